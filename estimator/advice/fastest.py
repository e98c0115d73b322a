"""The fastest setup that fits: within the user's constraints, the micro-batch and accumulation (the effective batch
kept), checkpointing, the optimizer (its 8-bit sibling), and where allowed the method (full, LoRA, QLoRA) and the
sharding over this device's GPUs (more of them only when the GPUs the user has cannot fit any setup), searched for
the highest tokens per second whose estimate fits the device's usable memory.

How it stays fast (the calculator reruns it): a setup's time never falls as its micro-batch grows at a fixed
effective batch (every micro-step pays the same launches and weight reads: speed/step.py), so each combination of
the other settings is timed first at its largest micro-batch, an upper bound of its speed; the combinations are
tried fastest bound first, and one whose bound cannot come within TIE of the best fit found is never priced in
memory. The one that is priced takes its largest fitting micro-batch from one bisect_last over the divisors of the
effective batch (memory grows with the micro-batch), through the estimate cache: the page's own estimate and the
remedies' are hints, already computed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.setup import MAX_BATCH, MAX_GPUS, MAX_GRAD_ACCUM
from ..job.stack import check_stack_setup, with_method
from ..job.trainer import TrainerSetup
from ..job.trainer import check as check_trainer
from ..options.methods import METHODS
from ..options.stacks import get_stack
from ..speed.price import time_of
from .remedies import EIGHT_BIT, without_stack_choice
from .search import bisect_last, solver_estimate_fn
from .solvers import fewest_gpus

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..memory.result import Estimate
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device
    from ..speed.step import StepTime
    from .search import EstimateFn

# Two setups whose speeds differ by less than this share are not told apart: the time model's held-out median error
# is 5.6 % (docs/speed.md §7), and its known bias prices bitsandbytes' 8-bit AdamW a few per cent faster than fused
# AdamW where torchtune measured it 4.7 % slower. Among the fitting setups within TIE of the fastest, the one with the
# fewest changes from the user's wins (then the faster), so the answer never switches a setting for noise.
TIE = 0.05
MAX_GPUS_DEFAULT = 64  # the Scale out page's and the shard remedy's limit

# The settings the solver changes, in the order its answer lists them (stable ids: FastestFit.changes keys).
CHANGE_KEYS = ("gpus", "sharding", "offload_optimizer", "method", "optimizer", "grad_ckpt", "batch",
               "effective_batch")



@dataclass(frozen=True)
class Constraints:
    """What the fastest-fit search may change beyond the batch, accumulation, checkpointing and optimizer: the
    method (full, LoRA, QLoRA) with change_method, and with max_gpus the sharding (ZeRO/FSDP, optimizer offload)
    and up to max_gpus GPUs of this kind (more than the user's only when the user's count fits nothing)."""

    change_method: bool = False
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        if self.max_gpus is not None and (isinstance(self.max_gpus, bool) or not isinstance(self.max_gpus, int)
                                          or not 1 <= self.max_gpus <= MAX_GPUS):
            raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value}"), name="max_gpus", low=1,
                                  high=MAX_GPUS, value=repr(str(self.max_gpus)[:20])))


@dataclass(frozen=True)
class Change:
    """One setting the fastest fit changes: a CHANGE_KEYS id, the user's value and the new one ("batch": the
    micro-batch × accumulation as a (batch, grad_accum) pair; "effective_batch": examples per optimizer step over
    all GPUs, which only moves when more GPUs cannot divide it)."""

    key: str
    before: object
    after: object


@dataclass(frozen=True)
class FastestFit:
    """The fastest setup that fits: the setup, its estimate, its step time, what changed from the user's setup, and
    the user's own step time (priced whether or not it fits)."""

    setup: TrainingSetup
    estimate: Estimate
    step: StepTime
    changes: tuple[Change, ...]
    base_step: StepTime
    constraints: Constraints

    @property
    def tokens_per_second(self) -> float:
        return self.step.tokens_per_second

    @property
    def speedup(self) -> float:
        """Tokens per second over the user's setup's (> 1: faster)."""
        return self.step.tokens_per_second / self.base_step.tokens_per_second


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _valid(setup: TrainingSetup, tr: TrainerSetup) -> bool:
    """Would the stack and TRL run this setup (its batch shape included)?"""
    try:
        check_stack_setup(setup)
        check_trainer(setup, tr, strict=True)
    except ValueError:
        return False
    return True


def _changes(user: TrainingSetup, s: TrainingSetup) -> tuple[Change, ...]:
    out = []
    for key in CHANGE_KEYS:
        if key == "batch":
            a, b = (user.batch, user.grad_accum), (s.batch, s.grad_accum)
        elif key == "effective_batch":
            a, b = user.batch * user.grad_accum * user.gpus, s.batch * s.grad_accum * s.gpus
        else:
            a, b = getattr(user, key), getattr(s, key)
        if a != b:
            out.append(Change(key, a, b))
    return tuple(out)


