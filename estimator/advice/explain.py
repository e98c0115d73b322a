"""Why this number, in one call (issue 29 items 1–4): the rule of thumb reconciled with the estimate, the assumptions
that move it most, the measured runs closest to it and, on a device, the verdict's condition and the longest length
per example that fits. The CLI prints it (report/text.py) and writes it into the JSON document (report/document.py);
the calculator page draws the same object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import Text
from ..memory.why import Why, why_not_rule
from .assumptions import DEFAULT_COUNT, Assumption, assumptions
from .condition import LongestLength, condition_sentence, longest_length
from .measured import Comparison, closest_measured

if TYPE_CHECKING:
    from ..memory.result import Estimate
    from ..models.spec import ModelSpec
    from ..options.devices import Device


@dataclass(frozen=True)
class Explanation:
    """Why the estimate says what it says, for one model, setup and device."""

    why: Why  # the rule of thumb → the estimate, in named steps that add up exactly
    assumptions: tuple[Assumption, ...]  # the settings whose alternative moves the total most, largest first
    measured: tuple[Comparison, ...]  # the closest measured runs, most similar first
    condition: Text  # what the verdict holds at: "batch 4 × 2,048 tokens per example, every example padded …"
    longest: LongestLength | None  # the longest length per example that fits (None without a device)


def explain(spec: ModelSpec, est: Estimate, device: Device | None = None, count: int = DEFAULT_COUNT,
            measured: int = 3) -> Explanation:
    """Everything the verdict's "why" shows, for the estimate `est` of the model as given (`spec`: the estimate's own
    may be the stack's build of it), priced like the verdict (the rule of thumb's own numbers when est is the rule's;
    a trainer's step; on the device's capacity where the runtime reads it)."""
    capacity = device.runtime_total_bytes if device is not None else None
    rule = "seed" if est.mode == "seed" else None
    return Explanation(
        why=why_not_rule(spec, est, capacity),
        assumptions=assumptions(spec, est.setup, est.trainer, rule, capacity, count),
        measured=closest_measured(spec, est.setup, est.trainer, measured) if measured > 0 else (),  # 0: not asked
        condition=condition_sentence(est.setup, est.trainer),
        longest=longest_length(spec, est.setup, device, est.trainer, rule) if device is not None else None,
    )
