"""LLaMA-Factory 0.9.5 YAML (`llamafactory-cli train config.yaml`) → the estimate's settings (stack "llamafactory").
Each key is read as the release's own dataclasses define it (src/llamafactory/hparams/*.py at tag v0.9.5, and
transformers 5.6's Seq2SeqTrainingArguments, which its TrainingArguments extends) and as its loader, adapter code and
trainers use it, cited per key. The paths below are under src/llamafactory/ of that tag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.stacks import LLAMAFACTORY_RELEASE, stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GRAD_ACCUM, MAX_RANK, MAX_SEQ_LEN
from ._common import (
    deepspeed,
    fsdp_offload,
    gpus_from_marker,
    gpus_note,
    hf_optimizer,
    liger_loss,
    lora_dropout,
    no_memory,
    unmodelled_switches,
)
from ._fields import load_keys
from ._models import ref_from_name

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader
    from ._models import ModelRef

ID = "llamafactory"
LABEL = f"LLaMA-Factory {LLAMAFACTORY_RELEASE} YAML (llamafactory-cli train)"
TOOL = f"LLaMA-Factory {LLAMAFACTORY_RELEASE}"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("llamafactory")
_H = "hparams"  # the dataclasses' folder, cited below

# Keys only LLaMA-Factory's dataclasses have (none is in another format's schema): the format's fingerprint. The
# first three are in nearly every LLaMA-Factory config and weigh more.
_STRONG = ("stage", "finetuning_type", "cutoff_len")
_OWN_KEYS = ("lora_target", "template", "quantization_bit", "quantization_method", "double_quantization", "pref_beta",
             "pref_loss", "freeze_trainable_layers", "dataset_dir", "flash_attn", "use_unsloth", "use_unsloth_gc",
             "enable_liger_kernel", "disable_gradient_checkpointing", "upcast_layernorm", "pure_bf16")

# transformers' TrainingArguments keys (and the model's) a TRL config has too, with trl.score's weights.
_SHARED_KEYS = {"model_name_or_path": 2, "per_device_train_batch_size": 2, "gradient_checkpointing": 1, "optim": 1,
                "num_train_epochs": 1, "report_to": 1, "logging_steps": 1}

# The DeepSpeed configs LLaMA-Factory 0.9.5 ships (examples/deepspeed/*.json): ZeRO stage, optimizer offload,
# parameter offload, from each file's zero_optimization block.
SHIPPED_DEEPSPEED: dict[str, tuple[int, bool, bool]] = {
    "ds_z0_config.json": (0, False, False), "ds_z2_config.json": (2, False, False),
    "ds_z2_autotp_config.json": (2, False, False), "ds_z2_offload_config.json": (2, True, False),
    "ds_z3_config.json": (3, False, False), "ds_z3_offload_config.json": (3, True, True),
    "ds_z3_fp8_config.json": (3, True, False),
}
_DEEPSPEED_EXTRAS = {
    "ds_z2_autotp_config.json": N_("its tensor_parallel autotp_size 2 is not modelled (the estimate shards nothing "
                                   "by tensor parallelism)"),
    "ds_z3_fp8_config.json": N_("FP8 training is not modelled (estimated as 16-bit)"),
}

# stage (finetuning_args.py:460-463) → the trainer. pt runs the Trainer's causal-LM loss on packed sequences (train/pt/
# trainer.py:92-93, data_args.py:185-189), the SFT step; the preference and RL stages are LLaMA-Factory's own.
_OWN_STAGES = ("dpo", "kto", "rm", "ppo")

# Switches that change memory the estimate does not count: not honoured when on, ignored when off.
_SWITCHES = {
    "use_unsloth": N_("Unsloth's kernels and offloaded checkpointing (model/model_utils/unsloth.py): estimate it with "
                      "the Unsloth stack"),
    "use_dora": N_("DoRA keeps a weight-norm vector and a second forward per adapted layer: not modelled"),
    "use_llama_pro": N_("LLaMA Pro's expanded blocks are not modelled"),
    "use_galore": N_("GaLore's projected optimizer state is not modelled; the optimizer named by optim is counted"),
    "use_apollo": N_("APOLLO's projected optimizer state is not modelled; the optimizer named by optim is counted"),
    "use_badam": N_("BAdam trains one block at a time: not modelled; the optimizer named by optim is counted for every "
                    "weight (an upper bound)"),
    "use_adam_mini": N_("Adam-mini's reduced second moment is not modelled; AdamW's two moments are counted (an upper "
                        "bound)"),
    "use_muon": N_("LLaMA-Factory's Muon optimizer is not modelled; the optimizer named by optim is counted"),
    "use_dft_loss": N_("the DFT loss on the full logits is not modelled; the standard loss is counted"),
    "use_eaft_loss": N_("the EAFT loss on the full logits is not modelled; the standard loss is counted"),
    "use_asft_loss": N_("the ASFT loss loads a frozen reference model and runs it on every batch (train/sft/"
                        "workflow.py:55-57, trainer.py:150-160): not modelled"),
    "upcast_lmhead_output": N_("the head's fp32 output stays alive with the model's outputs (model/model_utils/"
                               "checkpointing.py:180-184): 4 B × tokens × vocabulary more than the estimate counts"),
    "use_kt": N_("KTransformers keeps the MoE experts on the CPU: not modelled"),
    "use_mca": N_("Megatron-Core training (mcore_adapter) is not modelled"),
    "use_hyper_parallel": N_("HyperParallel's FSDP/TP backend is not modelled"),
    "shift_attn": N_("LongLoRA's shifted short attention is not modelled"),
    "fp8": N_("FP8 training is not modelled (estimated as 16-bit)"),
    "resize_vocab": N_("a resized vocabulary trains the embeddings and head in full beside LoRA (model/adapter.py:"
                       "222-231): not counted"),
    "use_v1_kernels": N_("LLaMA-Factory's v1 kernel plugins are not modelled"),
    "freeze_language_model": N_("a frozen language model (only the multimodal parts train) is not modelled"),
}
_NOT_MODELLED = {
    "additional_target": N_("modules trained in full beside LoRA: their gradients and optimizer state are not counted"),
    "add_tokens": N_("new tokens resize the vocabulary, which then trains in full beside LoRA (model/patcher.py:"
                     "279-293, model/adapter.py:222-231): not counted"),
    "add_special_tokens": N_("new tokens resize the vocabulary, which then trains in full beside LoRA (model/"
                             "patcher.py:279-293, model/adapter.py:222-231): not counted"),
    "new_special_tokens_config": N_("new tokens resize the vocabulary, which then trains in full beside LoRA: not "
                                    "counted"),
    "mixture_of_depths": N_("mixture-of-depths is not modelled"),
    "image_max_pixels": N_("image sizes: the estimate takes the image tokens per example (set them in the model "
                           "section)"),
    "image_min_pixels": N_("image sizes: the estimate takes the image tokens per example (set them in the model "
                           "section)"),
    "video_max_pixels": N_("video inputs are not modelled"), "video_min_pixels": N_("video inputs are not modelled"),
    "video_fps": N_("video inputs are not modelled"), "video_maxlen": N_("video inputs are not modelled"),
    "use_audio_in_video": N_("audio inputs are not modelled"), "image_do_pan_and_scan": N_("image crops add image "
                                                                                          "tokens: set them"),
    "crop_to_patches": N_("image crops add image tokens: set them"),
    "hyper_parallel_args": N_("HyperParallel's FSDP/TP backend is not modelled"),
    "torch_compile": N_("compile is modelled for torchtune's recipes only"),
    "fp8_backend": N_("FP8 training is not modelled (estimated as 16-bit)"),
    "fp8_enable_fsdp_float8_all_gather": N_("FP8 training is not modelled (estimated as 16-bit)"),
}
_PREFERENCE_KEYS = ("pref_beta", "pref_ftx", "pref_bco_weight", "pref_loss", "dpo_label_smoothing", "kto_chosen_weight",
                    "kto_rejected_weight", "simpo_gamma", "ppo_buffer_size", "ppo_epochs", "ppo_score_norm",
                    "ppo_target", "ppo_whiten_rewards", "ref_model", "ref_model_adapters",
                    "ref_model_quantization_bit", "reward_model", "reward_model_adapters",
                    "reward_model_quantization_bit", "reward_model_type", "ld_alpha")
_NO_MEMORY = {
    "template": N_("the chat template: how examples are written"), "dataset_dir": N_("where the datasets are"),
    "media_dir": N_("where the images are"), "max_samples": N_("how many examples are read"),
    "preprocessing_batch_size": N_("dataset preprocessing, before training"),
    "preprocessing_num_workers": N_("dataset preprocessing, before training"),
    "overwrite_cache": N_("dataset preprocessing, before training"), "buffer_size": N_("dataset streaming"),
    "mix_strategy": N_("how datasets are mixed"), "interleave_probs": N_("how datasets are mixed"),
    "val_size": N_("evaluation: it runs between training steps, without gradients"),
    "tool_format": N_("the chat template: how examples are written"),
    "default_system": N_("the chat template: how examples are written"),
    "enable_thinking": N_("the chat template: how examples are written"),
    "preserve_thinking": N_("the chat template: how examples are written"),
    "tokenized_path": N_("dataset preprocessing, before training"),
    "data_shared_file_system": N_("dataset preprocessing, before training"),
    "mask_history": N_("which tokens carry a label: the estimate prices full-length batches"),
    "ignore_pad_token_for_loss": N_("which tokens carry a label: the estimate prices full-length batches"),
    "do_train": N_("the run trains (the estimate prices a training step)"),
    "do_predict": N_("prediction: after training, without gradients"),
    "predict_with_generate": N_("prediction: after training, without gradients"),
    "plot_loss": N_("logging and experiment tracking: no memory on the GPU"),
    "compute_accuracy": N_("evaluation: it runs between training steps, without gradients"),
    "disable_shuffling": N_("the order of examples: no memory"),
    "enable_torch_profiler": N_("logging and experiment tracking: no memory on the GPU"),
    "profile_modules": N_("logging and experiment tracking: no memory on the GPU"),
    "ray_num_workers": N_("the Ray launcher's worker count: set the GPU count"),
    "ray_init_kwargs": N_("the Ray launcher"), "master_addr": N_("the launcher"), "master_port": N_("the launcher"),
    "hf_hub_token": N_("access to the Hub"), "ms_hub_token": N_("access to the Hub"),
    "om_hub_token": N_("access to the Hub"), "cache_dir": N_("where downloads are kept"),
    "use_fast_tokenizer": N_("the tokenizer"), "split_special_tokens": N_("the tokenizer"),
    "init_special_tokens": N_("the tokenizer"), "infer_backend": N_("inference only"),
    "infer_dtype": N_("inference only"), "use_kv_cache": N_("generation only: training runs without a KV cache"),
    "offload_folder": N_("inference only (a device map that offloads)"),
    "print_param_status": N_("logging and experiment tracking: no memory on the GPU"),
    "low_cpu_mem_usage": N_("how the checkpoint is loaded (host RAM): the GPU holds the same model"),
    "adapter_name_or_path": N_("a LoRA adapter to resume or merge first: the same memory per step"),
    "adapter_folder": N_("a LoRA adapter to resume or merge first: the same memory per step"),
    "pissa_init": N_("an initialisation: no memory per step"), "pissa_iter": N_("an initialisation: no memory per "
                                                                                "step"),
    "pissa_convert": N_("an initialisation: no memory per step"),
    "create_new_adapter": N_("a new adapter of the same shape: the same memory per step"),
    "train_from_scratch": N_("randomly initialised weights: the same memory per step"),
    "rope_scaling": N_("RoPE scaling changes positions, not memory"),
    "moe_aux_loss_coef": N_("a loss weight: no memory"), "quantization_type": N_("nf4 and fp4 store the same 4 bits "
                                                                                  "per weight"),
    "use_reentrant_gc": N_("reentrant or not, checkpointing keeps the same layer inputs"),
    "gradient_checkpointing_kwargs": N_("reentrant or not, checkpointing keeps the same layer inputs"),
    "do_sample": N_("generation only"), "temperature": N_("generation only"), "top_p": N_("generation only"),
    "top_k": N_("generation only"), "num_beams": N_("generation only"), "max_length": N_("generation only: the "
                                                                                           "training length is "
                                                                                           "cutoff_len"),
    "max_new_tokens": N_("generation only"), "repetition_penalty": N_("generation only"),
    "length_penalty": N_("generation only"), "skip_special_tokens": N_("generation only"),
    "generation_max_length": N_("generation only"), "generation_num_beams": N_("generation only"),
    "generation_config": N_("generation only"), "sortish_sampler": N_("the order of examples: no memory"),
    "model_revision": N_("read with model_name_or_path"),
}
# Key groups by prefix: a group read with its switch, or changing no memory.
_PREFIXES = (
    ("export_", N_("exporting the model: after training")), ("vllm_", N_("inference only")),
    ("sglang_", N_("inference only")), ("kt_", N_("KTransformers only (use_kt)")),
    ("galore_", N_("read with use_galore")), ("apollo_", N_("read with use_apollo")), ("badam_", N_("read with "
                                                                                                   "use_badam")),
    ("oft_", N_("read with finetuning_type: oft")), ("profiler_", N_("logging and experiment tracking: no memory on "
                                                                     "the GPU")),
    ("asft_", N_("read with use_asft_loss")), ("eaft_", N_("read with use_eaft_loss")),
)


def score(doc: dict[str, Any]) -> int:
    """How strongly the document looks like a LLaMA-Factory config: the keys only its dataclasses have and, when one
    is there, the transformers keys it shares with a TRL config, weighed as trl.score weighs them (a key of its own
    decides against TRL, whose parser refuses it as unknown)."""
    own = sum(3 for k in _STRONG if k in doc) + sum(1 for k in _OWN_KEYS if k in doc)
    return own + sum(_SHARED_KEYS[k] for k in _SHARED_KEYS if k in doc) if own else 0


def _no_memory(key: str) -> str | None:
    if key in _NO_MEMORY:
        return Text(_NO_MEMORY[key])
    for prefix, reason in _PREFIXES:
        if key.startswith(prefix):
            return Text(reason)
    return no_memory(key)


def _stage(r: Reader) -> str:
    """stage (finetuning_args.py:460-463, default 'sft'): sft and pt are the SFT step; the others are refused."""
    if not r.given("stage"):
        r.default("trainer", "sft", "stage", Text(N_("{src}/finetuning_args.py:460-463 default sft"), src=_H))
        return "sft"
    name = str(r.get("stage")).strip().lower()
    if name == "sft":
        r.set("trainer", "sft", "stage")
    elif name == "pt":
        r.set("trainer", "sft", "stage", why=Text(N_("pre-training runs the same causal-LM step on packed cutoff_len "
                                                     "sequences (train/pt/trainer.py:92-93)")))
    elif name in ("dpo", "kto"):
        r.refuse("stage", Text(N_("LLaMA-Factory's own {stage} trainer upcasts the full-vocabulary logits to fp32 and "
                                  "keeps their log-softmax (train/{stage}/trainer.py), which the estimate's TRL 1.16 "
                                  "trainers do not: not modelled, estimated as SFT (which prices it short)"), stage=name))
    elif name == "rm":
        r.refuse("stage", Text(N_("LLaMA-Factory's reward model is TRL's value-head model, which upcasts the "
                                  "full-vocabulary logits to fp32 (train/rm/trainer.py:98), not the 1-output score head "
                                  "the estimate's reward trainer prices: not modelled, estimated as SFT")))
    elif name == "ppo":
        r.refuse("stage", Text(N_("PPO (generation, a value head and a reward model, train/ppo/) is not modelled: "
                                  "estimated as SFT (which prices it short)")))
    else:
        r.refuse("stage", Text(N_("not a stage of {tool} (pt, sft, rm, ppo, dpo, kto); read as SFT"), tool=TOOL))
    for key in _PREFERENCE_KEYS:
        if r.has(key):
            r.ignore(key, Text(N_("a setting of the preference and RL stages, not modelled (see stage)")) if name in
                     _OWN_STAGES else Text(N_("used by the preference and RL stages only")))
    return name


def _quantisation(r: Reader, method: str) -> str:
    """quantization_bit (model_args.py:283-286, None), quantization_method (:279-282, bnb): 4-bit bitsandbytes is
    QLoRA (model/model_utils/quantization.py:166-179); LLaMA-Factory refuses a quantised base without LoRA or OFT
    (hparams/parser.py:188-190)."""
    if not r.given("quantization_bit"):
        if r.has("quantization_method"):
            r.ignore("quantization_method", Text(N_("no quantization_bit: the base is not quantised")))
        return method
    bits = r.integer("quantization_bit", 1, 8)
    kind = str(r.get("quantization_method", "bnb")).strip().lower()
    if bits is None:
        return method
    if method == "full":
        r.refuse("quantization_bit", Text(N_("{tool} refuses quantisation without LoRA or OFT (hparams/parser.py:"
                                             "188-190)"), tool=TOOL))
        return method
    if bits == 4 and kind in ("bnb", "hqq"):
        r.set("method", "qlora", "quantization_bit", why=Text(N_("LoRA on a 4-bit base")))
        if kind == "hqq":
            r.refuse("quantization_method", Text(N_("HQQ's 4-bit format is counted as bitsandbytes NF4 (both 4 bits per "
                                                    "weight plus scales)")))
        elif r.has("quantization_method"):
            r.ignore("quantization_method", Text(N_("bitsandbytes, as the estimate counts")))
        return "qlora"
    r.refuse("quantization_bit", Text(N_("a {bits}-bit {kind} base is not modelled: estimated as LoRA on a 16-bit base "
                                         "(an upper bound for the weights)"), bits=bits, kind=kind[:10]))
    if r.has("quantization_method"):
        r.ignore("quantization_method", Text(N_("read with quantization_bit")))
    return method


def _method(r: Reader) -> str:
    """finetuning_type (finetuning_args.py:464-467, default lora): lora, full, freeze (the last N layers trained in
    full, model/adapter.py:57-138) or oft; quantization_bit makes LoRA QLoRA."""
    if not r.given("finetuning_type"):
        r.default("method", "lora", "finetuning_type", Text(N_("{src}/finetuning_args.py:464-467 default lora"), src=_H))
        name = "lora"
    else:
        name = str(r.get("finetuning_type")).strip().lower()
    if name == "full":
        r.set("method", "full", "finetuning_type")
    elif name == "freeze":
        layers = r.get("freeze_trainable_layers", 2)  # finetuning_args.py:23-32 default 2
        r.set("method", "full", "finetuning_type", why=Text(N_("freeze tuning, counted as full fine-tuning")))
        r.refuse("finetuning_type", Text(N_("freeze tuning trains only {n} layers in full (freeze_trainable_layers, "
                                            "model/adapter.py:57-138); the PyTorch stacks' estimate trains every "
                                            "layer: an upper bound"), n=str(layers)[:10]))
    elif name == "oft":
        r.set("method", "lora", "finetuning_type", why=Text(N_("OFT, counted as LoRA")))
        r.refuse("finetuning_type", Text(N_("OFT's orthogonal blocks are not modelled: estimated as LoRA with the same "
                                            "targets")))
    elif name == "lora":
        if r.given("finetuning_type"):
            r.set("method", "lora", "finetuning_type")
    else:
        r.refuse("finetuning_type", Text(N_("not a finetuning_type of {tool} (lora, oft, freeze, full); LoRA assumed"),
                                         tool=TOOL))
        r.set("method", "lora", "finetuning_type", why=Text(N_("{tool}'s default"), tool=TOOL))
    for key in ("freeze_trainable_layers", "freeze_trainable_modules", "freeze_extra_modules"):
        if r.has(key):
            r.ignore(key, Text(N_("read with finetuning_type: freeze")) if name == "freeze" else Text(
                N_("used by finetuning_type: freeze only")))
    method = "full" if name in ("full", "freeze") else "lora"
    return _quantisation(r, method)


def _targets(r: Reader) -> None:
    """lora_target (finetuning_args.py:81-90, 'all'; a comma-separated string, split in __post_init__ :569): 'all' is
    every linear but the head (model/adapter.py:205-206, model/model_utils/misc.py:28-52), as PEFT's all-linear."""
    if not r.given("lora_target"):
        r.default("lora_targets", (ALL_LINEAR,), "lora_target", Text(N_("{src}/finetuning_args.py:81-90 default all: "
                                                                         "every linear but the head"), src=_H))
        return
    raw = r.get("lora_target")
    names = raw.split(",") if isinstance(raw, str) else raw
    if not (isinstance(names, list) and names and all(isinstance(n, str) and n.strip() for n in names)):
        r.refuse("lora_target", Text(N_("not a comma-separated list of module names")))
        return
    clean = tuple(dict.fromkeys(n.strip() for n in names))
    if clean == ("all",):
        r.set("lora_targets", (ALL_LINEAR,), "lora_target", why=Text(N_("every linear but the head")))
    elif "all" in clean:
        r.refuse("lora_target", Text(N_("'all' works alone only (model/adapter.py:205): with other names PEFT looks "
                                        "for a module called all")))
    else:
        r.set("lora_targets", clean, "lora_target")


