"""Issue 28's MLX regime: real mlx_lm lora steps without checkpointing at 512-1,024 tokens (CPU backend, the path Metal
training takes; validation/data/mlx_fixtures_long.json, written by calibration/mlx_trace.py from mlx_cases.LONG_CASES)
against the estimate. At these lengths the trained blocks' B·H·L² attention probabilities dominate the loss backward.
Full fine-tuning keeps about 0.6 of them more there, as a 4-bit base does (memory/mlx_step.py QUANT_EXTRA_PROBS):
without that term the full steps at 1,024 tokens were priced 10-18 % low."""

import json
import statistics
from pathlib import Path

import pytest

from estimator import estimate, spec_from_config
from validation.mlx import fixture_setup

LONG = Path(__file__).resolve().parents[1] / "validation" / "data" / "mlx_fixtures_long.json"
MEDIAN_PCT, WORST_PCT = 3.0, 8.0  # issue 28's targets for MLX real steps
# Measured misses beyond the worst target, and why (re-derived when the numbers change).
KNOWN = {
    "gemma_mqa-full-L-1-b2-s1024": "one KV head and GeGLU: its full - LoRA twin keeps 1.0 of the trained blocks' "
                                   "probabilities more at the loss backward, not 0.6 (its 4-bit twin only 0.13), so "
                                   "the family-wide 0.6 leaves it -8.5 % (-18 % without the term)",
}


def _rows():
    out = {}
    for fx in json.loads(LONG.read_text())["fixtures"]:
        est = estimate(spec_from_config(fx["config"]), fixture_setup(fx))
        measured = fx["measured"]["steady_peak_bytes"]
        out[fx["name"]] = {"error": 100 * (est.total_bytes - measured) / measured, "setup": fx["setup"],
                           "phase": est.peak_phase}
    return out


@pytest.fixture(scope="module")
def rows():
    return _rows()


def test_long_steps_cover_lora_4bit_and_full(rows):
    kinds = {(r["setup"]["method"], bool(r["setup"]["quant"])) for r in rows.values()}
    assert {("lora", False), ("lora", True), ("full", False)} <= kinds
    assert all(not r["setup"]["grad_checkpoint"] and r["setup"]["seq_len"] >= 512 for r in rows.values())


def test_long_steps_meet_issue_28_targets(rows):
    errors = [abs(r["error"]) for r in rows.values()]
    assert statistics.median(errors) <= MEDIAN_PCT
    misses = {name for name, r in rows.items() if abs(r["error"]) > WORST_PCT}
    assert misses <= set(KNOWN), misses


@pytest.mark.parametrize("name", ["llama_a-full-L-1-b2-s1024", "qwen2_gqa-full-L-1-b2-s1024", "llama_a-full-L-1-b2-s512",
                                  "qwen25_05b-full-L-1-b1-s1024"])
def test_full_fine_tuning_without_checkpointing_at_long_lengths(rows, name):
    """Before the term these were -10.2 %, -11.3 %, -5.2 % and +0.5 % (the real-width one is head-dominated)."""
    assert abs(rows[name]["error"]) <= 3.0, rows[name]
    assert rows[name]["phase"] == "loss backward"
