"""ui/charts.py: the figures carry the estimator's numbers, in the fixed order and colours, with the device's
limits drawn where they are; the colours stay apart for colour-blind viewers and read on both themes."""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path

import plotly.graph_objects as go
import pytest

from estimator import (
    COMPONENT_KEYS,
    COMPONENT_LABELS,
    TrainingSetup,
    custom_device,
    estimate,
    generic_spec,
    get_device,
    load_preset,
    to_gb,
)
from ui import charts
from ui.charts import (
    BAND_NAME,
    COMPONENT_COLORS,
    FROZEN_COLOR,
    FROZEN_NAME,
    TRAINABLE_NAME,
    USABLE_COLOR,
    capacity_overlay,
    chart_alt,
    font_layout,
    memory_bar,
    overlay_items,
    stacked_bars,
)

LAPTOP = get_device("laptop-36gb")  # unified: 27 GiB (29.0 GB) usable of 36 GiB (38.7 GB), as macOS reports RAM
RTX = get_device("rtx-4090")  # discrete: 24,564 MiB (25.8 GB) by nvidia-smi, 24,078 MiB (25.2 GB) usable by CUDA
LAPTOP_USABLE_GB, LAPTOP_TOTAL_GB = 27 * 2**30 / 1e9, 36 * 2**30 / 1e9  # 28.99 and 38.65 GB
RTX_GB = 24_078 * 2**20 / 1e9  # 25.25 GB: the usable line
LLAMA = load_preset("llama-3.1-8b")
WHITE, STREAMLIT_DARK = "#FFFFFF", "#0E1117"


def bars(fig: go.Figure) -> list[go.Bar]:
    return [t for t in fig.data if t.type == "bar"]


def shapes(fig: go.Figure, name: str) -> list:
    return [s for s in fig.layout.shapes if s.name == name]


def annotation(fig: go.Figure, name: str):
    found = [a for a in fig.layout.annotations if a.name == name]
    assert len(found) == 1, [a.name for a in fig.layout.annotations]
    return found[0]


# ---- colours ---------------------------------------------------------------------------------------------


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgb(hex_color: str) -> list[float]:
    h = hex_color.lstrip("#")
    return [_linear(int(h[i:i + 2], 16)) for i in (0, 2, 4)]


def _luminance(hex_color: str) -> float:
    r, g, b = _rgb(hex_color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# Machado et al. (2009) full-severity simulation matrices, in linear RGB.
CVD = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


def _lab(rgb: list[float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _simulate(hex_color: str, kind: str | None) -> tuple[float, float, float]:
    rgb = _rgb(hex_color)
    if kind is not None:
        rgb = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb, strict=True)))) for row in CVD[kind]]
    return _lab(rgb)


def test_component_colours_follow_the_component_order():
    assert tuple(k for k in COMPONENT_COLORS if k in COMPONENT_KEYS) == COMPONENT_KEYS == (
        "weights", "gradients", "optimizer", "activations", "overhead")
    assert set(COMPONENT_COLORS) == set(COMPONENT_KEYS) | {"reference", "generation"}  # trainers' two extra
    palette = [*COMPONENT_COLORS.values(), FROZEN_COLOR]
    assert len(set(palette)) == len(palette)


@pytest.mark.parametrize("vision", [None, *CVD])
def test_segment_colours_stay_apart_for_colour_blind_viewers(vision):
    """Every pair of segment colours differs by ΔE*ab ≥ 12 with normal vision and under simulated
    protanopia, deuteranopia and tritanopia (a grey overhead next to a pink activations segment once
    fell to 8.5 under deuteranopia)."""
    palette = {**COMPONENT_COLORS, "frozen": FROZEN_COLOR}
    for (a, ca), (b, cb) in itertools.combinations(palette.items(), 2):
        delta = math.dist(_simulate(ca, vision), _simulate(cb, vision))
        assert delta >= 12, f"{a} vs {b} under {vision or 'normal vision'}: ΔE {delta:.1f}"


@pytest.mark.parametrize("background", [WHITE, STREAMLIT_DARK])
def test_colours_read_on_light_and_dark_backgrounds(background):
    for name, color in {**COMPONENT_COLORS, "frozen": FROZEN_COLOR}.items():
        assert contrast(color, background) >= 2.0, (name, background)
    # The line that decides the verdict meets WCAG's 3:1 for graphics on both themes.
    assert contrast(USABLE_COLOR, background) >= 3.0


