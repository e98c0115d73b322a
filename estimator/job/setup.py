"""The training setup: method, precision, optimizer, batch, length and parallelism, validated on creation."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..options.backends import BACKEND_IDS
from ..options.losses import LOSS_IDS
from ..options.methods import ADAPTER_DTYPES, ATTENTIONS, METHODS, SHARDINGS
from ..options.optimizers import OPTIMIZER_IDS, OPTIMIZERS
from ..options.precisions import PRECISION_IDS, QLORA_PREP_IDS, QLORA_PREPS
from ..options.quantization import check_quant

if TYPE_CHECKING:
    from .versions import Versions

MAX_BATCH = 4096
MAX_SEQ_LEN = 1 << 21  # 2M tokens
MAX_RANK = 4096
MAX_GPUS = 4096
MAX_LORA_LAYERS = 1000  # models.spec.MAX_LAYERS: no real config has more decoder layers
MAX_GRAD_ACCUM = 1 << 16
ALL_LINEAR = "all-linear"


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(Text(N_("{name} must be one of {choices}; got {value}"), name=name, choices=", ".join(choices),
                              value=repr(str(value)[:40])))


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(Text(N_("{name} must be a whole number, got {value}"), name=name, value=repr(str(value)[:40])))
    if not low <= value <= high:
        raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value}"), name=name, low=low, high=high,
                              value=value))


@dataclass(frozen=True)
class TrainingSetup:
    """How one training step runs, every setting explicit. The field defaults are a neutral baseline (HF
    Trainer + PEFT, no checkpointing, the standard loss); what a user's framework does comes from a training
    stack (estimator.job.stack.resolve_setup), which also records itself in `stack` and the fields it filled in
    `from_stack`."""

    method: str = "lora"
    precision: str = "bf16"
    optimizer: str = "adamw"
    batch: int = 1  # micro-batch per GPU
    seq_len: int = 2048  # tokens per example (max length; padding to it is assumed)
    grad_ckpt: bool = False
    attention: str = "sdpa"  # SDPA/flash (no s² memory) or eager (materialised attention scores)
    loss: str = "standard"  # options.LOSSES: full logits, the stack's chunked loss, or a fused kernel
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = (ALL_LINEAR,)
    # options.QLORA_PREPS: what happens to the non-4-bit weights. Current TRL no longer calls PEFT's
    # prepare_model_for_kbit_training (trl PR #4577, moved to experimental in #4704): "none" by default.
    qlora_prep: str = "none"
    adapter_dtype: str = "fp32"  # PEFT upcasts adapters to fp32; LitGPT/torchtune keep them in bf16
    offload_activations: bool = False  # checkpointed layer inputs live in CPU RAM (needs grad_ckpt)
    max_grad_norm: float = 1.0  # gradient clipping (HF default); clip_grad_norm_ keeps only per-tensor norms
    load_16bit_first: bool = False  # QLoRA: the framework puts the 16-bit checkpoint on the GPU, then quantises
    nf4_double_quant: bool = True  # QLoRA default (bnb_4bit_use_double_quant=True); LitGPT's bnb.nf4 has none
    gpus: int = 1
    sharding: str = "none"
    offload_optimizer: bool = False  # ZeRO-Offload / FSDP CPU offload of optimizer state
    # ZeRO-3 parameter offload (DeepSpeed zero_optimization.offload_param, "valid only with stage 3": deepspeed
    # 0.18.2 runtime/zero/config.py:156): every parameter partition lives in CPU RAM and the GPU gathers one
    # layer at a time; needs sharding "zero3" (on one GPU too: ZeRO-Infinity).
    offload_params: bool = False
    grad_accum: int = 1  # >1 keeps gradients alive through the next forward
    # torch.compile of the layers and the loss (torchtune compile=True): counted for torchtune's losses, whose
    # compiled cross-entropy keeps its 16-bit input and two fp32 row statistics instead of a log-softmax output.
    compile: bool = False
    # The optimizer step runs per parameter inside backward (torchtune optimizer_in_bwd=True, full fine-tuning):
    # each gradient is freed as soon as it has been accumulated and applied.
    optimizer_in_bwd: bool = False
    stack: str | None = None  # the training stack the defaults came from (estimator.options.stacks), None = explicit
    from_stack: tuple[str, ...] = ()  # the fields whose values the stack chose
    # Multimodal wrappers (issue 11): image placeholder tokens per example. The processor puts them into the
    # language model's sequence (Gemma 3: mm_tokens_per_image = 256 per image), so the language model runs on
    # seq_len + image_tokens positions; the collator masks them out of the labels.
    image_tokens: int = 0
    # Train the multimodal wrapper's vision tower and projector too (full: all their weights; LoRA: adapters on
    # their nn.Linear modules). False = the tower stays frozen (estimate() refuses True for a text-only model).
    train_tower: bool = False
    # --- issue 21: LoRA on the last N blocks, DoRA, the QLoRA base's quantisation and the backend ---
    # LoRA/QLoRA adapters on the last N decoder blocks only (0 = every block): mlx-lm's --num-layers, PEFT's
    # layers_to_transform. On MLX, full fine-tuning trains those N blocks only (mlx_lm/lora.py:240-244).
    lora_layers: int = 0
    dora: bool = False  # weight-decomposed LoRA (mlx-lm fine_tune_type 'dora'; modelled for the MLX stack)
    # How a QLoRA base is quantised (options.quantization.QUANT_MODES): bitsandbytes NF4 on the PyTorch stacks,
    # MLX's affine / mxfp4 / nvfp4 / mxfp8 on the MLX stack; bits and group size as that mode accepts them.
    quant_mode: str = "nf4"
    quant_bits: int = 4
    quant_group: int = 64
    # The runtime the step runs on (options.backends): derived from the device by the CLI and the pages; the
    # estimate reads it (a PyTorch stack on "metal" is an MPS run; MLX on "cpu" is how the fixtures are measured).
    backend: str = "cuda"
    # --- issue 28: the releases installed (estimator/job/versions.py Versions, resolved for `stack` by resolve_setup):
    # the runtimes price the older side of a version fork where these are on it (TrainingSetup.older). None = the
    # stack's defaults, the newest modelled releases (every fork's new side).
    versions: Versions | None = None

    def __post_init__(self) -> None:
        _check_choice("method", self.method, METHODS)
        _check_choice("precision", self.precision, PRECISION_IDS)
        _check_choice("optimizer", self.optimizer, OPTIMIZER_IDS)
        _check_choice("attention", self.attention, ATTENTIONS)
        _check_choice("loss", self.loss, LOSS_IDS)
        _check_choice("sharding", self.sharding, SHARDINGS)
        _check_choice("adapter_dtype", self.adapter_dtype, ADAPTER_DTYPES)
        _check_choice("qlora_prep", self.qlora_prep, QLORA_PREP_IDS)
        if self.stack is not None:
            from ..options.stacks import STACK_IDS  # stacks imports this module: look the ids up at run time

            _check_choice("stack", self.stack, STACK_IDS)
        if self.offload_activations and not self.grad_ckpt:
            raise ValueError(Text(N_("activation offloading needs gradient checkpointing (it offloads the "
                                     "checkpointed layer inputs)")))
        if isinstance(self.max_grad_norm, bool) or not isinstance(self.max_grad_norm, (int, float)) or not (
                0 <= self.max_grad_norm < float("inf")):
            raise ValueError(Text(N_("{name} must be a number ≥ 0, got {value}"), name="max_grad_norm",
                                  value=repr(str(self.max_grad_norm)[:20])))
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("seq_len", self.seq_len, 1, MAX_SEQ_LEN)
        _check_int("lora_rank", self.lora_rank, 1, MAX_RANK)
        _check_int("gpus", self.gpus, 1, MAX_GPUS)
        _check_int("grad_accum", self.grad_accum, 1, MAX_GRAD_ACCUM)
        _check_int("image_tokens", self.image_tokens, 0, MAX_SEQ_LEN)
        _check_int("lora_layers", self.lora_layers, 0, MAX_LORA_LAYERS)
        _check_choice("backend", self.backend, BACKEND_IDS)
        if not isinstance(self.dora, bool):
            raise ValueError(Text(N_("{name} must be true or false, got {value}"), name="dora",
                                  value=repr(str(self.dora)[:20])))
        if self.dora and self.method == "full":
            raise ValueError(Text(N_("DoRA decomposes LoRA adapters; full fine-tuning has none (use lora or qlora)")))
        _check_int("quant_bits", self.quant_bits, 1, 8)
        _check_int("quant_group", self.quant_group, 1, 1024)
        check_quant(self.quant_mode, self.quant_bits, self.quant_group)
        if not isinstance(self.train_tower, bool):
            raise ValueError(Text(N_("{name} must be true or false, got {value}"), name="train_tower",
                                  value=repr(str(self.train_tower)[:20])))
        if not isinstance(self.lora_targets, tuple) or not self.lora_targets:
            raise ValueError(Text(N_("lora_targets must be 'all-linear' or a list of module names")))
        for target in self.lora_targets:
            if not isinstance(target, str) or not target or len(target) > 64 or not all(
                    ch.isalnum() or ch in "_-." for ch in target):
                raise ValueError(Text(N_("LoRA target {target} is not a module name"), target=repr(str(target)[:40])))
        if ALL_LINEAR in self.lora_targets and len(self.lora_targets) > 1:
            raise ValueError(Text(N_("'all-linear' cannot be combined with named target modules")))
        if self.optimizer_in_bwd and (self.method != "full" or self.grad_accum > 1):
            raise ValueError(Text(N_("the optimizer step in backward needs full fine-tuning without gradient "
                                     "accumulation (torchtune's recipes raise otherwise)")))
        if self.offload_params and self.sharding != "zero3":
            raise ValueError(Text(N_("parameter offload needs ZeRO-3 / FSDP full sharding (sharding zero3), on one "
                                     "GPU or more")))
        if self.offload_optimizer and self.sharding == "none" and self.gpus > 1:
            raise ValueError(Text(N_("optimizer offload needs ZeRO or FSDP sharding (choose zero1, zero2 or zero3)")))
        if self.versions is not None:
            from .versions import Versions  # versions.py reads the stacks, which read this module's constants

            if not isinstance(self.versions, Versions) or self.versions.stack != self.stack:
                raise ValueError(Text(N_("the installed versions must be resolved for the setup's stack "
                                         "(resolve_setup does it)")))

    def older(self, fork_id: str) -> bool:
        """Does this run have the older behaviour of a version fork (options.versions.FORKS)? Only when the setup's
        installed versions are on the fork's old side and the fork moves this stack's estimate (Fork.stacks); the
        default (no versions given: the newest releases) is on every fork's new side."""
        if self.versions is None:
            return False
        return _older(fork_id, self.versions)

    @property
    def fused_optimizer(self) -> bool:
        """Does the optimizer step run without parameter-sized temporaries? (options.OPTIMIZERS)"""
        return not OPTIMIZERS[self.optimizer].step_temporaries

    @property
    def qlora_fp32_upcast(self) -> bool:
        """Are the non-4-bit weights (embeddings, head) fp32 after the QLoRA preparation?"""
        return QLORA_PREPS[self.qlora_prep].upcast_embeddings

    @property
    def fp32_residual(self) -> bool:
        """QLoRA with fp32 norms: the residual stream and MLP intermediates turn fp32."""
        return self.method == "qlora" and QLORA_PREPS[self.qlora_prep].fp32_residual

    @property
    def lm_seq_len(self) -> int:
        """Positions the language model runs on per example: the text plus any image tokens."""
        return self.seq_len + self.image_tokens

    @property
    def tokens(self) -> int:
        """Tokens held at once on one GPU: micro-batch × max length (image tokens included)."""
        return self.batch * self.lm_seq_len

    @property
    def autocast(self) -> bool:
        """Is a 16-bit autocast region active? Mixed precision always; LoRA/QLoRA with fp32 adapters on a
        16-bit base too (HF Trainer bf16=True). bf16 adapters on a bf16 base need no casts."""
        return self.precision != "fp32" and (
            self.precision == "mixed" or (self.method != "full" and self.adapter_dtype == "fp32"))


@lru_cache(maxsize=1024)
def _older(fork_id: str, versions: Versions) -> bool:
    from .versions import older  # versions.py reads the stacks, which import this module's siblings

    return older(fork_id, versions)


def parse_targets(text: str) -> tuple[str, ...]:
    """'all-linear' or 'q_proj,v_proj' → a tuple. Raises ValueError on an empty or malformed list."""
    if not isinstance(text, str):
        raise ValueError(Text(N_("LoRA targets must be text")))
    parts = tuple(dict.fromkeys(p.strip() for p in text.replace(";", ",").split(",") if p.strip()))
    if not parts:
        raise ValueError(Text(N_("LoRA targets are empty; use 'all-linear' or names like q_proj,v_proj")))
    return parts
