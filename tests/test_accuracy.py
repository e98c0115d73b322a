"""Accuracy targets (issue 3): the estimator against the FakeTensor tracer fixtures and against published
measurements. Fix the model, not the tolerance."""

import json

import pytest

import validation
from estimator.memory.overhead import MODEL_ERROR_HIGH, MODEL_ERROR_LOW

REPORT = validation.accuracy_report()


def test_tracer_fixtures_cover_the_matrix():
    rows = REPORT["tracer"]["rows"]
    assert len(rows) >= 60
    families = {r["family"] for r in rows}
    assert {"llama", "mistral", "qwen2", "qwen3", "gemma2", "phi3", "gpt_neox"} <= families
    assert families & {"mixtral", "qwen3_moe", "qwen2_moe"}
    assert {r["method"] for r in rows} >= {"full", "lora"}
    assert {r["precision"] for r in rows} >= {"bf16", "mixed", "fp32"}
    assert {r["grad_ckpt"] for r in rows} == {True, False}
    assert {r["attention"] for r in rows} == {"sdpa", "eager"}


def test_tracer_median_within_quarter_percent_worst_within_3_5():
    """Measured: median 0.05 %, p90 0.65 %, worst 3.2 % over 186 fixtures (issue 10: median ≤ 1 %, worst ≤ 5 %)."""
    tracer = REPORT["tracer"]
    worst = max(tracer["rows"], key=lambda r: abs(r["error_pct"]))
    assert tracer["median_abs_pct"] <= 0.25
    assert tracer["p90_abs_pct"] <= 1.0
    assert tracer["worst_abs_pct"] <= 3.5, worst


def test_published_meets_issue_10_targets():
    """Each row runs with its own framework's stack (validation.FRAMEWORK_STACKS) and the switches its source states
    (gradient accumulation, torchtune's compile / optimizer_in_bwd / offloading). Issue 10's target: median ≤ 5 %, at
    least 80 % of rows within 15 %. Measured: 4.9 %, 36 of 44 (from 10.7 % and 29)."""
    published = REPORT["published"]
    assert published["n"] >= 25
    assert published["median_abs_pct"] <= 5.0
    assert sum(abs(r["error_pct"]) <= 15 for r in published["rows"]) >= 0.8 * published["n"]


