"""Gemma 4 and Gemma 3n (issue 11): per-layer attention shapes, KV sharing, per-layer input embeddings (PLE),
Gemma 3n's AltUp and LAuReL blocks, Gemma 4's MoE block, and their vision/audio towers.

Each builder follows transformers 5.24.0 module by module (models/gemma4/modeling_gemma4.py and
configuration_gemma4.py; models/gemma3n/modeling_gemma3n.py and configuration_gemma3n.py). Parameter counts equal
transformers' on the meta device (tests/test_families_gemma.py, tests/data/preset_param_counts.json).

* Gemma 4 (Gemma4TextConfig.__post_init__): full-attention layers use ``global_head_dim`` (512) and, when
  ``attention_k_eq_v``, ``num_global_key_value_heads`` and no v_proj (the key projection is reused as the value);
  the last ``num_kv_shared_layers`` layers reuse the K/V of the last earlier layer of their type and have no
  k_proj, v_proj or k_norm (kv_sharing_modes "reuse"); with ``use_double_wide_mlp`` those layers' MLP is twice as
  wide; with ``hidden_size_per_layer_input`` every layer adds a gated per-layer input (PLE) from a packed
  embedding table [vocab_size_per_layer_input, layers·p] plus a model-level projection h → layers·p; with
  ``enable_moe_block`` every layer runs the dense MLP *and* a routed expert block side by side.
* Gemma 3n: the same PLE and KV sharing (no per-layer head sizes, every layer has v_proj), per-layer
  ``intermediate_size`` lists, AltUp (altup_num_inputs parallel streams: a router h → n, n×n correction and
  n×n² prediction coefficients, a correct_output_scale, a router norm) and a LAuReL low-rank residual
  (h → laurel_rank → h with a norm) in every layer, and 2·(n−1) model-level h×h AltUp projections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from ..i18n import N_, Text
from ._parts import Parts

if TYPE_CHECKING:
    from typing import Any


FAMILIES = frozenset({"gemma4_text", "gemma3n_text"})
TEXT_MODEL_TYPES = {"gemma4": "gemma4_text", "gemma3n": "gemma3n_text"}


def _types(cfg: Mapping[str, Any], layers: int, full_every: int, last_full: bool) -> list[str]:
    types = cfg.get("layer_types")
    if types is None:
        types = ["full_attention" if (i + 1) % full_every == 0 else "sliding_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) for t in types):
        raise ValueError(Text(N_("config.json field 'layer_types' must list one attention type per layer ({layers})"),
                              layers=str(layers)))
    types = list(types)
    if last_full and types:
        types[-1] = "full_attention"  # Gemma4TextConfig.__post_init__ forces the last layer to full attention
    return types


def _shared(types: list[str], n_shared: int, all_allowed: bool) -> list[bool]:
    """Which layers reuse another layer's K/V (kv_sharing_modes == "reuse"): the last num_kv_shared_layers
    (Gemma 4 allows all of them; configuration_gemma4.py / configuration_gemma3n.py kv_sharing_modes)."""
    layers = len(types)
    if n_shared < 0 or n_shared > layers or (n_shared == layers and n_shared and not all_allowed):
        raise ValueError(Text(N_("num_kv_shared_layers = {shared} leaves no earlier layer to share K/V from ({layers} "
                                 "layers)"), shared=str(n_shared), layers=str(layers)))
    first = layers - n_shared
    if n_shared and n_shared < layers and set(types[:first]) != set(types):
        raise ValueError(Text(N_("num_kv_shared_layers leaves a layer type with no earlier layer to share K/V from")))
    return [i >= first for i in range(layers)]


def _per_layer_overrides(cfg: Mapping[str, Any], layers: int) -> dict[int, dict[str, int]] | None:
    """config.json's per_layer_config: {"<layer index>": {"head_dim": ..., "num_key_value_heads": ...}}."""
    raw = cfg.get("per_layer_config")
    if raw is None:
        return None
    bad = ValueError(Text(N_("config.json field 'per_layer_config' must map layer indices to head_dim / "
                             "num_key_value_heads overrides")))
    if not isinstance(raw, Mapping):
        raise bad
    out: dict[int, dict[str, int]] = {}
    for key, value in raw.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise bad from None
        if not 0 <= index < layers or not isinstance(value, Mapping):
            raise bad
        fields = {k: v for k, v in value.items() if k in ("head_dim", "num_key_value_heads")}
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 65536 for v in fields.values()):
            raise bad
        out[index] = fields
    return out


