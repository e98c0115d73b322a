"""The training setup: method, precision, optimizer, batch, length and parallelism, validated on creation."""

from __future__ import annotations

from dataclasses import dataclass

METHODS = ("full", "lora", "qlora")
PRECISIONS = ("bf16", "fp16", "mixed", "fp32")
OPTIMIZERS = ("adamw", "adamw_8bit", "paged_adamw", "paged_adamw_8bit", "sgd", "adafactor", "lion")
ATTENTIONS = ("sdpa", "eager")
LOSSES = ("standard", "chunked")
ADAPTER_DTYPES = ("fp32", "bf16")
SHARDINGS = ("none", "zero1", "zero2", "zero3")

METHOD_LABELS = {"full": "Full fine-tuning", "lora": "LoRA", "qlora": "QLoRA"}
PRECISION_LABELS = {
    "bf16": "bf16 (pure 16-bit)",
    "fp16": "fp16 (pure 16-bit)",
    "mixed": "Mixed (fp32 master + bf16 compute)",
    "fp32": "fp32",
}
OPTIMIZER_LABELS = {
    "adamw": "AdamW (fused, HF Trainer default)",
    "adamw_8bit": "8-bit AdamW (bitsandbytes)",
    "paged_adamw": "Paged AdamW 32-bit",
    "paged_adamw_8bit": "Paged AdamW 8-bit",
    "sgd": "SGD with momentum",
    "adafactor": "Adafactor",
    "lion": "Lion",
}
SHARDING_LABELS = {
    "none": "Data parallel (DDP)",
    "zero1": "ZeRO-1 (optimizer sharded)",
    "zero2": "ZeRO-2 (+ gradients sharded)",
    "zero3": "ZeRO-3 / FSDP full shard",
}

MAX_BATCH = 4096
MAX_SEQ_LEN = 1 << 21  # 2M tokens
MAX_RANK = 4096
MAX_GPUS = 4096
ALL_LINEAR = "all-linear"


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {str(value)[:40]!r}")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {str(value)[:40]!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:,} and {high:,}, got {value:,}")


@dataclass(frozen=True)
class TrainingSetup:
    """How one training step runs. Defaults follow the Hugging Face Trainer + PEFT defaults."""

    method: str = "lora"
    precision: str = "bf16"
    optimizer: str = "adamw"
    batch: int = 1  # micro-batch per GPU
    seq_len: int = 2048  # tokens per example (max length; padding to it is assumed)
    grad_ckpt: bool = False
    attention: str = "sdpa"  # SDPA/flash (no s² memory) or eager (materialised attention scores)
    loss: str = "standard"  # HF cross-entropy on fp32 logits, or a chunked/fused linear+CE kernel
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = (ALL_LINEAR,)
    fused_optimizer: bool = True  # HF Trainer default optim="adamw_torch_fused": no per-step temporaries
    # PEFT's prepare_model_for_kbit_training casts every non-4-bit param to fp32; current TRL no longer calls
    # it (trl PR #4577, moved to experimental in #4704), so the default keeps them in 16-bit.
    qlora_fp32_upcast: bool = False
    adapter_dtype: str = "fp32"  # PEFT upcasts adapters to fp32; LitGPT/torchtune keep them in bf16
    ce_fp32_upcast: bool = True  # HF loss upcasts logits to fp32 (logits.float()); LitGPT keeps bf16
    load_16bit_first: bool = False  # QLoRA: the framework puts the 16-bit checkpoint on the GPU, then quantises
    nf4_double_quant: bool = True  # QLoRA default (bnb_4bit_use_double_quant=True); LitGPT's bnb.nf4 has none
    gpus: int = 1
    sharding: str = "none"
    offload_optimizer: bool = False  # ZeRO-Offload / FSDP CPU offload of optimizer state
    grad_accum: int = 1  # >1 keeps gradients alive through the next forward

    def __post_init__(self) -> None:
        _check_choice("method", self.method, METHODS)
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("attention", self.attention, ATTENTIONS)
        _check_choice("loss", self.loss, LOSSES)
        _check_choice("sharding", self.sharding, SHARDINGS)
        _check_choice("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES)
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("seq_len", self.seq_len, 1, MAX_SEQ_LEN)
        _check_int("lora_rank", self.lora_rank, 1, MAX_RANK)
        _check_int("gpus", self.gpus, 1, MAX_GPUS)
        _check_int("grad_accum", self.grad_accum, 1, 1 << 16)
        if not isinstance(self.lora_targets, tuple) or not self.lora_targets:
            raise ValueError("lora_targets must be 'all-linear' or a list of module names")
        for target in self.lora_targets:
            if not isinstance(target, str) or not target or len(target) > 64 or not all(
                    ch.isalnum() or ch in "_-." for ch in target):
                raise ValueError(f"LoRA target {str(target)[:40]!r} is not a module name")
        if ALL_LINEAR in self.lora_targets and len(self.lora_targets) > 1:
            raise ValueError("'all-linear' cannot be combined with named target modules")
        if self.offload_optimizer and self.sharding == "none" and self.gpus > 1:
            raise ValueError("optimizer offload needs ZeRO or FSDP sharding (choose zero1, zero2 or zero3)")

    @property
    def tokens(self) -> int:
        """Tokens held at once on one GPU: micro-batch × max length."""
        return self.batch * self.seq_len

    @property
    def autocast(self) -> bool:
        """Is a 16-bit autocast region active? Mixed precision always; LoRA/QLoRA with fp32 adapters on a
        16-bit base too (HF Trainer bf16=True). bf16 adapters on a bf16 base need no casts."""
        return self.precision != "fp32" and (
            self.precision == "mixed" or (self.method != "full" and self.adapter_dtype == "fp32"))


def parse_targets(text: str) -> tuple[str, ...]:
    """'all-linear' or 'q_proj,v_proj' → a tuple. Raises ValueError on an empty or malformed list."""
    if not isinstance(text, str):
        raise ValueError("LoRA targets must be text")
    parts = tuple(dict.fromkeys(p.strip() for p in text.replace(";", ",").split(",") if p.strip()))
    if not parts:
        raise ValueError("LoRA targets are empty; use 'all-linear' or names like q_proj,v_proj")
    return parts
