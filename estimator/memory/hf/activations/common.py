"""The activation context of one setup (which linears carry adapters, the attention and loss code the stack runs,
dtypes) and the per-layer and loss result types every model code fills in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....job.stack import attention_impl, loss_impl_id
from ....options.losses import FULL_LOGITS_IMPLS
from ...adapters import adapted_modules
from ...precision import FP32, adapter_bytes, compute_bytes

if TYPE_CHECKING:
    from ....job.setup import TrainingSetup
    from ....models.spec import ModelSpec


@dataclass(frozen=True)
class ActivationContext:
    """Dtypes and trainability that decide which tensors are saved and how wide they are."""

    c: int  # bytes of matmul outputs (bf16 under autocast or pure 16-bit; fp32 otherwise)
    resid: int  # bytes of the residual stream and norm outputs (fp32 when the model is fp32-loaded)
    mlp: int  # bytes of MLP intermediates (fp32 when a 4-bit layer receives fp32 input)
    adapter_in: int  # bytes of the LoRA input as lora_A computes with it (bf16 under autocast)
    adapter_copies: bool  # fp32 adapters under autocast: every LoRA module makes its own input copy
    base_trainable: bool  # full fine-tuning: every weight requires grad
    adapted: frozenset[str]  # LoRA target module names
    rank: int
    eager: bool
    seq_len: int
    qlora_upcast: bool
    head_module: bool  # does the lm_head module run on all tokens (and save its input when it trains)?
    # LitGPT's own model saves the activations: its LoRA switches with what its layers keep (memory/litgpt/model.py
    # LitgptLora, set by LitGPT's runtime); None on transformers' modules
    litgpt: Any = None
    autocast: bool = False  # the step runs under bf16 autocast: matmuls save bf16 copies of fp32 inputs
    tokens: int = 0  # tokens the language model runs on per micro-batch (TrainingSetup.tokens, read once here)


def context(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str] | None = None) -> ActivationContext:
    """The context of transformers' modules; `adapted` are the linears that carry adapters as the runtime names them
    (PEFT's by default). LitGPT's runtime adds its own model's switches (`litgpt`)."""
    c = compute_bytes(setup)
    seq = setup.lm_seq_len  # positions the language model runs on (max length + image tokens)
    # Residual stream dtype = dtype of the loaded model: fp32 for mixed/fp32, and for QLoRA after
    # prepare_model_for_kbit_training (embeddings and norms upcast to fp32, docs/formulas.md §3.3 Qp).
    # QLoRA with fp32 norms (PEFT's preparation, or Axolotl's norms-only patch) gives an fp32 residual stream.
    fp32_resid = setup.precision in ("mixed", "fp32") or setup.fp32_residual
    resid = FP32 if fp32_resid else c
    # bnb 4-bit matmuls return their input's dtype, so fp32 residuals give fp32 MLP intermediates (§3.3 Qp).
    mlp = FP32 if setup.fp32_residual else c
    return ActivationContext(
        c=c, resid=resid, mlp=mlp,
        adapter_in=2 if setup.autocast else adapter_bytes(setup),  # autocast computes LoRA in bf16 (§3.2 PEFT)
        # PEFT casts x to the fp32 adapter dtype, then autocast casts it back to bf16: a new tensor per module.
        adapter_copies=setup.autocast and adapter_bytes(setup) == FP32,
        base_trainable=setup.method == "full",
        adapted=(adapted if adapted is not None else adapted_modules(spec, setup)) if setup.method != "full"
        else frozenset(),
        rank=setup.lora_rank, eager=attention_impl(setup, spec.family) == "eager", seq_len=seq,
        qlora_upcast=setup.method == "qlora" and setup.qlora_fp32_upcast,
        # TRL's fused head and the fused kernels read lm_head.weight directly: the module never runs.
        head_module=loss_impl_id(setup) in FULL_LOGITS_IMPLS,
        autocast=setup.autocast, tokens=setup.batch * seq,  # TrainingSetup.tokens
    )


@dataclass(frozen=True)
class LayerActivations:
    """Bytes per token saved by one decoder layer, split for display."""

    norms: float
    attention: float
    mlp: float

    @property
    def total(self) -> float:
        return self.norms + self.attention + self.mlp


@dataclass(frozen=True)
class LossMemory:
    """Logits and cross-entropy memory for the whole micro-batch, bytes, as one implementation builds it."""

    kept: float  # saved from the loss forward until the start of backward
    transient: float  # extra at the loss's worst moment (its backward, or the end of its forward)
    impl: str  # options.LOSS_IMPLS id
    kept_formula: str
    transient_formula: str