def _lora(r: Reader, method: str) -> None:
    """lora_rank (finetuning_args.py:77-80, 8), lora_target, lora_dropout (:73-76, 0.0), double_quantization
    (model_args.py:291-294, true) for QLoRA."""
    if not r.take_int("lora_rank", "lora_rank", 1, MAX_RANK):
        r.default("lora_rank", 8, "lora_rank", Text(N_("{src}/finetuning_args.py:77-80 default 8"), src=_H))
    _targets(r)
    lora_dropout(r, "lora_dropout", 0.0, Text(N_("{src}/finetuning_args.py:73-76 lora_dropout"), src=_H))
    if method == "qlora" and not r.take_bool("nf4_double_quant", "double_quantization"):
        r.default("nf4_double_quant", True, "double_quantization",
                  Text(N_("{src}/model_args.py:291-294 default true"), src=_H))


def _precision(r: Reader, method: str) -> None:
    """pure_bf16 (finetuning_args.py:456-459), transformers' bf16 / fp16 (both False by default). LLaMA-Factory loads
    the checkpoint in its own dtype (model/loader.py:155 torch_dtype='auto') and casts the trainable weights to fp32
    unless pure_bf16 (model/adapter.py:313-325): full fine-tuning under bf16 autocast is fp32 master weights
    ('mixed'); LoRA keeps the 16-bit base with fp32 adapters."""
    pure = r.boolean("pure_bf16") if r.given("pure_bf16") else False
    bf16 = r.boolean("bf16") if r.given("bf16") else False
    fp16 = r.boolean("fp16") if r.given("fp16") else False
    if bf16 and fp16:  # transformers' TrainingArguments refuses both
        r.refuse("fp16", Text(N_("bf16 and fp16 together: transformers refuses the pair; bf16 read")))
        fp16 = False
    if pure and r.settings.get("sharding") == "zero3":
        r.refuse("pure_bf16", Text(N_("{tool} refuses pure_bf16 with DeepSpeed ZeRO-3 (hparams/parser.py:384-385)"),
                                   tool=TOOL))
        pure = False
    if pure:
        r.set("precision", "bf16", "pure_bf16", why=Text(N_("pure bf16: the trained weights stay bf16 (model/adapter.py:"
                                                            "319-320)")))
        return
    amp = "bf16" if bf16 else ("fp16" if fp16 else None)
    key = "bf16" if bf16 or not fp16 else "fp16"
    if method == "full":
        if amp:
            r.set("precision", "mixed", key, why=Text(N_("fp32 trained weights under {amp} autocast (model/adapter.py:"
                                                         "313-325)"), amp=amp))
        else:
            r.default("precision", "fp32", key, Text(N_("bf16 and fp16 false (transformers' defaults): the trained "
                                                        "weights are cast to fp32, no autocast")))
        return
    if amp:
        r.set("precision", amp, key, why=Text(N_("the base in the checkpoint's dtype (model/loader.py:155), {amp} "
                                                 "autocast"), amp=amp))
    else:
        r.default("precision", "bf16", key, Text(N_("bf16 and fp16 false (transformers' defaults): no autocast; the base "
                                                    "stays in the checkpoint's dtype (model/loader.py:155), bf16 "
                                                    "assumed")))


