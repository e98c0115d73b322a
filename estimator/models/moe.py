"""Mixture-of-experts, MLA, hybrid linear-attention and attention-sink families (issue 11).

Each builder follows its transformers 5.24.0 modelling code (models/<type>/modeling_<type>.py and
configuration_<type>.py) module by module: every nn.Linear and every fused 3-D expert tensor of a decoder layer is
a LinearModule with the number of layers that carry it, and the remaining per-layer parameters (attention sinks,
MLA's low-rank norms, Gated DeltaNet's conv1d / dt_bias / A_log / gated norm, q/k norms of the full-attention
layers, ERNIE's score-correction bias) are summed into ``extra_layer_params``. Parameter counts equal
transformers' on the meta device (tests/test_model.py, tests/data/preset_param_counts.json).

What PEFT 0.21.2's ``target_modules="all-linear"`` wraps is listed per family in ``all_linear_targets``
(peft/utils/transformers_weight_conversion.py, checked with get_peft_model on the meta device): for the model
types that transformers 5 converts from the v4 unfused expert layout (deepseek_v3, glm4_moe, qwen3_next,
ernie4_5_moe share qwen2_moe's conversion), PEFT maps the v4 names gate/gate_proj/up_proj/down_proj to the fused
expert tensors and the router weight, and drops every nn.Linear of that name: the dense MLPs and the shared
experts get no adapter. Without a conversion (gpt_oss, llama4, qwen3_5_moe) all-linear wraps only real nn.Linear
modules: the fused experts (and gpt-oss' router, a plain parameter) get none, and Llama 4's router, an nn.Linear
subclass whose tuple output PEFT's LoRA wrapper cannot take, is left out as a user must exclude it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..i18n import N_, Text
from ._parts import Parts

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


FAMILIES = frozenset({
    "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "llama4_text",
    "ernie4_5_moe",
})
# Multimodal wrappers whose language model is one of ours: transformers builds the text model from text_config.
TEXT_MODEL_TYPES = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text", "llama4": "llama4_text"}
# Model types whose PEFT all-linear goes through the v4 -> v5 MoE conversion (transformers
# conversion_mapping.py maps them to the qwen2_moe pattern; peft 0.21.2 _MOE_TARGET_MODULE_MAPPING).
_PEFT_CONVERTED = frozenset({"deepseek_v3", "glm4_moe", "qwen3_next", "ernie4_5_moe"})


def _layer_types(cfg: Mapping[str, Any], layers: int, default: list[str]) -> list[str]:
    types = cfg.get("layer_types")
    if types is None:
        return default
    if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) for t in types):
        raise ValueError(Text(N_("config.json field 'layer_types' must list one attention type per layer ({layers})"),
                              layers=str(layers)))
    return types


class _Dims(NamedTuple):
    """The common config fields config.py has checked."""

    h: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int

    @property
    def qd(self) -> int:
        return self.heads * self.head_dim

    @property
    def kvd(self) -> int:
        return self.kv_heads * self.head_dim


class _Mlp(NamedTuple):
    """Where a family puts its experts: the MoE layers (mask), routed experts and their width, the shared experts'
    width and the dense MLP's width in the other layers."""

    experts: int
    k: int
    moe_mask: list[bool]
    moe_inter: int
    shared_inter: int
    dense_inter: int


# ---- attention ------------------------------------------------------------------------------------------

def _qkvo(p: Parts, d: _Dims, q_out: int, bias: bool, o_bias: bool, n: int = 0) -> None:
    """q/k/v/o projections (q_out: the query's width, doubled where q_proj also emits an output gate)."""
    p.add("q_proj", d.h, q_out, bias, "attn_in", 1, n)
    p.add("k_proj", d.h, d.kvd, bias, "attn_in", 1, n)
    p.add("v_proj", d.h, d.kvd, bias, "attn_in", 1, n)
    p.add("o_proj", d.qd, d.h, o_bias, "attn_out", 1, n)


