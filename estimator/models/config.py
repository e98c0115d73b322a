"""The model: one `ModelSpec` with exact parameter counts, from a Hugging Face config.json, a preset, or a bare size.

Parameter counts follow the module structure of the transformers classes (docs/formulas.md §1): every
nn.Linear of a decoder layer is listed with its in/out features so that LoRA targeting, QLoRA
quantisation and activations are all derived from the same list."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ..i18n import N_, Text, error_message
from . import dense as _dense
from . import gemma as _families_gemma
from . import moe as _families_moe
from ._fields import _flag, _positive_int, _safe
from .spec import MAX_LAYERS, MAX_PARAMS, LinearModule, ModelSpec
from .towers import _tower_params, _tower_shapes

if TYPE_CHECKING:
    from typing import Any


# Families whose config.json we understand. Anything else is a clear ValueError.
SUPPORTED_FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
    "gemma", "gemma2", "gemma3_text", "phi3", "phi", "gpt_neox",
    # issue 11, dense families (transformers 5.24.0 models/<type>/modeling_<type>.py)
    "olmo2", "olmo3", "granite", "smollm3", "cohere2", "starcoder2", "ernie4_5", "ministral",
)

# Defaults of configuration classes whose published config.json files leave shape fields out (transformers 5.24.0
# models/gemma3/configuration_gemma3.py Gemma3TextConfig: google/gemma-3-4b's text_config states only hidden,
# intermediate and layer counts).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256},
    # Gemma4TextConfig / Gemma3nTextConfig defaults (transformers 5.24.0 configuration_gemma4.py, configuration_gemma3n.py)
    "gemma4_text": {"vocab_size": 262_144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256},
    "gemma3n_text": {"vocab_size": 262_400, "hidden_size": 2048, "intermediate_size": 16_384,
                     "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256},
}

# Dropout probabilities configs state (StarCoder2: residual/embedding/attention; Phi: resid/embd/attn_pdrop).
DROPOUT_FIELDS = ("attention_dropout", "residual_dropout", "embedding_dropout", "hidden_dropout", "resid_pdrop",
                  "embd_pdrop", "attn_pdrop", "mlp_dropout")


# The wrapper's note that the tower is counted as frozen weights, one msgid per variant; memory.hf.runtime drops it (by
# its template, never by its words) when the tower trains, and the trained tower's own note follows.
FROZEN_TOWER_NOTE = N_("multimodal model{wrapper}: the {tower} and projector ({millions} M parameters) are counted "
                       "as frozen weights; the language model ({family}) trains; image tokens per example lengthen "
                       "its sequence")
FROZEN_TOWER_NOTE_TIMM_UNKNOWN = N_(
    "multimodal model{wrapper}: the {tower} and projector ({millions} M parameters) are counted as frozen weights; "
    "the language model ({family}) trains; image tokens per example lengthen its sequence; Gemma 3n's vision "
    "encoder (timm {arch}) is not counted, only its embedder: the estimator knows the size of {known} (without "
    "model_args) only")
FROZEN_TOWER_NOTE_TIMM = N_(
    "multimodal model{wrapper}: the {tower} and projector ({millions} M parameters) are counted as frozen weights; "
    "the language model ({family}) trains; image tokens per example lengthen its sequence; the vision encoder is "
    "timm's {arch} (MobileNetV5, {timm} M parameters, counted with timm 1.0.31)")
FROZEN_TOWER_NOTES = (FROZEN_TOWER_NOTE, FROZEN_TOWER_NOTE_TIMM_UNKNOWN, FROZEN_TOWER_NOTE_TIMM)


def is_frozen_tower_note(note: str) -> bool:
    """Is this spec note the wrapper's frozen-tower note (a Text built from one of FROZEN_TOWER_NOTES)?"""
    return getattr(note, "template", None) in FROZEN_TOWER_NOTES


# --------------------------------------------------------------------------------------------
# Unknown model types: a Llama-like estimate from the usual decoder fields (issue 11)
# --------------------------------------------------------------------------------------------

