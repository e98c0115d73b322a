"""Private to the family builders (moe.py, gemma.py): what one builder collects while it walks a modelling file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._fields import _flag, _positive_int
from .spec import LinearModule

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


@dataclass
class Parts:
    """What a builder collects, in the modelling code's order: the linears, the per-layer parameters that are
    neither listed linears nor the standard norms (``extra``), the notes and further ModelSpec fields (``out``)."""

    cfg: Mapping[str, Any]
    linears: list[LinearModule] = field(default_factory=list)
    extra: int = 0
    notes: list[Any] = field(default_factory=list)
    out: dict[str, Any] = field(default_factory=dict)

    def pint(self, key: str, default: Any = None, limit: int = 1 << 20) -> int:
        """The config field as a positive int (one clear error otherwise)."""
        return _positive_int(self.cfg, key, default=default, limit=limit)

    def flag(self, key: str, default: bool) -> bool:
        """The config field as true or false (one clear error otherwise)."""
        return _flag(self.cfg, key, default)

    def add(self, name: str, i: int, o: int, bias: bool, role: str, count: int = 1, n: int = 0,
            kinds: tuple[str, ...] = ()) -> None:
        """One LinearModule: count copies per layer (experts), n = layers carrying it (0: every layer)."""
        self.linears.append(LinearModule(name, i, o, bias, role, count, n, kinds))
