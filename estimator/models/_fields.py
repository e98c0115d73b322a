"""Private helpers the config readers share: read a field safely, as a positive int or a flag, with one clear error."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from .spec import MAX_DIM

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


# --------------------------------------------------------------------------------------------
# Config parsing
# --------------------------------------------------------------------------------------------

def _safe(text: object, limit: int = 40) -> str:
    """User text fit to quote: truncated, lone surrogates (valid in JSON, not in UTF-8) replaced."""
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in str(text)[:limit])


def _field(cfg: Mapping[str, Any], key: str, *, default: Any = None, required: bool = True) -> Any:
    value = cfg.get(key, default)
    if value is None and required:
        raise ValueError(Text(N_("config.json is missing the field '{key}'"), key=key))
    return value


def _positive_int(cfg: Mapping[str, Any], key: str, *, default: Any = None, limit: int = MAX_DIM) -> int:
    value = _field(cfg, key, default=default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(Text(N_("config.json field '{key}' must be a positive integer, got {value}"), key=key,
                              value=_safe(repr(value))))
    if value != int(value) or value < 1:
        raise ValueError(Text(N_("config.json field '{key}' must be a positive integer, got {value}"), key=key,
                              value=_safe(repr(value))))
    if value > limit:
        raise ValueError(Text(N_("config.json field '{key}' = {value} is beyond any real model (limit {limit})"), key=key,
                              value=_safe(value), limit=limit))
    return int(value)


def _flag(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(Text(N_("config.json field '{key}' must be true or false, got {value}"), key=key,
                              value=_safe(repr(value))))
    return value
