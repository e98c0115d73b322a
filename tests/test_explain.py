"""Why this number (issue 29 items 1, 3, 4): the verdict's condition and the longest length that fits (the calculator's
own search), the assumptions that move the number most (each priced with the estimator), and the closest measured
runs from the validation data (replayed as the accuracy report replays them)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import validation
from estimator import TrainerSetup, advise, estimate, generic_spec, get_device, load_preset
from estimator.advice.assumptions import ASSUMPTION_KEYS, apply_change, assumptions
from estimator.advice.condition import condition_sentence, longest_length
from estimator.advice.explain import explain
from estimator.advice.measured import (
    MLX_FIXTURES,
    PUBLISHED,
    REAL_RUNS,
    closest_measured,
    measured_runs,
    mlx_fixture_setup,
    ours_for,
    similarity,
)
from estimator.i18n import language
from estimator.job.stack import resolve_setup
from estimator.report.document import estimate_json

LLAMA = load_preset("llama-3.1-8b")
LAPTOP, RTX, H100, H200, T4 = (get_device(d) for d in ("laptop-36gb", "rtx-4090", "h100-80gb", "h200", "t4"))


# ---- item 1: the condition and the way out ------------------------------------------------------------------------

CASES = [
    (generic_spec(7), resolve_setup("mlx", backend="metal"), LAPTOP, None),
    (generic_spec(1.5), resolve_setup("mlx", backend="metal"), LAPTOP, None),
    (LLAMA, resolve_setup("trl", batch=4), RTX, None),
    (LLAMA, resolve_setup("unsloth", method="qlora"), RTX, None),
    (LLAMA, resolve_setup("trl", trainer="dpo", method="qlora"), RTX, TrainerSetup("dpo")),
    (LLAMA, resolve_setup("trl", trainer="grpo"), H100, TrainerSetup("grpo")),
    (LLAMA, resolve_setup("trainer", batch=2, seq_len=4096), H100, None),
]


@pytest.mark.parametrize(("spec", "setup", "device", "trainer"), CASES)
def test_the_longest_length_is_the_calculators_answer(spec, setup, device, trainer):
    """The same search as advise()'s "longest max length that fits", capped at the model's context length."""
    got = longest_length(spec, setup, device, trainer)
    want = advise(spec, setup, device, trainer).max_length
    if got.status == "all_fit":
        assert want >= got.limit and got.tokens == got.limit
    else:
        assert got.tokens == want
    assert got.batch == setup.batch and got.kind == ("completion_len" if trainer and trainer.option.generates
                                                      else "seq_len")


def test_the_longest_length_fits_and_one_token_more_does_not():
    spec, setup = generic_spec(1.5), resolve_setup("mlx", backend="metal")
    got = longest_length(spec, setup, LAPTOP)
    assert got.status == "fits_up_to" and got.tokens < setup.seq_len  # the 1.5B LoRA of the issue: too big at 2,048
    fits = estimate(spec, replace(setup, seq_len=got.tokens)).total_bytes
    over = estimate(spec, replace(setup, seq_len=got.tokens + 1)).total_bytes
    assert fits <= LAPTOP.usable_bytes < over
    assert str(got.sentence()) == f"fits up to {got.tokens:,} tokens per example at batch 4"


def test_no_length_and_every_length():
    none = longest_length(load_preset("llama-3.1-70b"), resolve_setup("trl", method="full"), T4)
    assert (none.tokens, none.status) == (None, "none_fits") and "no length fits" in str(none.sentence())
    small = load_preset("qwen2.5-0.5b")
    every = longest_length(small, resolve_setup("trl", method="qlora"), H200)
    assert every.status == "all_fit" and every.tokens == every.limit == small.max_position_embeddings
    assert "every length up to the model's 32,768 tokens per example fits" in str(every.sentence())


def test_the_condition_says_the_batch_the_length_and_the_padding():
    text = str(condition_sentence(resolve_setup("mlx", backend="metal")))
    assert text.startswith("batch 4 × 2,048 tokens per example, every example padded to the max length")
    assert "pad a batch to its longest example" in text
    grpo = str(condition_sentence(resolve_setup("trl", trainer="grpo"), TrainerSetup("grpo")))
    assert grpo.startswith("batch 8 completions × (512 + 512) tokens")
    with language("es"):
        assert condition_sentence(resolve_setup("mlx", backend="metal")).translated().startswith(
            "lote 4 × 2048 tokens por ejemplo, cada ejemplo rellenado hasta la longitud máxima")


def test_the_json_device_object_carries_the_condition_and_the_longest_length():
    spec, setup = generic_spec(1.5), resolve_setup("mlx", backend="metal")
    est = estimate(spec, setup)
    doc = estimate_json(est, LAPTOP, explanation=explain(spec, est, LAPTOP))
    device = doc["device"]
    assert device["longest_len_that_fits"] == longest_length(spec, setup, LAPTOP).tokens
    assert device["condition"] == {"batch": 4, "seq_len": 2048, "padded_to": "max_length",
                                   "sentence": str(condition_sentence(setup))}
    assert device["longest_len"]["status"] == "fits_up_to" and device["longest_len"]["limit"] > 2048
    assert doc["why"]["rule_bytes"] + sum(s["bytes"] for s in doc["why"]["steps"]) == doc["total_bytes"]
    no_device = estimate_json(est, None, explanation=explain(spec, est))
    assert "device" not in no_device and "why" in no_device
    json.dumps(doc)  # every value is JSON


# ---- item 3: the assumptions that move the number most --------------------------------------------------------------

@pytest.mark.parametrize(("spec", "setup", "device", "trainer"), CASES)
def test_each_assumption_is_priced_with_the_estimator(spec, setup, device, trainer):
    cap = device.capacity_bytes
    found = assumptions(spec, setup, trainer, device_capacity=cap)
    assert 1 <= len(found) <= 4
    assert [abs(a.delta_bytes) for a in found] == sorted((abs(a.delta_bytes) for a in found), reverse=True)
    now = estimate(spec, setup, trainer=trainer, device_capacity=cap, strict=False).total_bytes
    for a in found:
        assert a.key in ASSUMPTION_KEYS and a.delta_bytes != 0
        after = estimate(spec, apply_change(setup, a.change), trainer=trainer, device_capacity=cap,
                         strict=False).total_bytes
        assert a.delta_bytes == round(after - now)
        assert str(a.label) == f"{a.setting} · {a.source_label}"
        json.dumps(a.as_json())


def test_the_sources_say_whose_default_it_is():
    by = {a.key: a for a in assumptions(generic_spec(7), resolve_setup("mlx", backend="metal"), count=9)}
    assert str(by["batch"].label) == "batch 4 · MLX-LM default" and by["batch"].source == "stack"
    assert str(by["seq_len"].label) == "examples 2,048 tokens · MLX-LM default"
    assert by["seq_len"].change == {"seq_len": 1024} and str(by["seq_len"].change_label) == "examples 1,024 tokens"
    assert by["lora_layers"].change == {"lora_layers": 0}  # every block: what mlx-lm's 16 blocks save
    full = {a.key: a for a in assumptions(LLAMA, resolve_setup("trl", method="full"), count=9)}
    assert full["precision"].change == {"precision": "mixed"} and full["precision"].delta_bytes > 60e9
    assert str(full["grad_ckpt"].label) == "checkpointing on · TRL default"
    grpo = {a.key: a for a in assumptions(LLAMA, resolve_setup("trl", trainer="grpo"), TrainerSetup("grpo"), count=9)}
    assert grpo["batch"].source == "trainer" and str(grpo["batch"].source_label) == "GRPO default"
    mine = {a.key: a for a in assumptions(LLAMA, resolve_setup("trl", batch=4), count=9)}
    assert mine["batch"].source == "user" and str(mine["batch"].source_label) == "your choice"


def test_under_the_rule_of_thumb_only_what_the_rule_counts_moves():
    found = assumptions(LLAMA, resolve_setup("trl", batch=8, seq_len=8192), rule="seed", count=9)
    assert {a.key for a in found} <= {"method", "precision"} and found


# ---- item 4: what people measured ---------------------------------------------------------------------------------

def test_the_published_rows_replay_as_the_accuracy_report_replays_them():
    rows = {r["id"]: r for r in validation.published_rows()}
    runs = {r.id: r for r in measured_runs() if r.file == PUBLISHED.name}
    assert set(runs) == set(rows) and len(runs) >= 44
    for rid, run in runs.items():
        assert abs(ours_for(run) / 1e9 - rows[rid]["estimated_gb"]) < 1e-9, rid
        assert abs(run.figure / 1e9 - rows[rid]["measured_gb"]) < 1e-9, rid


def test_the_mlx_fixtures_and_unsloths_lengths_replay_as_the_accuracy_report():
    from validation.mlx import fixture_setup, mlx_rows
    from validation.unsloth import context_rows

    fixtures = {fx["name"]: fx for fx in json.loads(MLX_FIXTURES.read_text())["fixtures"]}
    estimated = {r["name"]: r["estimated"] for r in mlx_rows()}
    mlx = [r for r in measured_runs() if r.metric == "mx.get_peak_memory" and r.file.endswith("mlx_fixtures.json")]
    assert len(mlx) >= 100
    for run in mlx:
        assert run.setup == fixture_setup(fixtures[run.id]) == mlx_fixture_setup(fixtures[run.id])
        assert ours_for(run) == estimated[run.id]
    modelled = {r["id"]: r["modelled"] for r in context_rows()}
    lengths = [r for r in measured_runs() if r.unit == "tokens"]
    assert len(lengths) == sum(1 for r in context_rows() if r["check"] in ("unsloth_2024", "hf_fa2"))
    for run in lengths:
        assert ours_for(run) == modelled[run.id], run.id


@pytest.mark.skipif(not REAL_RUNS.is_file(), reason="the real-run file (issue 28 item 5) is not on this branch")
def test_the_real_runs_replay_as_the_real_run_check():  # pragma: no cover - runs once the file is merged
    from estimator.advice.measured import _csv, real_run_job
    from validation.real_runs import row_job

    for row in _csv(REAL_RUNS):
        assert real_run_job(row) == row_job(row), row["id"]


def test_a_published_runs_own_setup_finds_it_first():
    run = next(r for r in measured_runs() if r.id == "litgpt-hub-04")
    found = closest_measured(run.spec, run.setup, run.trainer)
    assert found[0].run.id == run.id and len(found) == 3
    assert found[0].similarity >= found[1].similarity >= found[2].similarity
    assert found[0].ours == ours_for(run) and found[0].diff_pct == pytest.approx(
        100 * (ours_for(run) - run.figure) / run.figure)


def test_the_closest_runs_share_the_model_the_method_and_the_stack_first():
    found = closest_measured(LLAMA, resolve_setup("unsloth", method="qlora"))
    assert all(c.run.spec.name == LLAMA.name and c.run.setup.method == "qlora" for c in found)
    assert found[0].run.setup.stack == "unsloth"
    tiny = next(r for r in measured_runs() if r.metric == "mx.get_peak_memory")
    same = similarity(tiny, tiny.spec, tiny.setup, tiny.trainer)
    assert same > similarity(tiny, LLAMA, resolve_setup("trl"), TrainerSetup("sft"))


def test_a_comparison_in_json_and_in_words():
    comparison = closest_measured(LLAMA, resolve_setup("litgpt", batch=4, seq_len=512))[0]
    doc = comparison.as_json()
    assert set(doc) >= {"id", "model", "figure", "unit", "metric", "source", "ours", "diff_pct", "similarity"}
    assert doc["metric"] in ("max_allocated", "max_reserved", "nvidia-smi", "mx.get_peak_memory", "longest_length")
    text = str(comparison.sentence())
    assert "measured" in text and doc["metric"] in text or "tokens" in text
    with language("es"):
        assert "medido" in comparison.sentence().translated() and "lote" in comparison.sentence().translated()
