"""The torchtune `tune run` command with its config overrides for the setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS
from ...options.precisions import QLORA_PREPS
from .common import (
    _ATTN_TARGETS,
    _TORCHTUNE_FULL_WITH_FUSED,
    _TORCHTUNE_RECIPES,
    _TORCHTUNE_TEMPLATE,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_DTYPES,
    _adapter_switches,
    _command,
    _comment,
    _common_notes,
    _model_id,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _torchtune_config(spec: ModelSpec, setup: TrainingSetup) -> tuple[str, bool, str]:
    """(the config family's prefix, whether it is a placeholder to copy, the --config argument)."""
    known = TORCHTUNE_CONFIGS.get(spec.source)
    if known and setup.method in known[1]:
        return known[0], False, f"{known[0]}_{setup.method}_single_device"
    return _TORCHTUNE_TEMPLATE, True, f"./your_model_{setup.method}_single_device.yaml"


def _torchtune_notes(setup: TrainingSetup, notes: list[str]) -> None:
    """What the estimate assumes that torchtune's recipe cannot express."""
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    _common_notes(setup, "torchtune", notes)
    dtype = TORCHTUNE_DTYPES[setup.precision]
    if setup.precision == "fp16":
        notes.append("fp16: torchtune's recipes run bf16 or fp32 only; bf16 is used (same bytes).")
    if setup.precision == "mixed":
        notes.append("mixed precision: torchtune has no autocast; dtype=fp32 keeps fp32 weights but computes and "
                     "stores activations in fp32 (more than the estimate's bf16 activations).")
    model_dtype = "fp32" if dtype == "fp32" else "bf16"
    if lora and setup.adapter_dtype != model_dtype:
        notes.append(f"{setup.adapter_dtype} LoRA adapters: torchtune keeps adapters in the model dtype "
                     f"({model_dtype}).")
    if setup.attention == "eager":
        notes.append("eager attention: torchtune uses SDPA (no s × s scores).")
    if qlora and not setup.nf4_double_quant:
        notes.append("NF4 without double quantisation: torchao's NF4 always quantises its scalers.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': torchtune keeps norms and "
                     "embeddings in the model dtype.")
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        notes.append(f"{setup.gpus} GPUs, {setup.sharding} sharding"
                     + (", optimizer offload" if setup.offload_optimizer else "")
                     + (", parameter offload" if setup.offload_params else "")
                     + f": use `tune run --nproc_per_node {setup.gpus} {setup.method.replace('qlora', 'lora')}"
                       "_finetune_distributed` (FSDP, ZeRO-3-like; fsdp_cpu_offload=True for offload) with the "
                       "same overrides; the command below is the single-device recipe.")


def _torchtune_optimizer_tokens(setup: TrainingSetup, prefix: str) -> list[str]:
    """The optimizer component and its arguments (the base config's fused=True removed where it does not apply)."""
    component, kwargs = OPTIMIZERS[setup.optimizer].torch_class, OPTIMIZERS[setup.optimizer].torch_init_kwargs
    base_has_fused = setup.method != "full" or prefix in _TORCHTUNE_FULL_WITH_FUSED
    tokens = [f"optimizer={component}"]
    if setup.optimizer == "adamw":
        tokens.append("optimizer.fused=True")
    elif setup.optimizer == "adamw_foreach":
        tokens += ["optimizer.fused=False", "optimizer.foreach=True"]
    else:
        if base_has_fused:
            tokens.append("~optimizer.fused")
        tokens += [f"optimizer.{key}={value}" for key, value in kwargs.items()]
    return tokens


def _torchtune_lora_tokens(setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The LoRA model overrides: which modules get adapters, rank, alpha and dropout."""
    switches = _adapter_switches(setup, notes, "torchtune")
    attn = [tt for name, (tt, _) in _ATTN_TARGETS.items() if switches[name]]
    return [f"model.lora_attn_modules=[{','.join(attn)}]",
            f"model.apply_lora_to_mlp={switches['mlp']}",
            f"model.apply_lora_to_output={switches['lm_head']}",
            f"model.lora_rank={setup.lora_rank}",
            f"model.lora_alpha={2 * setup.lora_rank}",
            "model.lora_dropout=0.0"]


def _torchtune(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The `tune run` command: the recipe, its config and one override per setting."""
    prefix, placeholder, config = _torchtune_config(spec, setup)
    _torchtune_notes(setup, notes)
    tokens = [f"batch_size={setup.batch}",
              f"tokenizer.max_seq_len={setup.seq_len}",
              f"gradient_accumulation_steps={setup.grad_accum}",
              f"enable_activation_checkpointing={setup.grad_ckpt}",
              f"enable_activation_offloading={setup.offload_activations}",
              f"dtype={TORCHTUNE_DTYPES[setup.precision]}"]
    tokens += _torchtune_optimizer_tokens(setup, prefix)
    if setup.method == "full":  # the estimate frees each gradient in backward only with optimizer_in_bwd
        tokens.append(f"optimizer_in_bwd={setup.optimizer_in_bwd}")
    tokens.append(f"compile={setup.compile}")  # compiled losses keep 16-bit logits (activations.loss_memory)
    tokens.append(f"clip_grad_norm={float(setup.max_grad_norm) if setup.max_grad_norm > 0 else None}")
    impl = loss_impl_id(setup)
    if impl == "torchtune":
        tokens.append("loss=torchtune.modules.loss.CEWithChunkedOutputLoss")
    else:  # the standard loss: full logits, one cross-entropy
        tokens.append("loss=torch.nn.CrossEntropyLoss")  # on the model's fp32 logits: "torchtune_full"
    if setup.method != "full":
        tokens += _torchtune_lora_tokens(setup, notes)
    out: list[str] = []
    if placeholder:
        out += [f"# torchtune 0.6.1 ships no single-device {setup.method} config for this model: copy one with",
                f"#   tune cp {prefix}_{setup.method}_single_device {config}",
                "# and set its model, tokenizer and checkpointer for your model; the overrides below still apply."]
    else:
        out += _comment("First download the weights to the config's checkpointer.checkpoint_dir (tune download "
                        f"{_model_id(spec)}), or override checkpointer.checkpoint_dir.")
    out.append(f"# Loss: {LOSS_IMPLS[impl].label}; optimizer: {OPTIMIZERS[setup.optimizer].label}.")
    return out + _command([["tune", "run", _TORCHTUNE_RECIPES[setup.method], "--config", config]]
                          + [[token] for token in tokens])
