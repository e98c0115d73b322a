"""ms-swift 4.6.0 YAML or JSON (`swift sft config.yaml`) → the estimate's settings (stack "swift"). swift/cli/main.py:
38-71 turns the file's keys into `--key value` arguments of SftArguments (swift/arguments/sft_args.py and its bases),
after setting its ENV block's variables; each key is read as those dataclasses define it and as ms-swift's loader,
tuner and trainer use it, cited per key. The paths below are under swift/ of the 4.6.0 release.

A `swift rlhf` file (RLHFArguments' keys) and a `megatron sft` file (Megatron-Core's keys) are read for the keys they
share with swift sft; their own trainers and parallelism are listed as not modelled, with the reason."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.stacks import STACKS as STACK_TABLE
from ...options.stacks import SWIFT_RELEASE, stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GPUS, MAX_GRAD_ACCUM, MAX_RANK, MAX_SEQ_LEN
from ._common import (
    attention,
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
from ._fields import MISSING, load_keys
from ._models import ref_from_name

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader
    from ._models import ModelRef

ID = "swift"
LABEL = f"ms-swift {SWIFT_RELEASE} YAML or JSON (swift sft)"
TOOL = f"ms-swift {SWIFT_RELEASE}"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SFT_KEYS = load_keys("swift")
RLHF_KEYS = load_keys("swift_rlhf")  # only swift rlhf parses them (RLHFArguments)
MEGATRON_KEYS = load_keys("swift_megatron")  # only megatron sft / rlhf parse them
SCHEMA = SFT_KEYS | RLHF_KEYS | MEGATRON_KEYS

# Keys only ms-swift's dataclasses have (none is in another format's schema): the format's fingerprint; the first
# ones are in nearly every ms-swift config and weigh more.
_STRONG = ("tuner_type", "target_modules", "attn_impl", "rlhf_type", "quant_bits")
_OWN_KEYS = ("torch_dtype", "quant_method", "freeze_vit", "freeze_aligner", "freeze_llm", "model_author", "model_name",
             "split_dataset_ratio", "system", "loss_scale", "tuner_backend", "bnb_4bit_use_double_quant",
             "lora_dtype", "sequence_parallel_size", "ENV")
# Keys it shares with a TRL or LLaMA-Factory config, with trl.score's weights.
_SHARED_KEYS = {"model": 2, "per_device_train_batch_size": 2, "max_length": 1, "gradient_checkpointing": 1,
                "optim": 1, "num_train_epochs": 1, "report_to": 1, "logging_steps": 1}

# The DeepSpeed configs ms-swift ships under the names --deepspeed takes (arguments/sft_args.py:261-267 → swift/config/
# <name>.json): ZeRO stage, optimizer offload, parameter offload, from each file's zero_optimization block.
SHIPPED_DEEPSPEED: dict[str, tuple[int, bool, bool]] = {
    "zero0": (0, False, False), "zero1": (1, False, False), "zero2": (2, False, False),
    "zero2_offload": (2, True, False), "zero3": (3, False, False), "zero3_offload": (3, True, True),
}

# tuner_type (arguments/base_args/base_args.py:121, 'lora'; pipelines/train/tuner.py:174-349): the ones the estimate
# does not model, read as LoRA with the reason.
_OTHER_TUNERS = ("longlora", "adalora", "llamapro", "adapter", "vera", "boft", "fourierft", "reft", "bone")
_TUNER_PREFIXES = {"adalora_": "adalora", "llamapro_": "llamapro", "reft_": "reft", "vera_": "vera", "boft_": "boft",
                   "fourier_": "fourierft", "adapter_": "adapter", "lora_ga_": "lora"}

# Switches that change memory the estimate does not count: not honoured when on, ignored when off.
_SWITCHES = {
    "use_dora": N_("DoRA keeps a weight-norm vector and a second forward per adapted layer: not modelled for this "
                   "stack"),
    "use_galore": N_("GaLore's projected optimizer state is not modelled; the optimizer named by optim is counted"),
    "enable_dft_loss": N_("the DFT loss computes per-token losses on the logits itself (trainers/seq2seq_trainer.py:"
                          "171-182): not modelled; the model's own loss is counted"),
    "enable_channel_loss": N_("the channel loss computes per-token losses on the logits itself (trainers/"
                              "seq2seq_trainer.py:171-193): not modelled; the model's own loss is counted"),
    "use_flash_ckpt": N_("DLRover's flash checkpoint copies the weights to shared memory while saving: not modelled"),
    "torch_compile": N_("compile is modelled for torchtune's recipes only"),
    "use_ray": N_("the Ray launcher places the workers itself (ray_utils/): not modelled; set the GPU count"),
}
_NOT_MODELLED = {
    "target_regex": N_("a regular expression of adapted modules (arguments/tuner_args.py:201-202): not read; every "
                       "linear of the targets is counted in every layer"),
    "target_parameters": N_("LoRA on parameters (a MoE's fused experts) is not modelled"),
    "modules_to_save": N_("modules trained in full beside LoRA: their gradients and optimizer state are not counted"),
    "freeze_parameters": N_("full fine-tuning with frozen parts: every weight is counted trainable (an upper bound)"),
    "freeze_parameters_regex": N_("full fine-tuning with frozen parts: every weight is counted trainable (an upper "
                                  "bound)"),
    "freeze_parameters_ratio": N_("full fine-tuning with frozen parts: every weight is counted trainable (an upper "
                                  "bound)"),
    "trainable_parameters": N_("extra trained parameters beside LoRA are not counted"),
    "trainable_parameters_regex": N_("extra trained parameters beside LoRA are not counted"),
    "lora_bias": N_("trained biases beside LoRA are not counted"),
    "new_special_tokens": N_("new tokens resize the vocabulary, which then trains in full beside LoRA: not counted"),
    "device_map": N_("a device map splits the model over the GPUs of one process (naive model parallel): not "
                     "modelled"),
    "max_memory": N_("a device map splits the model over the GPUs of one process (naive model parallel): not "
                     "modelled"),
    "deepspeed_autotp_size": N_("DeepSpeed's tensor parallelism is not modelled (the estimate shards nothing by "
                                "tensor parallelism)"),
    "zero_hpz_partition_size": N_("ZeRO++'s secondary weight partition is not modelled"),
    "fsdp_config": N_("FSDP's own settings are not read (its sharding is read from fsdp)"),
    "experts_impl": N_("the MoE experts' kernel is not modelled (transformers' default is counted)"),
    "model_kwargs": N_("extra keyword arguments of the model are not read"),
    "quant_method": N_("read with quant_bits"),
    "bnb_4bit_quant_storage": N_("the 4-bit storage dtype is not modelled (the estimate packs NF4 in bytes)"),
    "vit_gradient_checkpointing": N_("the vision tower's checkpointing: the estimate checkpoints the tower with the "
                                     "rest (arguments/sft_args.py:212-213: the same switch unless set)"),
    "lisa_activated_layers": N_("LISA trains a few layers at a time: not modelled; every layer is counted trainable"),
    "sequence_parallel_size": N_("sequence parallelism (Ulysses or ring attention) splits each sequence over GPUs: "
                                 "not modelled"),
    "loss_type": N_("a custom loss plugin (loss/mapping.py) is not modelled; the model's own loss is counted"),
}
_NO_MEMORY = {
    "model_author": N_("the self-cognition dataset's wording"), "model_name": N_("the self-cognition dataset's "
                                                                                 "wording"),
    "system": N_("the chat template: how examples are written"), "template": N_("the chat template: how examples are "
                                                                                "written"),
    "split_dataset_ratio": N_("evaluation: it runs between training steps, without gradients"),
    "load_from_cache_file": N_("dataset preprocessing, before training"),
    "lazy_tokenize": N_("dataset preprocessing, before training"),
    "truncation_strategy": N_("how examples longer than max_length are cut or dropped: the estimate prices "
                              "max_length tokens"),
    "loss_scale": N_("which tokens carry a label: the estimate prices full-length batches"),
    "is_binary_loss_scale": N_("which tokens carry a label: the estimate prices full-length batches"),
    "use_logits_to_keep": N_("logits of the labelled tokens only: every token carries a label in the worst batch the "
                             "estimate prices"),
    "acc_strategy": N_("logging and experiment tracking: no memory on the GPU"),
    "add_version": N_("saving and loading checkpoints: after or before the training steps"),
    "create_checkpoint_symlink": N_("saving and loading checkpoints: after or before the training steps"),
    "load_args": N_("saving and loading checkpoints: after or before the training steps"),
    "adapters": N_("a LoRA adapter to resume first: the same memory per step"),
    "init_weights": N_("an initialisation: no memory per step"),
    "use_swift_lora": N_("ms-swift's own LoRA layers: the same adapters"),
    "enable_thinking": N_("the chat template: how examples are written"),
    "add_non_thinking_prefix": N_("the chat template: how examples are written"),
    "agent_template": N_("the chat template: how examples are written"),
    "response_prefix": N_("the chat template: how examples are written"),
    "use_chat_template": N_("the chat template: how examples are written"),
    "max_new_tokens": N_("generation only"), "temperature": N_("generation only"), "top_k": N_("generation only"),
    "top_p": N_("generation only"), "repetition_penalty": N_("generation only"),
    "ds3_gather_for_generation": N_("generation only"),
    "router_aux_loss_coef": N_("a loss weight: no memory"),
    "rope_scaling": N_("RoPE scaling changes positions, not memory"),
    "max_model_len": N_("RoPE scaling changes positions, not memory"),
    "model_type": N_("read with model"), "model_revision": N_("read with model"),
    "check_model": N_("a check of the model files before loading"),
    "use_hf": N_("where the model and datasets are downloaded from"),
    "max_pixels": N_("image sizes: the estimate takes the image tokens per example (set them in the model section)"),
    "gradient_checkpointing_kwargs": N_("reentrant or not, checkpointing keeps the same layer inputs"),
    "bnb_4bit_quant_type": N_("nf4 and fp4 store the same 4 bits per weight"),
    "bnb_4bit_compute_dtype": N_("the 4-bit matmuls' dtype: the estimate computes in the precision's dtype"),
    "callbacks": N_("training callbacks: no memory on the GPU"), "early_stop_interval": N_("training callbacks: no "
                                                                                          "memory on the GPU"),
    "external_plugins": N_("plugins registered before training"), "custom_register_path": N_("plugins registered "
                                                                                           "before training"),
    "ray_exp_name": N_("the Ray launcher"), "device_groups": N_("the Ray launcher"),
}
_PREFIXES = (("swanlab_", N_("logging and experiment tracking: no memory on the GPU")),
             ("galore_", N_("read with use_galore")), ("lisa_", N_("read with lisa_activated_layers")),
             ("vllm_", N_("generation only")))
# ENV variables the launcher reads (swift/cli/main.py:74-83 get_torchrun_args); the others are the data pipeline's.
_LAUNCH_ENV = ("NPROC_PER_NODE", "NNODES", "CUDA_VISIBLE_DEVICES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def score(doc: dict[str, Any]) -> int:
    """How strongly the document looks like an ms-swift config: the keys only its dataclasses have and, when one is
    there, the keys it shares with a TRL or LLaMA-Factory config, weighed as trl.score weighs them."""
    own = sum(3 for k in _STRONG if k in doc) + sum(1 for k in _OWN_KEYS if k in doc)
    return own + sum(_SHARED_KEYS[k] for k in _SHARED_KEYS if k in doc) if own else 0


def _no_memory(key: str) -> str | None:
    if key in _NO_MEMORY:
        return Text(_NO_MEMORY[key])
    for prefix, reason in _PREFIXES:
        if key.startswith(prefix):
            return Text(reason)
    for prefix, tuner in _TUNER_PREFIXES.items():
        if key.startswith(prefix):
            return Text(N_("read with tuner_type {tuner}"), tuner=tuner)
    return no_memory(key)


def _not_modelled(key: str) -> str | None:
    if key in _NOT_MODELLED:
        return Text(_NOT_MODELLED[key])
    if key in MEGATRON_KEYS:
        return Text(N_("a Megatron-Core setting (megatron sft / rlhf): Megatron's parallel training is not modelled; "
                       "the keys it shares with swift sft are read"))
    if key in RLHF_KEYS:
        return Text(N_("a setting of swift rlhf, not modelled (see rlhf_type)"))
    return None


# ---- the launcher: ENV, the GPU count ------------------------------------------------------------------------------

def _gpu_list(value: Any) -> int | None:
    """How many GPUs a CUDA_VISIBLE_DEVICES value names (a comma-separated list)."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    parts = [p for p in text.split(",") if p.strip()]
    return len(parts) if parts else None