def test_torchtune_rows_within_7_percent_median():
    """torchtune: its unchunked loss upcasts in the model, compiled losses keep 16-bit logits, optimizer_in_bwd
    frees each gradient. Measured 5.9 %, 9 of 11 within 15 % (from 13.3 %, 6)."""
    rows = [r for r in REPORT["published"]["rows"] if r["framework"] == "torchtune"]
    errors = sorted(abs(r["error_pct"]) for r in rows)
    assert len(rows) >= 10
    assert errors[len(errors) // 2] <= 7.0
    assert sum(e <= 15 for e in errors) >= 8


def test_litgpt_rows_within_5_percent_median():
    """LitGPT's rows with LitGPT's own activations, loss and untied/4-bit head: measured 4.2 %, 23 of 29 within 15 %."""
    rows = [r for r in REPORT["published"]["rows"] if r["framework"] == "litgpt"]
    errors = sorted(abs(r["error_pct"]) for r in rows)
    assert len(rows) >= 25
    assert errors[len(errors) // 2] <= 5.0
    assert sum(e <= 15 for e in errors) >= 22


def test_published_has_qlora_rows_and_every_row_cites_a_source():
    rows = REPORT["published"]["rows"]
    assert sum(r["method"] == "qlora" for r in rows) >= 6
    assert all(r["source"] for r in rows)


def test_every_row_above_20_percent_is_explained():
    unexplained = [r["id"] for r in REPORT["published"]["rows"]
                   if abs(r["error_pct"]) > 20 and not r["explanation"]]
    assert unexplained == []


def test_band_constants_come_from_the_measured_error():
    low, high = validation.derived_band(REPORT)
    assert MODEL_ERROR_LOW == pytest.approx(low, abs=0.005)
    assert MODEL_ERROR_HIGH == pytest.approx(high, abs=0.005)


def test_report_is_json_serialisable():
    json.dumps(REPORT)


def _dense_family_fixtures():
    from pathlib import Path

    path = Path(validation.FIXTURES).parent / "fixtures_dense_families.json"
    return json.loads(path.read_text())


def test_issue11_dense_families_within_2_percent_median_5_worst():
    """olmo2, granite, smollm3, cohere2, starcoder2, ernie4_5 and the gemma3 / mistral3 wrappers at real widths:
    full and LoRA all-linear, with and without checkpointing."""
    ids = {case["id"] for case in _dense_family_fixtures()}
    rows = [r for r in REPORT["tracer"]["rows"] if r["id"] in ids]
    assert len(rows) == len(ids) >= 30
    assert {r["family"] for r in rows} >= {"olmo2", "granite", "smollm3", "cohere2", "starcoder2", "ernie4_5",
                                           "gemma3", "mistral3"}
    assert {(r["method"], r["grad_ckpt"]) for r in rows} == {("full", True), ("full", False), ("lora", True),
                                                             ("lora", False)}
    errors = sorted(abs(r["error_pct"]) for r in rows)
    assert errors[len(errors) // 2] <= 2.0
    assert errors[-1] <= 5.0, max(rows, key=lambda r: abs(r["error_pct"]))


def test_issue11_dense_families_parameter_counts_are_exact():
    from estimator import TrainingSetup, estimate, spec_from_config

    for case in _dense_family_fixtures():
        spec = spec_from_config(case["config"], name=case["id"])
        measured, setup = case["measured"], case["setup"]
        trainable = estimate(spec, TrainingSetup(method=setup["method"], lora_rank=setup["lora_rank"] or 16,
                                                 image_tokens=setup.get("image_tokens", 0))).params_trainable
        # the frozen towers stay out of the trainable count; a PEFT model's total includes its adapters
        assert trainable == measured["params_trainable"], case["id"]
        adapters = trainable if setup["method"] == "lora" else 0
        assert spec.params_total + adapters == measured["params_total"], case["id"]


def test_moe_mla_hybrid_sink_families_within_issue_11_targets():
    """Issue 11: the MoE / MLA / hybrid / sink families (estimator/models/moe.py) against real-width tracer
    fixtures: tensor peak median ≤ 2 %, worst ≤ 5 %."""
    from estimator.models.moe import FAMILIES

    rows = [r for r in REPORT["tracer"]["rows"] if r["family"] in FAMILIES]
    assert {r["method"] for r in rows} == {"full", "lora"} and {r["grad_ckpt"] for r in rows} == {True, False}
    # every family traced in full and in LoRA all-linear (Llama 4: its router excluded, as PEFT needs), each with and
    # without checkpointing (issue 11 §4: the 4 cases of cases.py's template per model)
    assert {(r["family"], r["method"], r["grad_ckpt"]) for r in rows} == {
        (f, m, c) for f in FAMILIES for m in ("full", "lora") for c in (True, False)}
    assert len(rows) == 4 * len(FAMILIES)
    errors = sorted(abs(r["error_pct"]) for r in rows)
    median = errors[len(errors) // 2]
    assert median <= 2.0
    assert errors[-1] <= 5.0, max(rows, key=lambda r: abs(r["error_pct"]))


def test_moe_mla_hybrid_sink_parameter_counts_are_exact():
    """Trainable and total parameters of every MoE / MLA / hybrid / sink fixture equal what the traced model held
    (ERNIE 4.5's frozen e_score_correction_bias gets no gradient; Llama 4's router no adapter)."""
    from estimator import TrainingSetup, estimate, spec_from_config
    from estimator.models.moe import FAMILIES

    cases = [c for c in validation._fixtures() if c.get("family") in FAMILIES]
    assert len(cases) >= 20
    for case in cases:
        spec = spec_from_config(case["config"], name=case["id"])
        measured, setup = case["measured"], case["setup"]
        trainable = estimate(spec, TrainingSetup(method=setup["method"], lora_rank=setup["lora_rank"] or 16)
                             ).params_trainable
        assert trainable == measured["params_trainable"], case["id"]
        adapters = trainable if setup["method"] == "lora" else 0
        assert spec.params_total + adapters == measured["params_total"], case["id"]


def test_gemma3_with_image_inputs_within_2_percent():
    """Gemma 3 4B at real width with one 896-px image per example (256 placeholder tokens on top of the text, the
    frozen SigLIP tower's forward): LoRA all-linear with and without checkpointing, against the image-token
    estimate (TrainingSetup.image_tokens)."""
    from pathlib import Path

    ids = {c["id"] for c in json.loads((Path(validation.FIXTURES).parent / "fixtures_image_inputs.json").read_text())}
    rows = [r for r in REPORT["tracer"]["rows"] if r["id"] in ids]
    assert len(rows) == len(ids) >= 2 and {r["grad_ckpt"] for r in rows} == {True, False}
    assert max(abs(r["error_pct"]) for r in rows) <= 2.0, rows


def test_gemma4_gemma3n_within_issue_11_targets_and_counts_exact():
    """Issue 11: Gemma 4 (PLE, KV sharing, double-wide MLP, MoE block, K = V global attention) and Gemma 3n (AltUp,
    LAuReL) text models at real widths against the tracer (validation/data/fixtures_gemma.json): tensor peak
    median ≤ 2 %, worst ≤ 5 %, and the traced models' parameter counts equal the estimator's."""
    from pathlib import Path

    from estimator import TrainingSetup, estimate, spec_from_config
    from estimator.models.gemma import FAMILIES

    cases = json.loads((Path(validation.FIXTURES).parent / "fixtures_gemma.json").read_text())
    ids = {case["id"] for case in cases}
    rows = [r for r in REPORT["tracer"]["rows"] if r["id"] in ids]
    assert len(rows) == len(ids) >= 6 and {r["family"] for r in rows} == FAMILIES
    assert {r["method"] for r in rows} == {"full", "lora"} and {r["grad_ckpt"] for r in rows} == {True, False}
    errors = sorted(abs(r["error_pct"]) for r in rows)
    assert errors[len(errors) // 2] <= 2.0
    assert errors[-1] <= 5.0, max(rows, key=lambda r: abs(r["error_pct"]))
    for case in cases:
        spec = spec_from_config(case["config"], name=case["id"])
        measured, setup = case["measured"], case["setup"]
        trainable = estimate(spec, TrainingSetup(method=setup["method"], lora_rank=16)).params_trainable
        assert trainable == measured["params_trainable"], case["id"]
        assert spec.params_total + (trainable if setup["method"] == "lora" else 0) == measured["params_total"]


# ---- issue 21: the MLX-LM stack against real mlx-lm training steps -------------------------------------------

def test_mlx_fixtures_meet_issue_21_targets():
    """validation/mlx.py prices every fixture of validation/data/mlx_fixtures.json (real mlx_lm lora steps, mlx 0.32.4
    CPU backend) with its own switches. Issue 21's targets on the total peak: median |error| ≤ 2 %, worst ≤ 5 %,
    over the validation fixtures (the probes that fix the constants are the fit set, reported separately)."""
    from validation.mlx import TARGET_MEDIAN_PCT, TARGET_WORST_PCT, mlx_report

    report = REPORT["mlx"]
    full = mlx_report()
    assert report["n"] == full["n"] >= 60
    worst = max(full["rows"], key=lambda r: abs(r["error_pct"]))
    assert full["median_abs_pct"] <= TARGET_MEDIAN_PCT
    assert full["worst_abs_pct"] <= TARGET_WORST_PCT, worst
    assert full["step_median_abs_pct"] <= 2 * TARGET_MEDIAN_PCT  # peak − resident


def test_mlx_fixtures_cover_issue_21s_matrix():
    from validation.mlx import mlx_report

    rows = mlx_report()["rows"]
    assert {"llama", "qwen2", "qwen3", "gemma", "gemma3_text", "phi3", "mistral"} <= {r["family"] for r in rows}
    assert {"lora", "dora", "full"} <= {r["method"] for r in rows}
    assert any(r["quant"] for r in rows) and {True, False} == {r["grad_ckpt"] for r in rows}
    assert {"float32", "bfloat16"} <= {r["dtype"] for r in rows}
    assert max(r["hidden"] for r in rows) >= 2048 and max(r["vocab"] for r in rows) >= 128_000
    assert any("-L1-" in r["name"] for r in rows)  # few trained blocks
    # the calibration probes are measured too, and priced within a few percent in the median
    probes = mlx_report()["probes"]
    assert probes["n"] >= 80 and probes["median_abs_pct"] <= 1.0


def test_mlx_band_covers_the_measured_error():
    """The MLX estimate's low/high band (mlx_step.MLX_ERROR_LOW/HIGH) covers the validation fixtures' errors."""
    from estimator.memory.mlx.step import MLX_ERROR_HIGH, MLX_ERROR_LOW
    from validation.mlx import mlx_report

    errors = [r["error_pct"] / 100 for r in mlx_report()["rows"]]
    assert max(errors) <= MLX_ERROR_LOW + 1e-9 and -min(errors) <= MLX_ERROR_HIGH + 1e-9


def _same(stored, computed, path="") -> list[str]:
    """Where two plain-JSON values differ (floats within 1e-9 relative: the same arithmetic on another machine)."""
    if isinstance(stored, dict) and isinstance(computed, dict):
        if list(stored) != list(computed):
            return [f"{path}: keys {list(stored)[:5]}… ≠ {list(computed)[:5]}…"]
        return [d for k in stored for d in _same(stored[k], computed[k], f"{path}/{k}")]
    if isinstance(stored, list) and isinstance(computed, list):
        if len(stored) != len(computed):
            return [f"{path}: {len(stored)} items ≠ {len(computed)}"]
        return [d for i, (a, b) in enumerate(zip(stored, computed, strict=True)) for d in _same(a, b, f"{path}/{i}")]
    if isinstance(stored, float) and isinstance(computed, float):
        return [] if stored == pytest.approx(computed, rel=1e-9, abs=1e-12) else [f"{path}: {stored} ≠ {computed}"]
    return [] if (type(stored), stored) == (type(computed), computed) else [f"{path}: {stored!r} ≠ {computed!r}"]


def test_the_how_page_shows_what_validation_computes():
    """The How page reads the stored report (ui/data/accuracy_report.json: the app imports no developer tool); it is
    exactly what validation computes now. When the estimate changes, store it again: python -m validation --write."""
    from ui.accuracy import REPORT

    stored = json.loads(REPORT.read_text(encoding="utf-8"))
    differences = _same(stored, validation.stored_report())
    assert not differences, differences[:10]
    assert _same({"a": [1.0, 2]}, {"a": [1.0 + 1e-6, 2]}) and _same({"a": 1}, {"a": 1.0})  # the comparison can fail
