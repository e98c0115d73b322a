"""One transformers decoder layer (dense or MoE): the tensors autograd saves for backward, per token, from the
model's linears (docs/formulas.md §3.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...precision import FP32
from .common import LayerActivations

if TYPE_CHECKING:
    from ....models.spec import LinearModule, ModelSpec
    from .common import ActivationContext


def _fp32_norm_product(spec: ModelSpec) -> bool:
    """Norms that multiply the weight with the fp32 normalised tensor and cast afterwards, so the weight's gradient
    keeps the fp32 tensor: Gemma's (1 + weight) and OLMo 2's Olmo2RMSNorm ((weight * x).to(dtype),
    transformers 5.24.0 modeling_olmo2.py; real-width layer traces, calibration/family_layers.py)."""
    return spec.family.startswith("gemma") or spec.norm_after


def _norm_saved(spec: ModelSpec, ctx: ActivationContext) -> float:
    """One norm's saved tensors. HF RMSNorm keeps an fp32 copy of its input (4h) and the fp32 rstd (4),
    plus the normalised tensor for its weight grad when trainable (§3.2). LayerNorm keeps its input and
    fp32 mean + rstd (8)."""
    h = spec.hidden_size
    if spec.norm_kind == "layer":
        return ctx.resid * h + 8  # native_layer_norm saves input, mean, rstd
    if spec.norm_kind == "layer_nobias":
        # Cohere2LayerNorm (transformers 5.24.0 modeling_cohere2.py) computes (x - mean) in fp32 twice: once inside
        # the variance (saved by pow) and once for the output (saved by the multiply with rsqrt, 4 B per token);
        # the normalised fp32 tensor is saved for the weight's gradient when it trains (real-width layer trace,
        # calibration/family_layers.py).
        return 2 * FP32 * h + 4 + (FP32 * h if ctx.base_trainable else 0)
    trainable = ctx.resid * h if ctx.base_trainable else 0
    if _fp32_norm_product(spec) and ctx.base_trainable:
        trainable = FP32 * h  # Gemma's norm multiplies in fp32 by (1 + weight): saves the fp32 normalised x
    return FP32 * h + 4 + trainable


BOOL_BYTES = 1  # a torch.bool mask element (native_dropout's mask)


def _linear_inputs(mods: list[LinearModule], in_features: int, in_bytes: int, ctx: ActivationContext,
                   already_saved: bool = False) -> float:
    """Inputs saved by linears reading one shared tensor of dtype size in_bytes.

    Trainable linear: saves its input for the weight grad; autocast casts a non-16-bit input separately
    for each module (§3.3 M: +10h), otherwise the one shared tensor is saved once. Frozen linear: saves
    nothing (autograd guard_for). LoRA module: lora_A saves its input and lora_B the rank-r intermediate;
    the input is a per-module copy when it had to be cast (fp32 adapters under autocast, §3.2 PEFT
    Linear.forward), else the shared tensor (counted once, and not at all if something saves it already)."""
    saved = 0.0
    if ctx.base_trainable and mods:
        casts = in_bytes != ctx.c  # input dtype differs from compute dtype → one cast per module
        if casts or not already_saved:
            saved += ctx.c * in_features * (len(mods) if casts else 1)
    adapted = [m for m in mods if m.name in ctx.adapted]
    if adapted:
        copies = ctx.adapter_copies or in_bytes != ctx.adapter_in
        if ctx.lora_dropout:
            # nn.Dropout per module (torch native_dropout): its bool mask (1 B) and its output, which lora_A saves, in
            # the adapter's input dtype; the (cast) input itself is not kept for the adapter
            saved += sum((ctx.adapter_in + BOOL_BYTES) * m.in_features for m in adapted)
        elif copies:
            saved += sum(ctx.adapter_in * m.in_features for m in adapted)
        elif not already_saved:
            saved += in_bytes * in_features
        saved += len(adapted) * ctx.adapter_in * ctx.rank
    return saved


def _attention(spec: ModelSpec, ctx: ActivationContext) -> float:
    """SDPA (flash/mem-efficient) saves Q, K, V, the output O and an fp32 logsumexp per head; with
    enable_gqa K and V stay kv-width (§3.2). Eager saves repeated K/V, fp32 softmax output and the bf16
    probabilities: 2 s²-sized tensors per head (Korthikanti et al. §4.1, without dropout)."""
    qd, kvd, a, c = spec.q_dim, spec.kv_dim, spec.num_heads, ctx.c
    attn_in = list(spec.by_role.get("attn_in", ()))
    attn_out = list(spec.by_role.get("attn_out", ()))
    saved = _linear_inputs(attn_in, spec.hidden_size, ctx.resid, ctx)
    if ctx.eager:
        probs = (FP32 + (c if c != FP32 else 0)) * a * ctx.seq_len  # fp32 softmax output + bf16 copy
        if spec.attn_softcap:
            probs += c * a * ctx.seq_len  # Gemma-2 soft-capping: tanh saves its output (calibration)
        saved += 3 * c * qd + probs  # q, repeat_kv'd k and v
        if ctx.base_trainable:
            saved += c * qd  # o_proj saves the transposed contiguous attention output
    else:
        saved += c * (2 * qd + 2 * kvd) + 4 * a  # Q, K, V, O + fp32 logsumexp
    if not ctx.base_trainable:
        # o_proj's input is the attention output O: SDPA saves it already (trainable o_proj shares it).
        saved += _linear_inputs(attn_out, spec.q_dim, c, ctx, already_saved=not ctx.eager)
    if spec.qk_norm:
        # per-head RMSNorm on q and k: fp32 input copies + rstd (+ normalised copies when trainable); OLMo 2's
        # q_norm/k_norm span all heads: one rstd each per token
        rstd = 2 if spec.qk_norm_full_width else a + spec.num_kv_heads
        saved += FP32 * (qd + kvd) + 4 * rstd
        if ctx.base_trainable:
            saved += (FP32 if _fp32_norm_product(spec) else ctx.resid) * (qd + kvd)
    return saved


def sliding_mask_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """Extra bytes per token of one sliding-window layer under SDPA once seq_len >= window: transformers 5.24
    cannot hand SDPA is_causal (masking_utils._ignore_causal_mask_sdpa: kv_length >= local_attention_size) and
    builds a (b, 1, s, s) bool mask, so GQA is lost (sdpa_attention.use_gqa_in_sdpa: no mask only) and K, V are
    repeat_kv'd to q width, and SDPA converts the mask to an additive one in the compute dtype that it saves
    (aten convert_boolean_attn_mask): c·s + 2c·(q_dim − kv_dim) (tracer: mistral sliding-window cases)."""
    if ctx.eager or not spec.sliding_layers or ctx.seq_len < spec.sliding_window or ctx.litgpt is not None:
        return 0.0
    return float(ctx.c * ctx.seq_len + 2 * ctx.c * (spec.q_dim - spec.kv_dim))


def _act_saved_factor(spec: ModelSpec) -> int:
    """Tensors of width I that the activation function saves: F.silu / F.gelu save their input (1);
    Phi-2's python gelu_new saves x, tanh(...), 0.5x and 1+tanh(...) (4)."""
    return 4 if spec.hidden_act == "gelu_new" else 1