class _Plan(NamedTuple):
    """Each layer's attention type, whether it reuses earlier K/V, and its MLP width."""

    types: list[str]
    shared: list[bool]
    inters: list[int]


def _layer_plan(p: Parts, layers: int, gemma4: bool) -> _Plan:
    """Attention types, KV sharing and the MLP width of each layer."""
    cfg = p.cfg
    types = _types(cfg, layers, 6 if gemma4 else 5, last_full=gemma4)
    n_shared = cfg.get("num_kv_shared_layers", 0 if gemma4 else 15) or 0
    if isinstance(n_shared, bool) or not isinstance(n_shared, int):
        raise ValueError(Text(N_("config.json field 'num_kv_shared_layers' must be a whole number of layers")))
    shared = _shared(types, n_shared, all_allowed=gemma4)

    # intermediate size: one for all layers (Gemma 4) or one per layer (Gemma 3n lists are allowed)
    raw_inter = cfg.get("intermediate_size", 9216 if gemma4 else 16_384)
    if isinstance(raw_inter, list):
        if gemma4 or len(raw_inter) != layers or not all(isinstance(x, int) and x > 0 for x in raw_inter):
            raise ValueError(Text(N_("config.json field 'intermediate_size' must be a positive integer or list one "
                                     "per layer ({layers})"), layers=str(layers)))
        inters = [int(x) for x in raw_inter]
    else:
        inters = [p.pint("intermediate_size", default=raw_inter)] * layers
    wide = gemma4 and p.flag("use_double_wide_mlp", False)
    inters = [i * (2 if wide and s else 1) for i, s in zip(inters, shared, strict=True)]
    return _Plan(types, shared, inters)


def _sparse_layers(cfg: Mapping[str, Any], layers: int) -> list[bool]:
    """Gemma 3n's layers whose MLP keeps only the top of its gate output."""
    # Gemma 3n's activation_sparsity_pattern (default 0.95 on the first 10 layers of a model deeper than 10):
    # those MLPs keep a Gaussian top-k of the gate output (modeling_gemma3n.py Gemma3nTextMLP._gaussian_topk)
    asp = cfg.get("activation_sparsity_pattern")
    if asp is None:
        asp = [0.95] * 10 + [0.0] * (layers - 10) if layers > 10 else [0.0] * layers
    if (not isinstance(asp, list) or len(asp) != layers
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in asp)):
        raise ValueError(Text(N_("config.json field 'activation_sparsity_pattern' must list one value per layer "
                                 "({layers})"), layers=str(layers)))
    return [x > 0 for x in asp]


def _pattern(plan: _Plan, moe_on: bool, sparse: list[bool]) -> list[str]:
    """One pattern entry per layer: "<sliding|full>[_shared]:<dense[width]|moe>[+sparse]"."""
    base = plan.inters[0]
    return [("full" if t == "full_attention" else "sliding") + ("_shared" if s else "") + ":"
            + ("moe" if moe_on else "dense" + ("" if i == base else str(i))) + ("+sparse" if sp else "")
            for t, s, i, sp in zip(plan.types, plan.shared, plan.inters, sparse, strict=True)]


class _Heads(NamedTuple):
    """Attention head shapes: the sliding layers' and the full-attention layers' (Gemma 4's global ones)."""

    heads: int
    kv_heads: int
    head_dim: int
    global_kv: int
    global_hd: int
    k_eq_v: bool


