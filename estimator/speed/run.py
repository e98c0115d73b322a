"""A run's time and cost: a dataset size (tokens, or examples of a typical length) × epochs over the step time, and
the GPU-hours × a price per GPU-hour the user gives (no built-in price list)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_, Text, short_number
from ..job.setup import MAX_SEQ_LEN
from .efficiency import CALIBRATION, Calibration
from .step import StepTime, step_time, with_length

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device

MAX_TOKENS = 10**15  # a quadrillion tokens: above any fine-tuning set (pre-training corpora are ~10^13)
MAX_EXAMPLES = 10**12
MAX_EPOCHS = 1000.0
MAX_PRICE = 1_000_000.0  # per GPU-hour, in the user's currency
# A run longer than a year is not a fine-tuning run: the inputs are wrong (a dataset size in the wrong unit, a slow
# device for a huge model). Refused with a message instead of a number nobody can use.
MAX_RUN_SECONDS = 365 * 24 * 3600.0

BAD_NUMBER = N_("{name} must be a number above 0, got {value}")
BAD_WHOLE = N_("{name} must be a whole number above 0, got {value}")
TOO_LARGE = N_("{name} must be at most {limit}, got {value}")
NEED_SIZE = N_("give the dataset size: a number of tokens, or a number of examples")
BOTH_SIZES = N_("give the dataset size as tokens or as examples, not both")
LENGTH_WITHOUT_EXAMPLES = N_("a typical example length needs a number of examples")
TOO_LONG = N_("this run would take {years} years on {gpus} GPU(s): check the dataset size and the device")


def positive_number(name: str, value: object, limit: float, whole: bool = False) -> float:
    """A positive finite number no larger than limit (a whole number where `whole`); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0 or (
            whole and value != int(value)):
        raise ValueError(Text(BAD_WHOLE if whole else BAD_NUMBER, name=name, value=repr(str(value)[:20])))
    if value > limit:
        raise ValueError(Text(TOO_LARGE, name=name, limit=short_number(limit), value=short_number(float(value))))
    return float(value)


@dataclass(frozen=True)
class DatasetSize:
    """What a run trains on: `tokens` (the dataset's tokens, packed into full rows), or `examples` each padded to
    the setup's max length, or `examples` of `typical_len` tokens (each row about that long: dynamic padding or
    packing), times `epochs`. Validated on creation: ValueError with one translatable line."""

    tokens: int | None = None
    examples: int | None = None
    typical_len: int | None = None
    epochs: float = 1.0

    def __post_init__(self) -> None:
        if self.tokens is None and self.examples is None:
            raise ValueError(Text(NEED_SIZE))
        if self.tokens is not None and self.examples is not None:
            raise ValueError(Text(BOTH_SIZES))
        if self.tokens is not None:
            positive_number("tokens", self.tokens, MAX_TOKENS, whole=True)
        if self.examples is not None:
            positive_number("examples", self.examples, MAX_EXAMPLES, whole=True)
        if self.typical_len is not None:
            if self.examples is None:
                raise ValueError(Text(LENGTH_WITHOUT_EXAMPLES))
            positive_number("typical_len", self.typical_len, MAX_SEQ_LEN, whole=True)
        positive_number("epochs", self.epochs, MAX_EPOCHS)


@dataclass(frozen=True)
class RunTime:
    """A run: its seconds, optimizer steps, the tokens it processes (padding included), the GPUs, and the step it
    was priced with."""

    seconds: float
    steps: int
    tokens: float
    gpus: int
    step: StepTime

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.gpus


@dataclass(frozen=True)
class Cost:
    """What a run costs at a price per GPU-hour: total = run hours × GPUs × price (in the price's currency)."""

    total: float
    gpu_hours: float
    price_per_gpu_hour: float


def run_time(spec: ModelSpec, setup: TrainingSetup, device: Device, dataset: DatasetSize,
             trainer: TrainerSetup | None = None, compute: Compute | None = None,
             calibration: Calibration = CALIBRATION) -> RunTime:
    """The time to train on `dataset`: tokens → tokens / tokens per second (rows full of real tokens); examples →
    ceil(examples / examples per step) optimizer steps per epoch, each example a row of the max length or of
    `typical_len`. ValueError for a run longer than a year (the inputs are wrong) or a device without figures."""
    if dataset.typical_len is not None:
        setup = with_length(setup, dataset.typical_len)
    step = step_time(spec, setup, device, trainer, compute, calibration)
    if dataset.tokens is not None:
        tokens = dataset.tokens * dataset.epochs
        steps = math.ceil(tokens / (step.tokens_per_step * step.gpus))
        seconds = tokens / step.tokens_per_second
    else:
        per_step = step.examples_per_step * step.gpus
        steps = math.ceil(dataset.examples / per_step * dataset.epochs)
        seconds = steps * step.step_seconds
        tokens = steps * step.tokens_per_step * step.gpus
    if seconds > MAX_RUN_SECONDS:
        raise ValueError(Text(TOO_LONG, years=(seconds / MAX_RUN_SECONDS, 1), gpus=step.gpus))
    return RunTime(seconds, steps, tokens, step.gpus, step)


def run_cost(run: RunTime, price_per_gpu_hour: float) -> Cost:
    """Cost = run hours × GPUs × the price per GPU-hour the user gives. ValueError for a zero, negative or absurd
    price."""
    price = positive_number("price per GPU-hour", price_per_gpu_hour, MAX_PRICE)
    return Cost(run.gpu_hours * price, run.gpu_hours, price)