def _mlp(spec: ModelSpec, ctx: ActivationContext, inter: int, mlp_in: list[LinearModule],
         mlp_out: list[LinearModule], trainable_input: bool = True, input_saved: bool = False) -> float:
    """Gated MLP (SwiGLU/GeGLU): act_fn saves the gate output, the product saves act output and up output,
    down_proj saves the product when trainable → 2h + 8I for full FT, 6I frozen (§3.2). Plain MLP: the
    activation saves fc1's output; fc2 saves the activation output when trainable."""
    m_bytes = ctx.mlp
    saved = _linear_inputs(mlp_in, spec.hidden_size, ctx.resid, ctx, already_saved=input_saved) \
        if trainable_input else 0.0
    act = _act_saved_factor(spec) * m_bytes * inter
    if spec.gated_mlp:
        saved += act + 2 * m_bytes * inter  # act_fn input, act output and up output (mul saves both)
    else:
        saved += act
    if ctx.base_trainable:
        saved += m_bytes * inter * len(mlp_out)  # down/fc2 input for the weight grad
    else:
        saved += _linear_inputs(mlp_out, inter, m_bytes, ctx)
    return saved


def _down_saved(spec: ModelSpec, ctx: ActivationContext) -> float:
    """What the dense MLP's output projection(s) save, as counted in _mlp."""
    mlp_out = [m for m in spec.by_role.get("mlp_out", ()) if not m.layers]
    if ctx.base_trainable:
        return float(ctx.mlp * spec.intermediate_size * len(mlp_out))
    return _linear_inputs(mlp_out, spec.intermediate_size, ctx.mlp, ctx)