def _checkpointing(r: Reader) -> None:
    """disable_gradient_checkpointing (model_args.py:145-148, false: on), transformers' gradient_checkpointing (the
    Trainer enables its own when true), use_unsloth_gc (:133-136: each checkpointed layer's input in CPU RAM,
    model/model_utils/checkpointing.py:43-77)."""
    off = r.boolean("disable_gradient_checkpointing") if r.given("disable_gradient_checkpointing") else None
    hf = r.boolean("gradient_checkpointing") if r.given("gradient_checkpointing") else False
    if off is None:
        r.default("grad_ckpt", True, "disable_gradient_checkpointing",
                  Text(N_("{src}/model_args.py:145-148 default false: checkpointing on"), src=_H))
        on = True
    elif off and hf:
        r.set("grad_ckpt", True, "gradient_checkpointing", why=Text(N_("the Trainer enables transformers' own")))
        r.used.add("disable_gradient_checkpointing")
        on = True
    else:
        on = not off
        r.set("grad_ckpt", on, "disable_gradient_checkpointing")
    if r.given("gradient_checkpointing") and "gradient_checkpointing" not in {e.key for e in r.read}:
        r.ignore("gradient_checkpointing", Text(N_("LLaMA-Factory turns checkpointing on itself unless "
                                                   "disable_gradient_checkpointing")))
    if r.given("use_unsloth_gc"):
        unsloth_gc = r.boolean("use_unsloth_gc")
        if unsloth_gc and off:  # transformers' own checkpointing (gradient_checkpointing) does not offload
            r.refuse("use_unsloth_gc", Text(N_("offloading rides on LLaMA-Factory's checkpointing, which is off")))
        elif unsloth_gc is not None:
            r.set("offload_activations", unsloth_gc, "use_unsloth_gc")


