"""Bytes per element: weights, compute copies, adapters, trainable parameters and optimizer state by precision
and optimizer (estimator/options/ describes each option)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..options.optimizers import BNB_8BIT_STATE_BYTES, OPTIMIZERS

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup


INT64 = 8

FP32 = 4  # bytes per fp32 element
HALF = 2  # bytes per bf16/fp16 element

# NF4 with double quantisation (QLoRA default, bitsandbytes quantize_4bit): 4-bit codes (0.5 B)
# + one 8-bit absmax per 64 weights (1/64 B) + one fp32 second-level absmax per 64×256 weights.
NF4_DQ_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # = 0.515869 B/param (QLoRA paper §3: 0.127 bits of constants)

NF4_BYTES = 0.5 + 4 / 64  # NF4 without double quantisation: one fp32 absmax per 64 weights (= 0.5625)


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
    """Optimizer-state bytes per trainable parameter (docs/formulas.md §2.2), from the optimizer's one
    description (options.OPTIMIZERS). Adafactor is shape-dependent and handled in memory.py; this returns its
    1-D fallback (one fp32 second moment per element)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    option = OPTIMIZERS[optimizer]
    per_state = {
        "param": param_bytes,  # created zeros_like(param): the parameter's dtype (torch.optim)
        "fp32": FP32,  # bitsandbytes 32-bit optimizers keep fp32 states whatever the param dtype
        "8bit": BNB_8BIT_STATE_BYTES,  # 8-bit blockwise state (options.optimizers)
        "factored": FP32,  # Adafactor: 1-D tensors keep a full fp32 second moment; matrices in memory.py
    }[option.state_dtype]
    return option.states * per_state
