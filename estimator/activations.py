"""Activations: the tensors autograd saves for backward, per token and per layer, from the architecture.

Closed forms follow docs/formulas.md §3.3 (measured with saved-tensor hooks) and are re-checked against the
FakeTensor tracer (validation/, checked by tests/test_accuracy.py). All figures are bytes per token unless named otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .i18n import N_, Text
from .model import LinearModule, ModelSpec
from .precision import FP32, adapter_bytes, compute_bytes
from .stacks import attention_impl, get_stack, loss_impl_id
from .training import ALL_LINEAR, TrainingSetup

INT64 = 8
LM_HEAD = "lm_head"
FULL_LOGITS_IMPLS = frozenset({"hf", "torchtune_full", "litgpt", "torchtune"})  # options.LOSS_IMPLS that build [T, V] logits
TRL_TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE (TRL 1.16.0)
TRL_VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE (TRL 1.16.0)
TORCHTUNE_CHUNKS = 8  # torchtune 0.6.1 CEWithChunkedOutputLoss(num_output_chunks=8)


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
    litgpt: LitgptLora | None = None  # LitGPT's own model saves the activations (litgpt_* functions below)
    autocast: bool = False  # the step runs under bf16 autocast: matmuls save bf16 copies of fp32 inputs


def context(spec: ModelSpec, setup: TrainingSetup) -> ActivationContext:
    c = compute_bytes(setup)
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
        adapted=adapted_modules(spec, setup) if setup.method != "full" else frozenset(),
        rank=setup.lora_rank, eager=attention_impl(setup, spec.family) == "eager", seq_len=setup.lm_seq_len,
        qlora_upcast=setup.method == "qlora" and setup.qlora_fp32_upcast,
        # TRL's fused head and the fused kernels read lm_head.weight directly: the module never runs.
        head_module=loss_impl_id(setup) in FULL_LOGITS_IMPLS,
        litgpt=litgpt_lora(spec, setup) if uses_litgpt_model(spec, setup) else None,
        autocast=setup.autocast,
    )


def adapted_modules(spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
    """Names PEFT would wrap. 'all-linear' = every nn.Linear of the decoder layers (PEFT excludes the
    output head). Named targets must exist in this architecture, or PEFT raises; so do we."""
    names = set(spec.linear_names())
    if litgpt_stack(setup) and setup.lora_targets != (ALL_LINEAR,):
        setup = _litgpt_fused_targets(spec, setup)
    if setup.lora_targets == (ALL_LINEAR,):
        if spec.all_linear_targets:  # families_moe: what PEFT 0.21.2 really wraps (meta-device check)
            return frozenset(spec.all_linear_targets)
        if spec.family == "qwen2_moe":
            # PEFT does not map qwen2_moe's fused experts and router back to linears: all-linear skips them
            return frozenset(n for n in names if not n.startswith(("experts.", "router.")))
        return frozenset(names)
    names.add(LM_HEAD)  # PEFT can adapt the output head when named explicitly
    unknown = [t for t in setup.lora_targets if t not in names]
    if unknown:
        raise ValueError(Text(N_("LoRA target {target} is not a linear module of {family}; its modules are: {names}"),
                              target=repr(unknown[0]), family=spec.family, names=", ".join(sorted(names))))
    return frozenset(setup.lora_targets)


def lora_targets(spec: ModelSpec, text: str) -> tuple[str, ...]:
    """The LoRA targets a user typed ('all-linear', or module names separated by commas or spaces), checked
    against this architecture as PEFT would check them. Raises ValueError with the reason."""
    from .training import parse_targets

    targets = parse_targets(str(text))
    adapted_modules(spec, TrainingSetup(method="lora", lora_targets=targets))
    return targets


def lora_params(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str] | None = None) -> int:
    """LoRA parameters: r × (in + out) per adapted module (A: r×in, B: out×r, no bias; LoRA paper §4)."""
    if setup.method == "full":
        return 0
    if uses_litgpt_model(spec, setup):
        return litgpt_lora_params(spec, litgpt_lora(spec, setup), setup.lora_rank)
    targets = adapted if adapted is not None else adapted_modules(spec, setup)
    r = setup.lora_rank
    head = r * (spec.hidden_size + spec.vocab_size) if LM_HEAD in targets else 0
    total = head
    for m in spec.linears:
        if m.name not in targets:
            continue
        per = r * (m.in_features + m.out_features)
        if m.role == "expert_in":
            # transformers 5 fuses gate and up into one 3-D gate_up_proj; PEFT wraps it with rank 2r and a
            # dense B (r·E rows per expert tensor): 2r·E·(h + 2I) for the pair instead of 2r·E·(h + I).
            per += r * m.out_features
        total += per * m.count * (m.layers or spec.num_layers)
    return total


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
        if copies:
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


@dataclass(frozen=True)
class LayerActivations:
    """Bytes per token saved by one decoder layer, split for display."""

    norms: float
    attention: float
    mlp: float

    @property
    def total(self) -> float:
        return self.norms + self.attention + self.mlp


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


def layer_sizes(spec: ModelSpec, ctx: ActivationContext) -> tuple[LayerActivations | None, LayerActivations | None]:
    """(dense layer, MoE layer) bytes per token, each computed once; None where the model has none."""
    if ctx.litgpt is not None:
        return litgpt_layer(spec, ctx), None
    dense = dense_layer(spec, ctx) if spec.num_layers > spec.moe_layers else None
    moe = moe_layer(spec, ctx) if spec.moe_layers else None
    return dense, moe


def layers_per_token(spec: ModelSpec, ctx: ActivationContext,
                     sizes: tuple[LayerActivations | None, LayerActivations | None] | None = None) -> float:
    """All decoder layers, bytes per token. With a frozen embedding (LoRA/QLoRA) no gradient reaches the
    first layer's input, so its input norm(s) save nothing (§3.3 R: "layer 0's first norm saves nothing")."""
    if spec.layer_pattern:  # families_moe: per layer kind
        kinds = family_layer_sizes(spec, ctx)
        total = sum(kinds[k].total for k in spec.layer_pattern) + gemma_model_level_per_token(spec, ctx)
    else:
        dense_size, moe_size = sizes or layer_sizes(spec, ctx)
        total = (spec.num_layers - spec.moe_layers) * (dense_size.total if dense_size else 0.0)
        if moe_size:
            total += spec.moe_layers * moe_size.total
        if ctx.litgpt is not None:
            return total - (0.0 if ctx.base_trainable else litgpt_first_layer_unsaved(spec, ctx))
    total += spec.sliding_layers * sliding_mask_per_token(spec, ctx)  # masked SDPA on sliding-window layers
    if not ctx.base_trainable and not spec.norm_after:  # OLMo 2's norms read sublayer outputs, which need grad
        first_norms = 2 if (spec.parallel_block and spec.family == "gpt_neox") else 1
        total -= first_norms * _norm_saved(spec, ctx)
    return total


