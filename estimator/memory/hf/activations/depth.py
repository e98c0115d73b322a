"""All layers of a model: per-token sums over the decoder stack, the final norm, RoPE, the backward's extra
buffers, and checkpointing's saved inputs and recompute (docs/formulas.md §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....models.spec import LM_HEAD, LinearModule
from ...precision import FP32, INT64
from .families import GEMMA_PLE_FAMILIES, family_layer_sizes, gemma_model_level_per_token
from .layers import _down_saved, _linear_inputs, _norm_saved, dense_layer, moe_layer, sliding_mask_per_token

if TYPE_CHECKING:
    from ....models.spec import ModelSpec
    from .common import ActivationContext, LayerActivations


def layer_sizes(spec: ModelSpec, ctx: ActivationContext) -> tuple[LayerActivations | None, LayerActivations | None]:
    """(dense layer, MoE layer) bytes per token, each computed once; None where the model has none."""
    if ctx.litgpt is not None:
        return ctx.litgpt.layer(spec, ctx), None
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
            return total - (0.0 if ctx.base_trainable else ctx.litgpt.first_layer_unsaved(spec, ctx))
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
        return ctx.litgpt.final_per_token(spec, ctx)
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