def _env(r: Reader) -> None:
    """ENV (swift/cli/main.py:53-59: set in the environment before the launch, unless the shell has it): NPROC_PER_NODE
    × NNODES processes, one GPU each, through torchrun (:74-83, :95-98); a process that sees several GPUs splits the
    model over them (model/utils.py:229-242 device_map 'auto' when utils/env.py:64-73 is_mp)."""
    if not r.has("ENV"):
        return
    env = r.get("ENV")
    if not isinstance(env, dict):
        r.refuse("ENV", Text(N_("not a mapping of environment variables")))
        return
    procs = r.integer("ENV.NPROC_PER_NODE", 1, MAX_GPUS) if "NPROC_PER_NODE" in env else None
    nodes = r.integer("ENV.NNODES", 1, MAX_GPUS) if "NNODES" in env else None
    visible = _gpu_list(env["CUDA_VISIBLE_DEVICES"]) if "CUDA_VISIBLE_DEVICES" in env else None
    if procs is not None or nodes is not None:
        gpus = (procs or 1) * (nodes or 1)
        if gpus <= MAX_GPUS:
            key = "ENV.NPROC_PER_NODE" if procs is not None else "ENV.NNODES"
            r.set("gpus", gpus, key, why=Text(N_("{procs} processes per node × {nodes} nodes, one GPU each"),
                                             procs=procs or 1, nodes=nodes or 1) if nodes else "")
        else:
            r.refuse("ENV.NNODES", Text(N_("out of range: the estimate takes 1 to {high} GPUs"), high=MAX_GPUS))
    if visible is not None:
        if visible > (procs or 1):
            r.refuse("ENV.CUDA_VISIBLE_DEVICES", Text(N_("each process sees several GPUs, over which ms-swift splits the "
                                                         "model (device_map 'auto', model/utils.py:229-242): not "
                                                         "modelled; estimated as data parallel")))
        else:
            r.ignore("ENV.CUDA_VISIBLE_DEVICES", Text(N_("one GPU per process, as the estimate counts")))
    for name in env:
        if name in ("NPROC_PER_NODE", "NNODES", "CUDA_VISIBLE_DEVICES"):
            continue
        if name == "PYTORCH_CUDA_ALLOC_CONF":
            r.ignore(f"ENV.{name}", Text(N_("the allocator's settings: the estimate's allocator slack is PyTorch's "
                                            "default")))
        elif name in _LAUNCH_ENV:
            r.ignore(f"ENV.{name}", Text(N_("the launcher's address: no memory")))
        else:
            r.ignore(f"ENV.{name}", Text(N_("an environment variable of the data pipeline or the model's loader: no "
                                            "memory the estimate prices")))
    r.used.add("ENV")


