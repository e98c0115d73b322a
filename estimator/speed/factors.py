"""Remedies priced in time: how much longer (or shorter) the same training job takes under another setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .efficiency import CALIBRATION, Calibration
from .step import step_time

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device


def time_factor(spec: ModelSpec, setup_a: TrainingSetup, setup_b: TrainingSetup, device: Device,
                trainer: TrainerSetup | None = None, compute: Compute | None = None,
                calibration: Calibration = CALIBRATION) -> float:
    """Time of setup B over the time of setup A for the same tokens (> 1: B is slower): tokens per second of A over
    tokens per second of B, all GPUs counted. When both process the same tokens per optimizer step (a remedy that
    keeps batch × accumulation × length), it is the ratio of their step times; halving the batch and doubling the
    accumulation, checkpointing, QLoRA, an 8-bit optimizer, offload or sharding over more GPUs each price this way."""
    a = step_time(spec, setup_a, device, trainer, compute, calibration)
    b = step_time(spec, setup_b, device, trainer, compute, calibration)
    return a.tokens_per_second / b.tokens_per_second