def dense_layer(spec: ModelSpec, ctx: ActivationContext) -> LayerActivations:
    """One dense decoder layer (no MoE), bytes per token."""
    mlp_in = [m for m in spec.by_role.get("mlp_in", ()) if not m.layers]
    mlp_out = [m for m in spec.by_role.get("mlp_out", ()) if not m.layers]
    if not mlp_in:  # MoE models: a dense layer uses the dense MLP modules (those with a layer count)
        mlp_in = list(spec.by_role.get("mlp_in", ()))[:2]
        mlp_out = list(spec.by_role.get("mlp_out", ()))[:1]
    return LayerActivations(
        norms=spec.norms_per_layer * _norm_saved(spec, ctx),
        attention=_attention(spec, ctx),
        # One norm feeding attention and MLP in parallel (Cohere2, Phi-2): the attention linears already saved it.
        mlp=_mlp(spec, ctx, spec.intermediate_size, mlp_in, mlp_out,
                 input_saved=spec.parallel_block and spec.norms_per_layer == 1),
    )


def moe_layer(spec: ModelSpec, ctx: ActivationContext) -> LayerActivations:
    """One MoE layer: attention as dense; router softmax in fp32 (4E); each of the k routed experts runs a
    gated MLP of width I_moe on a gathered copy of the token (c·h) whose output is scaled by the routing
    weight (another c·h); Qwen2-MoE adds a dense shared expert. Estimated, then checked by the tracer."""
    experts_in = list(spec.by_role.get("expert_in", ()))
    experts_out = list(spec.by_role.get("expert_out", ()))
    router = list(spec.by_role.get("router", ()))
    h, k = spec.hidden_size, spec.experts_per_token
    mlp = _linear_inputs(router, h, ctx.resid, ctx) + FP32 * spec.num_experts  # router logits → fp32 softmax
    per_expert = _mlp(spec, ctx, spec.moe_intermediate_size, experts_in, experts_out, trainable_input=False)
    gathered = ctx.c * h  # index_select copy of the routed tokens
    if ctx.base_trainable or any(m.name in ctx.adapted for m in experts_in):
        per_expert += gathered  # expert linears save the gathered input
        if ctx.base_trainable:
            per_expert += ctx.c * h  # output × routing weight saves the expert output
    if any(m.name in ctx.adapted for m in experts_in):
        # LoRA on the fused gate_up tensor: its own input copy and a rank-2r intermediate per routed pair
        per_expert += ctx.adapter_in * (h + 2 * ctx.rank) if ctx.adapter_copies else ctx.adapter_in * 2 * ctx.rank
    mlp += k * per_expert
    if spec.shared_expert_intermediate_size:
        shared_in = [m for m in spec.by_role.get("mlp_in", ()) if m.layers == spec.moe_layers]
        shared_out = [m for m in spec.by_role.get("mlp_out", ()) if m.layers == spec.moe_layers]
        mlp += _mlp(spec, ctx, spec.shared_expert_intermediate_size, shared_in, shared_out)
    return LayerActivations(
        norms=spec.norms_per_layer * _norm_saved(spec, ctx),
        attention=_attention(spec, ctx),
        mlp=mlp,
    )


def moe_lora_delta_bytes(spec: ModelSpec, ctx: ActivationContext) -> float:
    """PEFT adapts transformers 5's fused 3-D expert tensors with a ParamWrapper that builds the delta weight
    B·A for every expert and keeps it for backward: one adapter-dtype copy of each adapted expert tensor per
    MoE layer (calibration: qwen3_moe LoRA all-linear)."""
    return float(sum(m.in_features * m.out_features * m.count * ctx.adapter_in
                     for m in spec.linears if m.role.startswith("expert") and m.name in ctx.adapted))


def moe_lora_delta_grad_bytes(spec: ModelSpec, ctx: ActivationContext) -> float:
    """At an MoE layer's backward the gradient of the fused gate_up delta weight is alive while the down
    projection's delta has been consumed and freed: + (gate_up − down) delta bytes over the saved tensors
    (real-width traces: GLM-4.5-Air and DeepSeek-V3 LoRA all-linear with checkpointing)."""
    if not spec.layer_pattern:
        return 0.0
    size = {role: sum(m.in_features * m.out_features * m.count * ctx.adapter_in
                      for m in spec.linears if m.role == role and m.name in ctx.adapted)
            for role in ("expert_in", "expert_out")}
    return float(max(0, size["expert_in"] - size["expert_out"]))