def _parallel(r: Reader, ctx: ReadContext) -> None:
    """deepspeed (the names arguments/sft_args.py:261-267 maps to swift/config/*.json, a file attached, or the JSON
    itself), fsdp ('fsdp2' = swift/config/fsdp2.json 'full_shard auto_wrap', :300-320; or transformers' options)."""
    if r.given("deepspeed"):
        value = r.lookup("deepspeed")
        if isinstance(value, str) and value.strip().startswith("{"):  # json_parse_to_dict (:270)
            try:
                r.doc = {**r.doc, "deepspeed": json.loads(value)}
            except ValueError:
                r.refuse("deepspeed", Text(N_("not valid JSON")))
                value = None
        if value is not None:
            deepspeed(r, "deepspeed", ctx.attachment, SHIPPED_DEEPSPEED, N_("ms-swift's swift/config/{name}.json"))
    if r.given("fsdp"):
        flags = r.get("fsdp")
        text = (" ".join(str(f) for f in flags) if isinstance(flags, list) else str(flags)).strip().lower()
        if text == "fsdp2":
            r.set("sharding", "zero3", "fsdp", why=Text(N_("swift/config/fsdp2.json: full_shard auto_wrap")))
        elif "shard_grad_op" in text:
            r.set("sharding", "zero2", "fsdp")
        elif "full_shard" in text or "hybrid_shard" in text:
            r.set("sharding", "zero3", "fsdp")
        else:
            r.refuse("fsdp", Text(N_("an FSDP config file: attach nothing, set the sharding (its fsdp options are not "
                                     "read)")))
        if "offload" in text:
            fsdp_offload(r, "fsdp", r.settings.get("sharding", "none"))
    gpus_from_marker(r, ctx.marker)
    gpus_note(r)


