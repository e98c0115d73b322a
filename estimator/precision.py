"""Bytes per parameter for weights, gradients and optimizer state, per precision recipe and optimizer."""

from __future__ import annotations

from .training import TrainingSetup

FP32 = 4  # bytes per fp32 element
HALF = 2  # bytes per bf16/fp16 element

# NF4 with double quantisation (QLoRA default, bitsandbytes quantize_4bit): 4-bit codes (0.5 B)
# + one 8-bit absmax per 64 weights (1/64 B) + one fp32 second-level absmax per 64×256 weights.
NF4_DQ_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # = 0.515869 B/param (QLoRA paper §3: 0.127 bits of constants)

NF4_BYTES = 0.5 + 4 / 64  # NF4 without double quantisation: one fp32 absmax per 64 weights (= 0.5625)

# bitsandbytes 8-bit blockwise optimizer state: one uint8 per element per state + one fp32 absmax per
# 256 elements (bnb optim/optimizer.py, blocksize 256).
BNB_8BIT_STATE = 1 + 4 / 256


def weight_bytes(setup: TrainingSetup) -> int:
    """Bytes per weight of the model as loaded: fp32 for mixed precision (torch.amp keeps fp32 master
    weights) and fp32 training, 2 bytes for pure bf16/fp16 (HF docs model_memory_anatomy)."""
    return FP32 if setup.precision in ("mixed", "fp32") else HALF


def compute_bytes(setup: TrainingSetup) -> int:
    """Bytes per element of matmul outputs: 16-bit under autocast or pure 16-bit, 4 for fp32."""
    return FP32 if setup.precision == "fp32" else HALF


def adapter_bytes(setup: TrainingSetup) -> int:
    """LoRA adapter weights: fp32 by default (PEFT get_peft_model(autocast_adapter_dtype=True) upcasts
    them); bf16 when the framework keeps them in the model dtype (LitGPT bf16-true, torchtune)."""
    if setup.precision == "fp32":
        return FP32
    return FP32 if setup.adapter_dtype == "fp32" else HALF


def trainable_bytes(setup: TrainingSetup) -> int:
    """Bytes per trainable parameter (and so per gradient): adapters are fp32; full FT uses the model dtype."""
    return adapter_bytes(setup) if setup.method != "full" else weight_bytes(setup)


def optimizer_state_bytes(optimizer: str, param_bytes: int) -> float:
    """Optimizer-state bytes per trainable parameter (formulas.md §2.2). Adafactor is shape-dependent and
    handled in memory.py; this returns its 1-D fallback (one fp32 second moment per element)."""
    if optimizer == "adamw":
        return 2 * param_bytes  # exp_avg and exp_avg_sq, created zeros_like(param): param dtype (torch.optim)
    if optimizer == "paged_adamw":
        return 2 * FP32  # bnb 32-bit optimizers keep fp32 states whatever the param dtype
    if optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        return 2 * BNB_8BIT_STATE  # two 8-bit blockwise states (Dettmers et al. 2110.02861)
    if optimizer == "sgd":
        return param_bytes  # one momentum buffer (HF docs: "SGD with momentum maintains only 1 state")
    if optimizer == "lion":
        return FP32  # one exp_avg; the Trainer's lion_32bit (bitsandbytes) keeps it in fp32
    if optimizer == "adafactor":
        return FP32  # 1-D tensors keep a full fp32 second moment; matrices are factored (memory.py)
    raise ValueError(f"unknown optimizer {optimizer!r}")