# ---- the memory bar --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
@pytest.mark.parametrize("rule", [None, "seed"])
def test_bar_values_are_the_estimators(method, rule):
    est = estimate(LLAMA, TrainingSetup(method=method), rule=rule)
    fig = memory_bar(est, LAPTOP)
    by_component: dict[str, float] = {}
    for trace in bars(fig):
        assert trace.orientation == "h"
        assert len(trace.x) == 1
        by_component[trace.meta] = by_component.get(trace.meta, 0.0) + trace.x[0]
    assert list(by_component) == list(COMPONENT_KEYS)
    for key in COMPONENT_KEYS:
        assert by_component[key] == pytest.approx(to_gb(est.components_bytes[key]), abs=1e-9)
    assert sum(by_component.values()) == pytest.approx(to_gb(est.total_bytes))
    assert fig.layout.barmode == "stack"


def test_full_fine_tuning_has_one_weights_segment():
    fig = memory_bar(estimate(LLAMA, TrainingSetup(method="full")), RTX)
    names = [t.name for t in bars(fig)]
    assert names == [COMPONENT_LABELS[k] for k in COMPONENT_KEYS]
    assert [t.marker.color for t in bars(fig)] == [COMPONENT_COLORS[k] for k in COMPONENT_KEYS]


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_adapters_split_frozen_from_trainable_weights(method):
    est = estimate(LLAMA, TrainingSetup(method=method))
    fig = memory_bar(est, RTX)
    traces = {t.name: t for t in bars(fig)}
    assert [t.name for t in bars(fig)][:3] == [FROZEN_NAME, TRAINABLE_NAME, "Gradients"]
    frozen = next(d.bytes for d in est.details if d.key == "weights.base")
    assert traces[FROZEN_NAME].x[0] == pytest.approx(to_gb(frozen))
    assert traces[FROZEN_NAME].marker.color == FROZEN_COLOR
    assert traces[TRAINABLE_NAME].marker.color == COMPONENT_COLORS["weights"]
    # The trainable segment holds the adapters and their autocast copies: the rest of the weights.
    assert traces[TRAINABLE_NAME].x[0] == pytest.approx(to_gb(est.components_bytes["weights"] - frozen))
    assert traces[FROZEN_NAME].x[0] > 20 * traces[TRAINABLE_NAME].x[0] > 0


def test_seed_lora_weights_are_all_frozen_base():
    est = estimate(generic_spec(7), TrainingSetup(method="lora"), rule="seed")
    traces = {t.name: t for t in bars(memory_bar(est, LAPTOP))}
    assert traces[FROZEN_NAME].x[0] == pytest.approx(14.0)
    assert traces[TRAINABLE_NAME].x[0] == 0
    assert traces["Overhead (Metal + allocator)"].x[0] == pytest.approx(3.0)  # the rule's fixed margin, on a Mac


def test_hover_lists_the_detail_items_in_gb_and_gib():
    est = estimate(LLAMA, TrainingSetup(method="lora"))
    traces = {t.name: t for t in bars(memory_bar(est, RTX))}
    hover = traces["Activations"].hovertext[0]
    for item in (d for d in est.details if d.component == "activations"):
        expected = f"{item.label}: {to_gb(item.bytes):,.2f} GB ({item.bytes / 2**30:,.2f} GiB)"
        assert expected in hover
    assert "Logits and loss (saved)" in hover and "Loss backward buffers" in hover
    assert "Frozen base weights" in traces[FROZEN_NAME].hovertext[0]
    assert "Frozen base weights" not in traces[TRAINABLE_NAME].hovertext[0]
    assert "Trainable weights" in traces[TRAINABLE_NAME].hovertext[0]
    assert traces[FROZEN_NAME].hoverinfo == "text"


def test_band_whisker_spans_low_to_high():
    est = estimate(LLAMA, TrainingSetup(method="lora"))
    whisker = next(t for t in memory_bar(est, RTX).data if t.name == BAND_NAME)
    assert whisker.x[0] == pytest.approx(to_gb(est.total_bytes))
    assert whisker.x[0] + whisker.error_x.array[0] == pytest.approx(to_gb(est.high_bytes))
    assert whisker.x[0] - whisker.error_x.arrayminus[0] == pytest.approx(to_gb(est.low_bytes))
    assert whisker.y[0] < 0  # drawn just above the bar, clear of its colours


def test_seed_rule_has_no_band():
    est = estimate(LLAMA, TrainingSetup(), rule="seed")
    assert est.low_bytes == est.high_bytes
    assert BAND_NAME not in [t.name for t in memory_bar(est, RTX).data]