def _heads(p: Parts, heads: int, kv_heads: int, head_dim: int, gemma4: bool) -> _Heads:
    """Gemma 4's full-attention layers have their own head_dim, K/V heads and may share K with V."""
    global_hd = p.pint("global_head_dim", default=512) if gemma4 else head_dim
    k_eq_v = gemma4 and p.flag("attention_k_eq_v", False)
    global_kv = p.cfg.get("num_global_key_value_heads") if k_eq_v else None
    global_kv = p.pint("num_global_key_value_heads", limit=65536) if global_kv is not None else kv_heads
    return _Heads(heads, kv_heads, head_dim, global_kv, global_hd, k_eq_v)


def _layer_linears(p: Parts, plan: _Plan, pattern: list[str], h: int, a: _Heads, bias: bool) -> None:
    """Each layer's attention and MLP linears, grouped by shape over the pattern entries that carry them, and the
    q/k norms."""
    heads, kv_heads, head_dim, global_kv, global_hd, k_eq_v = a
    grouped: dict[tuple[str, int, int, str], list[str]] = {}  # (name, in, out, role) -> pattern entries

    def put(name: str, i: int, o: int, role: str, kind: str) -> None:
        grouped.setdefault((name, i, o, role), []).append(kind)

    # per_layer_config (PreTrainedConfig's sparse per-layer overrides, configuration_utils.py): what
    # Gemma4TextConfig.__post_init__ derives from global_head_dim / num_global_key_value_heads and what
    # save_pretrained writes in their place; when present it is the whole story (other layers keep the globals)
    overrides = _per_layer_overrides(p.cfg, len(pattern))
    for i, (kind, t, s, inter) in enumerate(zip(pattern, plan.types, plan.shared, plan.inters, strict=True)):
        full = t == "full_attention"
        if overrides is None:
            hd, kvh = (global_hd, global_kv) if full else (head_dim, kv_heads)
        else:
            hd = overrides.get(i, {}).get("head_dim", head_dim)
            kvh = overrides.get(i, {}).get("num_key_value_heads", kv_heads)
        # q_proj / o_proj on every layer, k_proj (and v_proj unless K = V) only where the layer computes its K/V
        put("q_proj", h, heads * hd, "attn_in", kind)
        if not s:
            put("k_proj", h, kvh * hd, "attn_in", kind)
            if not (full and k_eq_v):
                put("v_proj", h, kvh * hd, "attn_in", kind)
        put("o_proj", heads * hd, h, "attn_out", kind)
        put("gate_proj", h, inter, "mlp_in", kind)
        put("up_proj", h, inter, "mlp_in", kind)
        put("down_proj", inter, h, "mlp_out", kind)
        p.extra += hd * (1 if s else 2)  # q_norm (+ k_norm); v_norm has no weight (with_scale=False)
    for (name, i, o, role), kinds in grouped.items():
        p.add(name, i, o, bias if role.startswith("attn") else False, role, 1, len(kinds),
              tuple(dict.fromkeys(kinds)))


def _per_layer_inputs(p: Parts, h: int, layers: int) -> int:
    """Per-layer inputs (PLE); returns the size of their embedding table."""
    width = int(p.cfg.get("hidden_size_per_layer_input", 256) or 0)
    if not width:
        return 0
    width = p.pint("hidden_size_per_layer_input", default=256, limit=65536)
    vp = p.pint("vocab_size_per_layer_input", default=262_144)
    p.add("per_layer_input_gate", h, width, False, "ple_in")
    p.add("per_layer_projection", width, h, False, "ple_out")
    p.extra += layers * h  # post_per_layer_input_norm
    ple_table = vp * layers * width  # embed_tokens_per_layer: one packed table for all layers
    # per_layer_model_projection (h -> layers·p), a model-level nn.Linear: listed once (layers=1)
    p.add("per_layer_model_projection", h, layers * width, False, "model", 1, 1)
    p.extra += width  # per_layer_projection_norm
    p.notes.append(Text(N_("per-layer input embeddings (PLE): a {vocab} × {layers}·{width} table ({billions} B "
                           "parameters) looked up per token and fed to every layer; counted with the embeddings "
                           "(frozen under LoRA, never quantised)"),
                        vocab=vp, layers=layers, width=width, billions=(ple_table / 1e9, 2)))
    return ple_table


