"""The CLI's time and cost flags (issue 30): one argument group and one reader. With a device the report always has
the step time (estimator.speed, the same spec, setup and trainer as the estimate); these flags add a run's time
(--tokens, or --examples with --typical-len, × --epochs), its cost (--price-per-gpu-hour), a custom device's
figures (--device-tflops, --device-bandwidth) and what the fastest fit (--advice) may change.

Bad input is one line and exit 2 (cli.py prints every ValueError raised here): a zero, negative, non-finite or absurd
number, a flag without what it needs (a dataset size without a device, a price without a dataset size, a custom
device's figures on a catalog device, the fastest fit's limits without --advice), a run time asked for on a device
whose time is unknown, a run of years. A device without figures and no run asked for is a note: the memory answer
stands."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..advice.fastest import Constraints
from ..job.setup import MAX_GPUS, MAX_SEQ_LEN
from ..options.compute import CUSTOM_MAX_GBPS, CUSTOM_MAX_TFLOPS, custom_compute
from ..speed.price import time_of
from ..speed.run import (
    MAX_EPOCHS,
    MAX_EXAMPLES,
    MAX_PRICE,
    MAX_TOKENS,
    DatasetSize,
    positive_number,
    run_cost,
    run_time,
)

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device
    from ..speed.run import Cost, RunTime
    from ..speed.step import StepTime

CUSTOM_HINT = "give --device-tflops and --device-bandwidth"


def add_flags(p: argparse.ArgumentParser) -> None:
    """The time and cost flags, one group."""
    g = p.add_argument_group("time and cost (with --device: tokens per second and the step time; docs/speed.md)")
    g.add_argument("--tokens", type=float, metavar="N",
                   help="the dataset's tokens (packed into full rows): adds the run's time (× --epochs)")
    g.add_argument("--examples", type=float, metavar="N",
                   help="the dataset's examples, each a row of --seq-len tokens (or --typical-len): adds the run's "
                        "time (× --epochs)")
    g.add_argument("--typical-len", type=float, metavar="L",
                   help="tokens in a typical example, with --examples (dynamic padding or packing); default: each "
                        "example padded to --seq-len")
    g.add_argument("--epochs", type=float, metavar="E", help="passes over the dataset (default: 1)")
    g.add_argument("--price-per-gpu-hour", type=float, metavar="P",
                   help="what one GPU-hour costs you, in any currency: adds the run's cost = run hours × GPUs × P "
                        "(needs --tokens or --examples; no price list is built in)")
    g.add_argument("--device-tflops", type=float, metavar="X",
                   help="a custom device's dense 16-bit tensor TFLOPS (with --device custom and --device-bandwidth); "
                        "without them its time is unknown")
    g.add_argument("--device-bandwidth", type=float, metavar="GBPS", help="a custom device's memory bandwidth in GB/s")
    g.add_argument("--allow-method-change", action="store_true",
                   help="with --advice: the fastest fit may change the method (full, LoRA, QLoRA)")
    g.add_argument("--allow-more-gpus", type=int, metavar="N",
                   help="with --advice: the fastest fit may shard (ZeRO/FSDP, optimizer offload) and use up to N GPUs "
                        "of this kind, more than --gpus only when --gpus fits nothing")


@dataclass(frozen=True)
class TimeRequest:
    """What the time flags ask for: the dataset (None: no run time), the price (None: no cost), a custom device's
    figures (None: the catalog's) and the fastest fit's constraints."""

    dataset: DatasetSize | None
    price: float | None
    compute: Compute | None
    constraints: Constraints

    @property
    def wants_run(self) -> bool:
        return self.dataset is not None


def _as_typed(value: float) -> float | int:
    """A flag's number as the user wrote it, for the message: 0 rather than 0.0 (argparse reads every number as a
    float); nan and inf stay floats."""
    return int(value) if value == value and abs(value) < 1e18 and value.is_integer() else value


def _number(flag: str, value: float | None, limit: float) -> float | None:
    return None if value is None else positive_number(flag, _as_typed(value), limit)


def _whole(flag: str, value: float | None, limit: float) -> int | None:
    return None if value is None else int(positive_number(flag, _as_typed(value), limit, whole=True))


def read_time_request(args: argparse.Namespace, device: Device | None) -> TimeRequest:
    """The time flags read and checked against each other and the device. ValueError with one line."""
    tokens = _whole("--tokens", args.tokens, MAX_TOKENS)
    examples = _whole("--examples", args.examples, MAX_EXAMPLES)
    typical = _whole("--typical-len", args.typical_len, MAX_SEQ_LEN)
    epochs = _number("--epochs", args.epochs, MAX_EPOCHS)
    price = _number("--price-per-gpu-hour", args.price_per_gpu_hour, MAX_PRICE)
    if tokens is not None and examples is not None:
        raise ValueError("give the dataset size as --tokens or as --examples, not both")
    if typical is not None and examples is None:
        raise ValueError("--typical-len is the length of a typical example: it needs --examples")
    dataset = None
    if tokens is not None or examples is not None:
        if device is None:
            raise ValueError("--tokens and --examples need --device: the run time is priced on a device's compute "
                             "figures (see --list-devices)")
        dataset = DatasetSize(tokens=tokens, examples=examples, typical_len=typical, epochs=epochs or 1.0)
    elif epochs is not None:
        raise ValueError("--epochs needs a dataset size: --tokens or --examples")
    if price is not None and dataset is None:
        raise ValueError("--price-per-gpu-hour needs a dataset size (--tokens or --examples): the cost is the run's "
                         "GPU-hours × the price")
    compute = _custom_figures(args, device)
    if (args.allow_method_change or args.allow_more_gpus is not None) and not args.advice:
        raise ValueError("--allow-method-change and --allow-more-gpus set what the fastest fit may change: add "
                         "--advice")
    if args.allow_more_gpus is not None and not 1 <= args.allow_more_gpus <= MAX_GPUS:
        raise ValueError(f"--allow-more-gpus must be between 1 and {MAX_GPUS:,}, got {args.allow_more_gpus}")
    return TimeRequest(dataset, price, compute,
                       Constraints(change_method=args.allow_method_change, max_gpus=args.allow_more_gpus))


def _custom_figures(args: argparse.Namespace, device: Device | None) -> Compute | None:
    """--device-tflops and --device-bandwidth: a custom device's figures, both or neither."""
    tflops, gbps = args.device_tflops, args.device_bandwidth
    if tflops is None and gbps is None:
        return None
    if tflops is None or gbps is None:
        raise ValueError("--device-tflops and --device-bandwidth go together: a custom device's dense 16-bit TFLOPS "
                         "and its memory bandwidth in GB/s")
    if device is None or device.compute is not None:
        where = f"{device.id} has its own figures" if device is not None else "there is no --device"
        raise ValueError(f"--device-tflops and --device-bandwidth describe a custom device; {where} (use them with "
                         "--device custom --capacity GB)")
    _number("--device-tflops", tflops, CUSTOM_MAX_TFLOPS)
    _number("--device-bandwidth", gbps, CUSTOM_MAX_GBPS)
    return custom_compute(tflops, gbps)


