"""Figure builders for the secondary pages (compare, what fits, scale out). Pure functions returning plotly
Figures, no Streamlit; they reuse ui.charts' colours, stacked bars and device overlay so every page draws
memory the same way. Values are decimal GB; hovers add GiB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from estimator import Device, Estimate, to_gb
from estimator.i18n import _, format_number, ngettext
from estimator.options.methods import SHARDING_LABELS
from ui.charts import (
    USABLE_COLOR,
    _esc,
    both_units,
    capacity_overlay,
    font_layout,
    separators,
    stacked_bars,
)
from ui.grids import FitsGrid

FITS_COLOR = "#009E73"  # bluish green (Okabe–Ito): the verdict "fits"
# One colour and dash per sharding, distinct from the usable line's vermillion.
SHARDING_STYLES: dict[str, tuple[str, str]] = {
    "none": ("#8C8C8C", "dot"),
    "zero1": ("#E69F00", "dashdot"),
    "zero2": ("#56B4E9", "dash"),
    "zero3": ("#0072B2", "solid"),
}


def _font_size(fig: go.Figure, size: int | None) -> None:
    """Presentation mode: Streamlit's theme sets legend, tick and hover fonts itself, so size each one."""
    if size:
        fig.update_layout(font_layout({}, size))


def _row_height(n_rows: int, font_size: int | None) -> int:
    """Pixels per bar: compact for many rows, never less than two lines of the label font."""
    return max(28 if n_rows > 12 else 44, 2 * (font_size or 0))


def fits_chart(grid: FitsGrid, *, font_size: int | None = None) -> go.Figure:
    """The seed's 36 GB laptop diagram for any device: one horizontal stacked bar per model × method against
    the usable line, each marked with its verdict band at its end (fits, close call, borderline, too big). The memory axis stops at 1.6 × the device's
    capacity (or the largest bar that fits): longer bars run off the edge with their total written inside."""
    rows = [(c.label, c.estimate) for c in grid.cells]
    fig = stacked_bars(rows, grid.device, orientation="h", band=False, show_values=False, font_size=font_size)
    capacity = to_gb(grid.device.capacity_bytes)
    fitting = [to_gb(c.estimate.total_bytes) for c in grid.cells if c.verdict.fits]
    x_max = max([capacity * 1.6, *(t * 1.25 for t in fitting)])
    rows_at = list(fig.layout.yaxis.tickvals or [_esc(c.label) for c in grid.cells])  # the bars' y positions
    labels = []  # added in one update: add_annotation per bar re-validates the whole list (quadratic)
    for row_y, cell in zip(rows_at, grid.cells, strict=True):
        total = to_gb(cell.estimate.total_bytes)
        word = _(cell.verdict.band)  # fits, close call, borderline, too big: the calculator's bands
        color = FITS_COLOR if cell.verdict.fits else USABLE_COLOR
        clipped = total > x_max * 0.82
        labels.append(dict(
            x=min(total, x_max), y=row_y, xanchor="right" if clipped else "left",
            text=f"<b>{format_number(total)} GB · {word}</b>" + (" →" if total > x_max else ""), showarrow=False,
            font=dict(color="white" if clipped else color, size=(font_size or 12)),
            bgcolor=color if clipped else None, borderpad=2, xshift=-4 if clipped else 6, name="verdict"))
    fig.update_layout(annotations=[*fig.layout.annotations, *labels], xaxis_range=[0, x_max],
                      height=170 + _row_height(len(rows), font_size) * len(rows))
    return fig


def scale_out_chart(curves: Mapping[str, Sequence[Estimate]], gpu_counts: Sequence[int], device: Device, *,
                    font_size: int | None = None) -> go.Figure:
    """Per-GPU peak memory against the GPU count (log₂ axis), one line per sharding, with the device's
    usable line: where a line drops below it, that many GPUs of this kind fit the run."""
    fig = go.Figure()
    for sharding, ests in curves.items():
        color, dash = SHARDING_STYLES.get(sharding, ("#8C8C8C", "solid"))
        name = _(SHARDING_LABELS.get(sharding, sharding))
        totals = [to_gb(e.total_bytes) for e in ests]
        hovers = []
        for n, est in zip(gpu_counts, ests, strict=True):
            text = (f"<b>{_esc(name)}</b> · " + ngettext("{n} GPU", "{n} GPUs", n).format(n=n) + "<br>"
                    + _("{amount} per GPU").format(amount=both_units(est.total_bytes)))
            if est.cpu_offload_bytes:
                text += "<br>" + _("optimizer state in CPU RAM: {amount}").format(
                    amount=both_units(est.cpu_offload_bytes))
            hovers.append(text)
        fig.add_scatter(x=list(gpu_counts), y=totals, name=name, mode="lines+markers",
                        line=dict(color=color, dash=dash, width=3), marker=dict(size=8, color=color),
                        hovertext=hovers, hoverinfo="text")
    all_totals = [to_gb(e.total_bytes) for ests in curves.values() for e in ests]
    top = max([*all_totals, to_gb(device.capacity_bytes)])
    fig.update_layout(
        height=460, hovermode="closest", margin=dict(t=36, b=10, l=10, r=24),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        separators=separators(),
        xaxis=dict(type="log", title_text=_("GPUs (log₂ scale)"), tickvals=list(gpu_counts),
                   ticktext=[str(n) for n in gpu_counts]),
        yaxis=dict(title_text=_("Peak memory per GPU (GB)"), range=[0, top * 1.08], ticksuffix=" GB", zeroline=False),
    )
    _font_size(fig, font_size)
    capacity_overlay(fig, device, axis="y")
    return fig


ATTENTION_COLOR = "#D55E00"  # vermillion (Okabe–Ito): the s² attention probabilities
OTHER_ACTS_COLOR = "#56B4E9"  # sky blue: the other activations and the loss
RESIDENT_COLOR = "#999999"  # grey: weights, adapters and optimizer state


def attention_share_chart(rows: Sequence[tuple[int, Estimate]], device: Device | None = None, *,
                          font_size: int | None = None) -> go.Figure:
    """How the s² attention term grows with the max length on MLX (How page): one stacked bar per length, the
    resident part (weights, adapters, optimizer state), the trained blocks' attention probabilities
    (DetailItem "activations.attention_scores": B·H·L² per trained block) and everything else, against the device's
    usable line. `rows` are (max length, the MLX estimate at that length)."""
    from estimator.memory.result import detail_bytes

    labels = [format_number(length, 0) for length, _est in rows]
    resident = [to_gb(e.components_bytes["weights"] + e.components_bytes["optimizer"]) for _l, e in rows]
    probs = [to_gb(detail_bytes(e.details, "activations.attention_scores")) for _l, e in rows]
    other = [to_gb(e.total_bytes) - r - p for (_l, e), r, p in zip(rows, resident, probs, strict=True)]
    fig = go.Figure()
    for name, values, color in ((_("Weights and optimizer state"), resident, RESIDENT_COLOR),
                                (_("Attention probabilities (B·H·L²)"), probs, ATTENTION_COLOR),
                                (_("Other activations and the loss"), other, OTHER_ACTS_COLOR)):
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color,
                             hovertemplate="%{x}: %{y:.1f} GB<extra>" + _esc(name) + "</extra>"))
    fig.update_layout(barmode="stack", separators=separators(), height=360, margin={"t": 30, "b": 40},
                      xaxis_title=_("Max length (tokens)"), yaxis_title="GB", legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(type="category")  # one bar per length, evenly spaced (the labels are formatted numbers)
    if device is not None:
        capacity_overlay(fig, device, axis="y")
    _font_size(fig, font_size)
    return fig
