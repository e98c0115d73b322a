"""Remedies priced in time: each remedy's step-time factor (the same tokens under the changed setup over the current
one, speed.time_factor's definition, from the cached speed.time_of of both), its caveat worded with that factor
instead of a guess, and the order to try them: the ones that fit, cheapest in time first."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..i18n import _, format_number
from ..speed.price import speed_ratio, time_of

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.compute import Compute
    from ..options.devices import Device
    from .remedies import Remedy

# Below what one decimal of GB shows, a remedy "saves nothing here" (the CLI's and the page's threshold).
NEGLIGIBLE_BYTES = 0.05e9
SAME_SPEED = 0.005  # a factor within half a per cent of 1 reads "about as fast"


def time_phrase(factor: float) -> str:
    """'~27 % slower' (the same tokens take 27 % longer), '~40 % faster' (40 % more tokens per second) or 'about as
    fast', translated."""
    if abs(factor - 1) < SAME_SPEED:
        return _("about as fast")
    if factor > 1:
        return _("~{pct} % slower").format(pct=format_number(100 * (factor - 1), 0))
    return _("~{pct} % faster").format(pct=format_number(100 * (1 / factor - 1), 0))


def _caveat(r: Remedy, factor: float, full: bool) -> str:
    """The caveats that guessed the time ("training is somewhat slower", "20–30 % slower"), with the factor here."""
    time = time_phrase(factor)
    if r.key == "qlora":
        if full:  # the speed comes from training adapters only (no weight gradients, a small optimizer step)
            return _("A 4-bit base is about a quarter of a 16-bit one; training only the adapters is {time} here, the "
                     "base's dequantisation at every use included.").format(time=time)
        return _("A 4-bit base is about a quarter of a 16-bit one; it is dequantised at every use: {time} here.").format(
            time=time)
    if r.key == "checkpointing":
        if full:
            return _("Activations are recomputed in backward, one more forward pass: {time} here (published: "
                     "20–30 %).").format(time=time)
        return _("Activations are recomputed in backward, one more forward pass: {time} here, more than the 20–30 % "
                 "published for full fine-tuning because LoRA's backward computes no weight gradients.").format(time=time)
    return r.caveat


def timed_remedies(remedies: tuple[Remedy, ...], spec: ModelSpec, setup: TrainingSetup, device: Device,
                   trainer: TrainerSetup | None = None, compute: Compute | None = None) -> tuple[Remedy, ...]:
    """The remedies with their time factors (and their caveats worded with them). ValueError when the current setup
    cannot be timed on this device (no compute figures, or none for its precision): the time is unknown; a remedy
    whose changed setup cannot be timed keeps no factor."""
    base = time_of(spec, setup, device, trainer, compute)
    out = []
    for r in remedies:
        if r.new_setup is None or not r.applicable:
            out.append(r)
            continue
        try:
            changed = time_of(r.new_spec or spec, r.new_setup, device, r.new_trainer or trainer, compute)
        except ValueError:
            out.append(r)
            continue
        factor = speed_ratio(base, changed)
        out.append(replace(r, time_factor=factor, caveat=_caveat(r, factor, setup.method == "full")))
    return tuple(out)


def fits(r: Remedy, usable_bytes: float) -> bool:
    """Does the remedy apply, change something here, and bring the run within the usable memory?"""
    return r.applicable and abs(r.saves_bytes) >= NEGLIGIBLE_BYTES and r.new_total_bytes <= usable_bytes


def gpu_time_factor(r: Remedy, gpus: int) -> float | None:
    """The remedy's time factor in GPU-hours: the wall-clock factor × the GPUs it runs on over the `gpus` the setup
    has (sharding over 8 GPUs is faster on the clock, and costs 8 GPUs); None when it has no factor."""
    if r.time_factor is None:
        return None
    return r.time_factor * (r.new_setup.gpus if r.new_setup is not None else gpus) / gpus


def by_time(remedies: tuple[Remedy, ...], usable_bytes: float, gpus: int = 1) -> tuple[Remedy, ...]:
    """The order to try them: the remedies that fit, cheapest in time first; those that need more GPUs after the ones
    on the GPUs the setup has (as the seed's list ends with sharding), and a smaller model last (as in the seed: it
    changes what is trained, not how, and is faster for that); ties in time by the factor in GPU-hours; untimed ones
    after the timed, in their order. Then the rest in their order (the seed's). `gpus`: the setup's GPU count."""
    fitting = [r for r in remedies if fits(r, usable_bytes)]

    def more_gpus(r: Remedy) -> bool:
        return r.new_setup is not None and r.new_setup.gpus > gpus

    timed = sorted((r for r in fitting if r.time_factor is not None),
                   key=lambda r: (r.new_spec is not None, more_gpus(r), gpu_time_factor(r, gpus)))
    untimed = [r for r in fitting if r.time_factor is None]
    return tuple(timed + untimed + [r for r in remedies if not fits(r, usable_bytes)])