# ---- the capacity overlay --------------------------------------------------------------------------------


def test_unified_laptop_overlay_matches_the_seeds_diagram():
    """36 GB laptop: a labelled line at 27 GiB (29 GB) usable, a line at 36 GiB (38.7 GB) total, the OS-and-apps
    band shaded."""
    fig = memory_bar(estimate(generic_spec(7), TrainingSetup(), rule="seed"), LAPTOP)
    (usable,) = shapes(fig, "usable")
    (capacity,) = shapes(fig, "capacity")
    (band,) = shapes(fig, "reserved")
    assert usable.type == capacity.type == "line"
    assert usable.x0 == usable.x1 == pytest.approx(LAPTOP_USABLE_GB) and usable.yref.endswith("domain")
    assert capacity.x0 == capacity.x1 == pytest.approx(LAPTOP_TOTAL_GB)
    assert (band.type, band.x0, band.x1) == ("rect", pytest.approx(LAPTOP_USABLE_GB), pytest.approx(LAPTOP_TOTAL_GB))
    assert band.layer == "below"
    assert usable.line.color == USABLE_COLOR
    assert annotation(fig, "usable-label").text == "<b>29 GB usable</b>"
    assert annotation(fig, "usable-label").x == pytest.approx(LAPTOP_USABLE_GB)
    assert annotation(fig, "capacity-label").text == "38.7 GB total"
    assert "10 GB" in annotation(fig, "reserved-label").text  # 9 GiB = 9.7 GB
    assert fig.layout.xaxis.range[1] >= LAPTOP_TOTAL_GB


def test_discrete_gpu_has_one_line_at_cudas_total_and_no_band():
    fig = memory_bar(estimate(LLAMA, TrainingSetup()), RTX)
    (usable,) = shapes(fig, "usable")
    assert usable.x0 == pytest.approx(RTX_GB)
    assert not shapes(fig, "capacity") and not shapes(fig, "reserved")
    assert annotation(fig, "usable-label").text == "<b>25.2 GB usable</b> (CUDA's total)"
    typed = memory_bar(estimate(LLAMA, TrainingSetup()), custom_device(24))
    assert annotation(typed, "usable-label").text == "<b>24 GB usable</b> (all of it)"


def test_labels_take_two_rows_when_the_lines_are_close():
    """A 70B full fine-tune on the laptop: 29 and 38.7 GB are a sliver of a ~1 TB axis."""
    fig = memory_bar(estimate(load_preset("llama-3.1-70b"), TrainingSetup(method="full")), LAPTOP)
    assert annotation(fig, "usable-label").yshift == 0
    assert annotation(fig, "capacity-label").yshift < 0
    assert not [a for a in fig.layout.annotations if a.name == "reserved-label"]


def test_axis_covers_the_high_end_and_the_capacity():
    big = estimate(LLAMA, TrainingSetup(method="full"))
    fig = memory_bar(big, LAPTOP)
    assert fig.layout.xaxis.range[0] == 0
    assert fig.layout.xaxis.range[1] >= to_gb(big.high_bytes)
    small = estimate(load_preset("qwen2.5-0.5b"), TrainingSetup(method="qlora"))
    assert memory_bar(small, get_device("h200")).layout.xaxis.range[1] >= 141


def test_vertical_overlay_draws_horizontal_lines():
    fig = go.Figure(go.Bar(x=["a"], y=[10]))
    capacity_overlay(fig, custom_device(64, "unified"), axis="y")
    (usable,) = shapes(fig, "usable")
    assert usable.y0 == usable.y1 == pytest.approx(48.0)
    (band,) = shapes(fig, "reserved")
    assert (band.y0, band.y1) == (pytest.approx(48.0), pytest.approx(64.0))
    with pytest.raises(ValueError):
        capacity_overlay(fig, LAPTOP, axis="z")