@dataclass(frozen=True)
class TimeAnswer:
    """The time of the priced setup on the device: its step (None when unknown, with `unknown` saying why), the run
    and its cost when asked for."""

    step: StepTime | None
    unknown: str = ""
    run: RunTime | None = None
    cost: Cost | None = None
    figures: str = "catalog"  # "catalog" (the device's published figures) or "given" (--device-tflops/-bandwidth)
    dataset: DatasetSize | None = None  # what the run was priced for


def price_time(request: TimeRequest, spec: ModelSpec, setup: TrainingSetup, device: Device | None,
               trainer: TrainerSetup) -> TimeAnswer | None:
    """The step time of the estimate's own setup on the device (None without a device), and the run's time and cost
    when the flags ask. ValueError (exit 2) only where a run was asked for and cannot be priced."""
    if device is None:
        return None
    figures = "given" if request.compute is not None else "catalog"
    try:
        step = time_of(spec, setup, device, trainer, request.compute)
    except ValueError as exc:
        hint = f" ({CUSTOM_HINT})" if device.compute is None else ""
        if request.wants_run:
            flag = "--tokens" if request.dataset.tokens is not None else "--examples"
            raise ValueError(f"{flag} asks for the run time, which is unknown here: {exc}{hint}") from None
        return TimeAnswer(None, f"{exc}{hint}", figures=figures)
    if request.dataset is None:
        return TimeAnswer(step, figures=figures)
    run = run_time(spec, setup, device, request.dataset, trainer if trainer.trainer != "sft" else None,
                   request.compute)
    cost = run_cost(run, request.price) if request.price is not None else None
    return TimeAnswer(step, run=run, cost=cost, figures=figures, dataset=request.dataset)
