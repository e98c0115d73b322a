"""Which estimate to call: the one place that chooses between the detailed SFT step, a trainer's step and the rule
of thumb."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.trainer import check as check_trainer
from .rule import seed_estimate
from .step import estimate as detailed_estimate
from .trainers import estimate_trainer
from .unsloth_model import needs_capacity

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from .result import Estimate


def estimate(model: ModelSpec, setup: TrainingSetup, rule: str | None = None, trainer: TrainerSetup | None = None,
             device_capacity: float | None = None, strict: bool = True) -> Estimate:
    """The one entry point pages and the CLI call: the detailed estimate, or the seed's rule of thumb
    with rule='seed'. `trainer` prices a preference/RL trainer's step (estimator/memory/trainers.py); vLLM colocate
    mode and Unsloth's own decisions need the device's total memory in `device_capacity`; strict=False skips TRL's batch-shape checks the
    memory does not depend on (the solvers try every batch)."""
    if trainer is not None and trainer.trainer != "sft":
        if rule == "seed":
            raise ValueError(Text(N_("the rule of thumb covers SFT only; drop it to estimate the {trainer} trainer"),
                                  trainer=Text(trainer.option.label)))
        return estimate_trainer(model, setup, trainer, device_capacity, strict)
    if trainer is not None:
        check_trainer(setup, trainer, strict)  # SFT: only the checks (no second estimate)
    if rule is None or rule == "detailed":
        if needs_capacity(model, setup):  # Unsloth decides its embedding offload, double buffering and loss pass
            return detailed_estimate(model, setup, device_capacity)  # by the card's memory
        return detailed_estimate(model, setup)  # the same cache entry as the solvers' estimate(spec, setup)
    if rule == "seed":
        return seed_estimate(model, setup)
    raise ValueError(f"rule must be 'seed' or omitted, got {str(rule)[:20]!r}")
