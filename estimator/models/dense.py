"""The decoder-layer linears of the Llama-like families config.py reads (transformers 5.24.0
models/<type>/modeling_<type>.py): Phi-3, Phi-2, GPT-NeoX and StarCoder2 with their own module names, the others
named like Llama with their family's biases, and the experts of Mixtral, Qwen2-MoE and Qwen3-MoE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ._fields import _flag, _positive_int
from .spec import MAX_LAYERS, LinearModule

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def _own_layout_linears(family: str, h: int, qd: int, kvd: int, inter: int,
                        cfg: Mapping[str, Any]) -> list[LinearModule] | None:
    """Phi-3, Phi-2, GPT-NeoX and StarCoder2, whose layers are not named like Llama's; None for the others."""
    if family == "phi3":
        # Phi-3 fuses q,k,v into qkv_proj and gate,up into gate_up_proj (modeling_phi3.py); no biases.
        return [
            LinearModule("qkv_proj", h, qd + 2 * kvd, False, "attn_in"),
            LinearModule("o_proj", qd, h, False, "attn_out"),
            LinearModule("gate_up_proj", h, 2 * inter, False, "mlp_in"),
            LinearModule("down_proj", inter, h, False, "mlp_out"),
        ]
    if family == "phi":
        # Phi-2: q,k,v,dense with biases; fc1/fc2 GELU MLP with biases (modeling_phi.py).
        return [
            LinearModule("q_proj", h, qd, True, "attn_in"),
            LinearModule("k_proj", h, kvd, True, "attn_in"),
            LinearModule("v_proj", h, kvd, True, "attn_in"),
            LinearModule("dense", qd, h, True, "attn_out"),
            LinearModule("fc1", h, inter, True, "mlp_in"),
            LinearModule("fc2", inter, h, True, "mlp_out"),
        ]
    if family == "gpt_neox":
        # GPT-NeoX: fused query_key_value and dense with biases; dense_h_to_4h / dense_4h_to_h (modeling_gpt_neox.py).
        bias = _flag(cfg, "attention_bias", True)
        return [
            LinearModule("query_key_value", h, 3 * qd, bias, "attn_in"),
            LinearModule("dense", qd, h, bias, "attn_out"),
            LinearModule("dense_h_to_4h", h, inter, True, "mlp_in"),
            LinearModule("dense_4h_to_h", inter, h, True, "mlp_out"),
        ]
    if family == "starcoder2":
        # StarCoder2: q,k,v,o and the plain c_fc/c_proj MLP all take bias=config.use_bias (default true)
        # (transformers 5.24.0 models/starcoder2/modeling_starcoder2.py Starcoder2Attention, Starcoder2MLP).
        bias = _flag(cfg, "use_bias", True)
        return [
            LinearModule("q_proj", h, qd, bias, "attn_in"),
            LinearModule("k_proj", h, kvd, bias, "attn_in"),
            LinearModule("v_proj", h, kvd, bias, "attn_in"),
            LinearModule("o_proj", qd, h, bias, "attn_out"),
            LinearModule("c_fc", h, inter, bias, "mlp_in"),
            LinearModule("c_proj", inter, h, bias, "mlp_out"),
        ]
    return None


def _llama_biases(family: str, cfg: Mapping[str, Any]) -> tuple[bool, bool, bool]:
    """(q/k/v bias, o_proj bias, MLP bias) of a Llama-named layer."""
    if family in ("qwen2", "qwen2_moe"):
        # Qwen2: q,k,v have bias=True, o_proj bias=False, hard-coded in modeling_qwen2.py.
        qkv_bias, o_bias = True, False
    elif family == "ernie4_5":
        # ERNIE 4.5: every attention and MLP linear takes bias=config.use_bias (default false)
        # (transformers 5.24.0 models/ernie4_5/modeling_ernie4_5.py Ernie4_5Attention, Ernie4_5MLP).
        qkv_bias = o_bias = _flag(cfg, "use_bias", False)
    else:
        # Llama/Mistral/Qwen3/Gemma: one attention_bias flag for q,k,v,o (default false).
        qkv_bias = o_bias = _flag(cfg, "attention_bias", False)
    if family == "ernie4_5":
        mlp_bias = qkv_bias
    elif family in ("cohere2", "olmo2", "olmo3", "ministral"):
        mlp_bias = False  # hard-coded bias=False in their MLPs (modeling_<type>.py, transformers 5.24.0)
    else:
        mlp_bias = _flag(cfg, "mlp_bias", False)
    return qkv_bias, o_bias, mlp_bias


