"""Figure builders for the secondary pages (compare and its pinned setups, what fits, scale out). Pure functions, no Streamlit: each
`..._spec` returns the figure as plain plotly.js JSON, which the pages draw with ui.live_chart (no Figure built
and validated on every rerun), and its namesake returns the same figure as a validated plotly Figure (tests,
notebooks). They reuse ui.charts' colours, stacked bars and device overlay so every page draws memory the same
way. Values are decimal GB; hovers add GiB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from estimator import Device, Estimate, to_gb
from estimator.i18n import N_, _, format_number, ngettext
from estimator.oom_message import OomReading
from estimator.options.methods import METHOD_LABELS, SHARDING_LABELS
from ui.charts import (
    USABLE_COLOR,
    _esc,
    _segment_traces,
    axis_top,
    both_units,
    font_layout,
    overlay_items,
    separators,
    stacked_bars_spec,
)
from ui.grids import FitsGrid
from ui.pins import duration, money, short_device

if TYPE_CHECKING:
    from ui.pins import PinResult

FITS_COLOR = "#009E73"  # bluish green (Okabe–Ito): the verdict "fits"
# One colour and dash per sharding, distinct from the usable line's vermillion.
SHARDING_STYLES: dict[str, tuple[str, str]] = {
    "none": ("#8C8C8C", "dot"),
    "zero1": ("#E69F00", "dashdot"),
    "zero2": ("#56B4E9", "dash"),
    "zero3": ("#0072B2", "solid"),
}


def _row_height(n_rows: int, font_size: int | None) -> int:
    """Pixels per bar: compact for many rows, never less than two lines of the label font."""
    return max(28 if n_rows > 12 else 44, 2 * (font_size or 0))


def fits_chart(grid: FitsGrid, *, font_size: int | None = None) -> go.Figure:
    """fits_chart_spec as a plotly Figure (validated)."""
    return go.Figure(fits_chart_spec(grid, font_size=font_size))


def fits_chart_spec(grid: FitsGrid, *, font_size: int | None = None) -> dict:
    """The seed's 36 GB laptop diagram for any device: one horizontal stacked bar per model × method against
    the usable line, each marked with its verdict band at its end (fits, close call, borderline, too big). The memory axis stops at 1.6 × the device's
    capacity (or the largest bar that fits): longer bars run off the edge with their total written inside.
    Plain plotly.js JSON ({"data": [...], "layout": {...}}), what ui.live_chart draws without building a Figure."""
    rows = [(c.label, c.estimate) for c in grid.cells]
    spec = stacked_bars_spec(rows, grid.device, orientation="h", band=False, show_values=False, font_size=font_size)
    layout = spec["layout"]
    capacity = to_gb(grid.device.capacity_bytes)
    fitting = [to_gb(c.estimate.total_bytes) for c in grid.cells if c.verdict.fits]
    x_max = max([capacity * 1.6, *(t * 1.25 for t in fitting)])
    labels = []
    for row_y, cell in zip(layout["yaxis"]["tickvals"], grid.cells, strict=True):  # the bars' y positions
        total = to_gb(cell.estimate.total_bytes)
        word = _(cell.verdict.band)  # fits, close call, borderline, too big: the calculator's bands
        color = FITS_COLOR if cell.verdict.fits else USABLE_COLOR
        clipped = total > x_max * 0.82
        labels.append(dict(
            x=min(total, x_max), y=row_y, xanchor="right" if clipped else "left",
            text=f"<b>{format_number(total)} GB · {word}</b>" + (" →" if total > x_max else ""), showarrow=False,
            font=dict(color="white" if clipped else color, size=(font_size or 12)),
            bgcolor=color if clipped else None, borderpad=2, xshift=-4 if clipped else 6, name="verdict"))
    layout["annotations"] = [*layout.get("annotations", ()), *labels]
    layout["xaxis"] = {**layout["xaxis"], "range": [0, x_max]}
    layout["height"] = 170 + _row_height(len(rows), font_size) * len(rows)
    return spec


def scale_out_chart(curves: Mapping[str, Sequence[Estimate]], gpu_counts: Sequence[int], device: Device, *,
                    font_size: int | None = None) -> go.Figure:
    """scale_out_chart_spec as a plotly Figure (validated)."""
    return go.Figure(scale_out_chart_spec(curves, gpu_counts, device, font_size=font_size))


def scale_out_chart_spec(curves: Mapping[str, Sequence[Estimate]], gpu_counts: Sequence[int], device: Device, *,
                         font_size: int | None = None) -> dict:
    """Per-GPU peak memory against the GPU count (log₂ axis), one line per sharding, with the device's
    usable line: where a line drops below it, that many GPUs of this kind fit the run. Plain plotly.js JSON,
    what ui.live_chart draws without building a Figure."""
    traces = []
    for sharding, ests in curves.items():
        color, dash = SHARDING_STYLES.get(sharding, ("#8C8C8C", "solid"))
        name = _(SHARDING_LABELS.get(sharding, sharding))
        hovers = []
        for n, est in zip(gpu_counts, ests, strict=True):
            text = (f"<b>{_esc(name)}</b> · " + ngettext("{n} GPU", "{n} GPUs", n).format(n=n) + "<br>"
                    + _("{amount} per GPU").format(amount=both_units(est.total_bytes)))
            if est.cpu_offload_bytes:
                text += "<br>" + _("kept in CPU RAM while training: {amount}").format(
                    amount=both_units(est.cpu_offload_bytes))
            hovers.append(text)
        traces.append(dict(type="scatter", x=list(gpu_counts), y=[to_gb(e.total_bytes) for e in ests], name=name,
                           mode="lines+markers", line=dict(color=color, dash=dash, width=3),
                           marker=dict(size=8, color=color), hovertext=hovers, hoverinfo="text"))
    all_totals = [to_gb(e.total_bytes) for ests in curves.values() for e in ests]
    top = max([*all_totals, to_gb(device.capacity_bytes)])
    layout = dict(
        height=460, hovermode="closest", margin=dict(t=36, b=10, l=10, r=24),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        separators=separators(),
        # automargin: room for the tick labels and titles (st.plotly_chart's theme added it; the live chart draws
        # the figure as given)
        xaxis=dict(type="log", title=dict(text=_("GPUs (log₂ scale)")), tickvals=list(gpu_counts),
                   ticktext=[str(n) for n in gpu_counts], automargin=True),
        yaxis=dict(title=dict(text=_("Peak memory per GPU (GB)")), range=[0, top * 1.08], ticksuffix=" GB",
                   zeroline=False, automargin=True),
    )
    if font_size:  # presentation mode: Streamlit's theme sets legend, tick and hover fonts itself
        font_layout(layout, font_size)
    shapes, notes = overlay_items(device, "y", layout["yaxis"]["range"])
    layout.update(shapes=shapes, annotations=notes)
    return {"data": traces, "layout": layout}


ATTENTION_COLOR = "#D55E00"  # vermillion (Okabe–Ito): the s² attention probabilities
OTHER_ACTS_COLOR = "#56B4E9"  # sky blue: the other activations and the loss
RESIDENT_COLOR = "#999999"  # grey: weights, adapters and optimizer state


def attention_share_chart(rows: Sequence[tuple[int, Estimate]], device: Device | None = None, *,
                          font_size: int | None = None) -> go.Figure:
    """attention_share_chart_spec as a plotly Figure (validated)."""
    return go.Figure(attention_share_chart_spec(rows, device, font_size=font_size))


def attention_share_chart_spec(rows: Sequence[tuple[int, Estimate]], device: Device | None = None, *,
                               font_size: int | None = None) -> dict:
    """How the s² attention term grows with the max length on MLX (How page): one stacked bar per length, the
    resident part (weights, adapters, optimizer state), the trained blocks' attention probabilities
    (DetailItem "activations.attention_scores": B·H·L² per trained block) and everything else, against the device's
    usable line. `rows` are (max length, the MLX estimate at that length). Plain plotly.js JSON, what ui.live_chart
    draws without building a Figure."""
    from estimator.memory.result import detail_bytes

    labels = [format_number(length, 0) for length, _est in rows]
    resident = [to_gb(e.components_bytes["weights"] + e.components_bytes["optimizer"]) for _l, e in rows]
    probs = [to_gb(detail_bytes(e.details, "activations.attention_scores")) for _l, e in rows]
    other = [to_gb(e.total_bytes) - r - p for (_l, e), r, p in zip(rows, resident, probs, strict=True)]
    traces = [dict(type="bar", x=labels, y=values, name=name, marker=dict(color=color),
                   hovertemplate="%{x}: %{y:.1f} GB<extra>" + _esc(name) + "</extra>")
              for name, values, color in ((_("Weights and optimizer state"), resident, RESIDENT_COLOR),
                                          (_("Attention probabilities (B·H·L²)"), probs, ATTENTION_COLOR),
                                          (_("Other activations and the loss"), other, OTHER_ACTS_COLOR))]
    top = max([to_gb(e.total_bytes) for _l, e in rows] + ([to_gb(device.capacity_bytes)] if device else []) or [1.0])
    layout = dict(barmode="stack", separators=separators(), height=360, margin=dict(t=30, b=40),
                  # category axis: one bar per length, evenly spaced (the labels are formatted numbers)
                  xaxis=dict(title=dict(text=_("Max length (tokens)")), type="category"),
                  yaxis=dict(title=dict(text="GB"), range=[0, top * 1.1]),
                  legend=dict(orientation="h", y=-0.25))
    if device is not None:
        shapes, notes = overlay_items(device, "y", layout["yaxis"]["range"])
        layout.update(shapes=shapes, annotations=notes)
    if font_size:  # presentation mode: Streamlit's theme sets legend, tick and hover fonts itself
        font_layout(layout, font_size)
    return {"data": traces, "layout": layout}


# The device at the failure (pages/oom.py): what the out-of-memory message says holds the memory.
OOM_PARTS: tuple[tuple[str, str, str], ...] = (
    ("allocated", "#0072B2", N_("PyTorch's tensors")),
    ("unallocated", "#56B4E9", N_("Reserved, unallocated (cached pieces)")),
    ("others", "#CC79A7", N_("Other processes and non-PyTorch memory")),
    ("in_use", "#8C8C8C", N_("In use (the message does not say by what)")),
    ("unknown", "#D9D9D9", N_("Not given by the message")),
    ("free", "#009E73", N_("Free")),
)
REQUEST_COLOR = "#D55E00"  # vermillion: the allocation that failed


def oom_segments(reading: OomReading) -> dict[str, float]:
    """The device's memory at the failure in parts (bytes), from the message: PyTorch's tensors, its cached pieces,
    everything else (other processes, the CUDA context, the driver: the total less the other three) and free. An
    MPS message splits its limit the same way (other allocations in 'others', the rest free). A part the message
    does not give is not guessed: without PyTorch's split, the memory in use is one part ('in_use'); without the
    free memory, what the given parts leave of the total is 'unknown'. Empty when it gives no total."""
    mps = reading.kind == "mps"
    total = reading.limit_bytes if mps else reading.capacity_bytes
    if not total:
        return {}
    split = ({"allocated": reading.allocated_bytes, "others": reading.other_bytes} if mps else
             {"allocated": reading.allocated_bytes, "unallocated": reading.reserved_unallocated_bytes})
    given = {k: v for k, v in split.items() if v is not None}
    free = None if mps else reading.free_bytes
    rest = max(total - sum(given.values()) - (free or 0), 0)
    if len(given) < len(split):  # PyTorch's split cut off: in use (with the free memory), else unknown
        if free is None:
            return {**given, "unknown": rest}
        return {**given, "in_use": rest, "free": free}
    if mps:
        return {**given, "free": rest}  # the limit less the tensors and the other allocations
    if free is None:
        return {**given, "unknown": rest}
    return {**given, "others": rest, "free": free}


def oom_chart(reading: OomReading, *, font_size: int | None = None) -> go.Figure:
    """oom_chart_spec as a plotly Figure (validated)."""
    return go.Figure(oom_chart_spec(reading, font_size=font_size))


def oom_chart_spec(reading: OomReading, *, font_size: int | None = None) -> dict:
    """Two horizontal bars in GB: the device at the failure (PyTorch's tensors, cached pieces, everything else,
    free) and the request that failed, so the gap between 'free' and the request is seen at a glance. Plain
    plotly.js JSON, what ui.live_chart draws without building a Figure."""
    parts = oom_segments(reading)
    row_device = _("Device at the failure")
    row_request = _("Requested")
    traces = []
    for key, color, name in OOM_PARTS:
        value = parts.get(key, 0.0)
        if not value:
            continue
        traces.append(dict(type="bar", y=[row_device], x=[to_gb(value)], orientation="h", name=_(name),
                           marker=dict(color=color),
                           hovertemplate=f"{_esc(_(name))}: {_esc(both_units(value, 2))}<extra></extra>"))
    if reading.requested_bytes is not None:
        traces.append(dict(
            type="bar", y=[row_request], x=[to_gb(reading.requested_bytes)], orientation="h", name=_("Requested"),
            marker=dict(color=REQUEST_COLOR),
            hovertemplate=f"{_esc(_('Requested'))}: {_esc(both_units(reading.requested_bytes, 2))}<extra></extra>"))
    # The row labels and the axis title take the margins they need (automargin); the legend sits above the plot,
    # as on the calculator's chart, clear of the axis title below it.
    layout = dict(barmode="stack", height=240, margin=dict(l=10, r=10, t=10, b=10), separators=separators(),
                  xaxis=dict(title=dict(text=_("Memory (GB)")), automargin=True),
                  legend=dict(orientation="h", traceorder="normal", x=0, xanchor="left", y=1.0, yanchor="bottom"),
                  yaxis=dict(categoryorder="array", categoryarray=[row_request, row_device], automargin=True))
    if font_size:  # presentation mode: Streamlit's theme sets legend, tick and hover fonts itself
        font_layout(layout, font_size)
    return {"data": traces, "layout": layout}


# Setups side by side (the Compare page's pins): memory on top, the step's speed and the run's cost below it.
SPEED_COLOR = "#0072B2"  # blue: tokens per second (the time rows carry no component colour)
COST_COLOR = "#E69F00"  # orange: the run's cost or hours
CLOSE_COLOR = "#8C8C8C"  # grey: a close call's label (neither fits nor too big)
PIN_ROW_GAP = 0.07  # paper units between the chart's rows


def pins_chart(results: Sequence[PinResult], *, font_size: int | None = None) -> go.Figure:
    """pins_chart_spec as a plotly Figure (validated)."""
    return go.Figure(pins_chart_spec(results, font_size=font_size))


def _pin_label(n: int, result: PinResult) -> str:
    """A pin's tick label: its number and model, then the method, batch × length and the device (with the GPU count
    when there are several: the memory is per GPU)."""
    job = result.job
    return "<br>".join((f"<b>{n}</b> · {_esc(job.spec.name)}",
                        _esc(f"{_(METHOD_LABELS.get(job.setup.method, job.setup.method))} · "
                             f"{format_number(job.setup.batch, 0)} × {format_number(job.setup.seq_len, 0)}"),
                        _esc((f"{job.setup.gpus} × " if job.setup.gpus > 1 else "") + short_device(job.device))))


def pins_chart_spec(results: Sequence[PinResult], *, font_size: int | None = None) -> dict:
    """Up to four pinned setups on one axis, one column each (its number, model, method, batch × length and device
    under the last row): on top the memory as stacked bars (the calculator's components and colours) with each pin's
    own device usable line across its bar and its total and verdict above it; below, a row of tokens per second (all
    GPUs) and, where a dataset size was given, a row of the run's cost (with a price per GPU-hour) or its hours, each
    value written on its bar so a room can read it. A pin whose time is unknown (a custom device has no compute
    figures) says so in its column. Plain plotly.js JSON, what ui.live_chart draws without building a Figure."""
    if not results:
        raise ValueError("pins_chart needs at least one pinned setup")
    n = len(results)
    positions = list(range(n))
    ests = [r.estimate for r in results]
    labels = [_pin_label(i, r) for i, r in enumerate(results, start=1)]
    size = font_size or 13
    value_size = size + (4 if font_size else 1)  # the written values: larger in presentation mode, for the room
    has_run = any(r.run is not None for r in results)
    priced = any(r.cost is not None for r in results)
    # the rows' domains (paper units), top to bottom: memory, speed, and with a run its cost or hours
    domains = ([0.47, 1.0], [0.24, 0.38], [0.0, 0.15]) if has_run else ([0.32, 1.0], [0.0, 0.22])
    devices = {r.job.device.id for r in results}
    device = results[0].job.device if len(devices) == 1 else None  # the overhead's name: one runtime or generic
    top = max(max(to_gb(e.high_bytes) for e in ests), max(to_gb(r.usable_bytes) for r in results))
    traces = _segment_traces(labels, ests, device, "v", to_gb(max(e.total_bytes for e in ests)))
    if len({r.job.device.runtime for r in results}) > 1:  # a Mac beside a CUDA card: the overhead names no runtime
        for t in traces:
            if t["meta"] == "overhead":
                t["name"] = _("Overhead (runtime + allocator)")
    annotations: list[dict] = []
    shapes: list[dict] = []
    for i, r in enumerate(results):
        usable = to_gb(r.usable_bytes)
        shapes.append(dict(type="line", x0=i - 0.38, x1=i + 0.38, xref="x", y0=usable, y1=usable, yref="y",
                           line=dict(color=USABLE_COLOR, width=3, dash="dash"), name="usable"))
        total = to_gb(r.estimate.total_bytes)
        color = FITS_COLOR if r.band == "fits" else CLOSE_COLOR if r.fits else USABLE_COLOR
        # above the bar and its usable line, so neither crosses the words
        annotations.append(dict(
            x=i, xref="x", y=max(total, usable), yref="y", yanchor="bottom", yshift=4, showarrow=False, name="total",
            text=f"<b>{format_number(total)} GB</b><br>{_esc(_(r.band))}", font=dict(size=value_size + 1, color=color)))
    # one legend entry for the usable lines (shapes have none)
    traces.append(dict(type="scatter", x=[None], y=[None], mode="lines", hoverinfo="skip",
                       name=_("Usable memory of each pin's device"), line=dict(color=USABLE_COLOR, width=3, dash="dash")))
    speeds = [r.tokens_per_second for r in results]
    known = [s for s in speeds if s is not None]
    traces.append(dict(
        type="bar", x=positions, y=[s or 0 for s in speeds], xaxis="x2", yaxis="y2", width=0.5, showlegend=False,
        name=_("Tokens per second"), marker=dict(color=SPEED_COLOR), hoverinfo="text",
        hovertext=[_("{n} tokens/s").format(n=format_number(s, 0)) if s is not None else _("time unknown")
                   for s in speeds]))
    # the values as annotations above the bars (a bar's own text would be hidden where the column is narrow)
    for i, (s, r) in enumerate(zip(speeds, results, strict=True)):
        if s is None:
            annotations.append(dict(x=i, xref="x2", y=0, yref="y2", yanchor="bottom", showarrow=False, name="unknown",
                                    text=_("time unknown"), hovertext=_esc(r.time_note),
                                    font=dict(size=size, color=CLOSE_COLOR)))
        else:
            annotations.append(dict(x=i, xref="x2", y=s, yref="y2", yanchor="bottom", showarrow=False, name="speed",
                                    text=f"<b>{format_number(s, 0)}</b><br>" + _("tokens/s"),
                                    font=dict(size=value_size)))
    hidden = dict(matches="x", showticklabels=False, showgrid=False, zeroline=False)
    ticks = dict(tickvals=positions, ticktext=labels, range=[-0.5, n - 0.5], showgrid=False, zeroline=False,
                 automargin=True)
    layout = dict(
        barmode="stack", hovermode="closest", showlegend=True, separators=separators(),
        legend=dict(orientation="h", traceorder="normal", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        margin=dict(t=10, b=10, l=10, r=10), uniformtext=dict(minsize=10, mode="hide"),
        height=(640 if has_run else 540) + (80 if font_size else 0),
        xaxis=dict(anchor="y", range=[-0.5, n - 0.5], tickvals=positions, showticklabels=False, showgrid=False,
                   zeroline=False),
        yaxis=dict(domain=domains[0], title=dict(text=_("Memory (GB)")), range=[0, axis_top(top * 1.3)],
                   ticksuffix=" GB", zeroline=False, automargin=True),
        xaxis2=dict(anchor="y2", **(hidden if has_run else {**ticks, "matches": "x"})),
        yaxis2=dict(domain=domains[1], title=dict(text=_("Tokens/s")), range=[0, max(known or [1]) * 1.8],
                    showticklabels=False, showgrid=False, zeroline=True, automargin=True),
        shapes=shapes,
    )
    if has_run:
        values, texts = [], []
        for r in results:
            if r.run is None or (priced and r.cost is None):
                values.append(0)
                texts.append("")
            elif priced:
                values.append(r.cost.total)
                texts.append(f"<b>{money(r.cost.total)}</b><br>{duration(r.run.seconds)}")
            else:
                values.append(r.run.hours)
                texts.append(f"<b>{duration(r.run.seconds)}</b>")
        title = _("Cost per run") if priced else _("Time per run")
        traces.append(dict(
            type="bar", x=positions, y=values, xaxis="x3", yaxis="y3", width=0.5, showlegend=False, name=title,
            marker=dict(color=COST_COLOR), hoverinfo="text", hovertext=[t.replace("<br>", " · ") for t in texts]))
        annotations += [dict(x=i, xref="x3", y=v, yref="y3", yanchor="bottom", showarrow=False, name="run", text=t,
                             font=dict(size=value_size)) for i, (v, t) in enumerate(zip(values, texts, strict=True)) if t]
        layout.update(
            xaxis3=dict(anchor="y3", **ticks, matches="x"),
            yaxis3=dict(domain=domains[2], title=dict(text=title), range=[0, (max(values) or 1) * 1.8],
                        showticklabels=False, showgrid=False, zeroline=True, automargin=True))
    layout["annotations"] = annotations
    if font_size:  # presentation mode: Streamlit's theme sets legend, tick and hover fonts itself
        font_layout(layout, font_size)
        for axis in ("xaxis2", "xaxis3", "yaxis2", "yaxis3"):
            if axis in layout:
                spec = layout[axis]
                layout[axis] = {**spec, "tickfont": {"size": font_size},
                                "title": {**spec.get("title", {}), "font": {"size": font_size}}}
    return {"data": traces, "layout": layout}


# ---- Why not the rule of thumb (the calculator): the rule's bar, the steps to ours, our bar -------------------------

# Each step's name on the chart's axis, by its stable key (estimator/memory/why.py STEP_KEYS); the step's whole label
# (its numbers, what it is against) is in its hover and in the list under the chart.
WHY_STEP_NAMES: dict[str, str] = {
    "precision": N_("Precision recipe"),
    "adapters": N_("Adapters"),
    "base": N_("Frozen base"),
    "load": N_("16-bit load"),
    "activations": N_("Activations"),
    "attention": N_("Attention"),
    "loss": N_("Logits and loss"),
    "reference": N_("Reference model"),
    "generation": N_("Generation"),
    "runtime": N_("Runtime and allocator"),
    "eager_attention": N_("Eager attention"),
    "sharding": N_("Sharding"),
    "offload": N_("Moved to CPU RAM"),
}
WHY_RULE_NAME = N_("Rule of thumb")
WHY_OURS_NAME = N_("This estimate")
WHY_UP_COLOR = "#E69F00"  # orange (Okabe–Ito): a step that adds to the rule's number
WHY_DOWN_COLOR = "#009E73"  # bluish green: a step that takes from it
WHY_TOTAL_COLOR = "#0072B2"  # blue: the rule's bar and ours
WHY_ROW_PX = 34  # pixels per bar


def why_bars(why) -> list[tuple[str, str, int]]:  # noqa: ANN001 - estimator.memory.why.Why
    """The waterfall's bars as (key, measure, whole bytes): the rule ("rule", "absolute"), every step that moves the
    number ("relative"; a step of exactly 0 B is left out, which changes no sum), ours ("total", "total"). The
    relative bytes add up from the rule's to ours exactly (memory/why.py)."""
    return ([("rule", "absolute", int(why.rule_bytes))]
            + [(s.key, "relative", int(s.bytes)) for s in why.steps if s.bytes]
            + [("total", "total", int(why.total_bytes))])


def _two_lines(name: str, longest: int = 15) -> str:
    """An axis label longer than `longest` characters on two lines, broken at the space nearest its middle (a
    phone's narrow plot keeps its width for the bars)."""
    spaces = [i for i, ch in enumerate(name) if ch == " "]
    if len(name) <= longest or not spaces:
        return _esc(name)
    cut = min(spaces, key=lambda i: abs(i - len(name) / 2))
    return _esc(name[:cut]) + "<br>" + _esc(name[cut + 1:])


def _signed_gb(n_bytes: float) -> str:
    gb = to_gb(n_bytes)
    return ("+" if gb >= 0 else "−") + format_number(abs(gb)) + " GB"


def why_waterfall(why, *, font_size: int | None = None) -> go.Figure:  # noqa: ANN001
    """why_waterfall_spec as a plotly Figure (validated)."""
    return go.Figure(why_waterfall_spec(why, font_size=font_size))


def why_waterfall_spec(why, *, font_size: int | None = None) -> dict:  # noqa: ANN001 - estimator.memory.why.Why
    """Why not the rule of thumb, as a horizontal waterfall: the rule's number for this model and method on top, each
    named step from it to this estimate (memory/why.py why_not_rule: they add up exactly), and this estimate's
    total at the bottom, in GB; each step's hover holds its whole label. No device line: the chart is about the
    numbers' differences (the memory bar beside the verdict has the device). Plain plotly.js JSON, what
    ui.live_chart draws; `customdata` keeps each bar's whole bytes (the rule's, the steps', ours)."""
    bars = why_bars(why)
    labels = {s.key: s.label for s in why.steps}
    names, hovers, texts = [], [], []
    for key, measure, n_bytes in bars:
        if measure == "relative":
            name = _(WHY_STEP_NAMES.get(key, key))
            text, sign = _signed_gb(n_bytes), "+" if n_bytes >= 0 else "−"
            detail = _(labels[key])
        else:
            name = _(WHY_RULE_NAME) if key == "rule" else _(WHY_OURS_NAME)
            text, sign = f"{format_number(to_gb(n_bytes))} GB", ""
            detail = _(why.rule_label) if key == "rule" else _("The detailed estimate's peak")
        names.append(name)
        texts.append(text)
        hovers.append(f"<b>{_esc(name)}</b>: {sign}{_esc(both_units(abs(n_bytes), 2))}<br>{_esc(detail)}")
    positions = list(range(len(bars)))
    running, ends = 0, []
    for _key, measure, n_bytes in bars:
        running = n_bytes if measure != "relative" else running + n_bytes
        ends.append(to_gb(running))
    longest = max(ends + [to_gb(why.rule_bytes)])
    trace = dict(
        type="waterfall", orientation="h", y=positions, x=[to_gb(b) if m != "total" else 0.0 for _k, m, b in bars],
        measure=[m for _k, m, _b in bars], customdata=[b for _k, _m, b in bars], text=texts, textposition="outside",
        cliponaxis=False, hovertext=hovers, hoverinfo="text", name=_(WHY_OURS_NAME), showlegend=False,
        connector=dict(line=dict(color="#8C8C8C", width=1, dash="dot")),
        increasing=dict(marker=dict(color=WHY_UP_COLOR)), decreasing=dict(marker=dict(color=WHY_DOWN_COLOR)),
        totals=dict(marker=dict(color=WHY_TOTAL_COLOR)), meta=[k for k, _m, _b in bars])
    row = max(WHY_ROW_PX, round(2.4 * (font_size or 12)))  # a two-line label fits its row
    layout = dict(
        height=70 + row * len(bars), showlegend=False, hovermode="closest",
        # the right margin holds a bar's "+0.5 GB" past the axis's end (cliponaxis off): on a phone, where the plot
        # is narrow, the text of a bar near the end is not cut
        margin=dict(t=10, b=10, l=10, r=4 * (font_size or 12) + 10), separators=separators(),
        xaxis=dict(title=dict(text=_("Memory (GB; 1 GB = 10⁹ bytes)")), range=[0, axis_top(longest * 1.15)],
                   ticksuffix=" GB", zeroline=False, automargin=True),
        yaxis=dict(tickvals=positions, ticktext=[_two_lines(n) for n in names], range=[len(bars) - 0.5, -0.5],
                   showgrid=False, zeroline=False, automargin=True),
    )
    if font_size:
        font_layout(layout, font_size)
    return {"data": [trace], "layout": layout}
