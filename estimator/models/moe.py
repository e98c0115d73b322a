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

from typing import TYPE_CHECKING

from ..i18n import N_, Text

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


def build(family: str, cfg: Mapping[str, Any], h: int, layers: int, heads: int, kv_heads: int, head_dim: int,
          inter: int, vocab: int) -> dict[str, Any]:
    """ModelSpec fields of one of FAMILIES from a config dict whose common fields model.py has checked.

    Returns the keyword arguments for ModelSpec (linears, MoE fields, extra_layer_params, layer_pattern, ...)."""
    from ._fields import _flag, _positive_int
    from .spec import LinearModule as L  # noqa: N817

    def pint(key: str, default: Any = None, limit: int = 1 << 20) -> int:
        return _positive_int(cfg, key, default=default, limit=limit)

    linears: list[L] = []
    extra = 0
    notes: list[str] = []
    out: dict[str, Any] = {}
    qd, kvd = heads * head_dim, kv_heads * head_dim

    def add(name: str, i: int, o: int, bias: bool, role: str, count: int = 1, n: int = 0) -> None:
        linears.append(L(name, i, o, bias, role, count, n))  # n = layers carrying it (0: every layer)

    # ---- attention --------------------------------------------------------------------------------------
    if family == "gpt_oss":
        # GptOssAttention: q/k/v/o with attention_bias (default true) and one learned sink logit per head;
        # layer_types alternate sliding (window 128) and full attention (configuration_gpt_oss.py).
        bias = _flag(cfg, "attention_bias", True)
        kinds = _layer_types(cfg, layers, ["sliding_attention" if i % 2 == 0 else "full_attention"
                                           for i in range(layers)])
        add("q_proj", h, qd, bias, "attn_in")
        add("k_proj", h, kvd, bias, "attn_in")
        add("v_proj", h, kvd, bias, "attn_in")
        add("o_proj", qd, h, bias, "attn_out")
        extra += layers * heads  # self_attn.sinks
        out["attention_sinks"] = True
        out["sliding_window"] = pint("sliding_window", default=128)
        notes.append(N_("gpt-oss: attention sinks need eager attention in transformers 5.24 (the sink logit joins "
                        "the softmax), so every layer keeps B·H·T·T scores; checkpoints ship MXFP4 experts, which "
                        "the usual fine-tuning recipes (Mxfp4Config(dequantize=True), TRL/Unsloth/axolotl) "
                        "dequantise to bf16: estimated with bf16 experts"))
    elif family == "deepseek_v3":
        # DeepseekV3Attention (MLA): q through a q_lora_rank bottleneck (or a plain q_proj when q_lora_rank is
        # null), k/v through kv_a_proj_with_mqa (kv_lora_rank + a shared rope key) and kv_b_proj.
        bias = _flag(cfg, "attention_bias", False)
        q_rank = cfg.get("q_lora_rank", 1536)  # configuration_deepseek_v3.py default; null = a plain q_proj
        kv_rank = pint("kv_lora_rank", default=512)
        rope = pint("qk_rope_head_dim", default=64)
        nope = pint("qk_nope_head_dim", default=128)
        v_dim = pint("v_head_dim", default=128)
        qk = rope + nope
        if q_rank is None:
            add("q_proj", h, heads * qk, False, "attn_in")
        else:
            q_rank = pint("q_lora_rank")
            add("q_a_proj", h, q_rank, bias, "attn_in")
            add("q_b_proj", q_rank, heads * qk, False, "attn_in")
            extra += layers * q_rank  # q_a_layernorm
        add("kv_a_proj_with_mqa", h, kv_rank + rope, bias, "attn_in")
        add("kv_b_proj", kv_rank, heads * (nope + v_dim), False, "attn_in")
        add("o_proj", heads * v_dim, h, bias, "attn_out")
        extra += layers * kv_rank  # kv_a_layernorm
        kinds = ["full_attention"] * layers
        out.update(mla_q_rank=int(q_rank or 0), mla_kv_rank=kv_rank, mla_rope_dim=rope, mla_nope_dim=nope,
                   mla_v_dim=v_dim)
    elif family in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        # Gated DeltaNet layers (linear_attention) next to gated full-attention layers (every 4th by default).
        kinds = _layer_types(cfg, layers, ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                                           for i in range(layers)])
        n_lin = sum(t == "linear_attention" for t in kinds)
        n_full = layers - n_lin
        bias = _flag(cfg, "attention_bias", False)
        # Qwen3NextAttention: q_proj emits the query and its output gate (2·heads·head_dim); per-head q/k norms.
        if n_full:
            add("q_proj", h, 2 * qd, bias, "attn_in", 1, n_full)
            add("k_proj", h, kvd, bias, "attn_in", 1, n_full)
            add("v_proj", h, kvd, bias, "attn_in", 1, n_full)
            add("o_proj", qd, h, bias, "attn_out", 1, n_full)
            extra += n_full * 2 * head_dim  # q_norm, k_norm
        hk, hv = pint("linear_num_key_heads", default=16), pint("linear_num_value_heads", default=32)
        dk, dv = pint("linear_key_head_dim", default=128), pint("linear_value_head_dim", default=128)
        conv_k = pint("linear_conv_kernel_dim", default=4, limit=64)
        key_dim, value_dim = hk * dk, hv * dv
        conv_dim = 2 * key_dim + value_dim
        if n_lin:
            if family == "qwen3_next":
                # Qwen3NextGatedDeltaNet: fused in_proj_qkvz and in_proj_ba
                add("in_proj_qkvz", h, 2 * key_dim + 2 * value_dim, False, "attn_in", 1, n_lin)
                add("in_proj_ba", h, 2 * hv, False, "attn_in", 1, n_lin)
            else:
                # Qwen3_5GatedDeltaNet: separate in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
                add("in_proj_qkv", h, conv_dim, False, "attn_in", 1, n_lin)
                add("in_proj_z", h, value_dim, False, "attn_in", 1, n_lin)
                add("in_proj_b", h, hv, False, "attn_in", 1, n_lin)
                add("in_proj_a", h, hv, False, "attn_in", 1, n_lin)
            add("out_proj", value_dim, h, False, "attn_out", 1, n_lin)
            # depthwise conv1d (conv_dim, 1, K) without bias, dt_bias and A_log per value head, gated RMSNorm
            extra += n_lin * (conv_dim * conv_k + 2 * hv + dv)
        out.update(linear_key_heads=hk, linear_value_heads=hv, linear_key_dim=dk, linear_value_dim=dv,
                   linear_conv_kernel=conv_k)
        notes.append(N_("Gated DeltaNet layers: without flash-linear-attention and causal-conv1d installed, "
                        "transformers runs its torch fallback (chunked delta rule, 64-token chunks), estimated here"))
    else:  # glm4_moe, llama4_text, ernie4_5_moe: grouped-query attention
        if family == "ernie4_5_moe":
            bias = o_bias = _flag(cfg, "use_bias", False)
        elif family == "glm4_moe":
            bias, o_bias = _flag(cfg, "attention_bias", False), False  # Glm4MoeAttention: o_proj has no bias
        else:
            bias = o_bias = _flag(cfg, "attention_bias", False)
        add("q_proj", h, qd, bias, "attn_in")
        add("k_proj", h, kvd, bias, "attn_in")
        add("v_proj", h, kvd, bias, "attn_in")
        add("o_proj", qd, h, o_bias, "attn_out")
        if family == "glm4_moe" and _flag(cfg, "use_qk_norm", False):
            extra += layers * 2 * head_dim
        kinds = ["full_attention"] * layers
        if family == "llama4_text":
            chunk = cfg.get("attention_chunk_size", 8192)
            interval = pint("no_rope_layer_interval", default=4)
            nope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
            kinds = _layer_types(cfg, layers, ["chunked_attention" if r and chunk else "full_attention"
                                               for r in nope])
            if chunk:
                out["attention_chunk"] = pint("attention_chunk_size")
            # Llama4TextL2Norm on q and k of the RoPE layers: no parameters

    # ---- MLP / experts ----------------------------------------------------------------------------------
    moe_mask = [False] * layers
    if family == "gpt_oss":
        experts, k = pint("num_local_experts", limit=4096), pint("num_experts_per_tok", limit=4096)
        moe_mask = [True] * layers
        moe_inter = inter
        # GptOssExperts: gate_up_proj (E, h, 2I) + bias, down_proj (E, I, h) + bias; GptOssTopKRouter: weight
        # (E, h) and bias (E) as plain parameters.
        add("router", h, experts, True, "router", 1, layers)
        add("experts.gate_proj", h, moe_inter, True, "expert_in", experts, layers)
        add("experts.up_proj", h, moe_inter, True, "expert_in", experts, layers)
        add("experts.down_proj", moe_inter, h, True, "expert_out", experts, layers)
        shared_inter, dense_inter = 0, 0
    else:
        if family in ("deepseek_v3", "glm4_moe"):
            experts = pint("n_routed_experts", limit=4096)
            k = pint("num_experts_per_tok", limit=experts)
            first = cfg.get("first_k_dense_replace", 3 if family == "deepseek_v3" else 1) or 0
            moe_mask = [i >= first for i in range(layers)]
            moe_inter = pint("moe_intermediate_size")
            shared_inter = moe_inter * (cfg.get("n_shared_experts", 1) or 0)
            dense_inter = inter
        elif family in ("qwen3_next", "qwen3_5_moe_text"):
            experts = pint("num_experts", limit=4096)
            k = pint("num_experts_per_tok", limit=experts)
            step = pint("decoder_sparse_step", default=1, limit=1000)
            only = cfg.get("mlp_only_layers") or []
            moe_mask = [i not in only and (i + 1) % step == 0 for i in range(layers)]
            moe_inter = pint("moe_intermediate_size")
            shared_inter = pint("shared_expert_intermediate_size")
            dense_inter = inter if family == "qwen3_next" else 0
        elif family == "llama4_text":
            experts = pint("num_local_experts", limit=4096)
            k = pint("num_experts_per_tok", limit=experts)
            step = pint("interleave_moe_layer_step", default=1, limit=1000)
            listed = cfg.get("moe_layers")
            moe_idx = set(listed) if isinstance(listed, list) else set(range(step - 1, layers, step))
            moe_mask = [i in moe_idx for i in range(layers)]
            moe_inter = inter  # Llama4TextExperts: expert_dim = intermediate_size
            shared_inter = inter  # Llama4TextMoe.shared_expert = Llama4TextMLP(config)
            dense_inter = pint("intermediate_size_mlp", default=16384)
        elif family == "ernie4_5_moe":
            experts = pint("moe_num_experts", limit=4096)
            k = pint("moe_k", limit=experts)
            start, end = cfg.get("moe_layer_start_index", 1), cfg.get("moe_layer_end_index", layers - 1)
            interval = pint("moe_layer_interval", default=1, limit=1000)
            moe_mask = [(i + 1) % interval == 0 and start <= i <= end for i in range(layers)]
            moe_inter = pint("moe_intermediate_size")
            shared_inter = moe_inter * (cfg.get("moe_num_shared_experts", 0) or 0)
            dense_inter = inter
        else:  # qwen3_5_text: dense SwiGLU in every layer
            experts = k = moe_inter = shared_inter = 0
            dense_inter = inter
        n_moe = sum(moe_mask)
        n_dense = layers - n_moe
        mlp_bias = _flag(cfg, "use_bias", False) if family == "ernie4_5_moe" else False
        if n_dense and dense_inter:
            add("gate_proj", h, dense_inter, mlp_bias, "mlp_in", 1, n_dense)
            add("up_proj", h, dense_inter, mlp_bias, "mlp_in", 1, n_dense)
            add("down_proj", dense_inter, h, mlp_bias, "mlp_out", 1, n_dense)
        if n_moe:
            router = "router" if family == "llama4_text" else "gate"
            add(router, h, experts, False, "router", 1, n_moe)
            add("experts.gate_proj", h, moe_inter, False, "expert_in", experts, n_moe)
            add("experts.up_proj", h, moe_inter, False, "expert_in", experts, n_moe)
            add("experts.down_proj", moe_inter, h, False, "expert_out", experts, n_moe)
            if shared_inter:
                sh = {"deepseek_v3": "shared_experts", "glm4_moe": "shared_experts",
                      "ernie4_5_moe": "shared_experts"}.get(family, "shared_expert")
                add(f"{sh}.gate_proj", h, shared_inter, mlp_bias, "shared_in", 1, n_moe)
                add(f"{sh}.up_proj", h, shared_inter, mlp_bias, "shared_in", 1, n_moe)
                add(f"{sh}.down_proj", shared_inter, h, mlp_bias, "shared_out", 1, n_moe)
            if family in ("qwen3_next", "qwen3_5_moe_text"):
                add("shared_expert_gate", h, 1, False, "router", 1, n_moe)  # sigmoid gate of the shared expert
            if family == "ernie4_5_moe":
                extra += n_moe * experts  # gate.moe_statics.e_score_correction_bias (1, E), requires_grad=False
                out["params_frozen"] = n_moe * experts  # ... so full fine-tuning gives it no gradient or state
        inter = dense_inter or moe_inter

    # ---- what PEFT's all-linear wraps ------------------------------------------------------------------
    names = list(dict.fromkeys(m.name for m in linears))
    if family in _PEFT_CONVERTED:
        # v4 names gate/gate_proj/up_proj/down_proj -> target_parameters gate.weight, gate_up_proj, down_proj:
        # the fused experts and the router are adapted; nn.Linear modules of those names (dense MLP, shared
        # experts) are dropped from target_modules.
        dropped = ("gate_proj", "up_proj", "down_proj")
        targets = [n for n in names if not (n.split(".")[-1] in dropped and not n.startswith("experts."))]
    else:
        # nn.Linear only: not the fused expert tensors, not the routers that hold a plain weight parameter
        # (GptOssTopKRouter, Qwen3_5MoeTopKRouter). Llama4Router subclasses nn.Linear, so all-linear matches it, but
        # its forward returns (scores, logits) and PEFT 0.21.2's lora.Linear.forward reads result.dtype of the base
        # layer's output (peft/tuners/lora/layer.py): training fails unless the router is excluded, as counted here.
        targets = [n for n in names if not n.startswith("experts.") and n not in ("router", "gate")]
        if family == "llama4_text" and any(moe_mask):
            notes.append(N_("Llama 4: PEFT's all-linear also matches the router (an nn.Linear subclass that "
                            "returns scores and logits), and its LoRA wrapper then fails in the forward pass; pass "
                            "exclude_modules=[\"router\"] (estimated so)"))
    out["all_linear_targets"] = tuple(targets)

    pattern = tuple(f"{kind.replace('_attention', '')}:{'moe' if moe else 'dense'}"
                    for kind, moe in zip(kinds, moe_mask, strict=True))
    out.update(
        linears=tuple(linears), intermediate_size=inter, num_experts=experts, experts_per_token=k,
        moe_intermediate_size=moe_inter, shared_expert_intermediate_size=shared_inter, moe_layers=sum(moe_mask),
        extra_layer_params=extra, layer_pattern=pattern, notes=tuple(notes),
    )
    return out
