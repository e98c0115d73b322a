"""What a page's answer hands the rest of its page (ui.inputs.live_page: answer(inputs) → rest(inputs, answer)):
plain data, no Streamlit. Defined here, not in the page scripts: a page script runs again on every rerun, and
creating a dataclass costs 1–2 ms each time (dataclasses builds its methods with exec)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    from estimator import Estimate, TrainingSetup
    from estimator.job.trainer import TrainerSetup
    from estimator.memory.host import HostVerdict


@dataclass(frozen=True)
class CalculatorAnswer:
    """What the verdict was computed from, for the rest of the page: the setup and trainer as priced, the rule
    (None unless the rule of thumb prices this trainer), the estimate shown and the detailed one."""

    setup: TrainingSetup
    trainer: TrainerSetup
    rule: str | None
    est: Estimate
    detailed: Estimate
    length: str  # the batch's length as the verdict's line names it ("2,048 tokens", "(512 + 512) tokens")
    host: HostVerdict | None  # the host RAM's verdict (the detailed estimate's host side under the rule)
    # what the answer leaves for the end of the run, drawn into the place it kept for it (the calculator's chips: a
    # slider's rerun sends the verdict and the chart before them)
    late: Any = None


@dataclass(frozen=True)
class CompareAnswer:
    """The bars the chart drew (label, estimate), and what they were priced for: the rest of the page's table
    and exact trace use the same."""

    rows: list
    setups: list  # compare_setups' (label, setup) pairs
    trainer: object  # estimator.job.trainer.TrainerSetup
    trainer_in: object = None  # ui.trainer_inputs.TrainerInputs: the sidebar's setup as priced (the pinned setups')


@dataclass(frozen=True)
class ScaleLayouts:
    """What the Scale out page prices: the setup (the Trainer box's), the search's options, and how each GPU count
    is estimated."""

    spec: Any
    setup: Any
    device: Any
    trainer: Any
    offload: bool
    max_gpus: int
    per_node: int
    estimate_fn: Any
