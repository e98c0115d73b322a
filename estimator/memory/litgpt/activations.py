"""LitGPT's own model code (litgpt/model.py, litgpt/lora.py): its layer's saved tensors, first layer and final norm
(its chunked loss is a loss implementation like the others: memory/hf/activations/loss.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hf.activations.common import LayerActivations
from ..precision import FP32, INT64

if TYPE_CHECKING:
    from ...models.spec import ModelSpec
    from ..hf.activations.common import ActivationContext


# --------------------------------------------------------------------------------------------------------------
# LitGPT 0.5.13's own model (stack model_code "litgpt"): what litgpt.model.GPT and litgpt.lora.GPT save for
# backward under bf16-true with SDPA. Closed form from FakeTensor + MemTracker traces of LitGPT's model on 14
# published rows (calibration/litgpt_trace.py; byte-exact per layer), docs/formulas.md §3.6.
# --------------------------------------------------------------------------------------------------------------
BOOL = 1  # CUDA native_dropout keeps a bool mask: 1 byte per element


def _litgpt_norm(spec: ModelSpec, ctx: ActivationContext) -> float:
    """One LitGPT norm. RMSNorm (litgpt/model.py: x.float() … .to(dtype)) keeps the fp32 input and the fp32 rstd,
    and with a trainable weight also the fp32 normalised x; F.layer_norm keeps its 16-bit input and fp32 mean and
    rstd."""
    h = spec.hidden_size
    if spec.norm_kind == "layer":
        return ctx.c * h + 8  # input + fp32 mean, rstd (CUDA)
    return FP32 * h + 4 + (FP32 * h if ctx.base_trainable else 0)  # fp32 x, rstd (+ fp32 x_normed when trained)


def _lora_input(width: int, ctx: ActivationContext, p: bool) -> float:
    """What one LitGPT LoRA module keeps of its input: with dropout the dropout output and its bool mask (CUDA
    native_dropout), else the input itself (litgpt/lora.py LoRALinear.forward: lora_dropout(x) @ lora_A)."""
    return (ctx.c + BOOL) * width if p else ctx.c * width


def litgpt_layer(spec: ModelSpec, ctx: ActivationContext) -> LayerActivations:
    """One LitGPT decoder block (litgpt/model.py, litgpt/lora.py 0.5.13), bytes per token (docs/formulas.md §3.6)."""
    lit = ctx.litgpt
    assert lit is not None
    c, h, inter, r = ctx.c, spec.hidden_size, spec.intermediate_size, ctx.rank
    qd, kvd, heads = spec.q_dim, spec.kv_dim, spec.num_heads
    full, p = ctx.base_trainable, lit.dropout > 0
    tokens = ctx.seq_len * lit.batch
    lora_q = lit.qkv > 0 and not full
    # Norms: RMSNorm ×2; LayerNorm: a parallel block's norms read the same x, whose 16-bit copy is kept once.
    if spec.norm_kind == "layer":
        inputs = 1 if spec.parallel_block else spec.norms_per_layer
        norms = inputs * c * h + spec.norms_per_layer * 8  # F.layer_norm: input + fp32 mean, rstd each
    else:
        norms = spec.norms_per_layer * _litgpt_norm(spec, ctx)
        norms += spec.norms_per_layer * FP32 * h / tokens  # per layer: weight.float() kept by the multiply
    # qkv: the full-FT linear keeps the norm output; LoRAQKVLinear keeps its dropout output + mask (or the input),
    # lora_A's output, and zero_pad's index_copy keeps its source when only some of q, k, v are adapted.
    attention = c * h if full else 0.0
    if lora_q:
        attention += _lora_input(h, ctx, p) + c * lit.qkv * r
        if lit.qkv < 3:
            enabled = qd * lit.query + kvd * (lit.key + lit.value)
            attention += c * enabled + INT64 * enabled / tokens  # index_copy source; int64 lora_ind clone per layer
    # SDPA keeps q, k, v, O and the fp32 logsumexp. GQA/MQA: k, v are repeat_interleave'd to q width; MHA: v is a
    # view of the fused qkv output, which stays alive whole (litgpt/model.py CausalSelfAttention).
    attention += (4 * c * qd if spec.num_kv_heads != heads else c * (3 * qd + 3 * kvd)) + FP32 * heads
    # proj's input y is a reshape copy of the SDPA output (flash keeps q's BHTD layout): kept when proj trains.
    if full:
        attention += c * qd
    elif lit.projection:
        attention += _lora_input(qd, ctx, p) + c * r
    # MLP: LLaMAMLP keeps the silu input, its output and fc_2's output; GptNeoxMLP's F.gelu keeps its input only.
    mlp = (3 if spec.gated_mlp else 1) * c * inter
    if full:
        mlp += c * h + c * inter  # fc input (shared by fc_1, fc_2) and proj input
    elif lit.mlp:
        if spec.gated_mlp:  # fc_1 and fc_2 are separate LoRA modules, each with its own dropout (one shared input)
            mlp += (2 * (c + BOOL) * h if p else c * h) + 2 * c * r
        else:  # a shared parallel norm output is kept already by the qkv LoRA when there is no dropout
            shared = not p and spec.parallel_block and spec.norms_per_layer == 1 and lora_q
            mlp += (0.0 if shared else _lora_input(h, ctx, p)) + c * r
        mlp += _lora_input(inter, ctx, p) + c * r  # mlp.proj
    return LayerActivations(norms=norms, attention=attention, mlp=mlp)


def litgpt_first_layer_unsaved(spec: ModelSpec, ctx: ActivationContext) -> float:
    """LoRA: the first block's input comes from a frozen embedding, so the norms reading it keep nothing and a
    dropout over their output keeps no mask (no gradient flows there); lora_A still keeps its input."""
    lit = ctx.litgpt
    assert lit is not None
    h, p = spec.hidden_size, lit.dropout > 0
    if spec.norm_kind == "layer":
        readers = spec.norms_per_layer if spec.parallel_block else 1
        unsaved = (ctx.c * h if readers else 0) + readers * 8
    else:
        unsaved = _litgpt_norm(spec, ctx)
    if p and lit.qkv:
        unsaved += BOOL * h  # qkv dropout mask
    if p and lit.mlp and spec.parallel_block:
        unsaved += BOOL * h  # the parallel MLP reads the layer input's norm too
    return unsaved


def litgpt_final_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """ln_f, the head's input when it trains (full FT; LoRA head: dropout output + mask and lora_A's output),
    input ids and targets (int64)."""
    lit = ctx.litgpt
    assert lit is not None
    h = spec.hidden_size
    saved = _litgpt_norm(spec, ctx) + 2 * INT64
    if ctx.base_trainable:
        saved += ctx.c * h  # lm_head keeps its input for its weight gradient
    elif lit.head:
        saved += _lora_input(h, ctx, lit.dropout > 0) + ctx.c * ctx.rank  # per 128-token chunk, all chunks kept
    return saved
