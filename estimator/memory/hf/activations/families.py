"""Per-family layer code of the 2025–26 families (GQA with sinks, MLA, Gated DeltaNet, Llama 4's routed experts,
Gemma's per-layer embeddings), following their transformers modeling files."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ....models import gemma
from ...precision import FP32
from .common import LayerActivations
from .layers import _attention, _linear_inputs, _mlp, _norm_saved, moe_layer

if TYPE_CHECKING:
    from ....models.spec import LinearModule, ModelSpec
    from .common import ActivationContext


# --------------------------------------------------------------------------------------------
# MoE / MLA / hybrid / attention-sink families (estimator/models/moe.py): one LayerActivations per layer kind
# ("<attention>:<dense|moe>" in spec.layer_pattern). Kept apart from the functions above.
# --------------------------------------------------------------------------------------------

GDN_CHUNK = 64  # torch_chunk_gated_delta_rule chunk_size (transformers 5.24 modeling_qwen3_5.py / qwen3_next)


def _mods(spec: ModelSpec, roles: tuple[str, ...], layers: int | None = None) -> list[LinearModule]:
    """Linears of the given roles (optionally only those carried by `layers` layers)."""
    return [m for m in spec.linears if m.role in roles and (layers is None or (m.layers or spec.num_layers) == layers)]


def _gqa_attention(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule], gated: bool) -> float:
    """Full / sliding / chunked attention through _attention on the layer's own projections; Qwen3-Next / Qwen3.5
    gate the output (q_proj emits query and gate: sigmoid saves its output and the product its other input) and
    normalise q and k per head."""
    view = replace(spec, linears=tuple(m for m in mods if m.role.startswith("attn")), qk_norm=gated)
    saved = _attention(view, ctx)
    if gated:
        saved += 2 * ctx.c * spec.q_dim  # sigmoid(gate) output and the attention output it multiplies
    return saved


def _sink_attention(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule]) -> float:
    """gpt-oss eager attention with sinks (modeling_gpt_oss.py eager_attention_forward): the logits get one sink
    column, the softmax runs in the logits' dtype (fp32 when the fp32 sink parameter joins bf16 logits under
    autocast) and the probabilities are cast to the value dtype for the last matmul: per head T + 1 scores."""
    qd, a, c, t = spec.q_dim, spec.num_heads, ctx.c, ctx.seq_len
    attn_in = [m for m in mods if m.role == "attn_in"]
    attn_out = [m for m in mods if m.role == "attn_out"]
    saved = _linear_inputs(attn_in, spec.hidden_size, ctx.resid, ctx)
    probs = ctx.resid if ctx.resid != c else c  # softmax dtype: the sink parameter's dtype wins the promotion
    saved += probs * a * (t + 1) + (c * a * t if probs != c else 0)  # softmax output (+ its 16-bit copy)
    saved += 3 * c * qd  # q, repeat_kv'd k and v for the two matmuls
    if ctx.base_trainable:
        saved += c * qd  # o_proj input (transposed contiguous attention output)
    else:
        saved += _linear_inputs(attn_out, qd, c, ctx)
    return saved


def _mla_attention(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule]) -> float:
    """DeepSeek MLA (modeling_deepseek_v3.py DeepseekV3Attention): x feeds q_a_proj and kv_a_proj_with_mqa; the
    rank-r_q and rank-r_kv latents pass an RMSNorm each before q_b_proj / kv_b_proj; RoPE on the rope slices;
    SDPA on H heads of qk = nope + rope with values of v_head_dim; o_proj reads H·v."""
    c, a = ctx.c, spec.num_heads
    qk = spec.mla_nope_dim + spec.mla_rope_dim
    by = {m.name: m for m in mods}
    first = [m for m in mods if m.name in ("q_a_proj", "q_proj", "kv_a_proj_with_mqa")]
    saved = _linear_inputs(first, spec.hidden_size, ctx.resid, ctx)
    for rank, name in ((spec.mla_q_rank, "q_b_proj"), (spec.mla_kv_rank, "kv_b_proj")):
        if rank and name in by:
            saved += FP32 * rank + 4 + (c * rank if ctx.base_trainable else 0)  # latent RMSNorm
            saved += _linear_inputs([by[name]], rank, c, ctx)
    saved += 2 * c * a * spec.mla_rope_dim + c * spec.mla_rope_dim  # RoPE products on q_pe and the shared k_pe
    saved += c * a * (2 * qk + 2 * spec.mla_v_dim) + 4 * a  # SDPA: Q, K, V, O and the fp32 logsumexp
    if not ctx.base_trainable:
        saved += _linear_inputs([by["o_proj"]], a * spec.mla_v_dim, c, ctx, already_saved=True)
    return saved


def _gdn_attention(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule]) -> float:
    """Gated DeltaNet layer with transformers' torch fallback (flash-linear-attention and causal-conv1d absent):
    the projections, the depthwise conv1d and its SiLU in the compute dtype; torch_chunk_gated_delta_rule
    (transformers 5.24.0 modeling_qwen3_5.py / modeling_qwen3_next.py) works in fp32 on q/k repeated to the value
    heads, keeps per 64-token chunk 64×64 decay and attention matrices and one recurrent state Hv·dk·dv; the gated
    RMSNorm and out_proj on the value width. Under autocast every `@` of the rule casts its fp32 operands to bf16
    and saves those copies instead (docs/formulas.md §3.4, "Gated DeltaNet")."""
    c, f, t = ctx.c, FP32, max(ctx.seq_len, 1)
    hv, dk, dv = spec.linear_value_heads, spec.linear_key_dim, spec.linear_value_dim
    key_dim, value_dim = spec.linear_key_heads * dk, hv * dv
    conv_dim = 2 * key_dim + value_dim
    attn_in = [m for m in mods if m.role == "attn_in"]
    attn_out = [m for m in mods if m.role == "attn_out"]
    saved = _linear_inputs(attn_in, spec.hidden_size, ctx.resid, ctx)
    saved += 2 * c * conv_dim  # conv1d input and the SiLU's input (conv output)
    qk = hv * dk  # q and k after repeat_interleave to the value heads
    mat = hv * GDN_CHUNK  # one row of a chunk's 64×64 matrix per token and value head
    state = hv * dk * dv / GDN_CHUNK  # one recurrent state per chunk, per token
    # fp32 tensors the element-wise ops and the triangular solves keep: q and k (l2norm inputs), the normalised k,
    # the scaled q, k·beta, the solve's k output (6 key-wide); v and the solve's value output (2 value-wide)
    saved += f * (6 * qk + 2 * value_dim)
    if ctx.autocast:
        # bf16 copies saved by the `@`s: k·beta, k twice, scaled q, and per chunk the k and q slices (7 key-wide),
        # v_new twice (2 value-wide), minus the first chunk's k and q slices (the zero initial state needs no
        # grad); the two bf16 q·kᵀ products and the bf16 copy of the intra-chunk attention; fp32 decay and UT
        # matrices; per chunk the fp32 state and its two bf16 copies
        saved += c * (7 * qk + 2 * value_dim) - 2 * c * qk * min(GDN_CHUNK, t) / t
        saved += (2 * f + 3 * c) * mat + (f + 2 * c) * state
    else:
        # fp32 throughout: the decayed q and k and v_new (2 key-wide + 1 value-wide); five 64×64 matrices per chunk
        # (decay, both q·kᵀ products, the UT system, the intra-chunk attention); one state per chunk
        saved += f * (2 * qk + value_dim) + 5 * f * mat + f * state
    # gated RMSNorm: fp32 input, the fp32 gate copy SiLU keeps and its output, the normalised value the gated product
    # keeps (+ the one the norm weight's product keeps when it trains)
    saved += 3 * f * value_dim + c * value_dim * (2 if ctx.base_trainable else 1)
    if ctx.base_trainable:
        saved += c * value_dim  # out_proj input
    else:
        saved += _linear_inputs(attn_out, value_dim, c, ctx)
    return saved


def _llama4_routed(spec: ModelSpec, ctx: ActivationContext) -> float:
    """Llama4TextMoe (transformers 5.24.0 modeling_llama4.py) sends every token through all E experts:
    hidden_states.repeat(E, 1) times the sigmoid router scores, then two bmm over the fused expert tensors
    (Llama4TextExperts), so the routed part saves E copies per token, not k gathered ones (docs/formulas.md §3.4)."""
    e, h, i, c = spec.num_experts, spec.hidden_size, spec.moe_intermediate_size, ctx.c
    # the router and the shared expert read one tensor (the router's input is saved when it trains)
    saved = _linear_inputs(_mods(spec, ("router", "shared_in")), h, ctx.resid, ctx)
    saved += FP32 * e + 2 * 8 * spec.experts_per_token  # fp32 sigmoid output; topk and scatter_ int64 indices
    saved += c * e + c * e * h  # the scaling product keeps the scores (contiguous copy) and the E repeated tokens
    saved += c * e * 2 * i  # SiLU saves the gate half of gate_up, a view that keeps the whole bmm output alive
    saved += c * e * i  # SiLU output (up × act also keeps the up half, already counted)
    if ctx.base_trainable:
        saved += c * e * (h + i)  # the two bmm inputs, for the expert weight gradients
    return saved


def _family_mlp(spec: ModelSpec, ctx: ActivationContext, moe: bool) -> float:
    """Dense SwiGLU, or the MoE block: router logits in fp32, k routed experts on gathered copies (as moe_layer;
    Llama 4: all E experts on every token), and the shared expert(s) as a dense SwiGLU of their width (plus the
    sigmoid gate of Qwen3-Next / Qwen3.5)."""
    if not moe:
        n_dense = spec.num_layers - spec.moe_layers
        return _mlp(spec, ctx, spec.intermediate_size, _mods(spec, ("mlp_in",), n_dense),
                    _mods(spec, ("mlp_out",), n_dense))
    if spec.family == "llama4_text":
        saved = _llama4_routed(spec, ctx)
    else:
        saved = moe_layer(replace(spec, shared_expert_intermediate_size=0), ctx).mlp
    if spec.shared_expert_intermediate_size:
        saved += _mlp(spec, ctx, spec.shared_expert_intermediate_size, _mods(spec, ("shared_in",)),
                      _mods(spec, ("shared_out",)), trainable_input=False)
        if any(m.name == "shared_expert_gate" for m in spec.linears):
            saved += 2 * ctx.c * spec.hidden_size  # sigmoid(gate) · shared output keeps both
    return saved


GEMMA_PLE_FAMILIES = gemma.FAMILIES  # the families models/gemma.py builds (per-layer embeddings, AltUp)


def _gemma_norm(spec: ModelSpec, ctx: ActivationContext, width: int, scale: bool = True) -> float:
    """Gemma4RMSNorm / Gemma3nRMSNorm (modeling_gemma4.py): x.float() · pow(mean(x²) + eps, −0.5), times the fp32
    weight when with_scale: the fp32 input and the rstd; with a trainable weight also the fp32 normalised tensor."""
    return FP32 * width + 4 + (FP32 * width if scale and ctx.base_trainable else 0)


def _gemma_layer(spec: ModelSpec, ctx: ActivationContext, kind: str) -> LayerActivations:
    """One Gemma 4 / Gemma 3n decoder layer of a layer_pattern kind "<sliding|full>[_shared]:<dense…|moe>"
    (modeling_gemma4.py Gemma4TextDecoderLayer, modeling_gemma3n.py Gemma3nTextDecoderLayer): SDPA attention on the
    kind's own head size with q/k/v norms (a K/V-sharing layer reads the producer layer's K and V, saved there, and
    has no k/v projections or norms); the gated MLP of the kind's width; the per-layer input gate (PLE); Gemma 4's
    MoE block next to the MLP; Gemma 3n's AltUp streams and LAuReL branch. Model-level PLE work is spread evenly
    over the layers."""
    mods = [m for m in spec.linears if not m.kinds or kind in m.kinds]
    attention = _gemma_attention(spec, ctx, kind, mods)
    mlp_in = [m for m in mods if m.role == "mlp_in"]
    mlp_out = [m for m in mods if m.role == "mlp_out"]
    mlp = _mlp(spec, ctx, mlp_out[0].in_features, mlp_in, mlp_out)
    if kind.endswith("+sparse"):  # Gemma 3n's Gaussian top-k keeps the gate output for its mean/std backward
        mlp += ctx.mlp * mlp_out[0].in_features
    norms = 4 * _gemma_norm(spec, ctx, spec.hidden_size)
    if kind.endswith(":moe"):
        mlp, norms = _gemma_moe(spec, ctx, mods, mlp, norms)
    mlp, norms = _gemma_ple_altup(spec, ctx, mods, mlp, norms)
    return LayerActivations(norms=norms, attention=attention, mlp=mlp)


def _gemma_attention(spec: ModelSpec, ctx: ActivationContext, kind: str, mods: list[LinearModule]) -> float:
    """A Gemma 4 / 3n layer's attention on the kind's own head size, with q/k/v norms (none of k/v when shared)."""
    c, a = ctx.c, spec.num_heads
    attn_kind = kind.split(":")[0]
    shared = attn_kind.endswith("_shared")
    attn = [m for m in mods if m.role.startswith("attn")]
    q = next(m for m in attn if m.name == "q_proj")
    head_dim = q.out_features // a
    kv = next((m for m in spec.linears if m.name == "k_proj" and m.kinds
               and any(k.split(":")[0] == attn_kind.removesuffix("_shared") for k in m.kinds)), None)
    kv_heads = kv.out_features // head_dim if kv else spec.num_kv_heads
    view = replace(spec, linears=tuple(attn), head_dim=head_dim, num_kv_heads=kv_heads, qk_norm=True)
    kvd = kv_heads * head_dim
    attention = _attention(view, ctx)
    if shared:  # K, V and their norms belong to the producer layer (the same tensors, saved once)
        attention -= 2 * c * kvd + FP32 * kvd + 4 * kv_heads + (FP32 * kvd if ctx.base_trainable else 0)
    else:
        attention += FP32 * kvd + 4 * kv_heads  # v_norm (no weight): fp32 input and rstd
    return attention


def _gemma_moe(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule], mlp: float, norms: float
               ) -> tuple[float, float]:
    """Gemma 4's MoE block next to the MLP: its router, experts and extra norms added to `mlp` and `norms`."""
    c, h = ctx.c, spec.hidden_size
    # Gemma4TextRouter: unscaled norm, × scale (saves the normed tensor when trainable), proj, fp32 softmax;
    # pre_feedforward_layernorm_2 and the experts as moe_layer; post_feedforward_layernorm_1/_2
    moe_view = replace(spec, linears=tuple(m for m in mods if m.role in ("router", "expert_in", "expert_out")),
                       shared_expert_intermediate_size=0)
    mlp += moe_layer(moe_view, ctx).mlp + _gemma_norm(spec, ctx, h, scale=False)
    mlp += c * h if ctx.base_trainable else 0
    if not ctx.base_trainable and any(m.name in ctx.adapted for m in moe_view.by_role.get("router", ())):
        # LoRA on router.proj: the routing weights need grad, so each routed pair's expert output is saved by
        # its multiply with the weight (moe_layer counts it for full fine-tuning only)
        mlp += spec.experts_per_token * c * h
    norms += 3 * _gemma_norm(spec, ctx, h)
    return mlp, norms