def _layouts(setup: TrainingSetup, device: Device, scale: bool, gpus: int) -> list[tuple[str, bool]]:
    """(sharding, optimizer offload) pairs to try: the user's, or with scale every ZeRO/FSDP stage with and without
    optimizer offload (over one GPU sharding changes nothing: plain, with or without ZeRO-Offload)."""
    stack = get_stack(setup.stack) if setup.stack else None
    if not scale or device.kind != "discrete" or (stack is not None and not stack.multi_gpu):
        return [(setup.sharding, setup.offload_optimizer)]
    if gpus == 1:
        return [(setup.sharding if setup.gpus == 1 else "none", False), (setup.sharding if setup.gpus == 1
                                                                        else "none", True)]
    return [(s, off) for s in ("none", "zero1", "zero2", "zero3") for off in (False, True) if not (off and s == "none")]


def _configs(spec: ModelSpec, setup: TrainingSetup, device: Device, tr: TrainerSetup, constraints: Constraints,
             gpus: int, scale: bool) -> list[TrainingSetup]:
    """Every combination of method, optimizer, checkpointing and layout the constraints allow on `gpus` GPUs, at
    the user's batch shape (the batch is searched per combination). Combinations a stack refuses are left out."""
    methods = [setup.method] + ([m for m in METHODS if m != setup.method] if constraints.change_method else [])
    out: list[TrainingSetup] = []
    mlx = bool(setup.stack) and get_stack(setup.stack).framework == "mlx"
    for method in methods:
        try:
            base = setup if method == setup.method else with_method(setup, method)
        except ValueError:
            continue
        optimizers = [base.optimizer] + ([EIGHT_BIT[base.optimizer]] if base.optimizer in EIGHT_BIT and not mlx
                                         else [])
        for ckpt in (False, True):
            for optimizer in optimizers:
                for sharding, offload in _layouts(setup, device, scale, gpus):
                    wanted = {"grad_ckpt": ckpt, "offload_activations": base.offload_activations and ckpt,
                              "optimizer": optimizer, "sharding": sharding, "offload_optimizer": offload,
                              "offload_params": base.offload_params and sharding == "zero3", "gpus": gpus}
                    changed = {k: v for k, v in wanted.items() if getattr(base, k) != v}
                    try:
                        s = without_stack_choice(base, **changed) if changed else base
                        check_stack_setup(s)
                        check_trainer(s, tr, strict=False)
                    except ValueError:
                        continue
                    out.append(s)
    return out


