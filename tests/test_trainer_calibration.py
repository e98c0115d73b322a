"""The estimator against the stored traces of TRL 1.16's trainers (validation/data/trainer_findings.json, made by
calibration/trainer_trace.py with the tracer at real widths) and against a real CPU generate's KV cache.
Issue 13's targets: median |error| ≤ 3 %, worst ≤ 10 %."""

import json
import statistics
from pathlib import Path

import pytest

from calibration.trainer_cases import KV_RUNS, estimate_case, kv_estimate, matrix

FINDINGS = json.loads((Path(__file__).resolve().parents[1] / "validation" / "data" / "trainer_findings.json").read_text())
CASES = {c["name"]: c for c in matrix()}


def test_every_trainer_and_method_was_traced():
    names = {row["name"] for row in FINDINGS["traces"]}
    assert names == set(CASES) and len(names) == 20
    assert {CASES[n]["trainer"] for n in names} == {"dpo", "kto", "orpo", "reward", "grpo"}


@pytest.mark.parametrize("row", FINDINGS["traces"], ids=lambda r: r["name"])
def test_estimate_matches_the_trace(row):
    est, _phase = estimate_case(CASES[row["name"]])
    assert est == pytest.approx(row["measured"]["peak_bytes"], rel=0.03)


def test_median_and_worst():
    errors = [abs(estimate_case(CASES[r["name"]])[0] / r["measured"]["peak_bytes"] - 1) for r in FINDINGS["traces"]]
    assert statistics.median(errors) <= 0.03 and max(errors) <= 0.10


def test_kv_cache_matches_a_real_generate():
    assert [(r["sequences"], r["prompt"], r["completion"]) for r in FINDINGS["kv_cache"]] == list(KV_RUNS)
    for row in FINDINGS["kv_cache"]:
        assert row["cache_len"] == row["prompt"] + row["completion"] - 1
        assert kv_estimate(row["sequences"], row["prompt"], row["completion"]) == row["measured_bytes"]


def test_the_summary_the_how_page_shows_is_the_traces():
    from validation.trainers import trainer_trace_summary

    summary = trainer_trace_summary()
    errors = [abs(estimate_case(CASES[r["name"]])[0] / r["measured"]["peak_bytes"] - 1) for r in FINDINGS["traces"]]
    assert summary["n"] == 20
    assert summary["median_abs"] == pytest.approx(statistics.median(errors), abs=1e-4)
    assert summary["worst_abs"] == pytest.approx(max(errors), abs=1e-4)