def max_layer_per_token(spec: ModelSpec, ctx: ActivationContext,
                        sizes: tuple[LayerActivations | None, LayerActivations | None] | None = None) -> float:
    """The largest single layer: what gradient checkpointing recomputes at once."""
    if spec.layer_pattern:  # families_moe: per layer kind
        return max(x.total for x in family_layer_sizes(spec, ctx).values()) + sliding_mask_per_token(spec, ctx)
    return max(x.total for x in (sizes or layer_sizes(spec, ctx)) if x is not None) + sliding_mask_per_token(spec, ctx)


def rope_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """RoPE cos and sin, computed once per forward and saved by every layer's multiply (shared)."""
    if ctx.litgpt is not None:
        return 0.0  # LitGPT: cos/sin are the model's fp32 (T, rope_n_elem) buffers, no per-step tensors (§3.6)
    if spec.family in GEMMA_PLE_FAMILIES:
        # Gemma 4 / 3n compute cos and sin once per attention type, each of its own head size (Gemma 4's full
        # layers: global_head_dim) (modeling_gemma4.py Gemma4TextModel.forward: position_embeddings[layer_type])
        dims = {}
        for kind in spec.layer_pattern:
            base = kind.split(":")[0].removesuffix("_shared")
            q = next(m for m in spec.linears if m.name == "q_proj" and (not m.kinds or kind in m.kinds))
            dims[base] = q.out_features // spec.num_heads
        return 2 * ctx.c * sum(dims.values())
    return 2 * ctx.c * spec.head_dim if spec.family not in ("gpt_neox", "phi") else 2 * ctx.c * spec.head_dim // 2