def _gpt_oss_attention(p: Parts, d: _Dims) -> list[str]:
    """GptOssAttention; returns the layer kinds."""
    # GptOssAttention: q/k/v/o with attention_bias (default true) and one learned sink logit per head;
    # layer_types alternate sliding (window 128) and full attention (configuration_gpt_oss.py).
    bias = p.flag("attention_bias", True)
    kinds = _layer_types(p.cfg, d.layers, ["sliding_attention" if i % 2 == 0 else "full_attention"
                                           for i in range(d.layers)])
    _qkvo(p, d, d.qd, bias, bias)
    p.extra += d.layers * d.heads  # self_attn.sinks
    p.out["attention_sinks"] = True
    p.out["sliding_window"] = p.pint("sliding_window", default=128)
    p.notes.append(N_("gpt-oss: attention sinks need eager attention in transformers 5.24 (the sink logit joins "
                      "the softmax), so every layer keeps B·H·T·T scores; checkpoints ship MXFP4 experts, which "
                      "the usual fine-tuning recipes (Mxfp4Config(dequantize=True), TRL/Unsloth/axolotl) "
                      "dequantise to bf16: estimated with bf16 experts"))
    return kinds


def _mla_attention(p: Parts, d: _Dims) -> list[str]:
    """DeepseekV3Attention (multi-head latent attention); returns the layer kinds (all full attention)."""
    # DeepseekV3Attention (MLA): q through a q_lora_rank bottleneck (or a plain q_proj when q_lora_rank is
    # null), k/v through kv_a_proj_with_mqa (kv_lora_rank + a shared rope key) and kv_b_proj.
    h, heads = d.h, d.heads
    bias = p.flag("attention_bias", False)
    q_rank = p.cfg.get("q_lora_rank", 1536)  # configuration_deepseek_v3.py default; null = a plain q_proj
    kv_rank = p.pint("kv_lora_rank", default=512)
    rope = p.pint("qk_rope_head_dim", default=64)
    nope = p.pint("qk_nope_head_dim", default=128)
    v_dim = p.pint("v_head_dim", default=128)
    qk = rope + nope
    if q_rank is None:
        p.add("q_proj", h, heads * qk, False, "attn_in")
    else:
        q_rank = p.pint("q_lora_rank")
        p.add("q_a_proj", h, q_rank, bias, "attn_in")
        p.add("q_b_proj", q_rank, heads * qk, False, "attn_in")
        p.extra += d.layers * q_rank  # q_a_layernorm
    p.add("kv_a_proj_with_mqa", h, kv_rank + rope, bias, "attn_in")
    p.add("kv_b_proj", kv_rank, heads * (nope + v_dim), False, "attn_in")
    p.add("o_proj", heads * v_dim, h, bias, "attn_out")
    p.extra += d.layers * kv_rank  # kv_a_layernorm
    p.out.update(mla_q_rank=int(q_rank or 0), mla_kv_rank=kv_rank, mla_rope_dim=rope, mla_nope_dim=nope,
                 mla_v_dim=v_dim)
    return ["full_attention"] * d.layers


def _hybrid_attention(p: Parts, d: _Dims, family: str) -> list[str]:
    """Qwen3-Next / Qwen3.5: Gated DeltaNet layers (linear_attention) next to gated full-attention layers (every
    4th by default); returns the layer kinds."""
    kinds = _layer_types(p.cfg, d.layers, ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                                           for i in range(d.layers)])
    n_lin = sum(t == "linear_attention" for t in kinds)
    n_full = d.layers - n_lin
    bias = p.flag("attention_bias", False)
    # Qwen3NextAttention: q_proj emits the query and its output gate (2·heads·head_dim); per-head q/k norms.
    if n_full:
        _qkvo(p, d, 2 * d.qd, bias, bias, n_full)
        p.extra += n_full * 2 * d.head_dim  # q_norm, k_norm
    _gated_deltanet(p, d, family, n_lin)
    return kinds


def _gated_deltanet(p: Parts, d: _Dims, family: str, n_lin: int) -> None:
    """The Gated DeltaNet (linear attention) modules of the n_lin layers that have one."""
    h = d.h
    hk, hv = p.pint("linear_num_key_heads", default=16), p.pint("linear_num_value_heads", default=32)
    dk, dv = p.pint("linear_key_head_dim", default=128), p.pint("linear_value_head_dim", default=128)
    conv_k = p.pint("linear_conv_kernel_dim", default=4, limit=64)
    key_dim, value_dim = hk * dk, hv * dv
    conv_dim = 2 * key_dim + value_dim
    if n_lin:
        if family == "qwen3_next":
            # Qwen3NextGatedDeltaNet: fused in_proj_qkvz and in_proj_ba
            p.add("in_proj_qkvz", h, 2 * key_dim + 2 * value_dim, False, "attn_in", 1, n_lin)
            p.add("in_proj_ba", h, 2 * hv, False, "attn_in", 1, n_lin)
        else:
            # Qwen3_5GatedDeltaNet: separate in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
            p.add("in_proj_qkv", h, conv_dim, False, "attn_in", 1, n_lin)
            p.add("in_proj_z", h, value_dim, False, "attn_in", 1, n_lin)
            p.add("in_proj_b", h, hv, False, "attn_in", 1, n_lin)
            p.add("in_proj_a", h, hv, False, "attn_in", 1, n_lin)
        p.add("out_proj", value_dim, h, False, "attn_out", 1, n_lin)
        # depthwise conv1d (conv_dim, 1, K) without bias, dt_bias and A_log per value head, gated RMSNorm
        p.extra += n_lin * (conv_dim * conv_k + 2 * hv + dv)
    p.out.update(linear_key_heads=hk, linear_value_heads=hv, linear_key_dim=dk, linear_value_dim=dv,
                 linear_conv_kernel=conv_k)
    p.notes.append(N_("Gated DeltaNet layers: without flash-linear-attention and causal-conv1d installed, "
                      "transformers runs its torch fallback (chunked delta rule, 64-token chunks), estimated here"))