# ---- the method, the trainer, LoRA -------------------------------------------------------------------------------

def _rlhf(r: Reader) -> None:
    """rlhf_type (arguments/rlhf_args.py:233, 'dpo' in swift rlhf): ms-swift's own trainers, refused with the stack's
    reason (options/stacks.py trainers_refusal); a file with swift rlhf's keys and no rlhf_type is its DPO."""
    rlhf_keys = [k for k in r.doc if k in RLHF_KEYS and k != "rlhf_type"]
    if not r.given("rlhf_type") and not rlhf_keys:
        r.default("trainer", "sft", "rlhf_type", Text(N_("no rlhf_type: swift sft")))
        return
    name = str(r.get("rlhf_type", "dpo")).strip().lower()
    why = Text(STACK_TABLE["swift"].trainers_refusal, trainer=name.upper()[:10])
    r.refuse("rlhf_type", Text(N_("{why}: not modelled, estimated as SFT (which prices it short)"), why=why),
             raw=r.lookup("rlhf_type") if r.has("rlhf_type") else Text(N_("dpo (swift rlhf's default)")))


def _quantisation(r: Reader, method: str) -> str:
    """quant_method and quant_bits (arguments/base_args/quant_args.py:33-36, None): bnb with 4 bits is QLoRA
    (:51-68 BitsAndBytesConfig(load_in_4bit=True), quantised while loading, model/register.py:635-639)."""
    if not r.given("quant_bits"):
        if r.given("quant_method"):
            kind = str(r.get("quant_method")).strip().lower()
            if kind in ("awq", "gptq", "gptq_v2"):
                r.refuse("quant_method", Text(N_("a pre-quantised {kind} checkpoint is not modelled: estimated on a "
                                                 "16-bit base"), kind=kind[:10]))
            elif kind == "fp8":
                r.refuse("quant_method", Text(N_("an FP8 base is not modelled: estimated on a 16-bit base")))
            else:  # quant_args.py:49-50 raises without quant_bits
                r.refuse("quant_method", Text(N_("{tool} refuses a quant_method without quant_bits (arguments/base_args/"
                                                 "quant_args.py:49-50)"), tool=TOOL))
        return method
    bits = r.integer("quant_bits", 1, 8)
    kind = str(r.get("quant_method", "")).strip().lower()
    if bits is None:
        return method
    if method == "full":
        r.refuse("quant_bits", Text(N_("a quantised base trains through adapters only: full fine-tuning of it is not "
                                       "modelled")))
        return method
    if bits == 4 and kind == "bnb":
        r.set("method", "qlora", "quant_bits", why=Text(N_("LoRA on a bitsandbytes 4-bit base")))
        r.used.add("quant_method")
        return "qlora"
    if not kind:
        r.refuse("quant_bits", Text(N_("quant_bits without quant_method loads no quantised base (arguments/base_args/"
                                       "quant_args.py:46-47)")))
        return method
    r.refuse("quant_bits", Text(N_("a {bits}-bit {kind} base is not modelled: estimated as LoRA on a 16-bit base (an "
                                   "upper bound for the weights)"), bits=bits, kind=kind[:10]))
    return method