def _gemma4_moe(p: Parts, h: int, layers: int) -> dict[str, Any]:
    """Gemma 4's MoE block (routed experts beside the dense MLP in every layer); returns its ModelSpec fields."""
    experts = p.pint("num_experts", limit=4096)
    k = p.pint("top_k_experts", limit=experts)
    moe_inter = p.pint("moe_intermediate_size")
    # Gemma4TextRouter: proj (nn.Linear h -> E), scale (h), per_expert_scale (E), an unscaled norm;
    # Gemma4TextExperts: gate_up_proj (E, 2I, h) and down_proj (E, h, I) as 3-D parameters
    p.add("router.proj", h, experts, False, "router")
    p.add("experts.gate_proj", h, moe_inter, False, "expert_in", experts)
    p.add("experts.up_proj", h, moe_inter, False, "expert_in", experts)
    p.add("experts.down_proj", moe_inter, h, False, "expert_out", experts)
    p.extra += layers * (h + experts + 3 * h)  # router.scale, per_expert_scale, three more layer norms
    p.notes.append(N_("Gemma 4 MoE: every layer runs its dense MLP and the routed experts side by side"))
    return dict(num_experts=experts, experts_per_token=k, moe_intermediate_size=moe_inter, moe_layers=layers)


def _altup_laurel(p: Parts, h: int, layers: int) -> None:
    """Gemma 3n's AltUp and LAuReL modules."""
    n = p.pint("altup_num_inputs", default=4, limit=64)
    r = p.pint("laurel_rank", default=64, limit=65536)
    p.add("laurel.linear_left", h, r, False, "ple_in")
    p.add("laurel.linear_right", r, h, False, "ple_out")
    p.add("altup.modality_router", h, n, False, "router")
    p.add("altup.correction_coefs", n, n, False, "router")
    p.add("altup.prediction_coefs", n, n * n, False, "router")
    p.extra += layers * (h + h + h)  # post_laurel_norm, altup.router_norm, altup.correct_output_scale
    # altup_projections and altup_unembed_projections: 2·(n − 1) model-level h×h nn.Linear modules
    p.add("altup_projections", h, h, False, "model", 2 * (n - 1), 1)
    p.notes.append(Text(N_("Gemma 3n: AltUp keeps {n} copies of the hidden state through every layer and LAuReL "
                           "adds a rank-{rank} residual branch; activations estimated as for a Gemma layer, not "
                           "traced"), n=n, rank=r))


def build(family: str, cfg: Mapping[str, Any], h: int, layers: int, heads: int, kv_heads: int, head_dim: int,
          vocab: int) -> dict[str, Any]:
    """ModelSpec keyword arguments of gemma4_text / gemma3n_text from a config dict whose common fields model.py
    has checked (hidden_size, layers, heads, kv heads, head_dim, vocabulary)."""
    gemma4 = family == "gemma4_text"
    p = Parts(cfg)  # p.extra: per-layer and model-level parameters that are neither listed linears nor the 4 norms
    bias = p.flag("attention_bias", False)
    plan = _layer_plan(p, layers, gemma4)
    a = _heads(p, heads, kv_heads, head_dim, gemma4)
    moe_on = gemma4 and p.flag("enable_moe_block", False)
    pattern = _pattern(plan, moe_on, [False] * layers if gemma4 else _sparse_layers(cfg, layers))
    _layer_linears(p, plan, pattern, h, a, bias)
    ple_table = _per_layer_inputs(p, h, layers)
    moe = _gemma4_moe(p, h, layers) if moe_on else {}
    if not gemma4:
        _altup_laurel(p, h, layers)
    if any(plan.shared):
        p.notes.append(Text(N_("KV sharing: the last {n} layers reuse earlier layers' keys and values (no "
                               "k_proj/v_proj of their own)"), n=sum(plan.shared)))

    sliding = sum(t == "sliding_attention" for t in plan.types)
    window = cfg.get("sliding_window", 512)
    targets = tuple(dict.fromkeys(m.name for m in p.linears if not m.name.startswith("experts.")))
    return dict(
        linears=tuple(p.linears), intermediate_size=plan.inters[0], extra_layer_params=p.extra,
        layer_pattern=tuple(pattern), all_linear_targets=targets, notes=tuple(p.notes), params_extra_embedding=ple_table,
        sliding_window=window if isinstance(window, int) and window > 0 and sliding else 0,
        sliding_layers=sliding if isinstance(window, int) and window > 0 else 0, **moe,
    )


