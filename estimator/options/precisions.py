"""Precision recipes and QLoRA preparation: what each keeps in which dtype."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_


@dataclass(frozen=True)
class PrecisionOption:
    """A precision recipe: the dtype the model is loaded in and the Trainer flags that go with it."""

    id: str
    label: str
    model_dtype: str  # torch dtype name the weights are loaded in
    bf16_flag: bool  # TrainingArguments.bf16 (autocast)
    fp16_flag: bool  # TrainingArguments.fp16
    compute_dtype: str  # dtype of matmul outputs (and of QLoRA's 4-bit matmuls)
    summary: str


PRECISIONS: dict[str, PrecisionOption] = {o.id: o for o in (
    PrecisionOption("bf16", N_("bf16 (pure 16-bit)"), "bfloat16", True, False, "bfloat16",
                    N_("Weights, gradients and optimizer states in bf16 (2 B each).")),
    PrecisionOption("fp16", N_("fp16 (pure 16-bit)"), "float16", False, True, "float16",
                    N_("Like bf16 with fp16 storage (a loss scaler adds nothing measurable).")),
    PrecisionOption("mixed", N_("Mixed (fp32 master + bf16 compute)"), "float32", True, False, "bfloat16",
                    N_("fp32 weights, gradients and states; bf16 autocast copies of each weight while it is used.")),
    PrecisionOption("fp32", N_("fp32"), "float32", False, False, "float32", N_("Everything in fp32 (4 B each).")),
)}
PRECISION_IDS: tuple[str, ...] = tuple(PRECISIONS)
PRECISION_LABELS = {k: o.label for k, o in PRECISIONS.items()}
# precision → mlx_lm.convert --dtype (mlx_lm/convert.py:82 MODEL_CONVERSION_DTYPES, 0.32.2)
MLX_CONVERT_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class QLoRAPrep:
    """What happens to the non-4-bit weights (embeddings, head, norms) of a QLoRA model before training."""

    id: str
    label: str
    upcast_embeddings: bool  # embeddings and head become fp32
    fp32_residual: bool  # fp32 norms make the residual stream and MLP intermediates fp32
    summary: str
    source: str


QLORA_PREPS: dict[str, QLoRAPrep] = {o.id: o for o in (
    QLoRAPrep("none", N_("No upcast (16-bit non-4-bit weights)"), False, False,
              N_("Embeddings, head and norms stay in 16-bit; nothing is cast to fp32."),
              "TRL 1.16 no longer calls prepare_model_for_kbit_training (trl PRs #4577, #4704)"),
    QLoRAPrep("peft", N_("prepare_model_for_kbit_training (fp32 upcast)"), True, True,
              N_("Every non-4-bit weight is cast to fp32: embeddings, head and norms; the residual stream, MLP "
              "intermediates and logits follow in fp32."),
              "peft 0.21 peft/utils/other.py prepare_model_for_kbit_training; PEFT's QLoRA guide"),
    QLoRAPrep("norms", N_("Norms upcast, embeddings and head 16-bit"), False, True,
              N_("Axolotl patches PEFT's preparation to leave embed_tokens and lm_head in 16-bit: the norms become "
              "fp32, so the residual stream still turns fp32."),
              "axolotl 0.19.0 axolotl/monkeypatch/peft/utils.py (PATCHED_PREPARE_CODE)"),
)}
QLORA_PREP_IDS: tuple[str, ...] = tuple(QLORA_PREPS)