def _method(r: Reader) -> str:
    """tuner_type (arguments/base_args/base_args.py:121, 'lora'; base_args.py:252-253: every type but full is an
    adapter), tuner_backend (:120, 'peft'; 'unsloth' trains through Unsloth's FastLanguageModel,
    pipelines/train/tuner.py:232-246), task_type (model_args.py:72: causal_lm from the model)."""
    if not r.given("tuner_type"):
        r.default("method", "lora", "tuner_type", Text(N_("arguments/base_args/base_args.py:121 default lora")))
        name = "lora"
    else:
        name = str(r.get("tuner_type")).strip().lower()
    if name == "full":
        r.set("method", "full", "tuner_type")
    elif name == "lora":
        if r.given("tuner_type"):
            r.set("method", "lora", "tuner_type")
    elif name in _OTHER_TUNERS:
        r.set("method", "lora", "tuner_type", why=Text(N_("counted as LoRA")))
        r.refuse("tuner_type", Text(N_("{name} is not modelled: estimated as LoRA with the same targets"),
                                    name=name))
    else:
        r.refuse("tuner_type", Text(N_("not a tuner_type the estimate knows (lora, full); LoRA assumed")))
        r.set("method", "lora", "tuner_type", why=Text(N_("{tool}'s default"), tool=TOOL))
    if r.given("tuner_backend"):
        backend = str(r.get("tuner_backend")).strip().lower()
        if backend == "unsloth":
            r.refuse("tuner_backend", Text(N_("Unsloth's kernels and offloaded checkpointing (pipelines/train/tuner.py:"
                                              "232-246): estimate it with the Unsloth stack")))
        else:
            r.ignore("tuner_backend", Text(N_("PEFT's LoRA, as the estimate counts")))
    if r.given("task_type") and str(r.get("task_type")).strip().lower() != "causal_lm":
        r.refuse("task_type", Text(N_("a {task} head is not modelled: estimated as a causal language model"),
                                   task=str(r.get("task_type"))[:30]))
    for key in ("num_labels", "problem_type"):
        if r.has(key):
            r.ignore(key, Text(N_("read with task_type")))
    method = "full" if name == "full" else "lora"
    return _quantisation(r, method)


