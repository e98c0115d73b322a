"""The time of a priced setup: the one call the CLI, the advice (remedies, the fastest fit) and the pages make for the
seconds of a setup on a device, beside memory.price.estimate for its bytes. Pure functions of frozen dataclasses,
kept like the estimates (one calculator rerun times the same setups again: its own, the remedies', the solver's)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .step import step_time

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device
    from .step import StepTime

TIME_CACHE_SIZE = 4096  # as memory/price.py ESTIMATE_CACHE_SIZE: a StepTime is a few hundred bytes


@lru_cache(maxsize=TIME_CACHE_SIZE)
def _cached(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None,
            compute: Compute | None) -> StepTime:
    return step_time(spec, setup, device, trainer, compute)


def time_of(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
            compute: Compute | None = None) -> StepTime:
    """The step time of the setup the estimate prices (the same spec, setup and trainer) on `device`, with the
    user's figures `compute` for a device without any. SFT is priced without a trainer (the same step). ValueError
    with one translatable line when there are no figures or none for the setup's precision (nothing is cached)."""
    if trainer is not None and trainer.trainer == "sft":
        trainer = None
    return _cached(spec, setup, device, trainer, compute)


def speed_ratio(base: StepTime, changed: StepTime) -> float:
    """How much longer the same tokens take under `changed` than under `base` (> 1: slower): tokens per second of
    the base over the changed step's, all GPUs counted (speed.factors.time_factor on two priced steps)."""
    return base.tokens_per_second / changed.tokens_per_second
