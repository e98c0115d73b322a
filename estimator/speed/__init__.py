"""The time model: FLOPs and bytes of a training step from the architecture, at a device's published throughput
and a stack's fitted efficiency; run time for a dataset, cost at a user's price, remedies as time factors.
Layer: after job/ (imports options, models, job); memory/, advice/ and report/ do not come in here (advice/ and
report/ import it)."""

from .efficiency import CALIBRATION, Calibration
from .factors import time_factor
from .flops import StepFlops, step_flops
from .price import speed_ratio, time_of
from .run import Cost, DatasetSize, RunTime, run_cost, run_time
from .step import CATEGORIES, CATEGORY_LABELS, StepTime, TimeTerm, device_compute, step_time

__all__ = [
    "CALIBRATION", "CATEGORIES", "CATEGORY_LABELS", "Calibration", "Cost", "DatasetSize", "RunTime", "StepFlops",
    "StepTime", "TimeTerm", "device_compute", "run_cost", "run_time", "speed_ratio", "step_flops", "step_time",
    "time_factor", "time_of",
]