def final_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """Final norm + lm_head input (when the head is trainable) + input ids and labels (int64)."""
    if ctx.litgpt is not None:
        return litgpt_final_per_token(spec, ctx)
    saved = _norm_saved(spec, ctx) + 2 * INT64
    if ctx.base_trainable and ctx.head_module:
        saved += ctx.c * spec.hidden_size  # lm_head saves its input for its weight grad
    elif LM_HEAD in ctx.adapted:
        head = LinearModule(LM_HEAD, spec.hidden_size, spec.vocab_size, False, "head")
        saved += _linear_inputs([head], spec.hidden_size, ctx.resid, ctx)  # LoRA on the output head
    return saved


def backward_extra_per_token(spec: ModelSpec, ctx: ActivationContext,
                             sizes: tuple[LayerActivations | None, LayerActivations | None] | None = None) -> float:
    """What one layer's backward adds on top of its saved tensors at its worst moment, net of what it has
    already freed. At the MLP backward: gradients of the intermediates and of the hidden state (calibration:
    2·I + 2·h elements in the compute dtype). With eager attention, later, at the softmax backward: two fp32
    score-sized gradients (≈ 8 bytes per score element), while the MLP's saved tensors and the 16-bit
    probabilities have already been consumed and freed (MemTracker on the tracer fixtures)."""
    inter = max(spec.intermediate_size, spec.moe_intermediate_size * max(1, spec.experts_per_token))
    if ctx.litgpt is not None:  # LitGPT's own model, calibrated on its published runs with this form (§3.6)
        mlp_moment = ctx.c * (2 * inter + 2 * spec.hidden_size)
        if not ctx.eager:
            return mlp_moment
        probs16 = ctx.c if ctx.c != FP32 else 0
        layer = (sizes or layer_sizes(spec, ctx))[0]
        assert layer is not None
        return max(mlp_moment, (2 * FP32 - probs16) * spec.num_heads * ctx.seq_len - layer.mlp)
    if spec.moe_layers:
        mlp_moment = ctx.c * (2 * inter + 2 * spec.hidden_size)  # MoE layers (calibration)
    else:
        # Dense: the worst moment is the gated product's backward (aten.mul after down_proj's backward: the
        # product's grad and both factors' grads, 3 I-wide) or, with LoRA on the down projection, its own backward
        # (base-path and LoRA-path input grads and their sum, 3 I-wide); a plain MLP with a frozen fc2 has 2
        # (gelu's output and input grads). Plus the layer's h-wide output grad, while what down_proj saved (its
        # input, LoRA's rank-r intermediate) is already freed by its own backward (tracer inventories at the
        # peak op: qwen3 q+v bf16, qwen3 / gpt_neox LoRA-on-MLP fp32, with checkpointing).
        down_adapted = any(m.name in ctx.adapted for m in spec.by_role.get("mlp_out", ()))
        wide = 3 if (spec.gated_mlp or down_adapted) else 2
        mlp_moment = ctx.c * (wide * inter + spec.hidden_size) - _down_saved(spec, ctx)
    if not ctx.eager:
        return mlp_moment
    dense_size, moe_size = sizes or layer_sizes(spec, ctx)
    layer = dense_size or moe_size
    assert layer is not None
    # Eager softmax backward: everything the layer saved after the softmax in forward (the probabilities' 16-bit
    # copy, V, o_proj's input, the later norms, the MLP) has been consumed and freed by then. Alive: the first
    # norm, the q/k/v inputs, Q and the repeated K, q/k norms, the fp32 softmax output, Gemma-2's tanh output,
    # two fp32 score-sized grads, V's grad and the layer's output grad (tracer inventory at
    # aten._softmax_backward_data, gemma2 full bf16 + checkpointing).
    qd, kvd, a, s = spec.q_dim, spec.kv_dim, spec.num_heads, ctx.seq_len
    attn_in = list(spec.by_role.get("attn_in", ()))
    moment = _norm_saved(spec, ctx) + _linear_inputs(attn_in, spec.hidden_size, ctx.resid, ctx) + 2 * ctx.c * qd
    if spec.qk_norm:
        moment += FP32 * (qd + kvd) + 4 * (a + spec.num_kv_heads) + (ctx.resid * (qd + kvd) if ctx.base_trainable else 0)
    moment += FP32 * a * s + (ctx.c * a * s if spec.attn_softcap else 0)  # softmax output, tanh output
    moment += 2 * FP32 * a * s + ctx.c * (qd + spec.hidden_size)  # fp32 score grads, V's grad, output grad
    return max(mlp_moment, moment - layer.total)


