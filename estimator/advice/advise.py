"""The calculator's advice in one call: the remedies and the solvers for one job and device, priced once; on a device
with compute figures each remedy also carries its time factor, the ones that fit come cheapest in time first, and
(when asked) the fastest setup that fits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import _
from ..job.setup import MAX_BATCH, MAX_SEQ_LEN
from .fastest import fastest_fit
from .remedies import remedies, shard_remedy
from .solvers import max_batch, smallest_device
from .timing import by_time, timed_remedies

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device
    from .fastest import Constraints, FastestFit
    from .remedies import Remedy
    from .search import EstimateFn


@dataclass(frozen=True)
class Advice:
    """What to change, for the calculator: the remedies in the order to try them, and the solvers' answers."""

    remedies: tuple[Remedy, ...]
    max_batch: int | None  # the largest micro-batch that fits (None: not even 1)
    max_length: int | None  # the longest max length that fits; GRPO: the longest max completion length
    smallest_device: Device | None  # the catalog device with the least usable memory that fits
    fastest_fit: FastestFit | None = None  # the fastest setup that fits, when asked (advise(fastest=...))
    fastest_note: str = ""  # why there is none: nothing fits within the constraints, or the time is unknown
    time_note: str = ""  # why the remedies carry no time factor (the device has no compute figures…); "" = timed


def advise(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
           rule: str | None = None, batch_limit: int = MAX_BATCH, length_limit: int = MAX_SEQ_LEN,
           compute: Compute | None = None, fastest: Constraints | None = None) -> Advice:
    """The calculator's "What to change": the seed's remedies (and the trainer's own, and sharding over more GPUs
    of this kind when the run does not fit) priced with the estimate the page shows, the largest batch and
    the longest length that fit, and the smallest catalog device. With rule='seed' the remedies and the
    smallest device are the rule's (the batch and length answers stay the detailed estimate's: the rule has
    neither). Every estimate goes through the estimate cache, so the page's own estimate and the remedies'
    halves are computed once and the solvers start from them. Raises ValueError when a changed setup is
    refused.
    Time (estimator/speed, on the device's figures or the user's `compute`): each remedy's time factor, and the
    remedies that fit first, cheapest in time; where the time cannot be priced, `time_note` says why and the seed's
    order stays. `fastest` (the constraints) adds the fastest setup that fits (advice/fastest.py; the detailed
    estimate's, in rule mode too)."""
    from ..job.trainer import TrainerSetup as _TrainerSetup
    from ..memory.rule import seed_estimate
    from .condition import search_length, solver_fn
    from .remedies import all_remedies

    tr = trainer or _TrainerSetup("sft")
    usable = device.usable_bytes
    # Unsloth decides by the card's memory (every probe priced on this card); a trainer's step without TRL's
    # batch-shape checks (condition.solver_fn)
    fn: EstimateFn = solver_fn(spec, setup, device, tr)
    found = remedies(spec, setup, fn) if tr.trainer == "sft" else all_remedies(spec, setup, tr, device.runtime_total_bytes)
    # the longest max length (GRPO: max completion length): the search the verdict's way out uses too
    longest = search_length(spec, setup, device, tr, length_limit, fn)
    # DPO, ORPO, SimPO, reward: each example is 2 sequences per forward, so the batch stops at half the limit.
    biggest = max_batch(spec, setup, usable, fn, limit=batch_limit // tr.option.sequences)
    if rule == "seed":  # the rule prices its own changes and its own smallest device
        found, smallest = remedies(spec, setup, seed_estimate), smallest_device(spec, setup, estimate_fn=seed_estimate)
    else:
        if tr.trainer == "sft":
            shard = shard_remedy(spec, setup, device, order=len(found) + 1, estimate_fn=fn)
            found = found + ((shard,) if shard is not None else ())
        smallest = smallest_device(spec, setup, estimate_fn=fn)
    time_note = ""
    try:
        found = by_time(timed_remedies(tuple(found), spec, setup, device, tr, compute), usable, setup.gpus)
    except ValueError as exc:  # no compute figures (a custom device), or none for this precision
        time_note = str(exc)
    best, why = None, ""
    if fastest is not None:
        best, why = _fastest(spec, setup, device, tr, fastest, compute, time_note)
    return Advice(tuple(found), biggest, longest, smallest, best, why, time_note)


def _fastest(spec: ModelSpec, setup: TrainingSetup, device: Device, tr: TrainerSetup, constraints: Constraints,
             compute: Compute | None, time_note: str) -> tuple[FastestFit | None, str]:
    """advise()'s fastest fit and, when there is none, why (the time unknown, or nothing fits within the limits).
    Priced with the trainer's estimate on this card (search.solver_estimate_fn: the detailed SFT estimate's cache
    entries where the runtime does not read the card)."""
    if time_note:
        return None, time_note
    try:
        best = fastest_fit(spec, setup, device, tr, constraints, compute)
    except ValueError as exc:
        return None, str(exc)
    if best is not None:
        return best, ""
    if constraints.max_gpus is not None and constraints.max_gpus > 1 and device.kind == "discrete":
        return None, _("No setup fits on up to {n} GPUs of this kind within these limits.").format(
            n=constraints.max_gpus)
    if constraints.change_method:
        return None, _("No setup fits this device, whatever the method: allow more GPUs, or pick a smaller model.")
    return None, _("No setup fits this device by changing the batch and accumulation, checkpointing and the "
                   "optimizer: allow a method change (QLoRA) or more GPUs.")
