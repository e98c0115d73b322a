"""Methods (full, LoRA, QLoRA), attention implementations, adapter dtypes and shardings, with their labels."""

from __future__ import annotations

from ..i18n import N_

METHODS = ("full", "lora", "qlora")
ATTENTIONS = ("sdpa", "eager")
ADAPTER_DTYPES = ("fp32", "bf16")
SHARDINGS = ("none", "zero1", "zero2", "zero3")

METHOD_LABELS = {"full": N_("Full fine-tuning"), "lora": "LoRA", "qlora": "QLoRA"}  # N_: translated where shown
SHARDING_LABELS = {
    "none": N_("Data parallel (DDP)"),
    "zero1": N_("ZeRO-1 (optimizer sharded)"),
    "zero2": N_("ZeRO-2 (+ gradients sharded)"),
    "zero3": N_("ZeRO-3 / FSDP full shard"),
}