def _gemma_ple_altup(spec: ModelSpec, ctx: ActivationContext, mods: list[LinearModule], mlp: float, norms: float
                     ) -> tuple[float, float]:
    """The per-layer input gate (PLE) and Gemma 3n's AltUp streams and LAuReL branch, added to `mlp` and `norms`."""
    c, h = ctx.c, spec.hidden_size
    ple = [m for m in mods if m.role in ("ple_in", "ple_out")]
    gate = [m for m in ple if m.name == "per_layer_input_gate"]
    if gate:
        p = gate[0].out_features
        proj = [m for m in ple if m.name == "per_layer_projection"]
        # gate reads the residual; gelu saves its input; the product saves gelu(x) and the per-layer input slice;
        # per_layer_projection's input; post_per_layer_input_norm
        mlp += _linear_inputs(gate, h, ctx.resid, ctx) + 3 * c * p + _linear_inputs(proj, p, c, ctx)
        norms += _gemma_norm(spec, ctx, h)
    laurel = [m for m in ple if m.name == "laurel.linear_right"]
    if laurel:
        # LAuReL: linear_left reads the attention input (saved already), linear_right its rank-r output,
        # post_laurel_norm; AltUp: router norm + modality_router + tanh twice (predict and correct), the matmul of
        # the stacked streams with the prediction coefficients and the correction product (n streams each)
        n = next(m.in_features for m in spec.linears if m.name == "altup.correction_coefs")
        r = laurel[0].in_features
        mlp += _linear_inputs(laurel, r, c, ctx) + _gemma_norm(spec, ctx, h)
        router = [m for m in spec.linears if m.name == "altup.modality_router"]
        mlp += 2 * (_gemma_norm(spec, ctx, h) + _linear_inputs(router, h, c, ctx)) + 2 * c * n * h
        mlp += c * h if ctx.base_trainable else 0  # scale_corrected_output: input × correct_output_scale
    return mlp, norms


