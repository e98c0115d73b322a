"""The calculator's advice in one call: the remedies and the solvers for one job and device, priced once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..job.setup import MAX_BATCH, MAX_SEQ_LEN
from .remedies import remedies, shard_remedy
from .solvers import max_batch, smallest_device

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.devices import Device
    from .remedies import Remedy
    from .search import EstimateFn


@dataclass(frozen=True)
class Advice:
    """What to change, for the calculator: the remedies in the order to try them, and the solvers' answers."""

    remedies: tuple[Remedy, ...]
    max_batch: int | None  # the largest micro-batch that fits (None: not even 1)
    max_length: int | None  # the longest max length that fits; GRPO: the longest max completion length
    smallest_device: Device | None  # the catalog device with the least usable memory that fits


def advise(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
           rule: str | None = None, batch_limit: int = MAX_BATCH, length_limit: int = MAX_SEQ_LEN) -> Advice:
    """The calculator's "What to change": the seed's remedies (and the trainer's own, and sharding over more GPUs
    of this kind when the run does not fit) priced with the estimate the page shows, the largest batch and
    the longest length that fit, and the smallest catalog device. With rule='seed' the remedies and the
    smallest device are the rule's (the batch and length answers stay the detailed estimate's: the rule has
    neither). Every estimate goes through the estimate cache, so the page's own estimate and the remedies'
    halves are computed once and the solvers start from them. Raises ValueError when a changed setup is
    refused."""
    from ..job.trainer import TrainerSetup as _TrainerSetup
    from ..memory.rule import seed_estimate
    from .condition import search_length, solver_fn
    from .remedies import all_remedies

    tr = trainer or _TrainerSetup("sft")
    usable = device.usable_bytes
    # Unsloth decides by the card's memory (every probe priced on this card); a trainer's step without TRL's
    # batch-shape checks (condition.solver_fn)
    fn: EstimateFn = solver_fn(spec, setup, device, tr)
    found = remedies(spec, setup, fn) if tr.trainer == "sft" else all_remedies(spec, setup, tr, device.capacity_bytes)
    # the longest max length (GRPO: max completion length): the search the verdict's way out uses too
    longest = search_length(spec, setup, device, tr, length_limit, fn)
    # DPO, ORPO, SimPO, reward: each example is 2 sequences per forward, so the batch stops at half the limit.
    biggest = max_batch(spec, setup, usable, fn, limit=batch_limit // tr.option.sequences)
    if rule == "seed":  # the rule prices its own changes and its own smallest device
        return Advice(remedies(spec, setup, seed_estimate), biggest, longest,
                      smallest_device(spec, setup, estimate_fn=seed_estimate))
    if tr.trainer == "sft":
        shard = shard_remedy(spec, setup, device, order=len(found) + 1, estimate_fn=fn)
        found = found + ((shard,) if shard is not None else ())
    return Advice(tuple(found), biggest, longest, smallest_device(spec, setup, estimate_fn=fn))