def recompute_extra_per_token(spec: ModelSpec, ctx: ActivationContext, bwd_temp: float) -> float:
    """LoRA under checkpointing, where the down projection's adapter gets its own cast of the input (fp32 adapters
    under autocast): the layer's worst moment is the end of its recompute, inside that adapter, not its MLP
    backward. Alive then on top of the saved tensors: the product (c·I, saved by nobody), PEFT's cast of it to the
    adapter dtype (4·I, peft/tuners/lora/layer.py Linear.forward keeps x until it returns), and five hidden-wide
    tensors (the MLP input, the base output, the residual, the layer's output grad and its LoRA-scaled copy).
    Returns what this adds over the MLP-backward moment bwd_temp (tracer inventory at the peak op,
    rw-qwen2.5-0.5b LoRA bf16 + checkpointing)."""
    down_adapted = any(m.name in ctx.adapted for m in spec.by_role.get("mlp_out", ()))
    if ctx.base_trainable or not ctx.adapter_copies or not down_adapted:
        return 0.0
    if ctx.litgpt is not None:  # LitGPT's own model: the earlier calibrated c·(I + h) (§3.6)
        return float(ctx.c * (spec.intermediate_size + spec.hidden_size))
    if spec.moe_layers:
        return 0.0
    inter = spec.intermediate_size
    moment = ctx.c * inter + FP32 * inter + 5 * ctx.c * spec.hidden_size
    return max(0.0, moment - bwd_temp)


def checkpoint_alias_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """Bytes of a recomputed layer's saved tensors that are its checkpointed input itself. With an fp32 residual
    stream RMSNorm's x.to(float32) is a no-op, so the "fp32 copy" its first norm saves is the checkpoint already
    counted per layer (tracer inventories: qwen3 / qwen2 LoRA-on-MLP fp32 + checkpointing). LayerNorm models
    (GPT-NeoX, Phi-2) alias too, but their fused QKV output stays alive through V's view: not modelled, the two
    roughly cancel (tracer: gpt_neox LoRA fp32 + checkpointing)."""
    if ctx.resid != FP32 or spec.norm_kind != "rms" or ctx.litgpt is not None:
        return 0.0
    return float(FP32 * spec.hidden_size)


def checkpoint_per_token(spec: ModelSpec, ctx: ActivationContext) -> float:
    """Gradient checkpointing keeps each decoder layer's input hidden state (Korthikanti §5 full recompute:
    2sbh per layer in bf16; fp32 residual streams keep 4h)."""
    saved = spec.num_layers * ctx.resid * spec.hidden_size
    if spec.family in GEMMA_PLE_FAMILIES:
        by_name = {m.name: m for m in spec.linears}
        if "altup.correction_coefs" in by_name:  # Gemma 3n: a layer's input is the stack of n AltUp streams
            saved *= by_name["altup.correction_coefs"].in_features
        if "per_layer_input_gate" in by_name:  # PLE: the (b, s, L, p) per-layer inputs are a layer argument
            saved += ctx.c * spec.num_layers * by_name["per_layer_input_gate"].out_features
        saved += gemma_model_level_per_token(spec, ctx)  # saved outside the checkpointed layers
    if sliding_mask_per_token(spec, ctx):
        saved += ctx.seq_len  # the (b, 1, s, s) bool sliding-window mask is a layer argument: kept with the inputs
    if ctx.eager and ctx.litgpt is None:
        # Eager attention always gets a materialised (b, 1, s, s) additive mask in the embeddings' dtype
        # (masking_utils.eager_mask, transformers 5.24), one per attention kind (full; sliding): as layer arguments
        # the checkpoint keeps them to the end of backward (tracer inventory, gemma2 full mixed + checkpointing).
        kinds = (1 if spec.sliding_layers < spec.num_layers else 0) + (1 if spec.sliding_layers else 0)
        saved += kinds * ctx.resid * ctx.seq_len
    return saved


