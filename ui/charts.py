"""Chart builders: Estimate(s) + Device → plotly Figure. Pure functions (no Streamlit), so every page can
reuse them and tests can read the figures directly.

Memory is drawn in decimal GB (1 GB = 10⁹ bytes, what vendors print); hovers add GiB (2³⁰ bytes, what
PyTorch and nvidia-smi report). Components keep one fixed colour everywhere (Okabe–Ito palette: safe for
the common colour-vision deficiencies, mid-saturation so it reads on light and dark themes and on a
projector); the device's limits are neutral grey and vermillion so they never look like a component.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from estimator import ALL_COMPONENT_KEYS, Device, Estimate, component_keys, fmt_both, to_gb
from estimator.i18n import DEFAULT_LANGUAGE, N_, _, format_number, get_language
from estimator.memory.result import CONTEXT_KEY, component_label, context_label

# Fixed colour per component, in stacking order (weights → gradients → optimizer → activations → overhead).
COMPONENT_COLORS: dict[str, str] = {
    "weights": "#0072B2",  # blue
    "gradients": "#E69F00",  # orange
    "optimizer": "#009E73",  # bluish green
    "activations": "#CC79A7",  # reddish purple
    "overhead": "#6E6E6E",  # dark neutral grey: not the model's own memory; apart from activations under CVD
    # Preference/RL trainers only (estimator/memory/trainers.py), chosen to stay apart from
    # the Okabe–Ito components: reference copy brown, generation violet (ΔE ≥ 12 under CVD: tests).
    "reference": "#994F00",  # brown
    "generation": "#AA44FF",  # violet
}
TRAINER_KEYS = ("reference", "generation")
# LoRA/QLoRA: the frozen base is the lighter shade of the weights' blue (sky blue), adapters the full blue.
FROZEN_COLOR = "#56B4E9"
USABLE_COLOR = "#D55E00"  # vermillion: the limit that decides the verdict
CAPACITY_COLOR = "#8C8C8C"  # grey: the machine's total memory
RESERVED_FILL = "rgba(140, 140, 140, 0.22)"  # the OS-and-apps band, readable on white and on #0E1117
BAND_COLOR = "#7F7F7F"  # low–high whisker

# Trace names (also the legend). Weights split into two traces when any row trains adapters.
FROZEN_NAME = N_("Weights (frozen base)")  # translated where drawn; Segment.part identifies the piece
TRAINABLE_NAME = N_("Weights (trainable)")
BAND_NAME = N_("Likely range (low–high)")

# The detail key the estimator gives the frozen base (detailed mode) — the rest of "weights" trains
# (adapters, their autocast copies) or is the full model's weights.
_FROZEN_DETAIL_KEY = "weights.base"


@dataclass(frozen=True)
class Segment:
    """One stacked piece of a bar: a trace name (shown), its colour, the component it belongs to and, for the
    split weights, which part ("frozen" or "trainable"; "" for a whole component)."""

    name: str
    color: str
    component: str
    part: str = ""


def _esc(text: str) -> str:
    """Plotly renders a subset of HTML in names, ticks and hovers: user text (an uploaded config's name)
    must show literally."""
    return html.escape(str(text), quote=False)


def both_units(n_bytes: float, digits: int = 1) -> str:
    """'17.2 GB (16.0 GiB)' — the label format every hover uses."""
    return fmt_both(n_bytes, digits)


def splits_weights(est: Estimate) -> bool:
    """Are the weights split into a frozen base and trainable adapters (LoRA/QLoRA)?"""
    return est.setup.method in ("lora", "qlora")


def frozen_weight_bytes(est: Estimate) -> float:
    """Bytes of frozen base weights inside est's 'weights' component (0 for full fine-tuning).

    Detailed mode names the frozen base in its details; the seed rule counts only the frozen base as
    weights for LoRA/QLoRA (its adapter lives in the fixed margin)."""
    if not splits_weights(est):
        return 0.0
    if est.mode == "seed":
        return float(est.components_bytes["weights"])
    return float(sum(d.bytes for d in est.details if d.component == "weights" and d.key == _FROZEN_DETAIL_KEY))


def segments(estimates: Sequence[Estimate], device: Device | None = None) -> list[Segment]:
    """The stacked pieces, in order, for a set of estimates drawn on one axis (the overhead named for the
    device's runtime)."""
    out: list[Segment] = []
    present = {k for e in estimates for k in component_keys(e)}
    for key in ALL_COMPONENT_KEYS:
        if key in TRAINER_KEYS and key not in present:
            continue  # an SFT chart keeps its five segments
        if key == "weights" and any(splits_weights(e) for e in estimates):
            out.append(Segment(FROZEN_NAME, FROZEN_COLOR, key, "frozen"))
            out.append(Segment(TRAINABLE_NAME, COMPONENT_COLORS[key], key, "trainable"))
        else:
            out.append(Segment(component_label(key, device), COMPONENT_COLORS[key], key))
    return out


def segment_bytes(est: Estimate, seg: Segment) -> float:
    """Bytes of one segment in one estimate; the segments of an estimate sum to its total."""
    if seg.part == "frozen":
        return frozen_weight_bytes(est)
    if seg.part == "trainable":
        return float(est.components_bytes["weights"]) - frozen_weight_bytes(est)
    return float(est.components_bytes.get(seg.component, 0.0))


def _detail_lines(est: Estimate, seg: Segment, device: Device | None = None) -> list[str]:
    """The detail items behind a segment, for its hover."""
    items = [d for d in est.details if d.component == seg.component and d.bytes > 0]
    if seg.part == "frozen":
        items = [d for d in items if est.mode == "seed" or d.key == _FROZEN_DETAIL_KEY]
    elif seg.part == "trainable":
        items = [] if est.mode == "seed" else [d for d in items if d.key != _FROZEN_DETAIL_KEY]
    return [f"· {_esc(context_label(device) if d.key == CONTEXT_KEY else _(d.label))}: {both_units(d.bytes, 2)}"
            for d in items]


def _hover(row_label: str, est: Estimate, seg: Segment, value: float, device: Device | None = None) -> str:
    share = value / est.total_bytes if est.total_bytes else 0.0
    head = f"<b>{_esc(_(seg.name))}</b>: " + _("{amount} · {share} % of {total} GB").format(
        amount=both_units(value, 2), share=format_number(100 * share, 0), total=format_number(to_gb(est.total_bytes)))
    lines = [_esc(row_label), head, *_detail_lines(est, seg, device)]
    return "<br>".join(lines)


BAR_WIDTH = 0.5  # in category units; the likely-range whisker sits beside the bar, clear of its colours
BAND_OFFSET = 0.4  # whisker position from the bar's centre (above a horizontal bar, right of a vertical one)
LABEL_ROOM = 0.55  # extra category units before the first row: room for the device lines' labels
BOTTOM_ROOM = 0.35  # and after the last row: room for the "OS and apps" label under the bars


def stacked_bars(rows: Sequence[tuple[str, Estimate]], device: Device | None = None, *,
                 orientation: str = "h", band: bool = True, title: str | None = None,
                 font_size: int | None = None, show_values: bool = True) -> go.Figure:
    """stacked_bars_spec as a plotly Figure (validated)."""
    return go.Figure(stacked_bars_spec(rows, device, orientation=orientation, band=band, title=title,
                                       font_size=font_size, show_values=show_values))


def stacked_bars_spec(rows: Sequence[tuple[str, Estimate]], device: Device | None = None, *,
                      orientation: str = "h", band: bool = True, title: str | None = None,
                      font_size: int | None = None, show_values: bool = True) -> dict:
    """Several setups on one memory axis: one stacked bar per (label, Estimate), components in the fixed
    order and colours, the device's capacity overlay when a device is given, and each estimate's likely
    range (low–high) as a whisker beside its bar.

    orientation "h" draws horizontal bars (memory on x; rows top to bottom in the given order), "v"
    vertical bars (memory on y; rows left to right). Rows sit at numeric positions 0, 1, … with the labels
    as tick text. Values are GB; hovers list the detail items in GB and GiB. Returns the figure as plain
    plotly.js JSON ({"data": [...], "layout": {...}}): what ui.live_chart draws without building a Figure."""
    if orientation not in ("h", "v"):
        raise ValueError("orientation must be 'h' or 'v'")
    if not rows:
        raise ValueError("stacked_bars needs at least one (label, Estimate) row")
    labels = [_esc(label) for label, _ in rows]
    ests = [est for _, est in rows]
    horizontal = orientation == "h"
    longest = max(to_gb(e.high_bytes) for e in ests)
    traces = _segment_traces(labels, ests, device, orientation, longest if show_values else 0.0)
    if band and any(e.high_bytes != e.low_bytes for e in ests):
        traces.append(_band_trace(labels, ests, horizontal))
    top = longest if device is None else max(longest, to_gb(device.capacity_bytes))
    layout = _stacked_layout(labels, horizontal, top, title, font_size)
    if device is not None:
        axis = layout["xaxis" if horizontal else "yaxis"]
        shapes, notes = overlay_items(device, "x" if horizontal else "y", axis["range"])
        layout.update(shapes=shapes, annotations=notes)
    return {"data": traces, "layout": layout}


def _segment_traces(labels: list[str], ests: list[Estimate], device: Device | None, orientation: str,
                    longest: float) -> list[dict]:
    """One bar trace per segment (component or detail), the rows at positions 0, 1, …; in-bar values where a
    segment is wide enough (longest 0: none)."""
    positions = list(range(len(ests)))
    # Traces as plain dicts, validated once by go.Figure below: building go.Bar objects and calling
    # fig.add_trace / bar.update re-validates every property on each call (~2 ms per trace).
    traces: list[dict] = []
    for seg in segments(ests, device):
        values = [to_gb(segment_bytes(e, seg)) for e in ests]
        hovers = [_hover(lbl, e, seg, segment_bytes(e, seg), device) for lbl, e in zip(labels, ests, strict=True)]
        # In-bar value only where the segment is wide enough to hold it (≥ 8 % of the longest bar).
        text = [f"{format_number(v)} GB" if longest and v >= 0.08 * longest else "" for v in values]
        bar = dict(
            type="bar", name=_(seg.name), orientation=orientation, marker=dict(color=seg.color, line=dict(width=0)),
            width=BAR_WIDTH, legendgroup=seg.name, hovertext=hovers, hoverinfo="text", text=text,
            textposition="inside", insidetextanchor="middle", meta=seg.component,
        )
        bar.update(x=values, y=positions) if orientation == "h" else bar.update(x=positions, y=values)
        traces.append(bar)
    return traces


def _band_trace(labels: list[str], ests: list[Estimate], horizontal: bool) -> dict:
    """Each estimate's likely range (low–high) as a whisker beside its bar."""
    positions = range(len(ests))
    totals = [to_gb(e.total_bytes) for e in ests]
    plus = [to_gb(e.high_bytes - e.total_bytes) for e in ests]
    minus = [to_gb(e.total_bytes - e.low_bytes) for e in ests]
    beside = [p - BAND_OFFSET if horizontal else p + BAND_OFFSET for p in positions]
    hovers = [f"{lbl}<br><b>" + _("Total {amount}").format(amount=both_units(e.total_bytes)) + "</b><br>"
              + _("likely {low} – {high}").format(low=both_units(e.low_bytes), high=both_units(e.high_bytes))
              + "<br>" + _("peak: {phase}").format(phase=_esc(_(e.peak_phase)))
              for lbl, e in zip(labels, ests, strict=True)]
    err = dict(type="data", symmetric=False, array=plus, arrayminus=minus, color=BAND_COLOR, thickness=2,
               width=6)
    marker = dict(color=BAND_COLOR, size=10, symbol="line-ns-open" if horizontal else "line-ew-open",
                  line=dict(width=3, color=BAND_COLOR))
    whisker = dict(type="scatter", name=_(BAND_NAME), mode="markers", marker=marker, hovertext=hovers,
                   hoverinfo="text")
    if horizontal:
        whisker.update(x=totals, y=beside, error_x=err)
    else:
        whisker.update(x=beside, y=totals, error_y=err)
    return whisker


def _stacked_layout(labels: list[str], horizontal: bool, top: float, title: str | None,
                    font_size: int | None) -> dict:
    """The stacked bars' layout: the value axis up to a round number above `top`, the rows as tick labels."""
    positions = list(range(len(labels)))
    n_rows = len(labels)
    value_axis = dict(title=dict(text=_("Memory (GB; 1 GB = 10⁹ bytes)")), range=[0, axis_top(top)], zeroline=False,
                      ticksuffix=" GB", automargin=True)
    if horizontal:  # first row on top, with room above it for the device lines' labels
        category_axis = dict(tickvals=positions, ticktext=labels, range=[n_rows - 0.5 + BOTTOM_ROOM, -0.5 - LABEL_ROOM],
                             showgrid=False, zeroline=False, automargin=True)
    else:
        category_axis = dict(tickvals=positions, ticktext=labels, range=[-0.6, n_rows - 0.4], showgrid=False,
                             zeroline=False, automargin=True)
    # The whole layout as one dict, validated once by go.Figure: each fig.update_layout call re-parses and
    # re-validates its keys (two calls were ~70 % of the chart's build time, on every rerun).
    layout = dict(
        barmode="stack",
        hovermode="closest",
        showlegend=True,
        # Legend on top (a horizontal row saves width); the lines' labels sit inside the plot.
        legend=dict(orientation="h", traceorder="normal", x=0, xanchor="left", y=1.0, yanchor="bottom",
                    title=dict(text="")),
        margin=dict(t=10, b=10, l=10, r=10),
        uniformtext=dict(minsize=10, mode="hide"),
        xaxis=value_axis if horizontal else category_axis,
        yaxis=category_axis if horizontal else value_axis,
        height=(190 + 70 * n_rows) if horizontal else 480,
        separators=separators(),
    )
    if title:
        layout.update(title=dict(text=_esc(title), x=0, xanchor="left"))
        layout["margin"]["t"] = 40
    if font_size:
        font_layout(layout, font_size)
        if horizontal:
            layout["height"] += 40
    return layout


AXIS_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)  # round axis ends, per power of ten


def axis_top(top_gb: float) -> float:
    """The memory axis's end: the first round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10ⁿ GB) at least 5 %
    above the longest bar or the device. Round ends keep the scale still while a slider moves the bars (the
    live chart glides only its bars then), and read better than 27.7 GB."""
    need = max(top_gb, 1e-9) * 1.05
    power = 10.0 ** math.floor(math.log10(need))
    return next(step * power for step in AXIS_STEPS if step * power >= need * (1 - 1e-12))


def separators() -> str:
    """Plotly's decimal and thousands separators for the page's language (axis ticks, hover numbers)."""
    return ".," if get_language() == DEFAULT_LANGUAGE else ",."


def font_layout(layout: dict, size: int) -> dict:
    """Presentation mode: Streamlit's theme sets legend, tick and hover fonts itself, so size each one
    explicitly (in place, into a layout dict; returns it)."""
    layout["font"] = {**layout.get("font", {}), "size": size}
    layout["legend"] = {**layout.get("legend", {}), "font": {"size": size}}
    layout["hoverlabel"] = {**layout.get("hoverlabel", {}), "font": {"size": size}}
    for axis in ("xaxis", "yaxis"):
        spec = dict(layout.get(axis, {}))
        spec["tickfont"] = {"size": size}
        spec["title"] = {**spec.get("title", {}), "font": {"size": size}}
        layout[axis] = spec
    return layout


def capacity_overlay(fig: go.Figure, device: Device, axis: str = "x") -> go.Figure:
    """Draw the device's limits across fig's plot (see overlay_items), added in one layout update;
    returns fig."""
    memory_range = fig.layout[f"{axis}axis"].range if axis in ("x", "y") else None
    shapes, notes = overlay_items(device, axis, memory_range)
    # One layout update: fig.add_vline/add_annotation re-validate the figure's whole shape/annotation lists
    # on every call (over half of a memory bar's build time).
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *notes])
    return fig


