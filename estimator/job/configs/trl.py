"""A TRL 1.16.0 config as `trl <command> --config` reads it (YAML or JSON: the trainer's config, ModelConfig,
ScriptArguments and accelerate's launch arguments, trl/scripts/*.py make_parser and trl/cli/commands/training.py),
which is also transformers 5.24's TrainingArguments plus ModelConfig: the exports of the stacks without a config
file of their own (HF Trainer, plain loop, Unsloth) use it with the marker naming the stack. Sources are the 1.16.0
release's files, cited per key (trl/trainer/*_config.py, trl/trainer/model_config.py, trl/trainer/utils.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.stacks import stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GPUS, MAX_GRAD_ACCUM, MAX_RANK, MAX_SEQ_LEN
from ._common import (
    attention,
    deepspeed,
    fsdp_offload,
    gpus_from_marker,
    gpus_note,
    hf_optimizer,
    lora_dropout,
    no_memory,
    vllm_generation,
)
from ._fields import as_bool, load_keys
from ._models import ref_from_name

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader
    from ._models import ModelRef

ID = "trl"
LABEL = "TRL 1.16.0 / transformers 5.24 config (trl <command> --config)"
TOOL = "TRL 1.16.0"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("trl") | {"use_gradient_checkpointing"}  # Unsloth's from_pretrained/get_peft_model argument
_T = "trl/trainer"

_OWN_KEYS = ("model_name_or_path", "per_device_train_batch_size", "use_peft", "dataset_name", "max_length",
             "gradient_checkpointing", "optim", "num_train_epochs", "lora_target_modules", "num_generations",
             "use_bnb_nested_quant", "report_to", "logging_steps", "max_completion_length", "activation_checkpointing")

# Keys that name the trainer when the marker does not (each exists only in that trainer's config class).
_TRAINER_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("grpo", ("num_generations", "max_completion_length", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
              "reward_funcs", "steps_per_generation", "generation_batch_size", "vllm_enable_sleep_mode")),
    ("kto", ("desirable_weight", "undesirable_weight")),
    ("reward", ("center_rewards_coefficient",)),
    ("simpo", ("simpo_gamma", "cpo_alpha")),
    ("dpo", ("precompute_ref_log_probs", "rpo_alpha", "ref_model_mixup_alpha", "ref_model_sync_steps",
             "max_prompt_length", "beta", "use_weighting", "ld_alpha", "f_divergence_type")),
)
# TRL 1.16's CLI commands (trl/cli/commands/__init__.py) → the estimate's trainers (RLOO generates and trains like
# GRPO: counted as GRPO with a note).
_COMMANDS = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "kto": "kto", "reward": "reward", "rloo": "grpo",
             "orpo": "orpo", "cpo": "simpo", "simpo": "simpo"}
# Default per-trainer max_length (trl/trainer/*_config.py, 1.16.0).
_MAX_LENGTH = {"sft": 1024, "dpo": 1024, "kto": 1024, "reward": 1024, "orpo": 1024, "simpo": 1024}
# accelerate_config profiles shipped with TRL 1.16 (trl/accelerate_configs/*.yaml): sharding, num_processes.
_PROFILES = {"zero1": ("zero1", 8), "zero2": ("zero2", 8), "zero3": ("zero3", 8), "fsdp1": ("zero3", 8),
             "fsdp2": ("zero3", 8), "multi_gpu": ("none", 8), "single_gpu": ("none", 1)}

_NO_MEMORY = {
    "loss_type": N_("the loss formula: no memory"), "packing": N_("packing fills each sequence up to max_length: the "
                                                                   "estimate prices full sequences"),
    "padding_free": N_("the estimate prices full-length sequences"), "max_prompt_length": N_("the prompt is part of "
                                                                                             "max_length"),
    "model_revision": N_("read with model_name_or_path"), "bnb_4bit_quant_type": N_("nf4 and fp4 store the same 4 "
                                                                                    "bits per weight"),
    "bnb_4bit_quant_storage": N_("the storage dtype of the packed 4-bit weights (for FSDP): the same bytes"),
    "lora_task_type": N_("the PEFT task: no memory"), "gradient_checkpointing_kwargs": N_("read with checkpointing"),
    "activation_checkpointing_kwargs": N_("read with checkpointing"), "fp16_full_eval": N_("evaluation"),
    "bf16_full_eval": N_("evaluation"), "desirable_weight": N_("a loss weight: no memory"),
    "undesirable_weight": N_("a loss weight: no memory"), "rpo_alpha": N_("a loss weight: no memory"),
    "simpo_gamma": N_("SimPO's margin: no memory"), "cpo_alpha": N_("CPO's NLL weight: no memory"),
    "label_smoothing": N_("a loss setting: no memory"), "center_rewards_coefficient": N_("a loss weight: no memory"),
    "temperature": N_("sampling: no memory"), "top_p": N_("sampling: no memory"), "top_k": N_("sampling: no memory"),
    "min_p": N_("sampling: no memory"), "repetition_penalty": N_("sampling: no memory"),
    "num_iterations": N_("PPO-style iterations over a generation: no memory"), "epsilon": N_("a clipping bound"),
    "epsilon_high": N_("a clipping bound"), "scale_rewards": N_("reward scaling"), "mask_truncated_completions":
        N_("loss masking"), "vllm_server_host": N_("the vLLM server's address"), "vllm_server_port": N_("the vLLM "
                                                                                                       "server's "
                                                                                                       "address"),
    "vllm_server_base_url": N_("the vLLM server's address"), "vllm_server_timeout": N_("the vLLM server's address"),
    "mixed_precision": N_("accelerate's autocast: read with bf16/fp16"), "num_machines": N_("read with "
                                                                                           "num_processes"),
    "multi_gpu": N_("read with num_processes"), "use_deepspeed": N_("read with zero_stage"),
    "use_fsdp": N_("read with accelerate_config / fsdp"), "config_file": N_("an accelerate config file: not read"),
    "model_name_or_path": N_("read as the model"), "average_tokens_across_devices": N_("loss normalisation"),
    "use_kernels": N_("kernels from the Hub: not modelled, no memory counted"),
    "ref_model_init_kwargs": N_("the reference model's loading: read with the trainer"),
    "precompute_ref_batch_size": N_("the precomputation batch: it runs before training"),
}
_NOT_MODELLED = {
    "use_dora": N_("DoRA keeps a weight-norm vector and a second forward per adapted layer: not modelled"),
    "lora_modules_to_save": N_("modules trained in full beside LoRA: their gradients and optimizer state are not "
                               "counted"),
    "lora_target_parameters": N_("LoRA on parameters (MoE experts) is not modelled"),
    "torch_compile": N_("compile is modelled for torchtune's recipes only"),
    "sync_ref_model": N_("a synced reference copy for LoRA is not modelled"),
    "ref_model_mixup_alpha": N_("a synced reference copy is not modelled"),
    "ref_model_sync_steps": N_("a synced reference copy is not modelled"),
    "use_liger_loss": N_("Liger's GRPO loss is not modelled"),
    "model_init_kwargs": N_("other from_pretrained arguments are not modelled"),
    "fsdp_config": N_("read with fsdp"), "vllm_tensor_parallel_size": N_("vLLM tensor parallelism is not modelled"),
}


def score(doc: dict[str, Any]) -> int:
    return sum(2 if k in ("model_name_or_path", "per_device_train_batch_size", "use_peft") else 1
               for k in _OWN_KEYS if k in doc)


def _trainer(r: Reader, ctx: ReadContext) -> str:
    """The trainer: the export's marker (or its command), else the keys only one trainer's config has."""
    named = ctx.marker.get("trainer") or ctx.marker.get("command")
    if named:
        trainer = _COMMANDS.get(named.lower())
        if trainer is None:
            r.refuse("# will-it-fit: trainer", Text(N_("unknown trainer '{name}'; read as SFT"), name=named[:20]),
                     raw=named)
            return "sft"
        r.set("trainer", trainer, "# will-it-fit: trainer", raw=named,
              why=Text(N_("RLOO generates and trains like GRPO")) if named.lower() == "rloo" else "")
        return trainer
    hint = re.search(r"(?:^|[^a-z])(sft|dpo|grpo|kto|reward|rloo|orpo|cpo|simpo)(?:[_-]?config)?[^a-z]",
                     ctx.name.lower() + ".")
    if r.lookup("loss_type") == "simpo":
        r.set("trainer", "simpo", "loss_type", why=Text(N_("CPOConfig with loss_type simpo")))
        return "simpo"
    for trainer, keys in _TRAINER_KEYS:
        found = next((k for k in keys if r.has(k)), None)
        if found:
            r.set("trainer", trainer, found, raw=r.lookup(found),
                  why=Text(N_("{key} is a {trainer} setting"), key=found, trainer=trainer.upper()))
            return trainer
    if hint:
        trainer = _COMMANDS[hint.group(1)]
        r.set("trainer", trainer, "(file name)", raw=ctx.name,
              why=Text(N_("the file is named after trl {command}"), command=hint.group(1)))
        return trainer
    return "sft"


def _method(r: Reader) -> str:
    """use_peft, load_in_4bit, load_in_8bit (model_config.py; utils.py get_quantization_config)."""
    peft = r.boolean("use_peft") if r.given("use_peft") else False
    four = r.boolean("load_in_4bit") if r.given("load_in_4bit") else False
    eight = r.boolean("load_in_8bit") if r.given("load_in_8bit") else False
    if not peft:
        if r.has("use_peft"):
            r.set("method", "full", "use_peft")
        else:
            r.default("method", "full", "use_peft", Text(N_("{src}/model_config.py use_peft=False: full "
                                                            "fine-tuning"), src=_T))
        for key, on in (("load_in_4bit", four), ("load_in_8bit", eight)):
            if on:
                r.refuse(key, Text(N_("a quantised model needs adapters (use_peft: true); transformers' Trainer "
                                      "refuses to train it in full")))
        return "full"
    if four:
        r.set("method", "qlora", "load_in_4bit", why=Text(N_("use_peft on a 4-bit base")))
        r.used.add("use_peft")
        return "qlora"
    r.set("method", "lora", "use_peft")
    if eight:
        r.refuse("load_in_8bit", Text(N_("an 8-bit base is not modelled: estimated as LoRA on a 16-bit base (an "
                                         "upper bound for the weights)")))
    return "lora"


def _lora(r: Reader, method: str, stack: str) -> None:
    """lora_r (16), lora_target_modules (None: PEFT's per-family default), lora_dropout (0.05),
    use_bnb_nested_quant (False) (model_config.py; utils.py get_peft_config, get_quantization_config)."""
    if not r.take_int("lora_rank", "lora_r", 1, MAX_RANK):
        r.default("lora_rank", 16, "lora_r", Text(N_("{src}/model_config.py default 16"), src=_T))
    targets = r.get("lora_target_modules") if r.given("lora_target_modules") else None
    if targets is None:
        r.default("lora_targets", ("q_proj", "v_proj"), "lora_target_modules",
                  Text(N_("None: PEFT's default for Llama-like models (peft/utils/constants.py)")))
    else:
        names = [targets] if isinstance(targets, str) else targets
        if isinstance(names, list) and names and all(isinstance(n, str) and n.strip() for n in names):
            clean = tuple(dict.fromkeys(n.strip() for n in names))
            r.set("lora_targets", (ALL_LINEAR,) if ALL_LINEAR in clean else clean, "lora_target_modules")
        else:
            r.refuse("lora_target_modules", Text(N_("not a list of module names")))
    counted = 0.0
    lora_dropout(r, "lora_dropout", 0.05, Text(N_("{src}/model_config.py default 0.05"), src=_T), counted)
    if method == "qlora":
        if not r.take_bool("nf4_double_quant", "use_bnb_nested_quant") and stack == "trl":
            # ModelConfig's default, the TRL stack's too (estimator/options/stacks.py)
            r.default("nf4_double_quant", False, "use_bnb_nested_quant",
                      Text(N_("{src}/model_config.py default false"), src=_T))


def _precision(r: Reader, stack: str) -> None:
    """dtype (model_config.py default 'float32': the weights' dtype), bf16 (base_config.py: None → True unless
    fp16), fp16. fp32 weights under bf16/fp16 autocast are mixed precision."""
    key = "dtype" if r.has("dtype") else ("torch_dtype" if r.has("torch_dtype") else "dtype")
    dtype = str(r.get(key)).lower() if r.given(key) else ("float32" if stack == "trl" else "bfloat16")
    fp16 = bool(r.boolean("fp16")) if r.given("fp16") else False
    bf16_raw = r.get("bf16") if r.given("bf16") else None
    bf16 = as_bool(bf16_raw) if bf16_raw is not None else (not fp16 if stack == "trl" else False)
    if bf16_raw is not None and bf16 is None:
        r.refuse("bf16", Text(N_("not true or false")))
        bf16 = not fp16
    half = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
            "auto": "bf16"}.get(dtype)
    if half:
        why = Text(N_("'auto' loads the checkpoint's dtype: bf16 for current models (assumed)")) if dtype == "auto" \
            else ""
        if r.given(key):
            r.set("precision", half, key, why=why, raw=dtype)
        else:
            r.default("precision", half, key, Text(N_("the script loads the model in bf16")))
        return
    if dtype not in ("float32", "fp32", "float"):
        r.refuse(key, Text(N_("dtype {dtype} is not modelled; bf16 assumed"), dtype=dtype[:20]))
        r.set("precision", "bf16", key, raw=dtype)
        return
    precision = "mixed" if (bf16 or fp16) else "fp32"
    why = Text(N_("fp32 weights under {amp} autocast"), amp="fp16" if fp16 else "bf16") if precision == "mixed" \
        else Text(N_("fp32 weights, no autocast"))
    if r.given(key):
        r.set("precision", precision, key, why=why, raw=dtype)
    else:
        r.default("precision", precision, key, Text(N_("{src}/model_config.py dtype default 'float32'; {why}"),
                                                    src=_T, why=why))


def _checkpointing(r: Reader, stack: str) -> None:
    """activation_checkpointing / gradient_checkpointing (transformers 5.24 training_args.py; TRL's
    base_config.py default True), their kwargs' offload (activation_checkpointing_enable(offload=...)), SFTConfig's
    activation_offloading (sft_config.py) and Unsloth's use_gradient_checkpointing (True | False | 'unsloth')."""
    if stack == "unsloth" and r.given("use_gradient_checkpointing"):
        value = r.get("use_gradient_checkpointing")
        if isinstance(value, str) and value.strip().lower() == "unsloth":
            r.set("grad_ckpt", True, "use_gradient_checkpointing")
            r.set("offload_activations", True, "use_gradient_checkpointing")
        else:
            on = r.boolean("use_gradient_checkpointing")
            if on is not None:
                r.set("grad_ckpt", on, "use_gradient_checkpointing")
                r.set("offload_activations", False, "use_gradient_checkpointing")
        return
    key = next((k for k in ("activation_checkpointing", "gradient_checkpointing") if r.given(k)), None)
    on = r.boolean(key) if key else None
    if on is not None:
        r.set("grad_ckpt", on, key)
    kwargs_key = next((k for k in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs")
                       if isinstance(r.lookup(k), dict)), None)
    offload = as_bool(r.lookup(f"{kwargs_key}.offload")) if kwargs_key else None
    if r.given("activation_offloading"):
        offload = r.boolean("activation_offloading")
        key_off = "activation_offloading"
    else:
        key_off = f"{kwargs_key}.offload" if kwargs_key else None
    if offload is not None and key_off:
        effective = on if on is not None else stack in ("trl", "unsloth")
        if offload and not effective:
            r.refuse(key_off, Text(N_("offloading rides on checkpointing, which is off")))
        else:
            r.set("offload_activations", offload, key_off)


def _loss(r: Reader, stack: str) -> None:
    """use_liger_kernel (training_args.py): the HF Trainer patches in Liger's fused linear cross-entropy; TRL 1.16's
    SFTTrainer keeps its own fused chunked head (sft_trainer.py) and only patches Liger's layer kernels."""
    if not r.given("use_liger_kernel"):
        return
    on = r.boolean("use_liger_kernel")
    if not on:
        r.ignore("use_liger_kernel", Text(N_("off")))
        return
    if stack in ("trainer",):
        r.set("loss", "fused", "use_liger_kernel")
    else:
        r.refuse("use_liger_kernel", Text(N_("under {tool} the loss stays TRL's fused chunked head; Liger's layer "
                                             "kernels (RMSNorm, SwiGLU, RoPE) are not modelled"), tool=TOOL))


def _batch(r: Reader, trainer: str) -> None:
    """per_device_train_batch_size (training_args.py default 8), gradient_accumulation_steps (1), max_length."""
    if not r.take_int("batch", "per_device_train_batch_size", 1, MAX_BATCH):
        r.default("batch", 8, "per_device_train_batch_size",
                  Text(N_("transformers training_args.py default 8")))
    r.take_int("grad_accum", "gradient_accumulation_steps", 1, MAX_GRAD_ACCUM)
    if trainer == "grpo":
        return
    if r.take_int("seq_len", "max_length", 1, MAX_SEQ_LEN):
        pass
    elif r.given("max_seq_length"):
        length = r.integer("max_seq_length", 1, MAX_SEQ_LEN)
        if length is not None:
            r.set("seq_len", length, "max_seq_length")
            r.refuse("max_seq_length", Text(N_("renamed max_length in TRL 0.20: {tool} refuses this key; read as "
                                               "max_length"), tool=TOOL))
    elif r.has("max_length"):  # null: no truncation
        r.refuse("max_length", Text(N_("null: no truncation, sequences are as long as the data; the estimate uses "
                                       "{n} tokens (set max length)"), n=_MAX_LENGTH.get(trainer, 1024)))
    else:
        r.default("seq_len", _MAX_LENGTH.get(trainer, 1024), "max_length",
                  Text(N_("{src}/{trainer}_config.py default"), src=_T, trainer=trainer))


def _preference(r: Reader, trainer: str) -> None:
    """beta (dpo 0.1, kto 0.1, grpo 0.0), precompute_ref_log_probs (dpo_config.py, kto_config.py)."""
    if trainer in ("dpo", "kto", "orpo", "simpo", "grpo") and r.given("beta"):
        beta = r.number("beta", 0.0, 1e6)
        if beta is not None:
            r.set("beta", beta, "beta")
    if trainer in ("dpo", "kto") and r.given("precompute_ref_log_probs"):
        pre = r.boolean("precompute_ref_log_probs")
        if pre is not None:
            r.set("precompute_ref", pre, "precompute_ref_log_probs")


def _grpo(r: Reader) -> None:
    """num_generations (8), max_completion_length (512), use_vllm, vllm_mode, vllm_gpu_memory_utilization (0.3),
    vllm_enable_sleep_mode, steps_per_generation / generation_batch_size (grpo_config.py __post_init__)."""
    r.take_int("num_generations", "num_generations", 2, 1024)
    r.take_int("completion_len", "max_completion_length", 1, MAX_SEQ_LEN // 2)
    vllm_generation(r, "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode")
    for key in ("steps_per_generation", "generation_batch_size"):
        if r.given(key):
            r.refuse(key, Text(N_("the estimate generates once per optimizer step (steps_per_generation = "
                                  "gradient_accumulation_steps, TRL's default); other generation batches are not "
                                  "modelled")))
    if r.take_int("prompt_len", "max_prompt_length", 1, MAX_SEQ_LEN // 2):
        r.refuse("max_prompt_length", Text(N_("GRPOConfig 1.16 has no max_prompt_length ({tool} refuses the key); "
                                              "read as the prompt length"), tool=TOOL))
    else:
        r.refuse("max_prompt_length", Text(N_("GRPOConfig has no prompt limit: the estimate assumes prompts of 512 "
                                              "tokens (set the prompt length)")), raw="")


def _parallel(r: Reader, ctx: ReadContext) -> None:
    """num_processes and accelerate_config (trl/cli: accelerate launch arguments in the config), TrainingArguments'
    deepspeed and fsdp, accelerate's zero_stage / offload_optimizer_device."""
    if r.given("deepspeed"):
        deepspeed(r, "deepspeed", ctx.attachment)
    if r.given("fsdp"):
        flags = r.get("fsdp")
        text = " ".join(str(f) for f in flags) if isinstance(flags, list) else str(flags)
        if "shard_grad_op" in text.lower():
            r.set("sharding", "zero2", "fsdp")
        elif "full_shard" in text.lower() or "hybrid_shard" in text.lower():
            r.set("sharding", "zero3", "fsdp")
        if "offload" in text.lower():
            fsdp_offload(r, "fsdp", r.settings.get("sharding", "none"))
    profile_gpus = None
    if r.given("accelerate_config"):
        name = str(r.get("accelerate_config")).strip()
        if name in _PROFILES:
            sharding, profile_gpus = _PROFILES[name]
            r.set("sharding", sharding, "accelerate_config",
                  why=Text(N_("trl/accelerate_configs/{name}.yaml"), name=name))
        else:
            r.refuse("accelerate_config", Text(N_("a custom accelerate config file is not read: set sharding and the "
                                                  "GPU count")))
    if r.given("zero_stage"):
        stage = r.integer("zero_stage", 0, 3)
        if stage is not None:
            r.set("sharding", ("none", "zero1", "zero2", "zero3")[stage], "zero_stage")
    if r.given("offload_optimizer_device") and str(r.get("offload_optimizer_device")).lower() in ("cpu", "nvme"):
        r.set("offload_optimizer", True, "offload_optimizer_device")
    if r.given("offload_param_device") and str(r.get("offload_param_device")).lower() in ("cpu", "nvme"):
        if r.settings.get("sharding") == "zero3":
            r.set("offload_params", True, "offload_param_device")
        else:
            r.refuse("offload_param_device", Text(N_("offload_param works with ZeRO stage 3 only (DeepSpeed ignores "
                                                     "it below); not applied")))
    if not r.take_int("gpus", "num_processes", 1, MAX_GPUS) and profile_gpus:
        r.set("gpus", profile_gpus, "accelerate_config", why=Text(N_("the profile's num_processes")))
    gpus_from_marker(r, ctx.marker)
    gpus_note(r)


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of a TRL / TrainingArguments config into the three lists; returns the model it names."""
    stack = ctx.stack
    name = r.get("model_name_or_path") if r.given("model_name_or_path") else None
    if stack == "unsloth" and name is None and r.given("model_name"):
        name = r.get("model_name")  # FastLanguageModel.from_pretrained(model_name=...)
    revision = r.get("model_revision") if r.given("model_revision") else None
    if isinstance(name, str) and isinstance(revision, str) and revision.strip() not in ("", "main"):
        name = f"{name.strip()}@{revision.strip()}"
    model = ref_from_name(name)
    trainer = _trainer(r, ctx)
    method = _method(r)
    if method != "full":
        _lora(r, method, stack)
    else:
        for key in ("lora_r", "lora_target_modules", "lora_dropout", "lora_alpha"):
            if r.has(key):
                r.ignore(key, Text(N_("use_peft is off: full fine-tuning has no LoRA")))
    _batch(r, trainer)
    _precision(r, stack)
    _checkpointing(r, stack)
    if r.given("optim"):
        hf_optimizer(r, "optim", r.get("optim"))
    r.take_number("max_grad_norm", "max_grad_norm", 0.0, 1e6)
    attention(r)
    _loss(r, stack)
    _preference(r, trainer)
    if trainer == "grpo":
        _grpo(r)
    _parallel(r, ctx)
    extra = {k: Text(v) for k, v in _NO_MEMORY.items()}
    r.finish(list(doc), SCHEMA, lambda key: no_memory(key, extra),
             lambda key: Text(_NOT_MODELLED[key]) if key in _NOT_MODELLED else None)
    return model