@dataclass(frozen=True)
class LossMemory:
    """Logits and cross-entropy memory for the whole micro-batch, bytes, as one implementation builds it."""

    kept: float  # saved from the loss forward until the start of backward
    transient: float  # extra at the loss's worst moment (its backward, or the end of its forward)
    impl: str  # options.LOSS_IMPLS id
    kept_formula: str
    transient_formula: str


def loss_memory(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """The loss of the setup's stack (options.LOSS_IMPLS; docs/formulas.md §4). T = tokens, V = vocabulary,
    H = hidden size, c = compute dtype bytes."""
    tokens = setup.tokens
    vocab, hidden = spec.vocab_size, spec.hidden_size
    impl = loss_impl_id(setup)
    if impl == "litgpt":
        return litgpt_loss_memory(spec, setup, ctx)
    if impl == "trl":
        # TRL 1.16 fused chunked head (trl/kernels/chunked_logprob.py). Positions with a label: all but the last
        # of each sequence (labels shifted by one; the estimate assumes every token counts).
        # Image tokens carry no label (the collator masks them): TRL gathers only the labelled positions.
        scored = max(tokens - setup.batch - setup.batch * setup.image_tokens, 0)
        # Forward keeps the gathered hidden states hidden_states[mask] (c·N·H) and per-token fp32 log_z,
        # entropy and int64 targets for its backward.
        kept = ctx.resid * scored * hidden + (2 * FP32 + INT64) * scored
        # Backward: an fp32 grad_hidden [N, H] zeros, its cast back to the hidden dtype on return, one
        # [min(N, 4096), 32768] tile in the compute dtype, grad_logprobs.float() (4·N).
        tile = ctx.c * min(scored, TRL_TOKEN_TILE) * min(vocab, TRL_VOCAB_TILE)
        cast_back = ctx.resid if ctx.resid != FP32 else 0  # grad_hidden.to(hidden.dtype): no copy for fp32
        transient = (FP32 + cast_back) * scored * hidden + tile + FP32 * scored
        if ctx.base_trainable:
            # The head trains: an fp32 grad_weight [V, H] zeros, then .to(weight dtype) on return: a copy unless
            # the weight is fp32, alive next to the fp32 one at that moment (real-width trace rw-qwen3-0.6b full).
            transient += (FP32 + (ctx.resid if ctx.resid != FP32 else 0)) * vocab * hidden
        if ctx.resid == FP32 and ctx.c != FP32:
            transient += ctx.c * min(vocab, TRL_VOCAB_TILE) * hidden  # weight[start:end].to(bf16) per tile
        return LossMemory(kept, transient, impl, "c·N·H gathered hidden states + per-token fp32 stats",
                          "fp32 grad_hidden + its cast + one 4096 × 32768 tile" + (
                              " + fp32 grad of the head" if ctx.base_trainable else ""))
    if impl in ("liger", "cce"):
        # Liger FLCE (liger_kernel 0.8.5 ops/fused_linear_cross_entropy.py): the gradients are computed in
        # forward, one [chunk, V] tile at a time, chunk = next_pow2(ceil(T / ceil(V / H))); grad_input [T, H]
        # is kept until backward (and grad_weight [V, H] when the head trains: counted with the gradients).
        # The Triton CE kernel works in fp32 registers and writes the logits gradient into the tile in place.
        chunk = min(tokens, 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(vocab / hidden))))))
        tile = chunk * vocab * ctx.c  # one [chunk, V] logits tile in the compute dtype
        if ctx.resid == FP32 and ctx.c != FP32:
            # Under autocast (fp32 weights) every chunk's matmul casts the whole head to 16-bit first
            # (amp_custom_fwd keeps autocast on): one c·V·H copy at a time (real-width trace, mixed precision).
            # A trainable head is cast twice, weight.t() for the logits and weight for grad_input, and both copies
            # stay alive to the end of the loss forward (tracer: rw-llama3.1-8b full mixed fused, forward head).
            tile += (2 if ctx.base_trainable else 1) * ctx.c * vocab * hidden
        if impl == "liger" and ctx.base_trainable and ctx.c == FP32:
            # fp32 logits (fp32 training, no autocast) take the legacy fallback, grad_weight += mm(...).float():
            # a [V, H] fp32 product per chunk next to the fp32 grad_weight (ops/fused_linear_cross_entropy.py:370-375)
            tile += FP32 * vocab * hidden
        kept = ctx.resid * tokens * hidden + FP32 * tokens  # grad_input in the input's dtype + fp32 loss_1d
        return LossMemory(kept, float(tile), impl, "grad_input [T, H] from forward",
                          "one [chunk × V] logits tile")
    if impl == "torchtune" and setup.compile:
        # torchtune compile=True compiles compute_cross_entropy (training/_compile.py compile_loss): inductor's
        # partitioner (min-cut, torch 2.13) keeps the 16-bit logits chunk and two fp32 row statistics (max,
        # logsumexp) instead of the fp32 log-softmax; the fused backward writes each chunk's 16-bit gradient.
        kept = ctx.c * tokens * vocab + 2 * FP32 * tokens
        transient = ctx.c * tokens * vocab / TORCHTUNE_CHUNKS
        return LossMemory(kept, transient, impl, "c·T·V 16-bit logits chunks (compiled cross-entropy)",
                          "one chunk's 16-bit gradient")
    if impl == "torchtune":
        # CEWithChunkedOutputLoss: each of the 8 output chunks is upcast (logits.float()) and its fp32
        # log-softmax kept for backward (4·T·V in all); the worst moment is the end of the loss forward, with
        # the 16-bit logits chunks (c·T·V) and the last chunk's fp32 copy (4·T·V / 8) still alive.
        kept = FP32 * tokens * vocab
        transient = ctx.c * tokens * vocab + FP32 * tokens * vocab / TORCHTUNE_CHUNKS
        return LossMemory(kept, transient, impl, "4 B × T × V fp32 log-softmax (8 chunks)",
                          "16-bit logits chunks + one fp32 chunk")
    # Full logits: HF ForCausalLMLoss (logits.float() then cross_entropy): log_softmax keeps its fp32 output
    # (4·T·V); its backward adds grad_out and grad_in (8·T·V) → 12·T·V at the peak (§4). torchtune without output
    # chunks upcasts in the model (modules/transformer.py unembed: self.output(h).float()): the same fp32 loss.
    ce = FP32
    kept = ce * tokens * vocab
    if spec.final_softcap:
        kept += ctx.c * tokens * vocab  # Gemma-2 logit soft-capping: tanh keeps its output for backward
    if ctx.qlora_upcast:
        kept += FP32 * tokens * vocab  # prepare_model_for_kbit_training: an fp32 head keeps fp32 logits (§3.3 Qp)
    if impl == "torchtune_full" and setup.compile:
        # compiled nn.CrossEntropyLoss (torchtune compile_loss compiles the whole loss): it keeps its fp32 input
        # (the model's upcast logits) and row statistics; one fused kernel writes the fp32 gradient.
        return LossMemory(float(kept), float(ce * tokens * vocab), impl, "fp32 logits (compiled cross-entropy)",
                          f"{ce} B × T × V gradient (fused backward)")
    return LossMemory(float(kept), float(2 * ce * tokens * vocab), impl, f"{ce} B × T × V log-softmax",
                      f"{2 * ce} B × T × V (grad out + grad in)")


