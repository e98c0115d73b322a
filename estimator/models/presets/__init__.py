"""Presets: the real config.json files in this folder (index.json lists them) and a generic decoder of any size."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from ...i18n import N_, Text, short_number
from ..config import spec_from_config

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..spec import ModelSpec


# --------------------------------------------------------------------------------------------
# Presets (real config.json files shipped in estimator/models/presets/)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Preset:
    id: str
    name: str
    family: str
    hf_repo: str


@lru_cache(maxsize=1)
def _preset_index() -> tuple[Preset, ...]:
    text = resources.files(__name__).joinpath("index.json").read_text(encoding="utf-8")
    return tuple(Preset(id=row["id"], name=row["name"], family=row["family"], hf_repo=row.get("hf_repo", ""))
                 for row in json.loads(text))


def list_presets() -> tuple[Preset, ...]:
    """Every shipped preset, in display order."""
    return _preset_index()


def preset_ids() -> tuple[str, ...]:
    return tuple(p.id for p in _preset_index())


@lru_cache(maxsize=64)
def load_preset(preset_id: str) -> ModelSpec:
    """The ModelSpec of a shipped preset. Unknown ids raise ValueError listing the choices."""
    by_id = {p.id: p for p in _preset_index()}
    if preset_id not in by_id:
        raise ValueError(Text(N_("unknown model preset '{preset}'; choose one of: {choices}"),
                              preset=str(preset_id)[:60], choices=", ".join(by_id)))
    text = resources.files(__name__).joinpath(f"{preset_id}.json").read_text(encoding="utf-8")
    return spec_from_config(json.loads(text), name=by_id[preset_id].name, source=preset_id)


# --------------------------------------------------------------------------------------------
# Generic decoder by size
# --------------------------------------------------------------------------------------------

MIN_SIZE_B = 0.1
MAX_SIZE_B = 1000.0  # up to dense-equivalent trillion-parameter models (Llama-3.1-405B fits inside)
GENERIC_VOCAB = 128256  # Llama-3's vocabulary: a typical modern tokenizer


def generic_spec(size_b: float) -> ModelSpec:
    """A Llama-style decoder with `size_b` billion parameters.

    Shapes follow the presets' scaling (h ≈ 4096·(P/7e9)^0.4, L ≈ 32·(P/7e9)^0.2, fitted through
    Qwen2.5/Llama-3 0.5B…405B), GQA with 4 query heads per KV head; both hidden size and layer count are
    non-decreasing in the size; the parameter count is exactly size_b × 1e9.
    """
    if not isinstance(size_b, (int, float)) or isinstance(size_b, bool) or not math.isfinite(size_b):
        raise ValueError(Text(N_("model size must be a number of billions, got {value}"), value=repr(size_b)))
    if not MIN_SIZE_B <= size_b <= MAX_SIZE_B:
        raise ValueError(Text(N_("model size must be between {low} and {high} billion, got {value}"),
                              low=short_number(MIN_SIZE_B), high=short_number(MAX_SIZE_B), value=short_number(size_b)))
    total = int(round(size_b * 1e9))
    ratio = total / 7e9
    h = max(512, 512 * round(4096 * ratio**0.4 / 512))  # multiple of 512: 4k heads of 128, k KV heads
    layers = max(4, round(32 * ratio**0.2))  # depth grows slowly with size, as in the presets
    heads = h // 128
    kv_heads = max(1, heads // 4)  # GQA 4:1 as in Llama-3-8B (32 q heads, 8 kv heads)
    inter = 256 * round(3.5 * h / 256)  # SwiGLU width ≈ 3.5 h (Llama-3: 14336 / 4096)
    tie = total < 4e9  # small Llama-3.2 models tie embeddings, large ones do not
    shaped = _generic_shape(h, layers, heads, kv_heads, inter, tie)
    # Keep the exact requested size: embeddings as shaped (capped at half the model), the rest in
    # decoder linears, so weights grow monotonically with the size slider.
    embedding = min(shaped.params_embedding, total // 2)
    norms = shaped.params_total - shaped.params_embedding - shaped.params_quantizable
    quantizable = max(0, total - embedding - norms)
    return replace(shaped, name=f"{size_b:g}B (generic decoder)", params_total=total, params_embedding=embedding,
                   params_quantizable=quantizable, params_active=total,
                   notes=(N_("generic decoder: shapes follow the presets' scaling; use a preset or "
                             "config.json for an exact architecture"),))


@lru_cache(maxsize=256)
def _generic_shape(h: int, layers: int, heads: int, kv_heads: int, inter: int, tie: bool) -> ModelSpec:
    """The generic decoder's architecture for one set of shapes, parsed once: the shapes take few distinct values
    (multiples of 512 and 256, whole layers), while a solver probes many sizes (What fits' largest-size search: ~50
    sizes a rerun). generic_spec names it and sets its exact parameter counts."""
    cfg = {
        "model_type": "llama", "hidden_size": h, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 128,
        "intermediate_size": inter, "vocab_size": GENERIC_VOCAB, "tie_word_embeddings": tie,
    }
    return spec_from_config(cfg, name="generic decoder", source="generic")


def resolve_model(*, preset: str | None = None, size_b: float | None = None,
                  config: Mapping[str, Any] | None = None) -> ModelSpec:
    """One entry point: exactly one of preset, size_b or config."""
    given = [x is not None for x in (preset, size_b, config)]
    if sum(given) != 1:
        raise ValueError("give exactly one of a preset, a size in billions, or a config")
    if preset is not None:
        return load_preset(preset)
    if size_b is not None:
        return generic_spec(size_b)
    assert config is not None
    return spec_from_config(config)