def dense_linears(family: str, h: int, qd: int, kvd: int, inter: int, cfg: Mapping[str, Any]) -> list[LinearModule]:
    """Attention and MLP linears of a dense decoder layer, named as in transformers."""
    own = _own_layout_linears(family, h, qd, kvd, inter, cfg)
    if own is not None:
        return own
    qkv_bias, o_bias, mlp_bias = _llama_biases(family, cfg)
    attn = [
        LinearModule("q_proj", h, qd, qkv_bias, "attn_in"),
        LinearModule("k_proj", h, kvd, qkv_bias, "attn_in"),
        LinearModule("v_proj", h, kvd, qkv_bias, "attn_in"),
        LinearModule("o_proj", qd, h, o_bias, "attn_out"),
    ]
    mlp = [
        LinearModule("gate_proj", h, inter, mlp_bias, "mlp_in"),
        LinearModule("up_proj", h, inter, mlp_bias, "mlp_in"),
        LinearModule("down_proj", inter, h, mlp_bias, "mlp_out"),
    ]
    return attn + mlp


def classic_moe(cfg: Mapping[str, Any], family: str, h: int, layers: int, inter: int,
                linears: list[LinearModule]) -> tuple[list[LinearModule], dict[str, int]]:
    """Mixtral, Qwen2-MoE and Qwen3-MoE: the dense layer's linears (dense_linears) with experts in the sparse
    layers, and the ModelSpec MoE fields."""
    # Mixtral says num_local_experts; Qwen MoE configs say num_experts (transformers 5 accepts both).
    key = "num_local_experts" if family == "mixtral" or "num_experts" not in cfg else "num_experts"
    num_experts = _positive_int(cfg, key, limit=4096)
    experts_per_token = _positive_int(cfg, "num_experts_per_tok", limit=num_experts)
    if family == "mixtral":
        moe_inter = inter
    else:
        moe_inter = _positive_int(cfg, "moe_intermediate_size")
    step = _positive_int(cfg, "decoder_sparse_step", default=1, limit=MAX_LAYERS)
    only_dense = cfg.get("mlp_only_layers") or []
    if not isinstance(only_dense, list) or not all(isinstance(i, int) for i in only_dense):
        raise ValueError(Text(N_("config.json field 'mlp_only_layers' must be a list of layer indices")))
    # A layer is sparse when (i + 1) % decoder_sparse_step == 0 and it is not in mlp_only_layers
    # (Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer).
    moe_layers = sum(1 for i in range(layers) if i not in only_dense and (i + 1) % step == 0)
    dense_layers = layers - moe_layers
    attn = [m for m in linears if m.role.startswith("attn")]
    dense_mlp = [LinearModule(m.name, m.in_features, m.out_features, m.bias, m.role, 1, dense_layers)
                 for m in linears if m.role.startswith("mlp")] if dense_layers else []
    experts = _expert_linears(family, h, moe_inter, num_experts, moe_layers)
    router_name = "router.gate" if family == "qwen2_moe" else "gate"
    router = [LinearModule(router_name, h, num_experts, False, "router", 1, moe_layers)]
    shared: list[LinearModule] = []
    shared_inter = 0
    if family == "qwen2_moe":
        shared_inter = _positive_int(cfg, "shared_expert_intermediate_size")
        # Qwen2MoeSparseMoeBlock: a dense shared expert plus a sigmoid gate h -> 1.
        shared = [
            LinearModule("gate_proj", h, shared_inter, False, "mlp_in", 1, moe_layers),
            LinearModule("up_proj", h, shared_inter, False, "mlp_in", 1, moe_layers),
            LinearModule("down_proj", shared_inter, h, False, "mlp_out", 1, moe_layers),
            LinearModule("shared_expert_gate", h, 1, False, "router", 1, moe_layers),
        ]
    return attn + dense_mlp + router + experts + shared, dict(
        num_experts=num_experts, experts_per_token=experts_per_token, moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared_inter, moe_layers=moe_layers)


def _expert_linears(family: str, h: int, moe_inter: int, num_experts: int, moe_layers: int) -> list[LinearModule]:
    """The routed experts of Mixtral, Qwen2-MoE and Qwen3-MoE, named as PEFT sees them."""
    mlp_bias = False
    if family == "mixtral":
        # MixtralSparseMoeBlock: router `gate` (no bias) and experts w1 (gate), w3 (up), w2 (down).
        return [
            LinearModule("w1", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
            LinearModule("w3", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
            LinearModule("w2", moe_inter, h, mlp_bias, "expert_out", num_experts, moe_layers),
        ]
    if family == "qwen2_moe":
        # transformers 5 fuses the routed experts into 3-D tensors named experts.gate_up_proj / down_proj;
        # PEFT's all-linear leaves them (and the router) alone for qwen2_moe (meta-device check).
        return [
            LinearModule("experts.gate_proj", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
            LinearModule("experts.up_proj", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
            LinearModule("experts.down_proj", moe_inter, h, mlp_bias, "expert_out", num_experts, moe_layers),
        ]
    return [
        LinearModule("gate_proj", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
        LinearModule("up_proj", h, moe_inter, mlp_bias, "expert_in", num_experts, moe_layers),
        LinearModule("down_proj", moe_inter, h, mlp_bias, "expert_out", num_experts, moe_layers),
    ]