def _targets(r: Reader) -> None:
    """target_modules (arguments/tuner_args.py:126, ['all-linear']: every Linear but the head,
    pipelines/train/tuner.py:92-107, utils/transformers_utils.py:178-190)."""
    if not r.given("target_modules"):
        r.default("lora_targets", (ALL_LINEAR,), "target_modules",
                  Text(N_("arguments/tuner_args.py:126 default all-linear: every linear but the head")))
        return
    raw = r.get("target_modules")
    names = raw.split() if isinstance(raw, str) else raw
    if not (isinstance(names, list) and names and all(isinstance(n, str) and n.strip() for n in names)):
        r.refuse("target_modules", Text(N_("not a list of module names")))
        return
    clean = tuple(dict.fromkeys(n.strip() for n in names))
    if "all-embedding" in clean:
        r.refuse("target_modules", Text(N_("LoRA on the embeddings (all-embedding) is not modelled; the other targets "
                                           "are read")))
        clean = tuple(n for n in clean if n != "all-embedding")
    if not clean:
        return
    if ALL_LINEAR in clean:
        r.set("lora_targets", (ALL_LINEAR,), "target_modules", why=Text(N_("every linear but the head")))
    else:
        r.set("lora_targets", clean, "target_modules")


def _lora(r: Reader, method: str) -> None:
    """lora_rank (arguments/tuner_args.py:133, 8), target_modules, lora_dropout (:135, 0.05), lora_dtype (:137, None:
    PEFT's fp32 adapters, tuners/peft.py:147-160), bnb_4bit_use_double_quant (quant_args.py:42, true) for QLoRA."""
    if not r.take_int("lora_rank", "lora_rank", 1, MAX_RANK):
        r.default("lora_rank", 8, "lora_rank", Text(N_("arguments/tuner_args.py:133 default 8")))
    _targets(r)
    lora_dropout(r, "lora_dropout", 0.05, Text(N_("arguments/tuner_args.py:135 default 0.05")),
                 counted=STACK_TABLE["swift"].lora_dropout)
    if r.given("lora_dtype"):
        name = str(r.get("lora_dtype")).strip().lower()
        dtype = {"bfloat16": "bf16", "float32": "fp32"}.get(name)
        if dtype:
            r.set("adapter_dtype", dtype, "lora_dtype")
        else:
            r.refuse("lora_dtype", Text(N_("{dtype} adapters are not modelled (fp32 or bf16); fp32 counted"),
                                        dtype=name[:10]))
    if method == "qlora" and not r.take_bool("nf4_double_quant", "bnb_4bit_use_double_quant"):
        r.default("nf4_double_quant", True, "bnb_4bit_use_double_quant",
                  Text(N_("arguments/base_args/quant_args.py:42 default true")))


def _tower(r: Reader) -> None:
    """freeze_vit and freeze_aligner (arguments/tuner_args.py:123-124, true): false for both trains the vision tower
    and its aligner (LoRA: all-linear reaches them, pipelines/train/tuner.py:98-104); freeze_llm (:122, false)."""
    vit = r.boolean("freeze_vit") if r.given("freeze_vit") else True
    aligner = r.boolean("freeze_aligner") if r.given("freeze_aligner") else True
    if vit is False and aligner is False:
        r.set("train_tower", True, "freeze_vit", why=Text(N_("the vision tower and its aligner train")))
        r.ignore("freeze_aligner", Text(N_("read with freeze_vit")))
    else:
        for key, frozen in (("freeze_vit", vit), ("freeze_aligner", aligner)):
            if frozen is False:
                r.refuse(key, Text(N_("the estimate trains the vision tower and its aligner together (the tower "
                                      "toggle): set both false, or neither")))
            elif r.has(key):
                r.ignore(key, Text(N_("frozen, as the estimate counts")))
    if r.given("freeze_llm"):
        if r.boolean("freeze_llm"):
            r.refuse("freeze_llm", Text(N_("a frozen language model (only the multimodal parts train) is not "
                                           "modelled")))
        else:
            r.ignore("freeze_llm", Text(N_("the language model trains, as the estimate counts")))