# --------------------------------------------------------------------------------------------
# MoE / MLA / hybrid / attention-sink families (estimator/families_moe.py): one LayerActivations per layer kind
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


GEMMA_PLE_FAMILIES = frozenset({"gemma4_text", "gemma3n_text"})  # estimator/families_gemma.py


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
    c, h, a = ctx.c, spec.hidden_size, spec.num_heads
    attn_kind = kind.split(":")[0]
    shared = attn_kind.endswith("_shared")
    mods = [m for m in spec.linears if not m.kinds or kind in m.kinds]
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
    mlp_in = [m for m in mods if m.role == "mlp_in"]
    mlp_out = [m for m in mods if m.role == "mlp_out"]
    mlp = _mlp(spec, ctx, mlp_out[0].in_features, mlp_in, mlp_out)
    if kind.endswith("+sparse"):  # Gemma 3n's Gaussian top-k keeps the gate output for its mean/std backward
        mlp += ctx.mlp * mlp_out[0].in_features
    norms = 4 * _gemma_norm(spec, ctx, h)
    if kind.endswith(":moe"):
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
    return LayerActivations(norms=norms, attention=attention, mlp=mlp)


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


# --------------------------------------------------------------------------------------------------------------
# LitGPT 0.5.13's own model (stack model_code "litgpt"): what litgpt.model.GPT and litgpt.lora.GPT save for
# backward under bf16-true with SDPA. Closed form from FakeTensor + MemTracker traces of LitGPT's model on 14
# published rows (calibration/litgpt_trace.py; byte-exact per layer), docs/formulas.md §3.6.
# --------------------------------------------------------------------------------------------------------------
LITGPT_HEAD_CHUNK = 128  # litgpt/finetune/lora.py (0.5.13): model(input_ids, lm_head_chunk_size=128)
LITGPT_FAMILIES = frozenset({"llama", "mistral", "qwen2", "gemma", "phi3", "phi", "gpt_neox"})  # traced/same blocks
BOOL = 1  # CUDA native_dropout keeps a bool mask: 1 byte per element


