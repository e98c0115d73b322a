"""The CLI's text lines: the heading (the model, the setup, the stack's defaults in use), and what the calculator
page shows beside the breakdown: the verdict's band, the estimate's notes, the advice (the remedies with what each
saves, then the solvers' answers), the host RAM, an out-of-memory message read, and the exact trace; worded like the
page (pages/calculator.py, ui/report.py) in plain English."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..advice.timing import gpu_time_factor, time_phrase
from ..i18n import format_int
from ..job.setup import MAX_BATCH, MAX_SEQ_LEN
from ..job.stack import setup_json
from ..job.trainer import trainer_json
from ..oom_message import FIGURES
from ..units import fmt_both, fmt_gb

if TYPE_CHECKING:
    from ..advice.advise import Advice
    from ..advice.explain import Explanation
    from ..advice.fastest import Change, FastestFit
    from ..advice.oom import OomDiagnosis
    from ..advice.remedies import Remedy
    from ..exact.result import ExactResult
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..memory.host import HostVerdict
    from ..memory.result import Estimate
    from ..memory.verdict import Verdict
    from ..options.devices import Device
    from .cli_time import TimeAnswer

NEGLIGIBLE_BYTES = 0.05e9  # below what one decimal of GB shows: "saves nothing", not "saves 0.0 GB" (as the page)


def heading_lines(est: Estimate, setup: TrainingSetup, trainer: TrainerSetup) -> list[str]:
    """The text's first lines: the model and setup, then the stack's defaults in use."""
    head = f"{est.model.name} · {setup.method} · {setup.precision} · batch {setup.batch} × {setup.seq_len} tokens"
    if trainer.option.generates:
        head = (f"{est.model.name} · {setup.method} · {setup.precision} · batch {setup.batch} completions × "
                f"({trainer.prompt_length:,} + {trainer.completion_length:,}) tokens")
    if trainer.trainer != "sft":
        head += f" · {trainer.option.label} ({trainer_json(trainer)['trainer_version']})"
    ckpt = "offloaded checkpointing" if setup.offload_activations else (
        "checkpointing" if setup.grad_ckpt else "no checkpointing")
    return [head, f"  stack {setup.stack} ({setup_json(setup)['stack_version']}): {ckpt}, loss {setup.loss}, "
                  f"optimizer {setup.optimizer}"]


def band_line(est: Estimate, v: Verdict) -> str:
    """'  band: close call (the upper end of the likely range, 21.3 GB (19.8 GiB), is above the usable …)'."""
    usable = fmt_both(v.usable_bytes)
    why = {
        "fits": "the upper end of the likely range fits too",
        "close call": f"the upper end of the likely range, {fmt_both(est.high_bytes)}, is above the usable {usable}",
        "borderline": f"the lower end of the likely range, {fmt_both(est.low_bytes)}, would fit in {usable}",
        "too big": "even the lower end of the likely range does not fit",
    }[v.band]
    return f"  band: {v.band} ({why})"


def usable_lines(device: Device) -> list[str]:
    """Where a catalog GPU's usable memory comes from: '  usable: 85.0 GB (79.2 GiB) of 85.9 GB (80.0 GiB), the total
    CUDA gives PyTorch (torch.cuda's total_memory); the driver keeps the rest'. None for a Mac or a typed size."""
    if device.cuda_total_mib is None:
        return []
    return [f"  usable: {fmt_both(device.usable_bytes)} of {fmt_both(device.capacity_bytes)}, the total "
            f"{device.runtime} gives PyTorch (torch.cuda's total_memory); the driver keeps the rest"]


def note_lines(notes: tuple[str, ...] | list[str]) -> list[str]:
    return [f"  note: {n}" for n in notes]


def _remedy_time(r: Remedy, gpus: int) -> str:
    """' · ~27 % slower', or for a remedy on more GPUs ' · ~591 % faster on 7 GPUs (the same GPU-hours)'."""
    if r.time_factor is None:
        return ""
    n = r.new_setup.gpus if r.new_setup is not None else gpus
    if n == gpus:
        return f" · {time_phrase(r.time_factor)}"
    g = gpu_time_factor(r, gpus)
    hours = ("the same GPU-hours" if abs(g - 1) < 0.005 else
             f"~{100 * (g - 1):.0f} % more GPU-hours" if g > 1 else f"~{100 * (1 - g):.0f} % fewer GPU-hours")
    return f" · {time_phrase(r.time_factor)} on {n} GPUs ({hours})"


def _saves(r: Remedy, usable: float, gpus: int = 1) -> str:
    fits = "fits" if r.new_total_bytes <= usable else "still too big"
    time = _remedy_time(r, gpus)
    if r.saves_bytes < 0:
        return f"adds {fmt_both(-r.saves_bytes)} here → {fmt_gb(r.new_total_bytes)}, {fits}{time}"
    return f"saves {fmt_both(r.saves_bytes)} → {fmt_gb(r.new_total_bytes)}, {fits}{time}"


def _seconds(s: float) -> str:
    """A duration: '3.4 ms', '0.84 s', '12.3 s', '4.2 min', '15.4 h', '3.2 days'."""
    if s < 0.1:
        return f"{s * 1000:.1f} ms"
    if s < 10:
        return f"{s:.2f} s"
    if s < 120:
        return f"{s:.1f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    if s < 72 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


CATEGORY_WORDS = {"compute": "compute", "memory": "memory-bound", "transfer": "host transfers",
                  "collective": "collectives", "overhead": "launch overhead"}


def time_lines(answer: TimeAnswer) -> list[str]:
    """The step time on the device: tokens per second and the optimizer step's seconds, what one step holds and the
    rate it runs at, the seconds by category; then the run and its cost when asked for."""
    st = answer.step
    assert st is not None
    given = ", the figures given" if answer.figures == "given" else ""
    lines = [f"  time: {st.tokens_per_second:,.0f} tokens/s, {_seconds(st.step_seconds)} per optimizer step "
             f"({format_int(st.tokens_per_step)} tokens × {st.gpus} GPU{'s' if st.gpus > 1 else ''}; {st.dtype} at "
             f"{st.peak_tflops:g} TFLOPS × {st.efficiency:.0%} efficiency{given})",
             "    " + " · ".join(f"{CATEGORY_WORDS[k]} {_seconds(v)}" for k, v in st.seconds_by_category().items()
                                if v > 0)]
    run, d = answer.run, answer.dataset
    if run is not None and d is not None:
        size = (f"{format_int(d.tokens)} tokens" if d.tokens is not None else
                f"{format_int(d.examples)} examples " + (f"of ~{format_int(d.typical_len)} tokens" if d.typical_len
                                                         else "padded to the max length"))
        epochs = f"{d.epochs:g} epoch{'' if d.epochs == 1 else 's'}"
        lines.append(f"  run: {size} × {epochs} → {_seconds(run.seconds)} ({format_int(run.steps)} optimizer steps"
                     + (f", {run.step.tokens_per_second:,.0f} tokens/s at that length" if run.step != st else "")
                     + ")")
    if answer.cost is not None:
        c = answer.cost
        lines.append(f"  cost: {c.gpu_hours:,.2f} GPU-hours × {c.price_per_gpu_hour:g} per GPU-hour = {c.total:,.2f} "
                     "(in the price's currency)")
    return lines


CHANGE_WORDS = {"gpus": "GPUs", "method": "method", "optimizer": "optimizer", "sharding": "sharding"}


def _change_text(c: Change) -> str:
    """One change of the fastest fit, in the CLI's words."""
    if c.key == "batch":
        return f"batch × accumulation {c.before[0]} × {c.before[1]} → {c.after[0]} × {c.after[1]}"  # type: ignore[index]
    if c.key == "grad_ckpt":
        return f"checkpointing {'on' if c.before else 'off'} → {'on' if c.after else 'off'}"
    if c.key == "offload_optimizer":
        return f"optimizer offload {'on' if c.before else 'off'} → {'on' if c.after else 'off'}"
    if c.key == "effective_batch":
        return f"effective batch {c.before} → {c.after} (the GPUs do not divide it)"
    return f"{CHANGE_WORDS.get(c.key, c.key)} {c.before} → {c.after}"


def fastest_lines(advice: Advice, usable: float, base_fits: bool = True) -> list[str]:
    """The fastest setup that fits: what changes, its tokens per second against this setup's (`base_fits`: whether
    this setup itself fits), its memory; or why there is none."""
    fit: FastestFit | None = advice.fastest_fit
    if fit is None:
        return [f"  fastest setup that fits: none ({advice.fastest_note})"] if advice.fastest_note else []
    head = "  fastest setup that fits"
    allowed = "batch and accumulation, checkpointing, optimizer" + (", method" if fit.constraints.change_method
                                                                    else "") + (
        f", sharding and up to {fit.constraints.max_gpus} GPUs" if fit.constraints.max_gpus else "")
    if not fit.changes:
        return [f"{head} (changing {allowed}): this one, {fit.tokens_per_second:,.0f} tokens/s"]
    change = "; ".join(_change_text(c) for c in fit.changes)
    return [f"{head} (changing {allowed}): {change}",
            f"    → {fit.tokens_per_second:,.0f} tokens/s ({fit.speedup:.2f} × this setup's"
            f"{'' if base_fits else ', which does not fit'}), "
            f"{fmt_gb(fit.estimate.total_bytes)} of {fmt_gb(usable)} usable"]


def _limit(value: int | None, limit: int, unit: str) -> str:
    if value is None:
        return f"none fits (not even 1 {unit})"
    if value >= limit:
        return f"{format_int(limit)} or more"
    return format_int(value)


def advice_lines(advice: Advice, est: Estimate, setup: TrainingSetup, trainer: TrainerSetup, device: Device,
                 rule: str | None) -> list[str]:
    """The page's "What to change": the remedies that help, numbered in the order to try them, then those that
    are not available or change nothing here, then the largest batch, the longest length and the smallest
    catalog device that fit."""
    usable = device.usable_bytes
    if rule:
        head = ("what to change (priced with the rule of thumb, like the verdict; it ignores max length, batch "
                "and checkpointing):")
    elif est.total_bytes <= usable:
        head = "what to change (it fits; each change frees this much headroom; the first ones cost least):"
    else:
        head = "what to change (in the order to try them: the first ones cost least):"
    lines, aside, i = [f"  {head}"], [], 0
    for r in advice.remedies:
        if not r.applicable:
            aside.append(f"{r.title} ({r.reason})" if r.reason else r.title)
        elif abs(r.saves_bytes) < NEGLIGIBLE_BYTES:
            aside.append(f"{r.title} (" + ("the rule of thumb does not count it" if rule else
                                            f"saves nothing here: {fmt_gb(r.new_total_bytes)} after") + ")")
        else:
            i += 1
            lines.append(f"    {i}. {r.title} ({r.change}): {_saves(r, usable, setup.gpus)}")
    if i == 0:
        lines.append("    none helps here")
    if aside:
        lines.append("  not available or no help here: " + "; ".join(aside))
    detailed = " (detailed estimate: the rule of thumb ignores it)" if rule else ""
    if trainer.option.generates:
        at = f"({format_int(trainer.prompt_length)} + {format_int(trainer.completion_length)}) tokens"
        longest = f"longest max completion length that fits (at batch {setup.batch}){detailed}"
    else:
        at = f"max length {format_int(setup.seq_len)}"
        longest = f"longest max length that fits (at batch {setup.batch}){detailed}"
    length = _limit(advice.max_length, MAX_SEQ_LEN, "token") + (" tokens" if advice.max_length else "")
    smallest = (f"{advice.smallest_device.name} ({fmt_both(advice.smallest_device.usable_bytes)} usable)"
                if advice.smallest_device else
                "none in the catalog: try QLoRA, checkpointing, or sharding over several GPUs")
    lines += fastest_lines(advice, usable, est.total_bytes <= usable)
    lines += [
        f"  largest batch that fits (at {at}){detailed}: "
        f"{_limit(advice.max_batch, MAX_BATCH // trainer.option.sequences, 'example')}",
        f"  {longest}: {length}",
        f"  smallest catalog device that fits: {smallest}",
    ]
    return lines


def host_lines(hv: HostVerdict, device: Device | None) -> list[str]:
    """The host RAM the setup needs, its peak moment and each term, then the verdict: against the machine's RAM
    (--host-ram), or on unified memory the GPU and the host together against the device."""
    host = hv.host
    when = "at the model load" if host.peak_phase == "load" else "while training"
    procs = f"{host.processes} process" + ("" if host.processes == 1 else "es")
    lines = [f"  {'host RAM':<12} {fmt_both(host.total_bytes)}  (peak {when}, {procs}; load "
             f"{fmt_gb(host.load_bytes)}, training {fmt_gb(host.train_bytes)})"]
    lines += [f"    {x.key:<26} {fmt_both(x.bytes)}" for x in host.details]
    if hv.unified and device is not None:
        lines.append(f"  {device.name} (one pool): {hv.headline}")
    elif hv.ram_bytes is not None:
        lines.append(f"  host with {fmt_gb(hv.ram_bytes)} RAM: {hv.headline}")
    return lines


def oom_lines(diag: OomDiagnosis) -> list[str]:
    """The out-of-memory message as read (each figure in both units), the device it names, why it failed, what to
    do, and the job priced on that device."""
    r = diag.reading
    lines = [f"out-of-memory message: {r.label}"]
    lines += [f"  {label + ':':<44} {fmt_both(getattr(r, name), 2)}" for name, label in FIGURES
              if getattr(r, name) is not None]
    for pid, used in r.other_processes:
        lines.append(f"  {f'Process {pid} (NVML):':<44} {fmt_both(used, 2) if used is not None else 'not reported'}")
    if r.resource_limit is not None:
        lines.append(f"  {'buffer limit':<24} {format_int(r.resource_limit)} buffers")
    if diag.capacity_bytes is not None and diag.capacity_inferred:
        lines.append(f"  {'capacity (worked out)':<24} {fmt_both(diag.capacity_bytes, 2)}")
    if diag.matches:
        lines.append("  matching catalog devices: " + ", ".join(f"{d.id} ({d.reported})" for d in diag.matches))
    if diag.short_by_bytes is not None:
        lines.append(f"  short by at least {fmt_both(diag.short_by_bytes, 2)} at that moment")
    lines += [f"  cause [{c.key}]: {c.text}" for c in diag.causes]
    lines += [f"  do [{a.key}]: {a.text}" for a in diag.actions]
    if diag.comparison:
        lines.append(f"  {diag.comparison}")
    lines += [f"  note: {n}" for n in (*r.notes, *diag.notes)]
    return lines


def exact_lines(res: ExactResult, est: Estimate | None) -> list[str]:
    """The exact trace's lines: its total, what was traced and added, its peak, the difference from the fast
    estimate (or why there is none) and its notes."""
    added = ", ".join(f"{a.label} {'+' if a.bytes >= 0 else '−'}{fmt_both(abs(a.bytes))}" for a in res.added)
    lines = [f"  {'exact':<12} {fmt_both(res.total_bytes)}  (traced {fmt_both(res.peak_bytes)}; added: {added})",
             f"  {'':<12} peak: {res.peak_phase}/{res.peak_region}, {res.peak_op}; {res.versions_label}; "
             f"{res.seconds:.0f} s"]
    if res.depth_line:
        lines.append(f"  {'':<12} depth: {res.depth_line}")
    if est is not None:
        diff = est.total_bytes - res.total_bytes
        lines.append(f"  {'difference':<12} fast − exact = {'+' if diff >= 0 else '−'}{fmt_both(abs(diff))} "
                     f"({100 * diff / res.total_bytes:+.1f} %)")
    else:
        lines.append(f"  {'difference':<12} none: the fast estimate is missing for this model")
    lines.extend(f"  note: {n}" for n in res.notes)
    return lines


def _signed(n_bytes: float) -> str:
    return f"{'+' if n_bytes >= 0 else '−'}{fmt_gb(abs(n_bytes))}"


def condition_lines(x: Explanation) -> list[str]:
    """What the verdict holds at (every example padded to the max length) and its way out: the longest length per
    example that fits at this batch."""
    lines = [f"  holds at: {x.condition}"]
    if x.longest is not None:
        lines.append(f"  longest that fits: {x.longest.sentence()}")
    return lines


def why_lines(x: Explanation) -> list[str]:
    """Why not the rule of thumb: the rule's number, each step from it to the estimate, the estimate (they add up
    exactly, in bytes)."""
    why = x.why
    if not why.steps:
        return [f"  why not the rule of thumb: this is the rule of thumb ({fmt_gb(why.rule_bytes)}); it has no steps"]
    lines = ["  why not the rule of thumb:", f"    {'rule':<15} {fmt_gb(why.rule_bytes):>9}  {why.rule_label}"]
    lines += [f"    {s.key:<15} {_signed(s.bytes):>9}  {s.label}" for s in why.steps]
    lines.append(f"    {'estimate':<15} {fmt_gb(why.total_bytes):>9}  = the rule + the steps")
    return lines


def assumption_lines(x: Explanation) -> list[str]:
    """The assumptions that move the number most, each with its alternative and what that moves the total by."""
    if not x.assumptions:
        return []
    lines = ["  assumptions that move it most (the change → what it moves the total by):"]
    lines += [f"    {a.label} → {a.change_label}: {_signed(a.delta_bytes)}" for a in x.assumptions]
    return lines


def measured_lines(x: Explanation) -> list[str]:
    """The measured runs closest to this setup: each run's figure and measure, the estimate for its own settings,
    and its source."""
    if not x.measured:
        return []
    lines = ["  measured runs closest to this setup:"]
    lines += [f"    {c.sentence()} [{c.run.source}]" for c in x.measured]
    return lines