def _attention(r: Reader) -> None:
    """flash_attn (model_args.py:117-120, 'auto': transformers' default, model/model_utils/attention.py:66-67;
    'disabled': eager; 'sdpa', 'fa2', 'fa3' keep no score matrix)."""
    if not r.given("flash_attn"):
        r.default("attention", "sdpa", "flash_attn", Text(N_("{src}/model_args.py:117-120 default auto: transformers' "
                                                             "default, SDPA"), src=_H))
        return
    name = str(r.get("flash_attn")).strip().lower()
    if name == "disabled":
        r.set("attention", "eager", "flash_attn")
    elif name in ("auto", "sdpa", "fa2", "fa3"):
        r.set("attention", "sdpa", "flash_attn", why=Text(N_("no score matrix kept, as SDPA")) if name != "sdpa" else "")
    else:
        r.refuse("flash_attn", Text(N_("not a flash_attn choice of {tool} (auto, disabled, sdpa, fa2, fa3); SDPA "
                                       "assumed"), tool=TOOL))


def _loss(r: Reader) -> None:
    """enable_liger_kernel (model_args.py:137-140): Liger's kernels with its fused linear cross-entropy for stage pt and
    sft (model/loader.py:142, model/model_utils/liger_kernel.py)."""
    liger_loss(r, "enable_liger_kernel")