def _gqa_attention(p: Parts, d: _Dims, family: str) -> list[str]:
    """glm4_moe, llama4_text, ernie4_5_moe: grouped-query attention; returns the layer kinds."""
    if family == "ernie4_5_moe":
        bias = o_bias = p.flag("use_bias", False)
    elif family == "glm4_moe":
        bias, o_bias = p.flag("attention_bias", False), False  # Glm4MoeAttention: o_proj has no bias
    else:
        bias = o_bias = p.flag("attention_bias", False)
    _qkvo(p, d, d.qd, bias, o_bias)
    if family == "glm4_moe" and p.flag("use_qk_norm", False):
        p.extra += d.layers * 2 * d.head_dim
    if family == "llama4_text":
        return _llama4_layer_kinds(p, d.layers)
    return ["full_attention"] * d.layers


def _llama4_layer_kinds(p: Parts, layers: int) -> list[str]:
    """Llama 4's chunked-attention (RoPE) layers and its full-attention NoPE layers."""
    chunk = p.cfg.get("attention_chunk_size", 8192)
    interval = p.pint("no_rope_layer_interval", default=4)
    nope = p.cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    kinds = _layer_types(p.cfg, layers, ["chunked_attention" if r and chunk else "full_attention"
                                         for r in nope])
    if chunk:
        p.out["attention_chunk"] = p.pint("attention_chunk_size")
    # Llama4TextL2Norm on q and k of the RoPE layers: no parameters
    return kinds


def _attention(p: Parts, d: _Dims, family: str) -> list[str]:
    """The attention modules of the family; returns the attention kind of each layer."""
    if family == "gpt_oss":
        return _gpt_oss_attention(p, d)
    if family == "deepseek_v3":
        return _mla_attention(p, d)
    if family in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        return _hybrid_attention(p, d, family)
    return _gqa_attention(p, d, family)


# ---- MLP / experts --------------------------------------------------------------------------------------

def _gpt_oss_experts(p: Parts, d: _Dims) -> _Mlp:
    """gpt-oss: experts in every layer, with biases."""
    h, layers = d.h, d.layers
    experts, k = p.pint("num_local_experts", limit=4096), p.pint("num_experts_per_tok", limit=4096)
    moe_inter = d.inter
    # GptOssExperts: gate_up_proj (E, h, 2I) + bias, down_proj (E, I, h) + bias; GptOssTopKRouter: weight
    # (E, h) and bias (E) as plain parameters.
    p.add("router", h, experts, True, "router", 1, layers)
    p.add("experts.gate_proj", h, moe_inter, True, "expert_in", experts, layers)
    p.add("experts.up_proj", h, moe_inter, True, "expert_in", experts, layers)
    p.add("experts.down_proj", moe_inter, h, True, "expert_out", experts, layers)
    return _Mlp(experts, k, [True] * layers, moe_inter, 0, 0)


def _deepseek_glm_layout(p: Parts, d: _Dims, family: str) -> _Mlp:
    """DeepSeek-V3 / GLM-4.5: dense MLPs in the first first_k_dense_replace layers, then routed + shared experts."""
    experts = p.pint("n_routed_experts", limit=4096)
    k = p.pint("num_experts_per_tok", limit=experts)
    first = p.cfg.get("first_k_dense_replace", 3 if family == "deepseek_v3" else 1) or 0
    moe_mask = [i >= first for i in range(d.layers)]
    moe_inter = p.pint("moe_intermediate_size")
    shared_inter = moe_inter * (p.cfg.get("n_shared_experts", 1) or 0)
    return _Mlp(experts, k, moe_mask, moe_inter, shared_inter, d.inter)


