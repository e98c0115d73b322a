"""How long and what it costs, on the calculator (issue 30): the sidebar's "Run time and cost" box (the dataset size,
epochs, a price per GPU-hour and a custom device's figures: link parameters, rows of ui/params.py), the step time and
tokens per second beside the verdict (estimator.speed.price.time_of), the run's hours and cost (run_time, run_cost),
the remedies' time in words, and the fastest setup that fits with a button that applies it
(estimator.advice.advise(..., fastest=Constraints())). Bad input is one clear line and no number, never a
traceback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st

from estimator import to_gb
from estimator.advice.timing import gpu_time_factor, time_phrase
from estimator.i18n import N_, _, format_int, format_number, localised_error, ngettext
from estimator.options.compute import custom_compute
from estimator.options.methods import METHOD_LABELS, SHARDING_LABELS
from estimator.options.optimizers import OPTIMIZERS
from estimator.speed.price import time_of
from estimator.speed.run import DatasetSize, run_cost, run_time
from ui.apply import apply, rerun_if_applied, widget_updates
from ui.params import widget
from ui.text import plain

if TYPE_CHECKING:
    from estimator import Device, ModelSpec, Remedy, TrainingSetup
    from estimator.advice.advise import Advice
    from estimator.advice.fastest import Change, FastestFit
    from estimator.job.trainer import TrainerSetup
    from estimator.options.compute import Compute
    from estimator.speed.run import Cost, RunTime
    from estimator.speed.step import StepTime

RUN_KEYS = ("tokens", "examples", "typical_len", "epochs", "price")  # the box's rows (ui/params.py, group "page")
FIGURE_KEYS = ("tflops", "bandwidth")  # a custom device's figures
BOX_TITLE = N_("Run time and cost")


@dataclass(frozen=True)
class RunInputs:
    """What the sidebar's box holds, checked: the dataset (None: not given, or not valid), the price (None: not
    given), a custom device's figures (None: the catalog's, or not given), and a message for each value that could
    not be used (the estimator's own words)."""

    dataset: DatasetSize | None = None
    price: float | None = None
    compute: Compute | None = None
    notes: tuple[str, ...] = ()
    figures_given: bool = False  # the user typed a custom device's figures (both of them)


def read_run_inputs(values: dict[str, Any], device: Device) -> RunInputs:
    """The box's values (by link key; 0 = not given) → what the time model takes, with a note for each that cannot
    be used: both a token count and an example count, a typical length without examples, a price without a dataset,
    one of a custom device's two figures (estimator.speed.run.DatasetSize and options.compute.custom_compute word
    the checks). Pure."""
    notes: list[str] = []
    tokens, examples = int(values.get("tokens") or 0), int(values.get("examples") or 0)
    typical, epochs = int(values.get("typical_len") or 0), float(values.get("epochs") or 1.0)
    price = float(values.get("price") or 0.0) or None
    dataset = None
    if tokens or examples or typical:
        try:
            dataset = DatasetSize(tokens=tokens or None, examples=examples or None, typical_len=typical or None,
                                  epochs=epochs)
        except ValueError as exc:
            notes.append(_("Run time: {error}.").format(error=localised_error(exc)))
    if price is not None and dataset is None and not notes:
        notes.append(_("The cost is the run's GPU-hours × the price: give the dataset size too."))
    compute, given = None, False
    tflops, bandwidth = float(values.get("tflops") or 0.0), float(values.get("bandwidth") or 0.0)
    if device.compute is None and (tflops or bandwidth):
        if tflops and bandwidth:
            try:
                compute, given = custom_compute(tflops, bandwidth), True
            except ValueError as exc:
                notes.append(localised_error(exc))
        else:
            notes.append(_("A custom device's time needs both figures: its TFLOPS and its memory bandwidth."))
    return RunInputs(dataset, price, compute, tuple(notes), given)


def draw_run_box(sidebar: Any, device: Device) -> RunInputs:
    """The calculator's own box at the sidebar's end: the dataset size, epochs and a price per GPU-hour, and a custom
    device's TFLOPS and bandwidth (for a custom device only: a catalog device has its own). Open when the link gives
    any of them or the device is custom. Drawn on full runs only (outside the live fragment)."""
    keys = RUN_KEYS + FIGURE_KEYS
    custom = device.compute is None
    opened = custom or any(k in st.query_params for k in keys)
    values: dict[str, Any] = {}
    with sidebar.expander(_(BOX_TITLE), expanded=opened, icon=":material/schedule:"):
        st.caption(_("For the run's hours and cost beside the verdict. 0 = not given."))
        for key in RUN_KEYS:
            values[key] = widget(key)
        if custom:  # a catalog device has its own figures (a link's are unused there, and leave the address)
            for key in FIGURE_KEYS:
                values[key] = widget(key)
    return read_run_inputs(values, device)


# ---- the lines beside the verdict --------------------------------------------------------------------------------

def duration(seconds: float) -> str:
    """A duration as people say it: '85 ms', '1.14 s', '42.0 min', '15.4 h', '3.2 days' (the language's decimal
    sign)."""
    if seconds < 0.1:
        return _("{n} ms").format(n=format_number(seconds * 1000, 0))
    if seconds < 10:
        return _("{n} s").format(n=format_number(seconds, 2))
    if seconds < 120:
        return _("{n} s").format(n=format_number(seconds, 1))
    if seconds < 2 * 3600:
        return _("{n} min").format(n=format_number(seconds / 60, 1))
    if seconds < 72 * 3600:
        return _("{n} h").format(n=format_number(seconds / 3600, 1))
    return _("{n} days").format(n=format_number(seconds / 86400, 1))


def step_line(step: StepTime, given: bool = False) -> str:
    """'~1,801 tokens/s · 1.14 s per optimizer step (2,048 tokens × 1 GPU)' (plain text)."""
    gpus = ngettext("{n} GPU", "{n} GPUs", step.gpus).format(n=format_int(step.gpus))
    line = _("~{tps} tokens/s · {step} per optimizer step ({tokens} tokens × {gpus})").format(
        tps=format_int(round(step.tokens_per_second)), step=duration(step.step_seconds),
        tokens=format_int(step.tokens_per_step), gpus=gpus)
    return line + (" · " + _("with the figures you gave") if given else "")


def dataset_text(d: DatasetSize) -> str:
    """'10,000,000 tokens × 1 epoch', '50,000 examples of ~600 tokens × 3 epochs'."""
    if d.tokens is not None:
        size = _("{n} tokens").format(n=format_int(d.tokens))
    elif d.typical_len is not None:
        size = _("{n} examples of ~{length} tokens").format(n=format_int(d.examples), length=format_int(d.typical_len))
    else:
        size = _("{n} examples padded to the max length").format(n=format_int(d.examples))
    epochs = _("{n} epoch").format(n=format_number(d.epochs, 2, False).rstrip("0").rstrip(".,")) if d.epochs == 1 \
        else _("{n} epochs").format(n=format_number(d.epochs, 2, False).rstrip("0").rstrip(".,"))
    return f"{size} × {epochs}"


def run_line(run: RunTime, dataset: DatasetSize, cost: Cost | None) -> str:
    """'Run: 10,000,000 tokens × 1 epoch → 1.5 h (4,883 optimizer steps) · cost 7.65 (3.06 GPU-hours × 2.5)'."""
    line = _("Run: {size} → {time} ({steps} optimizer steps)").format(
        size=dataset_text(dataset), time=duration(run.seconds), steps=format_int(run.steps))
    if cost is not None:
        line += " · " + _("cost {total} ({hours} GPU-hours × {price} per GPU-hour)").format(
            total=format_number(cost.total, 2), hours=format_number(cost.gpu_hours, 2),
            price=format_number(cost.price_per_gpu_hour, 2, False).rstrip("0").rstrip(".,"))
    return line


def draw_time(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup, device: Device, run: RunInputs | None,
              present: bool) -> None:
    """Beside the verdict: the step time and tokens per second on this device (or why the time is unknown), then,
    with a dataset size, the run's hours and, with a price, its cost; one line for each value that could not be
    used."""
    run = run or RunInputs()
    notes = [":orange[" + plain(n) + "]" for n in run.notes]
    try:
        step = time_of(spec, setup, device, trainer, run.compute)
    except ValueError as exc:
        if device.compute is None and run.compute is None:
            unknown = _("Time unknown: a custom device has no compute figures. Give its TFLOPS and memory bandwidth "
                        "in the sidebar's '{box}' box.").format(box=_(BOX_TITLE))
        else:
            unknown = _("Time unknown here: {error}.").format(error=localised_error(exc))
        st.markdown("  \n".join([":material/schedule: :gray[" + plain(unknown) + "]", *notes]))
        return
    lines = [":material/schedule: " + plain(step_line(step, run.figures_given))]
    if run.dataset is not None:
        try:
            rt = run_time(spec, setup, device, run.dataset, trainer if trainer.trainer != "sft" else None, run.compute)
            cost = run_cost(rt, run.price) if run.price is not None else None
            lines.append(":material/payments: " + plain(run_line(rt, run.dataset, cost)))
        except ValueError as exc:
            lines.append(":orange[" + plain(_("Run time: {error}.").format(error=localised_error(exc))) + "]")
    elif not present:  # on the same line: where the run's hours and cost come from
        lines[0] += " · :gray[" + plain(_("the run's hours and cost: give the dataset size in the sidebar's '{box}' "
                                          "box").format(box=_(BOX_TITLE))) + "]"
    st.markdown("  \n".join(lines + notes))


# ---- what to change: the remedies' time and the fastest setup that fits ------------------------------------------

def remedy_time(r: Remedy, gpus: int) -> str:
    """' · ~27 % slower', or for a remedy on more GPUs ' · ~591 % faster on 7 GPUs (~12 % more GPU-hours)'; '' when
    it has no time factor."""
    if r.time_factor is None:
        return ""
    n = r.new_setup.gpus if r.new_setup is not None else gpus
    if n == gpus:
        return " · " + time_phrase(r.time_factor)
    g = gpu_time_factor(r, gpus)
    hours = (_("the same GPU-hours") if abs(g - 1) < 0.005 else
             _("~{pct} % more GPU-hours").format(pct=format_number(100 * (g - 1), 0)) if g > 1 else
             _("~{pct} % fewer GPU-hours").format(pct=format_number(100 * (1 - g), 0)))
    return " · " + _("{time} on {n} GPUs ({hours})").format(time=time_phrase(r.time_factor), n=n, hours=hours)


def _on_off(value: object) -> str:
    return _("on") if value else _("off")


def change_text(c: Change) -> str:
    """One change of the fastest fit, in words."""
    if c.key == "batch":
        return _("batch × accumulation {a} × {b} → {c} × {d}").format(a=c.before[0], b=c.before[1],  # type: ignore[index]
                                                                      c=c.after[0], d=c.after[1])  # type: ignore[index]
    if c.key == "grad_ckpt":
        return _("checkpointing {before} → {after}").format(before=_on_off(c.before), after=_on_off(c.after))
    if c.key == "offload_optimizer":
        return _("optimizer state in CPU RAM {before} → {after}").format(before=_on_off(c.before),
                                                                         after=_on_off(c.after))
    if c.key == "effective_batch":
        return _("effective batch {before} → {after} (the GPUs do not divide it)").format(before=c.before,
                                                                                        after=c.after)
    if c.key == "optimizer":
        return _("optimizer {before} → {after}").format(before=_(OPTIMIZERS[str(c.before)].label),
                                                        after=_(OPTIMIZERS[str(c.after)].label))
    if c.key == "method":
        return _("method {before} → {after}").format(before=_(METHOD_LABELS[str(c.before)]),
                                                     after=_(METHOD_LABELS[str(c.after)]))
    if c.key == "sharding":
        return _("sharding {before} → {after}").format(before=_(SHARDING_LABELS[str(c.before)]),
                                                       after=_(SHARDING_LABELS[str(c.after)]))
    return _("GPUs {before} → {after}").format(before=c.before, after=c.after)


# The TrainingSetup fields each change of the fastest fit sets (effective_batch follows from the others).
_CHANGE_FIELDS = {"gpus": ("gpus",), "sharding": ("sharding",), "offload_optimizer": ("offload_optimizer",),
                  "method": ("method",), "optimizer": ("optimizer",), "grad_ckpt": ("grad_ckpt",),
                  "batch": ("batch", "grad_accum"), "effective_batch": ()}


def fastest_updates(spec: ModelSpec, fit: FastestFit) -> dict[str, object]:
    """The sidebar's control values that give the fastest fit's setup."""
    names = [name for c in fit.changes for name in _CHANGE_FIELDS.get(c.key, ())]
    return widget_updates(spec, fit.setup, names)


def fastest_markdown(fit: FastestFit, usable_bytes: float, base_fits: bool) -> str:
    """The fastest setup that fits, in one Markdown block: what changes, its tokens per second against this setup's,
    its memory."""
    if not fit.changes:
        return _("**Fastest setup that fits:** this one, ~{tps} tokens/s (a larger batch with less accumulation, "
                 "checkpointing off or another optimizer would not be faster within the memory).").format(
            tps=format_int(round(fit.tokens_per_second)))
    changes = "; ".join(plain(change_text(c)) for c in fit.changes)
    against = (_("{x} × this setup's speed").format(x=format_number(fit.speedup, 2)) if base_fits else
               _("{x} × this setup's speed, which does not fit").format(x=format_number(fit.speedup, 2)))
    return (_("**Fastest setup that fits** (changing the batch and accumulation, checkpointing and the optimizer): "
              "{changes}") .format(changes=changes)
            + "  \n" + plain(_("→ ~{tps} tokens/s ({against}); {gb} GB of {usable} GB usable.").format(
                tps=format_int(round(fit.tokens_per_second)), against=against,
                gb=format_number(to_gb(fit.estimate.total_bytes)), usable=format_number(to_gb(usable_bytes)))))


def draw_fastest_button(spec: ModelSpec, advice: Advice) -> None:
    """The button that applies the fastest setup that fits to the sidebar (none when it is this setup)."""
    fit = advice.fastest_fit
    updates = fastest_updates(spec, fit) if fit is not None and fit.changes else {}
    if updates and st.button(_("Apply the fastest setup"), key="apply_fastest", on_click=apply, args=(updates,),
                             icon=":material/bolt:", help=_("Sets these values in the sidebar.")):
        rerun_if_applied()


__all__ = ["RunInputs", "draw_fastest_button", "fastest_markdown", "draw_run_box", "draw_time", "duration", "read_run_inputs",
           "remedy_time", "run_line", "step_line"]