def _batch(r: Reader) -> None:
    """per_device_train_batch_size (transformers 5.6 training_args.py:782, 8), gradient_accumulation_steps, cutoff_len
    (data_args.py:46-49, 2048), packing and neat_packing (data_args.py:108-115)."""
    if not r.take_int("batch", "per_device_train_batch_size", 1, MAX_BATCH):
        r.default("batch", 8, "per_device_train_batch_size",
                  Text(N_("transformers 5.6 training_args.py:782 default 8")))
    r.take_int("grad_accum", "gradient_accumulation_steps", 1, MAX_GRAD_ACCUM)
    if not r.take_int("seq_len", "cutoff_len", 1, MAX_SEQ_LEN):
        r.default("seq_len", 2048, "cutoff_len", Text(N_("{src}/data_args.py:46-49 default 2048"), src=_H))
    if r.has("packing"):
        r.ignore("packing", Text(N_("packing fills each sequence up to cutoff_len: the estimate prices full "
                                    "sequences")))
    if r.given("neat_packing") and r.boolean("neat_packing"):
        if str(r.lookup("flash_attn")).lower() == "fa2":
            r.ignore("neat_packing", Text(N_("with FlashAttention-2 packing keeps no mask: the estimate prices full "
                                             "sequences")))
        else:
            r.refuse("neat_packing", Text(N_("without FlashAttention-2 the collator builds a [batch, 1, T, T] "
                                             "block-diagonal mask in the compute dtype (data/collator.py:524-525): "
                                             "not counted")))