@dataclass(frozen=True)
class LitgptLora:
    """LitGPT's LoRA switches (litgpt/lora.py Config: lora_query/key/value/projection/mlp/head), its dropout and
    the micro-batch (per-layer constants are spread over the tokens)."""

    query: bool
    key: bool
    value: bool
    projection: bool
    mlp: bool
    head: bool
    dropout: float
    batch: int

    @property
    def qkv(self) -> int:
        return self.query + self.key + self.value


def litgpt_stack(setup: TrainingSetup) -> bool:
    """Does the setup's stack run LitGPT's own model code (estimator.stacks Stack.model_code)?"""
    return setup.stack is not None and get_stack(setup.stack).model_code == "litgpt"


def uses_litgpt_model(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """LitGPT's closed form applies: the LitGPT stack, a dense decoder of a family whose LitGPT block was traced
    (or is the same LLaMA/GPT-NeoX block), SDPA. Everything else (MoE, Gemma-2/3 post-norms and soft-capping,
    qk-norms, eager attention) keeps the transformers-module estimate."""
    return (litgpt_stack(setup) and spec.family in LITGPT_FAMILIES and not spec.moe_layers and not spec.qk_norm
            and attention_impl(setup, spec.family) == "sdpa")


def _litgpt_fused_targets(spec: ModelSpec, setup: TrainingSetup) -> TrainingSetup:
    """LitGPT has lora_query/key/value switches on every model (one fused qkv linear): on a model whose
    transformers config fuses q, k, v (GPT-NeoX query_key_value, Phi-3 qkv_proj) the names q_proj/k_proj/v_proj
    select that module."""
    from dataclasses import replace

    fused = [m.name for m in spec.by_role.get("attn_in", ()) if m.out_features == spec.q_dim + 2 * spec.kv_dim]
    names = set(spec.linear_names())
    if not fused or "q_proj" in names:
        return setup
    mapped = tuple(dict.fromkeys(fused[0] if t in ("q_proj", "k_proj", "v_proj") else t for t in setup.lora_targets))
    return replace(setup, lora_targets=mapped)


def litgpt_lora(spec: ModelSpec, setup: TrainingSetup) -> LitgptLora:
    """The LitGPT switches a setup's LoRA targets turn on. Transformers names map to LitGPT's modules as
    litgpt/scripts/convert_hf_checkpoint.py maps the weights: q/k/v (or a fused qkv) → attn.qkv, the attention
    output → attn.proj, any MLP linear → lora_mlp (LitGPT adapts fc_1, fc_2 and proj together), lm_head →
    lora_head. 'all-linear' = every switch but the head."""
    stack = get_stack(setup.stack) if setup.stack else None
    dropout = stack.lora_dropout if stack else 0.0
    if setup.method == "full":
        return LitgptLora(False, False, False, False, False, False, dropout, setup.batch)
    roles = {m.name: m.role for m in spec.linears}
    all_linear = setup.lora_targets == (ALL_LINEAR,)
    names = set(spec.linear_names()) if all_linear else set(setup.lora_targets)
    fused = any(roles.get(n) == "attn_in" and n not in ("q_proj", "k_proj", "v_proj") for n in names)
    q, k, v = ("q_proj" in names or fused), ("k_proj" in names or fused), ("v_proj" in names or fused)
    proj = any(roles.get(n) == "attn_out" for n in names)
    mlp = any(roles.get(n) in ("mlp_in", "mlp_out") for n in names)
    return LitgptLora(q, k, v, proj, mlp, LM_HEAD in names and not all_linear, dropout, setup.batch)


def litgpt_lora_params(spec: ModelSpec, lit: LitgptLora, r: int) -> int:
    """LoRA parameters of LitGPT's modules (litgpt/lora.py 0.5.13): LoRAQKVLinear lora_A (r·n_en, h) and lora_B
    (enabled q/k/v widths, r); LoRALinear r·(in + out) for proj, each MLP linear (fc_1, fc_2, proj) and the head."""
    h, inter = spec.hidden_size, spec.intermediate_size
    per_layer = 0
    if lit.qkv:
        per_layer += r * lit.qkv * h + r * (spec.q_dim * lit.query + spec.kv_dim * (lit.key + lit.value))
    if lit.projection:
        per_layer += r * (spec.q_dim + h)
    if lit.mlp:
        per_layer += (3 if spec.gated_mlp else 2) * r * (h + inter)  # LLaMAMLP fc_1, fc_2, proj; GptNeoxMLP fc, proj
    head = r * (h + spec.vocab_size) if lit.head else 0
    return per_layer * spec.num_layers + head


def stack_spec(spec: ModelSpec, setup: TrainingSetup) -> ModelSpec:
    """The model as the setup's stack builds it. LitGPT (Stack.untied_head) trains a separate output head even
    where the transformers config ties it (+V·h parameters); with --quantize its bnb precision plugin replaces
    every nn.Linear, the head included, by a 4-bit one (Stack.quantize_head)."""
    from dataclasses import replace

    if setup.stack is None:
        return spec
    stack = get_stack(setup.stack)
    head = spec.vocab_size * spec.hidden_size
    if stack.untied_head and spec.tie_embeddings:
        spec = replace(spec, tie_embeddings=False, params_total=spec.params_total + head,
                       params_embedding=spec.params_embedding + head, params_active=spec.params_active + head,
                       notes=(*spec.notes, f"{stack.label} trains an untied output head: +{head:,} parameters"))
    if stack.quantize_head and setup.method == "qlora":
        spec = replace(spec, params_quantizable=spec.params_quantizable + head)
    return spec


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


def litgpt_loss_memory(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """LitGPT's chunked_cross_entropy (litgpt/utils.py 0.5.13) on bf16 logits, as each finetune script calls it.

    finetune/lora.py: model(ids, lm_head_chunk_size=128) returns the logits as 128-token chunks; each chunk's
    log-softmax output (16-bit, no upcast) is kept: 2·c·T·V until backward (the end of the forward holds the same:
    the previous step's logits live until model() returns). In backward one chunk's nll grad and log-softmax grad
    are alive at a time: 2·c·B·128·V. finetune/full.py: model(ids) without head chunking, then
    chunked_cross_entropy(logits[..., :-1, :]): logits + the shifted reshape copy (or the log-softmax outputs) kept,
    and in backward the concatenated chunk gradients and slice_backward's zero-filled gradient: 3·c·T·V in all."""
    tokens, vocab, c = setup.tokens, spec.vocab_size, ctx.c
    kept = 2.0 * c * tokens * vocab
    if setup.method == "full":
        return LossMemory(kept, float(c * tokens * vocab), "litgpt", "2·c·T·V logits + log-softmax (16-bit)",
                          "c·T·V chunk gradients")
    chunk = setup.batch * min(LITGPT_HEAD_CHUNK, setup.seq_len) * vocab
    return LossMemory(kept, float(2 * c * chunk), "litgpt", "2·c·T·V logits chunks + log-softmax (16-bit)",
                      "2·c·B·128·V one chunk's gradients")
