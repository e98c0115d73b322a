"""ui/report.py: the calculator's table, CSV, rule gap, remedy and solver lines and share link."""

from __future__ import annotations

import io
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import pytest

from estimator import (
    COMPONENT_LABELS,
    TrainingSetup,
    estimate,
    generic_spec,
    get_device,
    load_preset,
    remedies,
    to_gb,
    verdict,
)
from estimator.advice.remedies import Remedy
from ui.report import (
    BREAKDOWN_COLUMNS,
    RuleGap,
    band_warning,
    breakdown_csv,
    breakdown_frame,
    limit_text,
    remedy_line,
    share_url,
    verdict_detail,
)

LLAMA = load_preset("llama-3.1-8b")
LAPTOP = get_device("laptop-36gb")


@pytest.mark.parametrize("rule", [None, "seed"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_breakdown_rows_sum_to_each_component_and_the_total(method, rule):
    est = estimate(LLAMA, TrainingSetup(method=method, grad_ckpt=True), rule=rule)
    frame = breakdown_frame(est)
    assert tuple(frame.columns) == BREAKDOWN_COLUMNS
    items, total = frame.iloc[:-1], frame.iloc[-1]
    assert total["component"] == "Total" and total["item"] == f"peak: {est.peak_phase}"
    assert total["bytes"] == round(est.total_bytes)
    assert items["bytes"].sum() == pytest.approx(est.total_bytes, abs=len(items))
    for key, label in COMPONENT_LABELS.items():
        assert items.loc[items["component"] == label, "bytes"].sum() == pytest.approx(
            est.components_bytes.get(key, 0.0), abs=len(items))  # SFT: no reference/generation
    assert items["share"].sum() == pytest.approx(1.0)
    assert (items["gib"] * 2**30).tolist() == pytest.approx((items["gb"] * 1e9).tolist())
    # Component order: weights first, overhead last.
    assert items["component"].iloc[0] == COMPONENT_LABELS["weights"]
    assert items["component"].iloc[-1] == COMPONENT_LABELS["overhead"]


def test_csv_is_the_table_with_exact_bytes():
    est = estimate(LLAMA, TrainingSetup())
    csv = breakdown_csv(est)
    back = pd.read_csv(io.StringIO(csv))
    frame = breakdown_frame(est)
    assert back["item"].tolist() == frame["item"].tolist()
    assert back["bytes"].tolist() == [int(b) for b in frame["bytes"]]
    assert back["gb"].tolist() == pytest.approx(frame["gb"].tolist(), abs=1e-4)
    assert f"\nTotal,peak: {est.peak_phase},{round(est.total_bytes)}," in csv


def test_absurd_totals_do_not_overflow_the_table():
    """400B, fp32, eager attention, 256 × 2M tokens passes int64 bytes: the table still builds."""
    est = estimate(generic_spec(400), TrainingSetup(method="full", precision="fp32", batch=256, seq_len=1 << 21,
                                                    attention="eager"))
    assert est.total_bytes > 2**63
    frame = breakdown_frame(est)
    assert frame["bytes"].dtype == "float64"
    assert str(int(est.total_bytes) // 10**6) in breakdown_csv(est)


def test_verdict_detail_lines():
    est = estimate(LLAMA, TrainingSetup())
    v = verdict(est.total_bytes, LAPTOP, est.high_bytes)
    line, device_line = verdict_detail(est, LAPTOP, v)
    assert line.startswith(f"Expected peak {to_gb(est.total_bytes):,.1f} GB (")
    assert f"likely {to_gb(est.low_bytes):,.1f}–{to_gb(est.high_bytes):,.1f} GB" in line
    assert line.endswith(f"peak during: {est.peak_phase}")
    assert device_line == f"{LAPTOP.name}: 29.0 GB (27.0 GiB) usable of 38.7 GB (36.0 GiB)"  # 36 GiB of RAM
    seed = estimate(LLAMA, TrainingSetup(), rule="seed")
    assert "likely" not in verdict_detail(seed, LAPTOP, verdict(seed.total_bytes, LAPTOP))[0]


def test_band_warning_only_when_the_band_straddles_the_limit():
    est = estimate(LLAMA, TrainingSetup())  # ≈ 36 GB, band ≈ 31–42 GB
    low, high = est.low_bytes, est.high_bytes

    def device(gb: float):
        from estimator import custom_device
        return custom_device(gb, "discrete")

    straddle_fits = verdict(est.total_bytes, device(to_gb(est.total_bytes) + 1), high)
    assert "Close call" in band_warning(est, straddle_fits)
    straddle_short = verdict(est.total_bytes, device(to_gb(low) + 0.5), high)
    assert "Borderline" in band_warning(est, straddle_short)
    assert band_warning(est, verdict(est.total_bytes, device(to_gb(high) + 1), high)) is None
    assert band_warning(est, verdict(est.total_bytes, device(to_gb(low) / 2), high)) is None


def test_rule_gap_reports_both_numbers_and_the_difference():
    seed = estimate(generic_spec(7), TrainingSetup(), rule="seed")
    detailed = estimate(generic_spec(7), TrainingSetup())
    gap = RuleGap(seed.total_bytes, detailed.total_bytes)
    assert gap.diff_bytes == pytest.approx(detailed.total_bytes - 17e9)
    assert gap.diff_pct == pytest.approx(100 * (detailed.total_bytes - 17e9) / 17e9)
    sentence = gap.sentence()
    assert sentence.startswith("Rule of thumb 17.0 GB (15.8 GiB) · detailed estimate ")
    assert f"{to_gb(gap.diff_bytes):,.1f} GB" in sentence and f"{gap.diff_pct:,.0f} %" in sentence
    assert sentence.endswith("above the rule.")
    assert RuleGap(20e9, 15e9).sentence().endswith("(4.7 GiB, 25 %) below the rule.")
    assert "matches" in RuleGap(17e9, 17.01e9).sentence()


def test_remedy_lines():
    usable = 24e9
    assert remedy_line(Remedy(1, "t", "c", 8.7e9, 20e9, True, ""), usable) == \
        "saves 8.7 GB (8.1 GiB) → 20.0 GB, fits"
    assert remedy_line(Remedy(1, "t", "c", 1e9, 30e9, True, ""), usable).endswith("still too big")
    assert remedy_line(Remedy(3, "t", "c", -2e9, 26e9, True, ""), usable).startswith("adds 2.0 GB (1.9 GiB)")
    assert remedy_line(Remedy(2, "t", "c", 0.0, 30e9, True, ""), usable).startswith("saves nothing")
    assert remedy_line(Remedy(3, "t", "c", 0.04e9, 34e9, True, ""), usable) == "saves nothing here (34.0 GB after)."
    assert remedy_line(Remedy(2, "t", "c", 0.0, 30e9, False, ""), usable).startswith("not available")
    # Real remedies for the default setup: the first one (halve the length) saves memory.
    first = remedies(LLAMA, TrainingSetup())[0]
    assert remedy_line(first, usable).startswith(f"saves {to_gb(first.saves_bytes):,.1f} GB")


def test_limit_text():
    assert limit_text(None, 256, "example") == "none fits (not even 1 example)"
    assert limit_text(12, 256, "example") == "12"
    assert limit_text(256, 256, "example") == "256 or more"
    assert limit_text(4096, 1 << 21, "token") == "4,096"


def test_share_url_keeps_every_param_and_drops_viewer_options():
    url = share_url("http://host:8501", {"model": ["by-size"], "size": ["7"], "embed_options": ["dark_theme"],
                                         "targets": ["q_proj,v_proj"], "stocks": ["a", "b"]})
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "host:8501", "/")
    assert parse_qsl(parts.query) == [("model", "by-size"), ("size", "7"), ("targets", "q_proj,v_proj"),
                                      ("stocks", "a"), ("stocks", "b")]
    assert share_url("http://host:8501/", {}) == "http://host:8501/"
    assert share_url(None, {"batch": ["4"]}) == "/?batch=4"