def _qwen_layout(p: Parts, d: _Dims, family: str) -> _Mlp:
    """Qwen3-Next / Qwen3.5-MoE: experts every decoder_sparse_step layers except mlp_only_layers, one shared expert."""
    experts = p.pint("num_experts", limit=4096)
    k = p.pint("num_experts_per_tok", limit=experts)
    step = p.pint("decoder_sparse_step", default=1, limit=1000)
    only = p.cfg.get("mlp_only_layers") or []
    moe_mask = [i not in only and (i + 1) % step == 0 for i in range(d.layers)]
    moe_inter = p.pint("moe_intermediate_size")
    shared_inter = p.pint("shared_expert_intermediate_size")
    return _Mlp(experts, k, moe_mask, moe_inter, shared_inter, d.inter if family == "qwen3_next" else 0)


def _llama4_layout(p: Parts, d: _Dims) -> _Mlp:
    """Llama 4: experts in the moe_layers (every interleave_moe_layer_step-th), dense MLPs elsewhere."""
    experts = p.pint("num_local_experts", limit=4096)
    k = p.pint("num_experts_per_tok", limit=experts)
    step = p.pint("interleave_moe_layer_step", default=1, limit=1000)
    listed = p.cfg.get("moe_layers")
    moe_idx = set(listed) if isinstance(listed, list) else set(range(step - 1, d.layers, step))
    moe_mask = [i in moe_idx for i in range(d.layers)]
    moe_inter = d.inter  # Llama4TextExperts: expert_dim = intermediate_size
    shared_inter = d.inter  # Llama4TextMoe.shared_expert = Llama4TextMLP(config)
    return _Mlp(experts, k, moe_mask, moe_inter, shared_inter, p.pint("intermediate_size_mlp", default=16384))


def _ernie_layout(p: Parts, d: _Dims) -> _Mlp:
    """ERNIE 4.5 MoE: experts every moe_layer_interval layers between moe_layer_start_index and moe_layer_end_index."""
    layers = d.layers
    experts = p.pint("moe_num_experts", limit=4096)
    k = p.pint("moe_k", limit=experts)
    start, end = p.cfg.get("moe_layer_start_index", 1), p.cfg.get("moe_layer_end_index", layers - 1)
    interval = p.pint("moe_layer_interval", default=1, limit=1000)
    moe_mask = [(i + 1) % interval == 0 and start <= i <= end for i in range(layers)]
    moe_inter = p.pint("moe_intermediate_size")
    shared_inter = moe_inter * (p.cfg.get("moe_num_shared_experts", 0) or 0)
    return _Mlp(experts, k, moe_mask, moe_inter, shared_inter, d.inter)


def _mlp_layout(p: Parts, d: _Dims, family: str) -> _Mlp:
    """Which layers have experts, and the widths, for a family other than gpt-oss."""
    if family in ("deepseek_v3", "glm4_moe"):
        return _deepseek_glm_layout(p, d, family)
    if family in ("qwen3_next", "qwen3_5_moe_text"):
        return _qwen_layout(p, d, family)
    if family == "llama4_text":
        return _llama4_layout(p, d)
    if family == "ernie4_5_moe":
        return _ernie_layout(p, d)
    # qwen3_5_text: dense SwiGLU in every layer
    return _Mlp(0, 0, [False] * d.layers, 0, 0, d.inter)