def overlay_items(device: Device, axis: str = "x",
                  memory_range: Sequence[float] | None = None) -> tuple[list[dict], list[dict]]:
    """The device's limits as plotly shapes and annotations (plain dicts), as in the seed's 36 GB laptop
    diagram: a vermillion dashed line labelled '27 GB usable' at the usable memory, a grey dotted line at
    the total memory, and the band between them (the OS and apps' share) shaded. axis is the memory axis:
    'x' for horizontal bars, 'y' for vertical ones; memory_range is that axis's range in GB (None: the
    capacity + 10 %). Discrete GPUs get the usable line only, at the total CUDA (ROCm) reports (a sliver below
    nvidia-smi's figure, which the device's name gives), labelled so. Labels sit inside the plot next to their
    line; when the two lines are close they take two rows."""
    if axis not in ("x", "y"):
        raise ValueError("axis must be 'x' or 'y'")
    usable = to_gb(device.usable_bytes)
    capacity = to_gb(device.capacity_bytes)
    reserved = device.kind == "unified" and device.reserved_bytes > 0
    span = (memory_range[1] - memory_range[0]) if memory_range else max(capacity, 1.0) * 1.1
    # Both labels sit left of their line, so the total's label lies inside the band: when the band is too
    # narrow to hold it, the labels take two rows and the band goes unnamed.
    close = (capacity - usable) < 0.12 * span
    whose = "" if reserved else " " + (_("({runtime}'s total)").format(runtime=device.runtime)
                                        if device.cuda_total_mib is not None else _("(all of it)"))
    usable_text = "<b>" + _("{gb} GB usable").format(gb=_fmt_limit(usable)) + "</b>" + whose
    total_text = _("{gb} GB total").format(gb=_fmt_limit(capacity))
    shapes: list[dict] = []
    notes: list[dict] = []
    def span(value_from: float, value_to: float) -> dict:
        if axis == "x":  # vertical: across the plot's height
            return {"x0": value_from, "x1": value_to, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain"}
        return {"x0": 0, "x1": 1, "xref": "x domain", "y0": value_from, "y1": value_to, "yref": "y"}

    if reserved:
        shapes.append({"type": "rect", **span(usable, capacity), "fillcolor": RESERVED_FILL, "line": {"width": 0},
                       "layer": "below", "name": "reserved"})
        shapes.append({"type": "line", **span(capacity, capacity),
                       "line": {"color": CAPACITY_COLOR, "width": 2, "dash": "dot"}, "name": "capacity"})
    shapes.append({"type": "line", **span(usable, usable), "line": {"color": USABLE_COLOR, "width": 2.5, "dash": "dash"},
                   "name": "usable"})

    def label(value: float, text: str, color: str, name: str, row: int) -> None:
        if axis == "x":  # vertical line: label at the top, just left of the line
            notes.append(dict(x=value, xref="x", xanchor="right", xshift=-4, y=1, yref="paper", yanchor="top",
                              yshift=-18 * row, text=text, showarrow=False, font=dict(color=color), name=name))
        else:  # horizontal line: label just above it, usable at the left end, total at the right end
            left = name == "usable-label"
            notes.append(dict(y=value, yref="y", yanchor="bottom", x=0 if left else 1, xref="paper",
                              xanchor="left" if left else "right", text=text, showarrow=False,
                              font=dict(color=color), name=name))

    label(usable, usable_text, USABLE_COLOR, "usable-label", 0)
    if reserved:
        label(capacity, total_text, CAPACITY_COLOR, "capacity-label", 1 if close else 0)
        if not close:  # name the shaded band where it is wide enough to hold the words
            os_text = _("OS and apps: {gb} GB").format(gb=format_number(capacity - usable, 0))
            if axis == "x":
                notes.append(dict(x=(usable + capacity) / 2, y=0, yref="paper", yanchor="bottom", showarrow=False,
                                  text=os_text.replace(": ", "<br>"), font=dict(size=11, color=CAPACITY_COLOR),
                                  name="reserved-label"))
            else:
                notes.append(dict(y=(usable + capacity) / 2, yref="y", x=0.5, xref="paper", showarrow=False,
                                  text=os_text, font=dict(size=11, color=CAPACITY_COLOR), name="reserved-label"))
    return shapes, notes


def _fmt_limit(gb: float) -> str:
    """27 → '27', 13.5 → '13.5': device limits as people say them."""
    return format_number(gb, 0) if abs(gb - round(gb)) < 0.05 else format_number(gb, 1)


def memory_bar(estimate: Estimate, device: Device | None = None, *, title: str | None = None,
               label: str | None = None, font_size: int | None = None) -> go.Figure:
    """One horizontal stacked bar of estimate's components (GB) against the device's capacity overlay,
    with the low–high band as a whisker on the total. LoRA/QLoRA split the weights into the frozen base
    and the trainable adapters; hovers list each segment's detail items in GB and GiB."""
    return stacked_bars([(label or _("Peak"), estimate)], device, orientation="h", title=title, font_size=font_size)


def memory_bar_spec(estimate: Estimate, device: Device | None = None, *, label: str | None = None,
                    font_size: int | None = None) -> dict:
    """memory_bar as plain plotly.js JSON, for ui.live_chart (no Figure to build and validate on each rerun)."""
    return stacked_bars_spec([(label or _("Peak"), estimate)], device, orientation="h", font_size=font_size)


def chart_alt(estimate: Estimate, device: Device | None = None) -> str:
    """A plain-text description of memory_bar for screen readers (st.plotly_chart(alt=...))."""
    parts = [f"{component_label(k, device)} {format_number(to_gb(estimate.components_bytes[k]))} GB"
             for k in component_keys(estimate)]
    text = _("Stacked bar of peak memory: {parts}; total {total} GB").format(
        parts=", ".join(parts), total=format_number(to_gb(estimate.total_bytes)))
    if device is not None:
        text += _(", against {usable} GB usable of {capacity} GB on {device}").format(
            usable=format_number(to_gb(device.usable_bytes)), capacity=format_number(to_gb(device.capacity_bytes)),
            device=device.name)
    return text + "."