# The fields every Hugging Face decoder config states; an unknown model_type with all of them is estimated
# as a Llama-style decoder (num_key_value_heads, head_dim, tie_word_embeddings, attention_bias, mlp_bias and
# hidden_act are read when present).
DECODER_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
# Encoders and encoder-decoders state the same fields but are not decoder language models.
NOT_DECODERS = frozenset({
    "bert", "roberta", "xlm-roberta", "camembert", "distilbert", "albert", "electra", "deberta", "deberta-v2",
    "modernbert", "mpnet", "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper", "vit", "clip",
    "siglip", "wav2vec2", "hubert",
})
# Keys that mark a mixture of experts: a dense Llama-like estimate would leave out most of its weights.
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok")
# Fields a multimodal wrapper may keep at its top level rather than in text_config.
_TEXT_FIELDS_AT_TOP = (*DECODER_FIELDS, "num_key_value_heads", "head_dim", "tie_word_embeddings")


def _check_generic(cfg: Mapping[str, Any], family: str) -> list[str]:
    """Whether an unknown model_type can be estimated as a Llama-like decoder: the caveat notes, or a
    ValueError saying why not (encoder, mixture of experts, or the usual decoder fields missing)."""
    quoted = _safe(family)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", family):
        raise ValueError(Text(N_("model_type '{family}' is not supported: it is not the name of a transformers "
                                 "model type"), family=quoted))
    if family.lower() in NOT_DECODERS or cfg.get("is_encoder_decoder") is True:
        raise ValueError(Text(N_("model_type '{family}' is not supported: it is an encoder or encoder-decoder model, "
                                 "and this calculator estimates decoder language models"), family=quoted))
    moe = [k for k in MOE_FIELDS if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)
           and cfg[k] > 1]
    supported = ", ".join(SUPPORTED_FAMILIES)
    if moe:
        raise ValueError(Text(N_("model_type '{family}' is not supported: it is a mixture of experts ('{field}' = "
                                 "{value}), which a Llama-like estimate would undercount; supported: {supported}"),
                              family=quoted, field=moe[0], value=_safe(cfg[moe[0]]), supported=supported))
    missing = [k for k in DECODER_FIELDS if cfg.get(k) is None]
    if missing:
        raise ValueError(Text(N_("model_type '{family}' is not supported, and its config lacks the usual decoder "
                                 "fields for a Llama-like estimate (missing {missing}); supported: {supported}"),
                              family=quoted, missing=", ".join(repr(k) for k in missing), supported=supported))
    notes = [Text(N_("model_type '{family}' is not one of the modelled families: estimated as a Llama-like "
                     "decoder (q/k/v/o attention, gated MLP, RMSNorm) from its hidden size, layers, heads, "
                     "vocabulary and intermediate size; expect larger errors than for a modelled family"),
                  family=_safe(family))]
    if cfg.get("tie_word_embeddings") is None:
        notes.append(N_("tie_word_embeddings is not set in this config: the output layer is assumed untied, as in "
                        "Llama"))
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and any(isinstance(t, str) and "linear" in t for t in layer_types):
        notes.append(N_("its layer_types include linear-attention layers, estimated here as full attention layers"))
    return notes