def test_overlay_items_are_what_both_paths_draw():
    """stacked_bars puts overlay_items' shapes and labels into its one layout; capacity_overlay adds the
    same ones to an existing figure: both draw the laptop's three limits and three labels."""
    est = estimate(LLAMA, TrainingSetup())
    fig = memory_bar(est, LAPTOP)
    shape_dicts, label_dicts = overlay_items(LAPTOP, "x", fig.layout.xaxis.range)
    assert [s["name"] for s in shape_dicts] == ["reserved", "capacity", "usable"]
    assert [a["name"] for a in label_dicts] == ["usable-label", "capacity-label", "reserved-label"]
    assert [s.name for s in fig.layout.shapes] == ["reserved", "capacity", "usable"]
    assert shapes(fig, "usable")[0].x0 == pytest.approx(LAPTOP_USABLE_GB)
    bare = memory_bar(est)
    capacity_overlay(bare, LAPTOP, axis="x")
    assert bare.layout.shapes == memory_bar(est, LAPTOP).layout.shapes
    assert bare.layout.annotations == memory_bar(est, LAPTOP).layout.annotations
    with pytest.raises(ValueError):
        overlay_items(LAPTOP, "z")


def test_presentation_font_reaches_every_text():
    """Streamlit's theme sets legend, tick and hover fonts itself: font_size must size each one."""
    fig = memory_bar(estimate(LLAMA, TrainingSetup()), RTX, font_size=22)
    layout = fig.layout
    assert (layout.font.size, layout.legend.font.size, layout.hoverlabel.font.size) == (22, 22, 22)
    for axis in (layout.xaxis, layout.yaxis):
        assert (axis.tickfont.size, axis.title.font.size) == (22, 22)
    assert layout.xaxis.title.text == "Memory (GB; 1 GB = 10⁹ bytes)"  # merged, not replaced
    assert layout.height == memory_bar(estimate(LLAMA, TrainingSetup()), RTX).layout.height + 40
    assert memory_bar(estimate(LLAMA, TrainingSetup()), RTX).layout.legend.font.size is None
    assert font_layout({"xaxis": {"title": {"text": "t"}}}, 9)["xaxis"]["title"] == {"text": "t", "font": {"size": 9}}


# ---- several setups --------------------------------------------------------------------------------------


def test_stacked_bars_put_several_setups_on_one_axis():
    rows = [(m, estimate(LLAMA, TrainingSetup(method=m))) for m in ("full", "lora", "qlora")]
    fig = stacked_bars(rows, LAPTOP)
    assert list(fig.layout.yaxis.ticktext) == ["full", "lora", "qlora"]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    frozen = next(t for t in bars(fig) if t.name == FROZEN_NAME)
    assert frozen.x[0] == 0  # full fine-tuning has no frozen base
    for i, (_, est) in enumerate(rows):
        assert sum(t.x[i] for t in bars(fig)) == pytest.approx(to_gb(est.total_bytes))
    whisker = next(t for t in fig.data if t.name == BAND_NAME)
    assert list(whisker.x) == pytest.approx([to_gb(e.total_bytes) for _, e in rows])
    assert fig.layout.height > memory_bar(rows[0][1], LAPTOP).layout.height


def test_vertical_stacked_bars():
    rows = [("a", estimate(LLAMA, TrainingSetup(method="lora"))), ("b", estimate(LLAMA, TrainingSetup(method="qlora")))]
    fig = stacked_bars(rows, RTX, orientation="v")
    assert all(t.orientation == "v" for t in bars(fig))
    assert list(fig.layout.xaxis.ticktext) == ["a", "b"]
    assert sum(t.y[1] for t in bars(fig)) == pytest.approx(to_gb(rows[1][1].total_bytes))
    assert shapes(fig, "usable")[0].y0 == pytest.approx(RTX_GB)
    with pytest.raises(ValueError):
        stacked_bars(rows, RTX, orientation="diagonal")
    with pytest.raises(ValueError):
        stacked_bars([], RTX)


def test_user_text_is_escaped():
    """Names from an uploaded config.json reach tick labels and hovers: plotly's HTML subset stays inert."""
    est = estimate(LLAMA, TrainingSetup())
    fig = stacked_bars([("<b onmouseover=x>evil</b>", est)], RTX, title="<a href='javascript:x'>t</a>")
    assert fig.layout.yaxis.ticktext[0] == "&lt;b onmouseover=x&gt;evil&lt;/b&gt;"
    assert "<a" not in fig.layout.title.text
    assert all("<b onmouseover" not in t.hovertext[0] for t in bars(fig))


def test_alt_text_names_every_component_and_the_device():
    est = estimate(generic_spec(7), TrainingSetup(), rule="seed")
    alt = chart_alt(est, LAPTOP)
    assert "Weights 14.0 GB" in alt and "total 17.0 GB" in alt and "29.0 GB usable of 38.7 GB" in alt


def test_chart_builders_never_import_streamlit():
    tree = ast.parse(Path(charts.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "streamlit" not in imported
    assert "plotly" in imported
