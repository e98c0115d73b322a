"""The version forks that matter to an estimate (issue 28): for each fork that moves the setup's stack
(options.versions.FORKS, Fork.stacks), the same job priced with that one change on its other side, and a note naming
the fork when the two differ by FORK_NOTE_SHARE or more ("transformers 5 stores … On transformers before 5.0.0 (e.g.
4.57.6) this estimate would be 32.3 GB."). One estimate per fork of the stack: call it once per shown estimate, not in
a search."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.stack import with_versions
from ..job.versions import default_versions, older
from ..options.versions import stack_forks
from ..units import to_gb
from .price import estimate

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..job.versions import Versions
    from ..models.spec import ModelSpec
    from ..options.versions import Fork
    from .result import Estimate

FORK_NOTE_SHARE = 0.05  # issue 28: a fork matters to an estimate when its other side moves it by 5 % or more


def other_side_estimate(spec: ModelSpec, setup: TrainingSetup, fork: Fork, trainer: TrainerSetup | None = None,
                        device_capacity: float | None = None) -> Estimate | None:
    """The estimate with this one fork's change on the other side from the setup's releases (Versions.flipped: the
    stack's defaults chosen again, the user's own settings kept); None when that side cannot run this job."""
    versions = setup.versions or default_versions(setup.stack)
    flipped = replace(versions, flipped=(fork.id,))
    try:
        other = with_versions(setup, flipped, trainer.trainer if trainer is not None else "sft")
        return estimate(spec, other, trainer=trainer, device_capacity=device_capacity, strict=False)
    except ValueError:  # e.g. an explicit loss the other release's trainer does not run
        return None


def may_matter(fork: Fork, spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None) -> bool:
    """Can this fork move this job at all (its Fork.methods, trainers, moe, backends, losses, stack_defaults; a fork
    that only decides a training config's precision moves no step)? Only those are priced on their other side."""
    tid = trainer.trainer if trainer is not None else "sft"
    return not fork.config_only and all((
        not fork.methods or setup.method in fork.methods,
        not fork.trainers or tid in fork.trainers,
        not fork.moe or bool(spec.moe_layers),
        not fork.backends or setup.backend in fork.backends,
        not fork.losses or setup.loss in fork.losses,
        all(name in setup.from_stack for name in fork.stack_defaults),
    ))


def fork_note(fork: Fork, versions: Versions, total_bytes: float) -> Text:
    """The note naming a fork: what changed, and this estimate on the other side."""
    total = (to_gb(total_bytes), 1)  # shown in the reader's language (Text)
    if older(fork.id, versions):
        return Text(N_("{change} From {package} {since} on, this estimate would be {total} GB."),
                    change=Text(fork.description), package=fork.package, since=fork.since, total=total)
    return Text(N_("{change} Before {package} {since} (e.g. {last}), this estimate would be {total} GB."),
                change=Text(fork.description), package=fork.package, since=fork.since, last=fork.last_without,
                total=total)


def modelled_note(versions: Versions) -> Text:
    """The releases an estimate was priced at, for a run whose versions were given."""
    given = ", ".join(f"{name} {versions[name]}" for name, src in versions.sources if src != "default")
    if not given:
        return Text(N_("Priced at the newest modelled releases (none of this stack's packages was given)."))
    return Text(N_("Priced for the releases given: {packages}; this stack's other packages at their newest modelled "
                   "release."), packages=given)


def version_notes(spec: ModelSpec, setup: TrainingSetup, est: Estimate, trainer: TrainerSetup | None = None,
                  device_capacity: float | None = None, rule: str | None = None) -> tuple[Text, ...]:
    """The notes for an estimate's releases: which were given (when any were), then each fork of the stack whose
    other side moves this estimate by FORK_NOTE_SHARE or more (fork_note). The rule of thumb knows no releases."""
    if setup.stack is None or rule == "seed":
        return ()
    versions = setup.versions or default_versions(setup.stack)
    notes = [modelled_note(versions)] if setup.versions is not None else []
    for fork in stack_forks(setup.stack):
        if not may_matter(fork, spec, setup, trainer):
            continue
        other = other_side_estimate(spec, setup, fork, trainer, device_capacity)
        if other is not None and abs(other.total_bytes - est.total_bytes) >= FORK_NOTE_SHARE * est.total_bytes:
            notes.append(fork_note(fork, versions, other.total_bytes))
    return tuple(notes)