def _optimizer(r: Reader) -> None:
    """optim (transformers 5.6 training_args.py:811-820, adamw_torch_fused), max_grad_norm (:871-873, 1.0)."""
    if r.given("optim"):
        hf_optimizer(r, "optim", r.get("optim"))
    else:
        r.default("optimizer", "adamw", "optim", Text(N_("transformers 5.6 training_args.py:811-820 default "
                                                         "adamw_torch_fused")))
    r.take_number("max_grad_norm", "max_grad_norm", 0.0, 1e6)


def _parallel(r: Reader, ctx: ReadContext) -> None:
    """deepspeed (LLaMA-Factory's examples/deepspeed/*.json by name, an attached file, or inline), transformers' fsdp;
    the GPU count is the launcher's (llamafactory-cli: every visible device, launcher.py:58-66)."""
    if r.given("deepspeed"):
        deepspeed(r, "deepspeed", ctx.attachment, SHIPPED_DEEPSPEED,
                  N_("LLaMA-Factory's examples/deepspeed/{name}"))
        value = r.lookup("deepspeed")
        name = value.strip().replace("\\", "/").rsplit("/", 1)[-1] if isinstance(value, str) else ""
        if name in _DEEPSPEED_EXTRAS and "sharding" in r.settings:
            r.refuse("deepspeed", Text(_DEEPSPEED_EXTRAS[name]))
    if r.given("fsdp"):
        flags = r.get("fsdp")
        text = (" ".join(str(f) for f in flags) if isinstance(flags, list) else str(flags)).lower()
        if "shard_grad_op" in text:
            r.set("sharding", "zero2", "fsdp")
        elif "full_shard" in text or "hybrid_shard" in text:
            r.set("sharding", "zero3", "fsdp")
        if "offload" in text:
            fsdp_offload(r, "fsdp", r.settings.get("sharding", "none"))
    gpus_from_marker(r, ctx.marker)
    gpus_note(r)


