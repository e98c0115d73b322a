"""Axolotl 0.19.0 YAML → the estimate's settings (stack "axolotl"). Each key is read as Axolotl's schema defines it
(axolotl/utils/schemas/*.py in the 0.19.0 release, cited per key) and as its loaders and builders use it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.stacks import stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GRAD_ACCUM, MAX_RANK, MAX_SEQ_LEN
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

ID = "axolotl"
LABEL = "Axolotl 0.19.0 YAML"
TOOL = "Axolotl 0.19.0"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("axolotl")
_S = "axolotl/utils/schemas"  # the schema's folder in the 0.19.0 release, cited below

# Keys only Axolotl writes: the format's fingerprint (a TRL or LitGPT file has none of them).
_OWN_KEYS = ("base_model", "micro_batch_size", "sequence_len", "lora_target_linear", "num_epochs", "adapter",
             "sample_packing", "datasets", "val_set_size", "lora_model_dir", "special_tokens", "plugins")

# rl: (axolotl/utils/schemas/enums.py RLType) → the trainer (options/trainers.py). IPO is DPO with loss_type ipo
# (core/builders/rl.py: AxolotlDPOConfig for both); GDPO is GRPO with a multi-objective reward aggregation.
_RL_TRAINERS = {"dpo": "dpo", "ipo": "dpo", "orpo": "orpo", "kto": "kto", "simpo": "simpo", "grpo": "grpo",
                "gdpo": "grpo"}

# Keys that change no memory here beyond the general groups (_common.no_memory), with the reason.
_NO_MEMORY = {
    "base_model_config": N_("where the model's config is read from: the estimate reads the model base_model names"),
    "gradient_checkpointing_kwargs": N_("reentrant or not, checkpointing keeps the same layer inputs"),
    "sample_packing": N_("packing fills each sequence up to sequence_len: the estimate prices full sequences"),
    "pad_to_sequence_len": N_("padding to sequence_len: the estimate prices full sequences"),
    "rl_beta": N_("beta: read with rl"), "orpo_alpha": N_("ORPO's loss weight: no memory"),
    "simpo_gamma": N_("SimPO's margin: no memory"), "cpo_alpha": N_("CPO's NLL weight: no memory"),
    "kto_desirable_weight": N_("a loss weight: no memory"), "kto_undesirable_weight": N_("a loss weight: no memory"),
    "dpo_loss_type": N_("the DPO loss formula: no memory"), "dpo_label_smoothing": N_("a loss setting: no memory"),
    "dpo_use_weighting": N_("a loss setting: no memory"), "rpo_alpha": N_("a loss weight: no memory"),
    "dpo_loss_weights": N_("loss weights: no memory"),
    "tf32": N_("TF32 matmuls: no memory"), "flash_attn_cross_entropy": N_("flash-attn's fused cross-entropy is "
                                                                          "not used for the loss in 0.19.0"),
    "fsdp_version": N_("read with fsdp_config"), "ddp": N_("data parallel: no memory per GPU"),
    "auto_find_batch_size": N_("retries smaller batches after an OOM: the estimate prices the batch given"),
    "use_ray": N_("the launcher"), "ray_num_workers": N_("the launcher"), "neftune_noise_alpha": N_("noise on the "
                                                                                                    "embeddings: no "
                                                                                                    "memory"),
}
_NOT_MODELLED = {
    "lora_modules_to_save": N_("modules trained in full beside LoRA (often the embeddings and head): their "
                               "gradients and optimizer state are not counted"),
    "peft_use_dora": N_("DoRA keeps a weight-norm vector and a second forward per adapted layer: not modelled"),
    "unfrozen_parameters": N_("a partly frozen full fine-tune: the estimate trains every weight (an upper bound)"),
    "relora": N_("ReLoRA merges adapters periodically: not modelled"),
    "torch_compile": N_("compile is modelled for torchtune's recipes only"),
    "fp8": N_("FP8 training is not modelled (estimated as 16-bit)"),
    "device_map": N_("a device map may spread the model over GPUs and CPU: the estimate keeps it on each GPU"),
    "max_memory": N_("a per-device memory cap for loading: not modelled"),
    "liger_rms_norm": N_("Liger's RMSNorm kernel saves other tensors than transformers' norm: not modelled"),
    "liger_glu_activation": N_("Liger's SwiGLU kernel saves other tensors than transformers' MLP: not modelled"),
    "liger_rope": N_("Liger's RoPE kernel: not modelled (little memory)"),
    "liger_layer_norm": N_("Liger's LayerNorm kernel: not modelled"),
    "lora_mlp_kernel": N_("Axolotl's fused LoRA MLP kernel saves fewer tensors: not modelled"),
    "lora_qkv_kernel": N_("Axolotl's fused LoRA QKV kernel: not modelled"),
    "lora_o_kernel": N_("Axolotl's fused LoRA output kernel: not modelled"),
    "selective_checkpointing": N_("selective checkpointing keeps some ops inside each layer: not modelled"),
    "layer_offloading": N_("layer parameters offloaded to CPU: not modelled"),
    "tensor_parallel_size": N_("tensor parallelism is not modelled"),
    "context_parallel_size": N_("context parallelism is not modelled"),
    "sequence_parallel_degree": N_("sequence parallelism is not modelled"),
    "gptq": N_("a GPTQ-quantised base is not modelled"),
    "qat": N_("quantisation-aware training is not modelled"),
    "tiled_mlp": N_("tiled MLP (ALST) is not modelled"),
    "quantize_moe_experts": N_("quantised MoE experts are not modelled"),
}


def score(doc: dict[str, Any]) -> int:
    """How strongly the document looks like an Axolotl config (keys only Axolotl uses)."""
    return sum(2 if k in ("base_model", "micro_batch_size", "sequence_len") else 1 for k in _OWN_KEYS if k in doc)


def _method(r: Reader) -> None:
    """adapter (peft.py LoraConfig.adapter: lora | qlora | a plugin's), load_in_4bit / load_in_8bit (peft.py)."""
    adapter = r.get("adapter", None)
    four = r.boolean("load_in_4bit") if r.given("load_in_4bit") else False
    eight = r.boolean("load_in_8bit") if r.given("load_in_8bit") else False
    if adapter in (None, ""):
        r.default("method", "full", "adapter", Text(N_("no adapter: full fine-tuning ({src}/peft.py)"),
                                                   src=_S))
        for key, on in (("load_in_4bit", four), ("load_in_8bit", eight)):
            if on:  # peft.py check_adapter: quantised loading needs an adapter
                r.refuse(key, Text(N_("Axolotl refuses 4/8-bit loading without an adapter (peft.py)")))
        return
    name = str(adapter).strip().lower()
    if name not in ("lora", "qlora"):
        r.set("method", "lora", "adapter", why=Text(N_("adapter {name} is not modelled: estimated as LoRA"),
                                                    name=name[:30]))
        r.refuse("adapter", Text(N_("only lora and qlora adapters are modelled; {name} is estimated as LoRA"),
                                 name=name[:30]))
        return
    if name == "qlora" or four:
        why = Text(N_("adapter {name} on a 4-bit base (load_in_4bit)"), name=name)
        r.set("method", "qlora", "adapter", why=why)
        if four:
            r.set("method", "qlora", "load_in_4bit")
        else:  # peft.py validate_qlora: 'Require cfg.load_in_4bit to be True for qlora'
            r.refuse("load_in_4bit", Text(N_("Axolotl requires load_in_4bit: true with adapter: qlora (peft.py); "
                                             "estimated as QLoRA")))
        return
    r.set("method", "lora", "adapter")
    if eight:
        r.refuse("load_in_8bit", Text(N_("an 8-bit base (bitsandbytes LLM.int8) is not modelled: estimated as LoRA on "
                                         "a 16-bit base (an upper bound for the weights)")))


def _lora(r: Reader) -> None:
    """lora_r, lora_target_modules / lora_target_linear, lora_dropout (peft.py LoraConfig)."""
    if not r.take_int("lora_rank", "lora_r", 1, MAX_RANK):  # loaders/adapter.py LoraConfig(r=cfg.lora_r): None leaves PEFT's LoraConfig default r=8
        r.default("lora_rank", 8, "lora_r", Text(N_("PEFT's LoraConfig default r=8")))
    linear = r.boolean("lora_target_linear") if r.given("lora_target_linear") else False
    modules = r.get("lora_target_modules") if r.given("lora_target_modules") else None
    if linear:
        r.set("lora_targets", (ALL_LINEAR,), "lora_target_linear")
        if modules:
            r.ignore("lora_target_modules", Text(N_("lora_target_linear already adapts every linear")))
    elif modules:
        names = [modules] if isinstance(modules, str) else modules
        if isinstance(names, list) and names and all(isinstance(n, str) and n for n in names):
            r.set("lora_targets", tuple(dict.fromkeys(n.strip() for n in names)), "lora_target_modules")
        else:
            r.refuse("lora_target_modules", Text(N_("not a list of module names")))
    else:  # PEFT's default targets for the family (peft/utils/constants.py: q_proj, v_proj for Llama-like models)
        r.default("lora_targets", ("q_proj", "v_proj"), "lora_target_modules",
                  Text(N_("PEFT's default for Llama-like models (peft/utils/constants.py)")))
    lora_dropout(r, "lora_dropout", 0.0, Text(N_("{src}/peft.py lora_dropout"), src=_S))


def _precision(r: Reader) -> None:
    """bf16 (default 'auto'), fp16, bfloat16/float16/float32 (config.py): Axolotl loads the model in the half dtype
    it trains in (utils/config/__init__.py normalize_config: torch_dtype bf16 / fp16, else fp32)."""
    bf16 = r.get("bf16", "auto")
    fp16 = r.boolean("fp16") if r.given("fp16") else False
    if bf16 not in ("auto", None) and as_bool(bf16) is None:
        r.refuse("bf16", Text(N_("bf16 takes true, false or auto; auto assumed")))
        bf16 = "auto"
    if r.given("bfloat16") and r.boolean("bfloat16"):
        r.set("precision", "bf16", "bfloat16", why=Text(N_("pure bf16, no autocast")))
    elif r.given("float16") and r.boolean("float16"):
        r.set("precision", "fp16", "float16", why=Text(N_("pure fp16, no autocast")))
    elif fp16 and bf16 is not True:
        r.set("precision", "fp16", "fp16")
    elif bf16 == "auto" or bf16 is None:
        if r.has("bf16"):
            r.set("precision", "bf16", "bf16", why=Text(N_("auto: bf16 on an Ampere or newer GPU (assumed)")))
        else:
            r.default("precision", "bf16", "bf16", Text(N_("{src}/config.py default 'auto': bf16 on an Ampere or "
                                                           "newer GPU (assumed)"), src=_S))
    elif as_bool(bf16):
        r.set("precision", "bf16", "bf16")
    else:
        r.set("precision", "fp32", "bf16", why=Text(N_("neither bf16 nor fp16: fp32")))
    for key in ("fp8",):
        if r.given(key):
            r.refuse(key, Text(_NOT_MODELLED[key]))


def _checkpointing(r: Reader) -> None:
    """gradient_checkpointing: bool | 'offload' | 'offload_disk' (config.py, default False) and
    activation_offloading: bool | 'legacy' | 'disk' | 'hidden_states' (config.py; validation.py turns the
    'offload' spellings into activation_offloading)."""
    ckpt = r.get("gradient_checkpointing", False)
    offload = r.get("activation_offloading", False)
    if ckpt in ("offload", "offload_disk"):  # validation.py check_gradient_checkpointing_w_offload
        r.set("grad_ckpt", True, "gradient_checkpointing")
        r.set("offload_activations", True, "gradient_checkpointing",
              why=Text(N_("deprecated spelling of activation_offloading: {mode}"),
                       mode="true" if ckpt == "offload" else "disk"))
        r.refuse("gradient_checkpointing", Text(N_("TRL's activation offloader moves every saved tensor to CPU; the "
                                                   "estimate counts checkpointing with the layer inputs offloaded "
                                                   "(the closest it models)")))
        return
    on = r.boolean("gradient_checkpointing", value=ckpt) if r.has("gradient_checkpointing") else None
    if on is None:
        r.default("grad_ckpt", False, "gradient_checkpointing", Text(N_("{src}/config.py default false"), src=_S))
        on = False
    else:
        r.set("grad_ckpt", on, "gradient_checkpointing")
    if offload in (None, False):
        if r.has("activation_offloading"):
            r.set("offload_activations", False, "activation_offloading")
        return
    if not on:  # validation.py check_activation_offloading_wo_gc
        r.refuse("activation_offloading", Text(N_("Axolotl refuses activation_offloading without "
                                                  "gradient_checkpointing")))
        return
    r.set("offload_activations", True, "activation_offloading")
    if offload != "hidden_states":
        r.refuse("activation_offloading", Text(N_("'{mode}' offloads every saved tensor (TRL's offloader); the "
                                                  "estimate counts the checkpointed layer inputs offloaded "
                                                  "('hidden_states', the closest it models)"),
                                               mode=str(offload)[:20]))


def _attention(r: Reader) -> None:
    """attn_implementation, else the flash_attention / sdp_attention / xformers_attention / flex_attention /
    eager_attention switches (config.py; utils/config normalize_config picks the implementation)."""
    if attention(r):
        return
    for key, attn in (("eager_attention", "eager"), ("flash_attention", "sdpa"), ("sdp_attention", "sdpa"),
                      ("xformers_attention", "sdpa"), ("flex_attention", "sdpa"), ("sage_attention", "sdpa")):
        if r.given(key) and r.boolean(key):
            r.set("attention", attn, key)
            return
    r.default("attention", "sdpa", "attn_implementation", Text(N_("transformers' default: SDPA")))


def _loss(r: Reader) -> None:
    """plugins with Liger (liger_fused_linear_cross_entropy) or Cut Cross Entropy (cut_cross_entropy) give the fused
    loss (integrations/liger/args.py, integrations/cut_cross_entropy/args.py); chunked_cross_entropy (config.py)
    still builds the full logits."""
    plugins = r.get("plugins") if r.given("plugins") else []
    plugins = [str(p) for p in plugins] if isinstance(plugins, list) else [str(plugins)]
    liger = any("liger" in p.lower() for p in plugins)
    cce = any("cut_cross_entropy" in p.lower() for p in plugins)
    if liger and r.given("liger_fused_linear_cross_entropy") and r.boolean("liger_fused_linear_cross_entropy"):
        r.set("loss", "fused", "liger_fused_linear_cross_entropy")
    elif cce and r.given("cut_cross_entropy") and r.boolean("cut_cross_entropy"):
        r.set("loss", "fused", "cut_cross_entropy", why=Text(N_("Cut Cross-Entropy, counted like Liger's fused kernel "
                                                                "(no logits tensor)")))
    elif r.given("chunked_cross_entropy") and r.boolean("chunked_cross_entropy"):
        r.set("loss", "standard", "chunked_cross_entropy",
              why=Text(N_("Axolotl's chunked cross-entropy still builds the full logits")))
    if r.given("plugins"):
        r.ignore("plugins", Text(N_("read with the plugin's own switches")))


def _rl(r: Reader) -> None:
    """rl (config.py RLType), rl_beta / trl.beta, precompute_ref_log_probs, reward_model; GRPO's trl: and vllm:
    blocks (schemas/trl.py, schemas/vllm.py; core/trainers/grpo set_training_args_kwargs)."""
    if r.given("reward_model") and r.boolean("reward_model"):
        r.set("trainer", "reward", "reward_model")
    rl = r.get("rl") if r.given("rl") else None
    if rl is None:
        return
    name = str(rl).strip().lower()
    if name not in _RL_TRAINERS:
        r.refuse("rl", Text(N_("rl: {name} is not modelled; estimated as SFT"), name=name[:20]))
        return
    trainer = _RL_TRAINERS[name]
    r.set("trainer", trainer, "rl", why=Text(N_("IPO is DPO with another loss")) if name == "ipo" else (
        Text(N_("GDPO runs GRPO's trainer")) if name == "gdpo" else ""))
    beta_key = "trl.beta" if r.given("trl.beta") else ("rl_beta" if r.given("rl_beta") else None)
    if beta_key and trainer != "reward":
        beta = r.number(beta_key, 0.0, 1e6)
        if beta is not None:
            r.set("beta", beta, beta_key)
    if trainer in ("dpo", "kto") and r.given("precompute_ref_log_probs"):
        pre = r.boolean("precompute_ref_log_probs")
        if pre is not None:
            r.set("precompute_ref", pre, "precompute_ref_log_probs")
    if trainer == "grpo":
        _grpo(r)


def _grpo(r: Reader) -> None:
    r.take_int("num_generations", "trl.num_generations", 2, 1024)
    # core/trainers/grpo: max_completion_length = trl.max_completion_length (None: no limit)
    if not r.take_int("completion_len", "trl.max_completion_length", 1, MAX_SEQ_LEN // 2):
        r.refuse("trl.max_completion_length", Text(N_("no completion limit is set; the estimate uses TRL's default "
                                                      "512 tokens")))
    r.take_int("prompt_len", "max_prompt_len", 1, MAX_SEQ_LEN // 2)
    vllm_generation(r, "trl.use_vllm", "trl.vllm_mode", "vllm.gpu_memory_utilization", "trl.vllm_enable_sleep_mode")
    for key in ("trl", "vllm"):
        if r.has(key):
            r.ignore(key, Text(N_("its other GRPO settings change no memory the estimate prices")))


def _fsdp(r: Reader) -> None:
    """fsdp (a list: full_shard | shard_grad_op, offload, auto_wrap) and fsdp_config (schemas/fsdp.py:
    reshard_after_forward, offload_params; the legacy fsdp_* spellings too)."""
    flags = r.get("fsdp") if r.given("fsdp") else []
    flags = [str(f).lower() for f in (flags if isinstance(flags, list) else str(flags).split())]
    cfg = r.get("fsdp_config") if r.given("fsdp_config") else None
    if not flags and not isinstance(cfg, dict):
        return
    cfg = cfg if isinstance(cfg, dict) else {}
    reshard = cfg.get("reshard_after_forward", cfg.get("fsdp_reshard_after_forward", True))
    strategy = str(cfg.get("fsdp_sharding_strategy", "")).upper()  # the legacy FSDP1 spelling
    grad_op = "shard_grad_op" in flags or reshard in (False, "SHARD_GRAD_OP", "shard_grad_op") or \
        strategy == "SHARD_GRAD_OP"
    key = "fsdp_config" if cfg else "fsdp"
    r.set("sharding", "zero2" if grad_op else "zero3", key,
          why=Text(N_("FSDP: parameters kept between forward and backward")) if grad_op else Text(N_("FSDP full shard")))
    offload = cfg.get("offload_params", cfg.get("fsdp_offload_params", "offload" in flags))
    if offload is True or "offload" in flags:
        fsdp_offload(r, key, "zero2" if grad_op else "zero3")
    if r.has("fsdp") and key == "fsdp_config":
        r.ignore("fsdp", Text(N_("read with fsdp_config")))


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of an Axolotl config into the three lists; returns the model it names."""
    name = r.get("base_model")
    revision = r.get("revision_of_model") if r.given("revision_of_model") else None  # model.py: a Hub revision
    if isinstance(name, str) and isinstance(revision, str) and revision.strip():
        name = f"{name.strip()}@{revision.strip()}"
    model = ref_from_name(name)
    _method(r)
    method = r.settings.get("method", "full")
    if method != "full":
        _lora(r)
    else:
        for key in ("lora_r", "lora_target_modules", "lora_target_linear", "lora_dropout"):
            if r.has(key):
                r.ignore(key, Text(N_("no adapter: full fine-tuning has no LoRA")))
    if not r.take_int("seq_len", "sequence_len", 1, MAX_SEQ_LEN):
        r.default("seq_len", 512, "sequence_len", Text(N_("{src}/config.py default 512"), src=_S))
    if not r.take_int("batch", "micro_batch_size", 1, MAX_BATCH):
        r.default("batch", 1, "micro_batch_size", Text(N_("{src}/training.py default 1"), src=_S))
    if r.take_int("grad_accum", "gradient_accumulation_steps", 1, MAX_GRAD_ACCUM):
        pass
    elif r.given("batch_size") and "batch" in r.settings:  # training.py: batch_size / micro_batch_size / GPUs
        total = r.integer("batch_size", 1, 1 << 24)
        if total is not None:
            r.set("grad_accum", max(1, total // r.settings["batch"]), "batch_size",
                  why=Text(N_("batch_size ÷ micro_batch_size (1 GPU)")))
    else:
        r.default("grad_accum", 1, "gradient_accumulation_steps", Text(N_("{src}/training.py default 1"), src=_S))
    if r.has("batch_size") and "batch_size" not in r.used:
        r.ignore("batch_size", Text(N_("gradient_accumulation_steps is given")))
    _checkpointing(r)
    if r.given("optimizer"):
        hf_optimizer(r, "optimizer", r.get("optimizer"))
    else:
        r.default("optimizer", "adamw", "optimizer", Text(N_("{src}/training.py default adamw_torch_fused"), src=_S))
    r.take_number("max_grad_norm", "max_grad_norm", 0.0, 1e6)
    _precision(r)
    _attention(r)
    _loss(r)
    if r.given("deepspeed"):
        deepspeed(r, "deepspeed", ctx.attachment)
    _fsdp(r)
    _rl(r)
    gpus_from_marker(r, ctx.marker)
    gpus_note(r)
    if r.given("peft_autocast_adapter_dtype") and r.boolean("peft_autocast_adapter_dtype") is False \
            and method == "lora":  # snippets/axolotl.py: keeps the adapters in the model dtype
        r.set("adapter_dtype", "bf16" if r.settings.get("precision") in ("bf16", "fp16") else "fp32",
              "peft_autocast_adapter_dtype", why=Text(N_("adapters in the model dtype")))
    if method == "qlora" and r.given("bnb_config_kwargs.bnb_4bit_use_double_quant"):
        value = r.boolean("bnb_config_kwargs.bnb_4bit_use_double_quant")  # loaders/model.py BitsAndBytesConfig
        if value is not None:
            r.set("nf4_double_quant", value, "bnb_config_kwargs.bnb_4bit_use_double_quant")
    r.finish(list(doc), SCHEMA, lambda key: no_memory(key, {k: Text(v) for k, v in _NO_MEMORY.items()}),
             lambda key: Text(_NOT_MODELLED[key]) if key in _NOT_MODELLED else None)
    return model