def _int(cfg: Mapping[str, Any], key: str, default: int, limit: int = 1 << 20) -> int:
    from ._fields import _positive_int
    return _positive_int(cfg, key, default=default, limit=limit)


def gemma4_tower_params(cfg: Mapping[str, Any], text_hidden: int) -> int:
    """Gemma4Model's towers and embedders (transformers 5.24.0 modeling_gemma4.py): Gemma4VisionModel (a bias-free
    patch input_proj, a 2 × position_embedding_size × h position table, encoder layers of q/k/v/o and a gated MLP
    through Gemma4ClippableLinear, q/k norms over head_dim and four layer norms; the pooler has no weights),
    embed_vision (vision h → text h), and when audio_config is set Gemma4AudioModel (two bias-free 3×3 conv
    subsampling layers with weight-only LayerNorms, input_proj_linear, conformer layers of two 4h feed-forwards,
    chunked attention q/k/v/post + relative_k_proj + per_dim_scale, a light conv1d block, output_proj with bias)
    and embed_audio (output_proj_dims → text h)."""
    total = 0
    vision = cfg.get("vision_config")
    if isinstance(vision, Mapping):
        hv = _int(vision, "hidden_size", 768)
        iv = _int(vision, "intermediate_size", 3072)
        lv = _int(vision, "num_hidden_layers", 16, 1000)
        nv = _int(vision, "num_attention_heads", 12, 65536)
        nkv = _int(vision, "num_key_value_heads", 12, 65536)
        hd = _int(vision, "head_dim", 64, 65536)
        patch = _int(vision, "patch_size", 16, 4096)
        positions = _int(vision, "position_embedding_size", 10 * 1024)
        layer = hv * nv * hd * 2 + 2 * hv * nkv * hd + 2 * hd + 3 * hv * iv + 4 * hv
        total += 3 * patch * patch * hv + 2 * positions * hv + lv * layer + hv * text_hidden
    audio = cfg.get("audio_config")
    if isinstance(audio, Mapping):
        ha = _int(audio, "hidden_size", 1024)
        la = _int(audio, "num_hidden_layers", 12, 1000)
        na = _int(audio, "num_attention_heads", 8, 65536)
        kernel = _int(audio, "conv_kernel_size", 5, 1024)
        out = _int(audio, "output_proj_dims", 1536)
        channels = audio.get("subsampling_conv_channels", [128, 32])
        if (not isinstance(channels, list) or len(channels) != 2
                or not all(isinstance(c, int) and c > 0 for c in channels)):
            raise ValueError(Text(N_("audio_config field 'subsampling_conv_channels' must list two channel counts")))
        c0, c1 = channels
        sub = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * ha
        ffw = 2 * 4 * ha * ha + 2 * ha
        attn = 5 * ha * ha + ha // na
        lconv = 3 * ha * ha + ha * kernel + 2 * ha
        total += sub + la * (2 * ffw + attn + lconv + 3 * ha) + ha * out + out + out * text_hidden
    return total