def _switches(r: Reader) -> None:
    unmodelled_switches(r, _SWITCHES)


def _tower(r: Reader) -> None:
    """freeze_vision_tower and freeze_multi_modal_projector (finetuning_args.py:527-534, both true): false for both is
    the estimate's trained tower (model/model_utils/visual.py:173-193, model/model_utils/misc.py:37-41)."""
    tower = r.boolean("freeze_vision_tower") if r.given("freeze_vision_tower") else True
    projector = r.boolean("freeze_multi_modal_projector") if r.given("freeze_multi_modal_projector") else True
    if tower is False and projector is False:
        r.set("train_tower", True, "freeze_vision_tower", why=Text(N_("the vision tower and its projector train")))
        r.ignore("freeze_multi_modal_projector", Text(N_("read with freeze_vision_tower")))
        return
    for key, frozen in (("freeze_vision_tower", tower), ("freeze_multi_modal_projector", projector)):
        if frozen is False:
            r.refuse(key, Text(N_("the estimate trains the vision tower and its projector together (the tower "
                                  "toggle): set both false, or neither")))
        elif r.has(key):
            r.ignore(key, Text(N_("frozen, as the estimate counts")))


def _upcast_layernorm(r: Reader, method: str) -> None:
    """upcast_layernorm (model_args.py:153-156): the norm weights in fp32 (model/model_utils/checkpointing.py:
    151-155). On a 4-bit base that is the 'norms' preparation; full fine-tuning has fp32 trained weights already."""
    if not r.given("upcast_layernorm"):
        return
    on = r.boolean("upcast_layernorm")
    if not on:
        if on is False:
            r.ignore("upcast_layernorm", Text(N_("off")))
        return
    if method == "qlora":
        r.set("qlora_prep", "norms", "upcast_layernorm", why=Text(N_("fp32 norms; embeddings and head stay 16-bit")))
    elif method == "full" and r.settings.get("precision") in ("mixed", "fp32"):
        r.ignore("upcast_layernorm", Text(N_("the trained weights are fp32 already")))
    else:
        r.refuse("upcast_layernorm", Text(N_("fp32 norm weights turn the residual stream fp32, which the estimate "
                                             "counts on a 4-bit base only")))


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of a LLaMA-Factory config into the three lists; returns the model it names."""
    name = r.get("model_name_or_path") if r.given("model_name_or_path") else None
    revision = r.get("model_revision") if r.given("model_revision") else None  # model_args.py:105-108 default main
    if isinstance(name, str) and isinstance(revision, str) and revision.strip() not in ("", "main"):
        name = f"{name.strip()}@{revision.strip()}"
    model = ref_from_name(name)
    _stage(r)
    method = _method(r)
    if method != "full":
        _lora(r, method)
    else:
        for key in ("lora_rank", "lora_target", "lora_dropout", "lora_alpha", "double_quantization"):
            if r.has(key):
                r.ignore(key, Text(N_("finetuning_type {name}: no LoRA"), name=str(r.lookup("finetuning_type"))[:10]))
    _batch(r)
    _parallel(r, ctx)
    _precision(r, method)
    _checkpointing(r)
    _optimizer(r)
    _attention(r)
    _loss(r)
    _upcast_layernorm(r, method)
    _tower(r)
    _switches(r)
    r.finish(list(doc), SCHEMA, _no_memory, lambda key: Text(_NOT_MODELLED[key]) if key in _NOT_MODELLED else None)
    return model