# ---- precision, checkpointing, the loss, the batch ---------------------------------------------------------------

def _precision(r: Reader) -> None:
    """torch_dtype (arguments/base_args/model_args.py:74, None: the checkpoint's dtype, model/model_meta.py:296), bf16
    and fp16 (arguments/sft_args.py:169-170, None: chosen from torch_dtype, model_args.py:130-142: bf16 for a bf16
    model, fp16 for an fp16 or fp32 one). fp32 weights under autocast are mixed precision."""
    dtype = str(r.get("torch_dtype")).strip().lower() if r.given("torch_dtype") else None
    half = {"bfloat16": "bf16", "float16": "fp16"}
    if dtype is not None and dtype not in (*half, "float32"):
        r.refuse("torch_dtype", Text(N_("not a torch_dtype of {tool} (bfloat16, float16, float32); bf16 assumed"),
                                     tool=TOOL))
        dtype = None
    bf16 = r.boolean("bf16") if r.given("bf16") else None
    fp16 = r.boolean("fp16") if r.given("fp16") else None
    if bf16 and fp16:  # transformers' TrainingArguments refuses both
        r.refuse("fp16", Text(N_("bf16 and fp16 together: transformers refuses the pair; bf16 read")))
        fp16 = False
    if dtype in half or dtype is None:
        precision = half.get(dtype or "bfloat16")
        if dtype is None:
            r.default("precision", precision, "torch_dtype", Text(N_("None: the checkpoint's dtype (arguments/base_args/"
                                                                     "model_args.py:120-142), bf16 for current models "
                                                                     "(assumed), with autocast to it")))
        else:
            r.set("precision", precision, "torch_dtype")
        for key, on in (("bf16", bf16), ("fp16", fp16)):
            if on is not None:
                r.ignore(key, Text(N_("16-bit weights: autocast or not, the same bytes")))
        return
    amp = "bf16" if bf16 else ("fp16" if fp16 or fp16 is None and bf16 is None else None)
    if amp:
        r.set("precision", "mixed", "torch_dtype", why=Text(N_("fp32 weights under {amp} autocast{auto}"), amp=amp,
                                                            auto=Text(N_(" (model_args.py:133-134: fp16 unless "
                                                                         "set)")) if bf16 is None and fp16 is None
                                                            else ""))
    else:
        r.set("precision", "fp32", "torch_dtype", why=Text(N_("fp32 weights, no autocast")))
    for key in ("bf16", "fp16"):
        if r.has(key):
            r.used.add(key)


def _checkpointing(r: Reader) -> None:
    """gradient_checkpointing (trainers/arguments.py:135, true; trainers/mixin.py:970-980)."""
    if not r.take_bool("grad_ckpt", "gradient_checkpointing"):
        r.default("grad_ckpt", True, "gradient_checkpointing", Text(N_("trainers/arguments.py:135 default true")))


def _loss(r: Reader) -> None:
    """use_liger_kernel (trainers/arguments.py:155, false): Liger's kernels with its fused linear cross-entropy
    (transformers' Trainer applies it: pipelines/train/tuner.py:375 patches only older transformers)."""
    liger_loss(r, "use_liger_kernel")