class _Search:
    """The fastest-fit search for one job on one device: its estimate function, the effective batch and the fits
    found so far."""

    def __init__(self, spec: ModelSpec, setup: TrainingSetup, device: Device, tr: TrainerSetup,
                 fn: EstimateFn, compute: Compute | None) -> None:
        self.spec, self.setup, self.device, self.tr, self.fn, self.compute = spec, setup, device, tr, fn, compute
        self.usable = device.usable_bytes
        self.global_batch = setup.batch * setup.grad_accum * setup.gpus
        self.max_micro = MAX_BATCH // tr.option.sequences

    def per_gpu(self, gpus: int) -> int:
        """Examples per optimizer step on each GPU: the effective batch divided over the GPUs (rounded up when they
        do not divide it: each GPU takes at least one example)."""
        return -(-self.global_batch // gpus)

    def shapes(self, s: TrainingSetup) -> list[TrainingSetup]:
        """The setup at every (micro-batch, accumulation) that keeps its GPUs' effective batch, smallest batch
        first, the ones the stack and TRL run."""
        e = self.per_gpu(s.gpus)
        out = []
        for d in divisors(e):
            if d <= self.max_micro and e // d <= MAX_GRAD_ACCUM:
                shaped = s if (s.batch, s.grad_accum) == (d, e // d) else without_stack_choice(
                    s, batch=d, grad_accum=e // d)
                if _valid(shaped, self.tr):
                    out.append(shaped)
        return out

    def time(self, s: TrainingSetup) -> StepTime:
        return time_of(self.spec, s, self.device, self.tr, self.compute)

    def largest_fitting(self, shapes: list[TrainingSetup]) -> TrainingSetup | None:
        """The fitting shape with the largest micro-batch. Without accumulation the gradients are not kept between
        micro-steps, so that shape is tried on its own; with it, memory grows with the micro-batch: one bisect_last
        over the rest, the user's own batch and its half first (estimates the page and the remedies made)."""
        fn, spec = self.fn, self.spec
        rest = shapes
        if shapes and shapes[-1].grad_accum == 1:
            if fn(spec, shapes[-1]).total_bytes <= self.usable:
                return shapes[-1]
            rest = shapes[:-1]
        if not rest:
            return None
        batches = [s.batch for s in rest]
        hints = [i for i, b in enumerate(batches) if b in (self.setup.batch, max(1, self.setup.batch // 2))]
        i = bisect_last(0, len(rest) - 1, lambda k: fn(spec, rest[k]).total_bytes, self.usable, hints=hints)
        return None if i is None else rest[i]

    def best_at(self, configs: list[TrainingSetup]) -> list[tuple[float, TrainingSetup]]:
        """(tokens per second per GPU, setup) of every combination's fastest fitting shape that can come within TIE
        of the fastest: combinations tried by their speed bound, fastest first. Per GPU: on the user's GPU count the
        same order as the total; where the counts differ (more GPUs allowed), the most tokens per GPU-hour."""
        bounded = []
        for s in configs:
            shapes = self.shapes(s)
            if not shapes:
                continue
            try:
                bound = self.time(shapes[-1]).tokens_per_second_per_gpu
            except ValueError:  # no figure for this precision: not timed, not offered
                continue
            bounded.append((bound, shapes))
        bounded.sort(key=lambda t: -t[0])
        found: list[tuple[float, TrainingSetup]] = []
        best = 0.0
        for bound, shapes in bounded:
            if bound < best * (1 - TIE):
                break  # neither this combination nor a slower one can come within TIE of the fastest fit
            fit = self.largest_fitting(shapes)
            if fit is None:
                continue
            speed = self.time(fit).tokens_per_second_per_gpu
            found.append((speed, fit))
            best = max(best, speed)
            # the user's own batch shape on this combination, one change fewer when it is within TIE: it fits when
            # a larger micro-batch with accumulation does (memory grows with the micro-batch), so no estimate
            own = next((x for x in shapes if (x.batch, x.grad_accum) == (self.setup.batch, self.setup.grad_accum)),
                       None)
            if own is not None and own is not fit and fit.grad_accum > 1 and own.batch < fit.batch:
                found.append((self.time(own).tokens_per_second_per_gpu, own))
        return found


def fastest_fit(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
                constraints: Constraints | None = None, compute: Compute | None = None,
                estimate_fn: EstimateFn | None = None) -> FastestFit | None:
    """The setup with the highest tokens per second whose estimate fits `device` (its usable memory), searched
    within `constraints` (the effective batch kept through accumulation; the user's method, sharding and GPU count
    unless allowed), or None when none fits. Among setups within TIE of the fastest the one with the fewest changes
    wins. ValueError (one translatable line) when the device has no compute figures for this job."""
    tr = trainer or TrainerSetup("sft")
    constraints = constraints or Constraints()
    fn = estimate_fn or solver_estimate_fn(tr, device.runtime_total_bytes)
    search = _Search(spec, setup, device, tr, fn, compute)
    base_step = search.time(setup)  # raises when the device has no figures: the time is unknown
    scale = constraints.max_gpus is not None and constraints.max_gpus > 1
    found = search.best_at(_configs(spec, setup, device, tr, constraints, setup.gpus, scale))
    if not found and scale and constraints.max_gpus > setup.gpus:
        found = search.best_at(_scaled_configs(search, spec, setup, device, tr, constraints))
    if not found:
        return None
    top = max(speed for speed, _ in found)
    near = [(len(_changes(setup, s)), s.gpus, -speed, i) for i, (speed, s) in enumerate(found)
            if speed >= top * (1 - TIE)]
    best = found[min(near)[-1]][1]
    return FastestFit(best, fn(spec, best), search.time(best), _changes(setup, best), base_step, constraints)


def _scaled_configs(search: _Search, spec: ModelSpec, setup: TrainingSetup, device: Device, tr: TrainerSetup,
                    constraints: Constraints) -> list[TrainingSetup]:
    """When the user's GPUs fit nothing: every sharded combination on the fewest GPUs (above the user's, at most
    max_gpus) at which it fits at its smallest micro-batch (solvers.fewest_gpus: per-GPU memory never grows with
    the count from two GPUs on), moved up to the next count that divides the effective batch when one is allowed (it
    then fits too, with fewer examples on each GPU); the combinations that keep the effective batch this way are the
    only ones offered when there are any. More GPUs always run faster on the clock; best_at ranks these by tokens
    per GPU-hour."""
    limit = min(constraints.max_gpus or MAX_GPUS_DEFAULT, MAX_GPUS)

    def smallest_shape(model: ModelSpec, s: TrainingSetup) -> Estimate:
        e = search.per_gpu(s.gpus)
        return search.fn(model, replace(s, batch=1, grad_accum=e) if (s.batch, s.grad_accum) != (1, e) else s)

    out = []
    for s in _configs(spec, setup, device, tr, constraints, setup.gpus + 1, True):
        if s.sharding == "none":
            continue  # data parallel alone does not divide the memory
        n = fewest_gpus(spec, s, search.usable, limit, 1, smallest_shape, at_least=setup.gpus + 1)
        if n is None:
            continue
        keeps = [k for k in range(n, limit + 1) if search.global_batch % k == 0]
        out.append(replace(s, gpus=keeps[0] if keeps else n))
    kept = [s for s in out if search.global_batch % s.gpus == 0]
    return kept or out