# Gemma 3n's vision tower is a timm model: TimmWrapperModel calls timm.create_model(vision_config.architecture,
# pretrained=False, num_classes=0, **model_args) (transformers 5.24.0 modeling_timm_wrapper.py), so its size is fixed
# by the architecture name. Parameters of that module on the meta device, timm 1.0.31 (the same in timm 1.0.22),
# counted inside the whole Gemma3nForConditionalGeneration by calibration/count_params.py
# (tests/data/preset_param_counts.json). An architecture not listed here is not counted (the spec notes it).
TIMM_VISION_PARAMS = {
    "mobilenetv5_300m_enc": 294_126_912,  # MobileNetV5Encoder, Gemma3nVisionConfig's default architecture
}
GEMMA3N_VISION_ARCHITECTURE = "mobilenetv5_300m_enc"  # configuration_gemma3n.py Gemma3nVisionConfig default


def gemma3n_vision_architecture(cfg: Mapping[str, Any]) -> str:
    """The timm architecture Gemma 3n's vision tower is built from (vision_config.architecture)."""
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    arch = vision.get("architecture", GEMMA3N_VISION_ARCHITECTURE)
    if not isinstance(arch, str) or not arch:
        raise ValueError(Text(N_("vision_config field 'architecture' must name a timm model")))
    return arch


def gemma3n_timm_vision_params(cfg: Mapping[str, Any]) -> int | None:
    """Parameters of Gemma 3n's timm vision encoder from TIMM_VISION_PARAMS, or None when the config names an
    architecture that table does not hold, or passes model_args (timm.create_model keywords that change it)."""
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    if vision.get("model_args"):
        return None
    return TIMM_VISION_PARAMS.get(gemma3n_vision_architecture(cfg))


def gemma3n_tower_params(cfg: Mapping[str, Any], text_hidden: int) -> int:
    """Gemma3nModel's audio tower and both embedders (transformers 5.24.0 modeling_gemma3n.py): Gemma3nAudioEncoder
    (two bias-free conv blocks with cumulative group norms, input_proj_linear over channels × frequency bins,
    conformer blocks of two 4h feed-forwards, attention q/k/v/post + relative pos_proj + per_dim_scale, a light
    conv1d block and norms), and embed_vision / embed_audio (Gemma3nMultimodalEmbedder: a vocab_size × h
    embedding, two norms and h → text h), and the timm vision tower (MobileNetV5) from TIMM_VISION_PARAMS when the
    config names an architecture listed there (otherwise it is left out; the spec notes it)."""
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    audio = cfg.get("audio_config") if isinstance(cfg.get("audio_config"), Mapping) else {}
    hv = _int(vision, "hidden_size", 2048)
    total = _int(vision, "vocab_size", 128) * hv + 2 * hv + hv * text_hidden  # embed_vision
    total += gemma3n_timm_vision_params(cfg) or 0  # vision_tower (TimmWrapperModel), 0 when not in the table
    ha = _int(audio, "hidden_size", 1536)
    la = _int(audio, "conf_num_hidden_layers", 12, 1000)
    na = _int(audio, "conf_num_attention_heads", 8, 65536)
    kernel = _int(audio, "conf_conv_kernel_size", 5, 1024)
    feat = _int(audio, "input_feat_size", 128)
    c0, c1 = (audio.get("sscp_conv_channel_size") or [128, 32])[:2]
    f = feat
    for _ in range(2):  # 3×3 kernels, stride 2, one frequency bin of padding each side (the config defaults)
        f = (f + 2 - 3) // 2 + 1
    sub = 9 * c0 + c0 + 9 * c0 * c1 + c1 + c1 * f * ha
    ffw = 2 * 4 * ha * ha + 2 * ha
    attn = 2 * ha + 5 * ha * ha + ha // na
    lconv = 3 * ha * ha + ha * kernel + 2 * ha
    total += sub + la * (2 * ffw + attn + lconv + ha)
    total += _int(audio, "vocab_size", 128) * ha + 2 * ha + ha * text_hidden  # embed_audio
    return total