def _mlp_linears(p: Parts, d: _Dims, family: str, m: _Mlp) -> None:
    """The dense MLPs, routers, routed and shared experts of a family other than gpt-oss."""
    h = d.h
    n_moe = sum(m.moe_mask)
    n_dense = d.layers - n_moe
    mlp_bias = p.flag("use_bias", False) if family == "ernie4_5_moe" else False
    if n_dense and m.dense_inter:
        p.add("gate_proj", h, m.dense_inter, mlp_bias, "mlp_in", 1, n_dense)
        p.add("up_proj", h, m.dense_inter, mlp_bias, "mlp_in", 1, n_dense)
        p.add("down_proj", m.dense_inter, h, mlp_bias, "mlp_out", 1, n_dense)
    if not n_moe:
        return
    router = "router" if family == "llama4_text" else "gate"
    p.add(router, h, m.experts, False, "router", 1, n_moe)
    p.add("experts.gate_proj", h, m.moe_inter, False, "expert_in", m.experts, n_moe)
    p.add("experts.up_proj", h, m.moe_inter, False, "expert_in", m.experts, n_moe)
    p.add("experts.down_proj", m.moe_inter, h, False, "expert_out", m.experts, n_moe)
    if m.shared_inter:
        sh = {"deepseek_v3": "shared_experts", "glm4_moe": "shared_experts",
              "ernie4_5_moe": "shared_experts"}.get(family, "shared_expert")
        p.add(f"{sh}.gate_proj", h, m.shared_inter, mlp_bias, "shared_in", 1, n_moe)
        p.add(f"{sh}.up_proj", h, m.shared_inter, mlp_bias, "shared_in", 1, n_moe)
        p.add(f"{sh}.down_proj", m.shared_inter, h, mlp_bias, "shared_out", 1, n_moe)
    if family in ("qwen3_next", "qwen3_5_moe_text"):
        p.add("shared_expert_gate", h, 1, False, "router", 1, n_moe)  # sigmoid gate of the shared expert
    if family == "ernie4_5_moe":
        p.extra += n_moe * m.experts  # gate.moe_statics.e_score_correction_bias (1, E), requires_grad=False
        p.out["params_frozen"] = n_moe * m.experts  # ... so full fine-tuning gives it no gradient or state


# ---- what PEFT's all-linear wraps ----------------------------------------------------------------------

def _all_linear_targets(p: Parts, family: str, has_moe: bool) -> tuple[str, ...]:
    """The module names PEFT 0.21.2's target_modules="all-linear" adapts (see the module docstring)."""
    names = list(dict.fromkeys(m.name for m in p.linears))
    if family in _PEFT_CONVERTED:
        # v4 names gate/gate_proj/up_proj/down_proj -> target_parameters gate.weight, gate_up_proj, down_proj:
        # the fused experts and the router are adapted; nn.Linear modules of those names (dense MLP, shared
        # experts) are dropped from target_modules.
        dropped = ("gate_proj", "up_proj", "down_proj")
        return tuple(n for n in names if not (n.split(".")[-1] in dropped and not n.startswith("experts.")))
    # nn.Linear only: not the fused expert tensors, not the routers that hold a plain weight parameter
    # (GptOssTopKRouter, Qwen3_5MoeTopKRouter). Llama4Router subclasses nn.Linear, so all-linear matches it, but
    # its forward returns (scores, logits) and PEFT 0.21.2's lora.Linear.forward reads result.dtype of the base
    # layer's output (peft/tuners/lora/layer.py): training fails unless the router is excluded, as counted here.
    targets = tuple(n for n in names if not n.startswith("experts.") and n not in ("router", "gate"))
    if family == "llama4_text" and has_moe:
        p.notes.append(N_("Llama 4: PEFT's all-linear also matches the router (an nn.Linear subclass that "
                          "returns scores and logits), and its LoRA wrapper then fails in the forward pass; pass "
                          "exclude_modules=[\"router\"] (estimated so)"))
    return targets


def build(family: str, cfg: Mapping[str, Any], h: int, layers: int, heads: int, kv_heads: int, head_dim: int,
          inter: int, vocab: int) -> dict[str, Any]:
    """ModelSpec fields of one of FAMILIES from a config dict whose common fields model.py has checked.

    Returns the keyword arguments for ModelSpec (linears, MoE fields, extra_layer_params, layer_pattern, ...)."""
    p = Parts(cfg)
    d = _Dims(h, layers, heads, kv_heads, head_dim, inter)
    kinds = _attention(p, d, family)
    if family == "gpt_oss":
        m = _gpt_oss_experts(p, d)
    else:
        m = _mlp_layout(p, d, family)
        _mlp_linears(p, d, family, m)
    p.out["all_linear_targets"] = _all_linear_targets(p, family, any(m.moe_mask))
    pattern = tuple(f"{kind.replace('_attention', '')}:{'moe' if moe else 'dense'}"
                    for kind, moe in zip(kinds, m.moe_mask, strict=True))
    p.out.update(
        linears=tuple(p.linears), intermediate_size=m.dense_inter or m.moe_inter, num_experts=m.experts,
        experts_per_token=m.k, moe_intermediate_size=m.moe_inter, shared_expert_intermediate_size=m.shared_inter,
        moe_layers=sum(m.moe_mask), extra_layer_params=p.extra, layer_pattern=pattern, notes=tuple(p.notes),
    )
    return p.out