def _multimodal_spec(cfg: Mapping[str, Any], text_cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """A multimodal wrapper (gemma3, mistral3, qwen3_5, llava, …): the language model from its text_config,
    with a note that the other towers are not counted."""
    top = cfg.get("model_type")
    wrapper = f" ({_safe(top)})" if isinstance(top, str) and top else ""
    text = {k: v for k, v in text_cfg.items() if k != "text_config"}
    for key in _TEXT_FIELDS_AT_TOP:  # a few wrappers keep these at the top level
        if text.get(key) is None and cfg.get(key) is not None:
            text[key] = cfg[key]
    if not isinstance(text.get("model_type"), str) or not text.get("model_type"):
        if isinstance(top, str) and top:
            text["model_type"] = top  # transformers would build the wrapper's default text model
    try:
        spec = spec_from_config(text, name=name, source=source)
    except ValueError as exc:
        raise ValueError(Text(N_("multimodal config{wrapper}, in its text_config: {error}"), wrapper=wrapper,
                              error=error_message(exc))) from None
    towers = [label for key, label in (("vision_config", "vision"), ("audio_config", "audio"))
              if isinstance(cfg.get(key), Mapping)]
    tower = (Text(N_("vision and audio tower")) if len(towers) == 2 else Text(N_("vision tower")) if towers == ["vision"]
             else Text(N_("audio tower")) if towers else Text(N_("non-text towers")))
    try:
        counted = _tower_params(cfg, spec.hidden_size)
    except ValueError as exc:
        raise ValueError(Text(N_("multimodal config{wrapper}, in its vision_config: {error}"), wrapper=wrapper,
                              error=error_message(exc))) from None
    if counted is None:
        note = Text(N_("multimodal model{wrapper}: the language model ({family}, from text_config) is estimated, "
                       "training on text; the {tower}'s weights are not counted yet"),
                    wrapper=wrapper, family=spec.family, tower=tower)
        return replace(spec, tower_kind=" and ".join(towers) or "non-text", notes=(*spec.notes, note))
    base = FROZEN_TOWER_NOTE
    args: dict[str, object] = dict(wrapper=wrapper, tower=tower, millions=(counted / 1e6, 0), family=spec.family)
    if top != "gemma3n":
        note = Text(base, **args)
    else:
        arch = _families_gemma.gemma3n_vision_architecture(cfg)
        timm_params = _families_gemma.gemma3n_timm_vision_params(cfg)
        if timm_params is None:
            note = Text(FROZEN_TOWER_NOTE_TIMM_UNKNOWN, arch=repr(arch), known=", ".join(sorted(_families_gemma.TIMM_VISION_PARAMS)), **args)
        else:
            note = Text(FROZEN_TOWER_NOTE_TIMM, arch=arch, timm=(timm_params / 1e6, 0), **args)
    return _with_counts(replace(spec, params_tower=counted, tower_kind=" and ".join(towers),
                                notes=(*spec.notes, note), **_tower_shapes(cfg, spec.hidden_size)))


class _Shape(NamedTuple):
    """The fields every decoder config states, checked."""

    h: int
    layers: int
    heads: int
    vocab: int
    kv_heads: int
    head_dim: int


def _family_of(cfg: Mapping[str, Any]) -> tuple[Mapping[str, Any], str, list[Any]]:
    """(the config with its family's defaults filled in, the family, notes): a known model_type (a multimodal
    wrapper's text model type mapped to ours), or an unknown one that passes _check_generic."""
    family = cfg.get("model_type")
    if not isinstance(family, str) or not family:
        raise ValueError(Text(N_("config.json is missing the field '{key}'"), key="model_type"))
    if family in FAMILY_DEFAULTS:  # fields a real config.json leaves to transformers' defaults
        cfg = {**FAMILY_DEFAULTS[family], **{k: v for k, v in cfg.items() if v is not None}}
    notes: list[Any] = []
    family = _families_moe.TEXT_MODEL_TYPES.get(family, _families_gemma.TEXT_MODEL_TYPES.get(family, family))
    if family not in SUPPORTED_FAMILIES and family not in _families_moe.FAMILIES | _families_gemma.FAMILIES:
        notes = _check_generic(cfg, family)
        family = _safe(family)
    return cfg, family, notes


def _dropout_notes(cfg: Mapping[str, Any]) -> list[Any]:
    """A note when the config trains with dropout (its masks are not counted)."""
    dropouts = [k for k in DROPOUT_FIELDS if isinstance(cfg.get(k), (int, float)) and not isinstance(cfg.get(k), bool)
                and cfg[k] > 0]
    if not dropouts:
        return []
    # StarCoder2's and Granite's configs train with dropout 0.1
    return [Text(N_("this config trains with dropout ({fields} > 0): the dropout masks (1 byte per "
                    "element, where a layer keeps one) are not counted; SDPA/flash attention dropout keeps "
                    "only a random seed on the GPU"), fields=", ".join(dropouts[:3]))]


def _shape(cfg: Mapping[str, Any]) -> _Shape:
    """Hidden size, layers, heads, vocabulary, K/V heads and head_dim, each checked."""
    h = _positive_int(cfg, "hidden_size")
    layers = _positive_int(cfg, "num_hidden_layers", limit=MAX_LAYERS)
    heads = _positive_int(cfg, "num_attention_heads", limit=65536)
    vocab = _positive_int(cfg, "vocab_size")
    kv_heads = _positive_int(cfg, "num_key_value_heads", default=heads, limit=65536)
    if heads % kv_heads:
        raise ValueError(Text(N_("num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})"),
                              heads=str(heads), kv_heads=str(kv_heads)))
    head_dim_default = h // heads if h >= heads else 1
    head_dim = _positive_int(cfg, "head_dim", default=head_dim_default, limit=65536)
    return _Shape(h, layers, heads, vocab, kv_heads, head_dim)


def _gemma_family_spec(cfg: Mapping[str, Any], family: str, s: _Shape, notes: list[Any], name: str,
                       source: str) -> ModelSpec:
    """Gemma 4 / Gemma 3n text models (models/gemma.py)."""
    fields = _families_gemma.build(family, cfg, s.h, s.layers, s.heads, s.kv_heads, s.head_dim, s.vocab)
    fields["notes"] = (*notes, *fields["notes"])
    softcap = cfg.get("final_logit_softcapping", None if family == "gemma4_text" else 30.0)
    spec = ModelSpec(
        name=name, family=family, vocab_size=s.vocab, hidden_size=s.h, num_layers=s.layers, num_heads=s.heads,
        num_kv_heads=s.kv_heads, head_dim=s.head_dim, tie_embeddings=_flag(cfg, "tie_word_embeddings", True),
        gated_mlp=True, norm_kind="rms", norms_per_layer=4, qk_norm=False, parallel_block=False,
        lm_head_bias=False, hidden_act=_safe(cfg.get("hidden_activation") or "gelu_pytorch_tanh"),
        final_softcap=softcap is not None, source=source, **fields)
    return _with_counts(spec)


def _moe_family_spec(cfg: Mapping[str, Any], family: str, s: _Shape, inter: int, tie: bool, notes: list[Any],
                     name: str, source: str) -> ModelSpec:
    """The MoE, MLA, hybrid and attention-sink families of models/moe.py."""
    fields = _families_moe.build(family, cfg, s.h, s.layers, s.heads, s.kv_heads, s.head_dim, inter, s.vocab)
    fields["notes"] = (*notes, *fields["notes"])
    spec = ModelSpec(
        name=name, family=family, vocab_size=s.vocab, hidden_size=s.h, num_layers=s.layers, num_heads=s.heads,
        num_kv_heads=s.kv_heads, head_dim=s.head_dim, tie_embeddings=tie, gated_mlp=True, norm_kind="rms",
        norms_per_layer=2, qk_norm=False, parallel_block=False,
        lm_head_bias=family == "ernie4_5_moe" and _flag(cfg, "use_bias", False),
        hidden_act=_safe(cfg.get("hidden_act") or "silu"), source=source, **fields)
    return _with_counts(spec)


def spec_from_config(cfg: Mapping[str, Any], name: str = "custom config", source: str = "config.json") -> ModelSpec:
    """The model a config.json describes (`_spec_from_config`), with an MLX checkpoint's quantisation when the
    config carries one (an mlx-community repo's "quantization": bits, group_size, mode; `mlx_quantization`)."""
    spec = _spec_from_config(cfg, name, source)
    quant, note = mlx_quantization(cfg)
    if not quant:
        return spec
    return replace(spec, quantization=quant, notes=(*spec.notes, note) if note else spec.notes)


def mlx_quantization(cfg: Mapping[str, Any]) -> tuple[tuple[str, int, int] | tuple[()], Any]:
    """(mode, bits, group size) of a checkpoint mlx-lm quantised, from config.json's "quantization" (mlx_lm/utils.py
    load_model:518-519 rebuilds the model with nn.quantize from it; mode defaults to "affine", :512-514), and a note
    when some layers carry their own settings. A mode or bit width MLX does not define is refused with the reason
    instead of guessed."""
    from ..options.quantization import QUANT_MODES, check_quant

    q = cfg.get("quantization") if isinstance(cfg, Mapping) else None
    if q is None:
        return (), None
    if not isinstance(q, Mapping):
        raise ValueError(Text(N_("config.json's 'quantization' is not an object; an MLX checkpoint writes "
                                 '{{"group_size": 64, "bits": 4}}')))
    mode = q.get("mode", "affine")
    bits, group = q.get("bits"), q.get("group_size")
    if not isinstance(mode, str) or mode not in QUANT_MODES or QUANT_MODES[mode].framework != "mlx":
        raise ValueError(Text(N_("config.json's quantization mode {mode} is not one MLX 0.32.4 defines (affine, "
                                 "mxfp4, nvfp4, mxfp8); its memory cannot be priced"), mode=repr(str(mode)[:20])))
    for key, value in (("bits", bits), ("group_size", group)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(Text(N_("config.json's quantization has {key} = {value}, not a whole number; its memory "
                                     "cannot be priced"), key=key, value=repr(str(value)[:20])))
    try:
        check_quant(mode, bits, group)
    except ValueError as exc:
        raise ValueError(Text(N_("config.json's quantization ({mode}, bits {bits}, group {group}) is not one MLX "
                                 "0.32.4 defines: {why}; its memory cannot be priced"), mode=mode, bits=bits,
                              group=group, why=exc)) from None
    per_layer = [k for k, v in q.items() if isinstance(v, Mapping) or (v is False)]
    note = Text(N_("config.json gives some layers their own quantisation ({n} entries); every quantised layer is "
                   "priced at the model's {bits}-bit"), n=len(per_layer), bits=bits) if per_layer else None
    return (mode, bits, group), note


def _spec_from_config(cfg: Mapping[str, Any], name: str = "custom config", source: str = "config.json") -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json dict. Raises ValueError naming the bad field.

    A supported model_type follows its family's module structure. An unknown model_type with the usual decoder
    fields gets a Llama-like estimate and a note saying so; a multimodal wrapper is read from its text_config."""
    if not isinstance(cfg, Mapping):
        raise ValueError(Text(N_("config.json must be a JSON object")))
    if isinstance(cfg.get("text_config"), Mapping):
        return _multimodal_spec(cfg, cfg["text_config"], name, source)
    cfg, family, notes = _family_of(cfg)
    notes += _dropout_notes(cfg)
    s = _shape(cfg)
    if family in _families_gemma.FAMILIES:
        return _gemma_family_spec(cfg, family, s, notes, name, source)
    # GPT-NeoX defaults to a 4h MLP; every other family states intermediate_size.
    inter = _positive_int(cfg, "intermediate_size", default=4 * s.h if family == "gpt_neox" else (
        cfg.get("moe_intermediate_size") if family in _families_moe.FAMILIES else None))
    # Gemma configs tie by default; so do SmolLM3, Cohere2, StarCoder2 and ERNIE 4.5 (tie_word_embeddings: bool =
    # True in their configuration_<type>.py, transformers 5.24.0)
    tie_default = family in ("gemma", "gemma2", "gemma3_text", "smollm3", "cohere2", "starcoder2", "ernie4_5",
                             "ernie4_5_moe")
    tie = _flag(cfg, "tie_word_embeddings", tie_default)
    if family in _families_moe.FAMILIES:
        return _moe_family_spec(cfg, family, s, inter, tie, notes, name, source)
    linears = _dense.dense_linears(family, s.h, s.heads * s.head_dim, s.kv_heads * s.head_dim, inter, cfg)
    moe: dict[str, int] = {}
    if family in ("mixtral", "qwen2_moe", "qwen3_moe"):
        linears, moe = _dense.classic_moe(cfg, family, s.h, s.layers, inter, linears)
        notes.append(N_("MoE: routing buffers are estimated, not traced exactly"))
    return _dense_spec(cfg, family, s, inter, tie, linears, moe, notes, name, source)


def _dense_spec(cfg: Mapping[str, Any], family: str, s: _Shape, inter: int, tie: bool,
                linears: list[LinearModule], moe: dict[str, int], notes: list[Any], name: str,
                source: str) -> ModelSpec:
    """A Llama-like family of SUPPORTED_FAMILIES (or an unknown one estimated as such): norms, residual layout,
    soft-capping and sliding window from the family and its config."""
    layers = s.layers
    # StarCoder2: nn.LayerNorm (weight and bias); Cohere2LayerNorm: weight only, no bias (modeling_cohere2.py).
    norm_kind = {"phi": "layer", "gpt_neox": "layer", "starcoder2": "layer", "cohere2": "layer_nobias"}.get(family, "rms")
    # Cohere2DecoderLayer has only input_layernorm (attention and MLP read it in parallel).
    norms_per_layer = {"gemma2": 4, "gemma3_text": 4, "phi": 1, "cohere2": 1}.get(family, 2)
    qk_norm = family in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2", "olmo3") or (
        family == "phi" and _flag(cfg, "qk_layernorm", False))
    parallel = family in ("phi", "cohere2") or (family == "gpt_neox" and _flag(cfg, "use_parallel_residual", True))
    lm_head_bias = family == "phi"
    olmo = family in ("olmo2", "olmo3")  # Olmo2DecoderLayer: post_attention/post_feedforward norms, full-width qk norm
    window, sliding = _sliding_layers(cfg, family, layers)

    spec = ModelSpec(
        name=name, family=family, vocab_size=s.vocab, hidden_size=s.h, intermediate_size=inter,
        num_layers=layers, num_heads=s.heads, num_kv_heads=s.kv_heads, head_dim=s.head_dim,
        tie_embeddings=tie, gated_mlp=family not in ("phi", "gpt_neox", "starcoder2"), norm_kind=norm_kind,
        norms_per_layer=norms_per_layer, qk_norm=qk_norm, parallel_block=parallel,
        lm_head_bias=lm_head_bias, linears=tuple(linears),
        hidden_act=_safe(cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"),
        attn_softcap=family == "gemma2" and cfg.get("attn_logit_softcapping", 50.0) is not None,
        final_softcap=family == "gemma2" and cfg.get("final_logit_softcapping", 30.0) is not None,
        sliding_window=window, sliding_layers=sliding, source=source,
        notes=tuple(notes), norm_after=olmo, qk_norm_full_width=olmo,
        # Cohere2ForCausalLM multiplies the logits by logit_scale, GraniteForCausalLM divides by logits_scaling.
        logit_scale=family in ("cohere2", "granite"), max_position_embeddings=_context_length(cfg), **moe,
    )
    return _with_counts(spec)


def _context_length(cfg: Mapping[str, Any]) -> int:
    """config max_position_embeddings when it is a plausible positive integer, else 0 (only Unsloth's RoPE cache
    reads it, so a missing or odd value is no reason to refuse the model)."""
    value = cfg.get("max_position_embeddings")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_CONTEXT_FIELD:
        return 0
    return value


MAX_CONTEXT_FIELD = 1 << 24  # 16M positions: beyond any released config


def _sliding_layers(cfg: Mapping[str, Any], family: str, layers: int) -> tuple[int, int]:
    """(window, how many layers use it), as transformers 5.24's configs decide: Qwen configs drop the window
    unless use_sliding_window (configuration_qwen2.py __post_init__); an explicit layer_types list names the
    sliding layers; otherwise Qwen slides from max_window_layers on, Gemma-2 on every other layer, Gemma-3 on five
    of six (sliding_window_pattern), and Mistral/Mixtral/Phi-3 on every layer (modeling_mistral.py)."""
    window = cfg.get("sliding_window")
    if (not isinstance(window, int) or isinstance(window, bool) or window <= 0
            or cfg.get("use_sliding_window", not family.startswith("qwen")) is False):
        return 0, 0
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return window, sum(1 for t in types if t == "sliding_attention")
    if family.startswith("qwen"):
        first = cfg.get("max_window_layers", 28)
        return window, max(0, layers - first) if isinstance(first, int) else 0
    if family == "gemma2":
        return window, (layers + 1) // 2
    if family in ("gemma3_text", "cohere2"):
        # Cohere2Config: three sliding layers, then a full one (sliding_window_pattern 4, configuration_cohere2.py)
        pattern = cfg.get("sliding_window_pattern", 6 if family == "gemma3_text" else 4)
        pattern = pattern if isinstance(pattern, int) and pattern > 0 else 6
        return window, sum(1 for i in range(layers) if (i + 1) % pattern)
    return window, layers


def _with_counts(spec: ModelSpec) -> ModelSpec:
    """Fill the exact parameter counts from the module list (docs/formulas.md §1)."""
    h, layers = spec.hidden_size, spec.num_layers
    norm_params = h * (2 if spec.norm_kind == "layer" else 1)  # LayerNorm has weight and bias (Cohere2's: weight)
    quantizable = 0
    active_linear = 0
    for m in spec.linears:
        n_layers = m.layers or layers
        quantizable += m.params_per_copy * m.count * n_layers
        used = spec.experts_per_token if m.role.startswith("expert") else m.count
        active_linear += m.params_per_copy * used * n_layers
    qk = 2 * spec.head_dim * (2 if spec.norm_kind == "layer" else 1) if spec.qk_norm else 0  # q_norm, k_norm over head_dim
    if spec.qk_norm_full_width:
        qk = spec.q_dim + spec.kv_dim  # OLMo 2: Olmo2RMSNorm(num_heads * head_dim) and (num_kv_heads * head_dim)
    per_layer_norms = spec.norms_per_layer * norm_params + qk
    embed = spec.vocab_size * h + spec.params_extra_embedding  # embed_tokens (+ Gemma 3n/4's per-layer table)
    head = 0 if spec.tie_embeddings else spec.vocab_size * h  # lm_head, absent when tied
    head_bias = spec.vocab_size if spec.lm_head_bias else 0  # Phi-2's lm_head has a bias
    other = layers * per_layer_norms + norm_params + head_bias + spec.extra_layer_params  # norms + final norm
    total = quantizable + embed + head + other + spec.params_tower  # + a multimodal wrapper's towers
    if total > MAX_PARAMS:
        raise ValueError(Text(N_("this config has {total} parameters, beyond any real model (limit {limit})"),
                              total=total, limit=MAX_PARAMS))
    active = active_linear + embed + head + other + spec.params_tower
    return replace(spec, params_total=total, params_embedding=embed + head + head_bias,
                   params_quantizable=quantizable, params_active=active)


def parse_config_text(text: str | bytes, name: str = "uploaded config") -> ModelSpec:
    """Parse an uploaded config.json (text or bytes). Every failure is a ValueError with a clear message."""
    if len(text) > 1_000_000:  # checked before decoding: a 100 MB upload is refused at once
        raise ValueError(Text(N_("the file is larger than 1 MB; a config.json is a few kB")))
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")  # tolerate a byte-order mark (Windows editors add one)
        except UnicodeDecodeError:
            raise ValueError(Text(N_("the file is not UTF-8 text; upload a Hugging Face config.json"))) from None
    text = text.removeprefix("\ufeff")
    try:
        cfg = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(Text(N_("the file is not valid JSON ({error})"), error=_safe(exc, 80))) from None
    except ValueError:  # int() refuses numbers longer than sys.get_int_max_str_digits() (4300 digits)
        raise ValueError(Text(N_("the file has a number with thousands of digits; no real config.json does"))) from None
    return spec_from_config(cfg, name=_safe(name, 60))