def _batch(r: Reader) -> None:
    """per_device_train_batch_size (trainers/arguments.py:130, 1), gradient_accumulation_steps (:132, None →
    :289-291 max(1, ceil(16 / batch / world size))), max_length (arguments/base_args/template_args.py:130, None: the
    model's max_model_len, base_args.py:227-228), packing and padding_free (template_args.py:139; sft_args.py:
    186-197: they need a flash-attention implementation)."""
    if not r.take_int("batch", "per_device_train_batch_size", 1, MAX_BATCH):
        r.default("batch", 1, "per_device_train_batch_size", Text(N_("trainers/arguments.py:130 default 1")))
    megatron = any(k in MEGATRON_KEYS for k in r.doc)  # Megatron's accumulation is global_batch_size's (not read)
    if not r.take_int("grad_accum", "gradient_accumulation_steps", 1, MAX_GRAD_ACCUM) and not megatron:
        batch = r.settings.get("batch", 1)
        gpus = r.settings.get("gpus", 1)
        steps = max(1, math.ceil(16 / batch / gpus))
        r.default("grad_accum", steps, "gradient_accumulation_steps",
                  Text(N_("trainers/arguments.py:289-291: ceil(16 / batch {batch} / {gpus} GPUs)"), batch=batch,
                       gpus=gpus))
    if not r.take_int("seq_len", "max_length", 1, MAX_SEQ_LEN):
        r.refuse("max_length", Text(N_("not given: {tool} truncates at the model's max_model_len (arguments/base_args/"
                                       "base_args.py:227-228) and pads each batch to its longest example; the "
                                       "estimate takes the stack's {n} tokens: set the max length to your longest "
                                       "example"), tool=TOOL, n=STACK_TABLE["swift"].seq_len), raw=MISSING)
    for key, reason in (("packing", N_("packing fills each sequence up to max_length: the estimate prices full "
                                       "sequences")),
                        ("padding_free", N_("padding-free batches hold the examples' own tokens, at most batch × "
                                            "max_length: the estimate prices full sequences"))):
        if r.given(key) and r.boolean(key):
            r.ignore(key, Text(reason))
        elif r.has(key):
            r.used.add(key)


def _optimizer(r: Reader) -> None:
    """optim (transformers 5.19 training_args.py:804-811, adamw_torch_fused), ms-swift's optimizer plugin (trainers/
    arguments.py:170, None: the Trainer's own; optimizers/mapping.py), max_grad_norm (training_args.py:864-866)."""
    if r.given("optim"):
        hf_optimizer(r, "optim", r.get("optim"))
    else:
        r.default("optimizer", "adamw", "optim", Text(N_("transformers 5.19 training_args.py:804-811 default "
                                                         "adamw_torch_fused")))
    if r.given("optimizer"):
        name = str(r.get("optimizer")).strip().lower()
        if name in ("default", "multimodal", "lorap"):
            r.ignore("optimizer", Text(N_("the optimizer named by optim, with its own learning rates per group")))
        else:
            r.refuse("optimizer", Text(N_("ms-swift's {name} optimizer is not modelled; the optimizer named by optim "
                                          "is counted"), name=name[:20]))
    r.take_number("max_grad_norm", "max_grad_norm", 0.0, 1e6)


def _switches(r: Reader) -> None:
    unmodelled_switches(r, _SWITCHES)
    for key in ("lisa_activated_layers", "sequence_parallel_size"):
        if r.given(key):
            value = r.integer(key, 0, 1_000_000)
            if value is not None and value <= (0 if key == "lisa_activated_layers" else 1):
                r.ignore(key, Text(N_("off")))
            elif value is not None:
                r.refuse(key, Text(_NOT_MODELLED[key]))


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of an ms-swift config into the three lists; returns the model it names."""
    name = r.get("model") if r.given("model") else None
    revision = r.get("model_revision") if r.given("model_revision") else None  # model_args.py:71, the hub's default
    if isinstance(name, str) and isinstance(revision, str) and revision.strip() not in ("", "main", "master"):
        name = f"{name.strip()}@{revision.strip()}"
    model = ref_from_name(name)
    _rlhf(r)
    method = _method(r)
    if method != "full":
        _lora(r, method)
    else:
        for key in ("lora_rank", "target_modules", "lora_dropout", "lora_alpha", "lora_dtype",
                    "bnb_4bit_use_double_quant"):
            if r.has(key):
                r.ignore(key, Text(N_("tuner_type full: no LoRA")))
    _env(r)
    _parallel(r, ctx)
    _batch(r)
    _precision(r)
    _checkpointing(r)
    _optimizer(r)
    if not attention(r, "attn_impl"):
        r.default("attention", "sdpa", "attn_impl", Text(N_("arguments/base_args/model_args.py:79 None: transformers "
                                                            "chooses, SDPA")))
    _loss(r)
    _tower(r)
    _switches(r)
    r.finish(list(doc), SCHEMA, _no_memory, _not_modelled)
    return model