def gemma_model_level_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """What Gemma 4 / Gemma 3n save outside the decoder layers (kept with or without checkpointing): PLE's
    per_layer_model_projection input and the per_layer_projection_norm over the (L, p) per-layer inputs; Gemma 3n's
    AltUp work (Gemma3nTextModel.forward): the embeddings, per extra stream the projection's output and its
    magnitude-rescaled copy (pow and the division keep them) before the first layer, the last layer's n-stream
    output and the same two per stream after the last layer."""
    if spec.family not in GEMMA_PLE_FAMILIES:
        return 0.0
    c, h = ctx.c, spec.hidden_size
    by_name = {m.name: m for m in spec.linears}
    saved = 0.0
    if "per_layer_model_projection" in by_name:
        p = by_name["per_layer_input_gate"].out_features
        saved += _linear_inputs([by_name["per_layer_model_projection"]], h, c, ctx)
        saved += spec.num_layers * _gemma_norm(spec, ctx, p)
    if "altup.correction_coefs" in by_name:
        n = by_name["altup.correction_coefs"].in_features
        saved += c * h * (1 + 4 * (n - 1) + n)
    return saved


def family_layer_sizes(spec: ModelSpec, ctx: ActivationContext) -> dict[str, LayerActivations]:
    """Bytes per token of each layer kind in spec.layer_pattern."""
    if spec.family in GEMMA_PLE_FAMILIES:
        return {kind: _gemma_layer(spec, ctx, kind) for kind in set(spec.layer_pattern)}
    out: dict[str, LayerActivations] = {}
    for kind in set(spec.layer_pattern):
        attn_kind, mlp_kind = kind.split(":")
        mods = [m for m in spec.linears if m.role.startswith("attn")]
        if attn_kind == "linear":
            attn = _gdn_attention(spec, ctx, [m for m in mods if m.name.startswith(("in_proj", "out_proj"))])
        else:
            full = [m for m in mods if not m.name.startswith(("in_proj", "out_proj"))]
            if spec.attention_sinks:
                attn = _sink_attention(spec, ctx, full)
            elif spec.mla_kv_rank:
                attn = _mla_attention(spec, ctx, full)
            else:
                attn = _gqa_attention(spec, ctx, full, gated=spec.linear_value_heads > 0)
        out[kind] = LayerActivations(norms=spec.norms_per_layer * _norm_saved(spec, ctx), attention=attn,
                                     mlp=_family_mlp(spec, ctx, mlp_kind == "moe"))
    return out
