"""Accuracy of the MLX-LM stack's model (estimator/memory/mlx_step.py) against real mlx-lm training steps measured
by calibration/mlx_trace.py (validation/data/mlx_fixtures.json: mx.get_peak_memory() around steady-state steps of
mlx-lm's own model classes and trainer step, CPU backend). Pure Python: no mlx needed to read them.

Each fixture is priced with the MLX-LM stack on the "cpu" backend (the path the fixtures ran), with the fixture's own
method, dtype, batch, length, checkpointing, trained blocks, rank, optimizer and quantisation."""

from __future__ import annotations

import json
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

from estimator import TrainingSetup, estimate, spec_from_config
from estimator.job.stack import resolve_setup

ROOT = Path(__file__).resolve().parents[1]
MLX_FIXTURES = ROOT / "validation" / "data" / "mlx_fixtures.json"

# The accuracy targets of issue 21 (the MLX-LM stack against real steps): on the total peak.
TARGET_MEDIAN_PCT = 2.0
TARGET_WORST_PCT = 5.0


def fixture_setup(fx: dict[str, Any]) -> TrainingSetup:
    """The estimator's setup for one fixture: mlx-lm's stack on the CPU backend, every switch the fixture set."""
    s = fx["setup"]
    q = s.get("quant") or {}
    method = "full" if s["method"] == "full" else ("qlora" if q else "lora")
    layers = s["num_layers"]
    kwargs: dict[str, Any] = dict(
        method=method, dora=s["method"] == "dora", precision="fp32" if s["dtype"] == "float32" else "bf16",
        batch=s["batch"], seq_len=s["seq_len"], grad_ckpt=s["grad_checkpoint"], optimizer=s["optimizer"],
        lora_layers=0 if layers == -1 else layers, backend="cpu")
    if method != "full":
        kwargs["lora_rank"] = s["rank"]
    if q:
        kwargs.update(quant_mode=q.get("mode", "affine"), quant_bits=q["bits"], quant_group=q["group_size"])
    return resolve_setup("mlx", **kwargs)


def counted(fx: dict[str, Any]) -> bool:
    """Fixtures the statistics count: compiled steps, as mlx_lm lora runs them (the one uncompiled fixture shows
    what compilation adds)."""
    return fx["setup"].get("compile", True)


@lru_cache(maxsize=1)
def _fixtures() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(MLX_FIXTURES.read_text())["fixtures"])


def mlx_rows() -> list[dict[str, Any]]:
    """Every fixture with the estimate's peak, the measured peak and the errors on the total and on peak − resident."""
    rows = []
    for fx in _fixtures():
        m = fx["measured"]
        spec = spec_from_config(fx["config"])
        setup = fixture_setup(fx)
        est = estimate(spec, setup)
        measured = m["steady_peak_bytes"]
        resident = m["steady_active_before_bytes"]
        rows.append({
            "name": fx["name"], "family": fx["config"]["model_type"], "method": fx["setup"]["method"],
            "quant": bool(fx["setup"].get("quant")), "grad_ckpt": fx["setup"]["grad_checkpoint"],
            "dtype": fx["setup"]["dtype"], "counted": counted(fx),
            "hidden": fx["config"]["hidden_size"], "vocab": fx["config"]["vocab_size"],
            "measured": measured, "estimated": est.total_bytes, "resident": resident,
            "error_pct": 100 * (est.total_bytes - measured) / measured,
            "step_error_pct": 100 * ((est.total_bytes - resident) - (measured - resident)) / (measured - resident),
            "peak_phase": est.peak_phase,
        })
    return rows


def mlx_report() -> dict[str, Any]:
    """The statistics issue 21 asks for: median and worst |error| on the total peak, and on peak − resident."""
    rows = [r for r in mlx_rows() if r["counted"]]
    errs = sorted(abs(r["error_pct"]) for r in rows)
    step = sorted(abs(r["step_error_pct"]) for r in rows)
    return {
        "n": len(rows),
        "median_abs_pct": statistics.median(errs),
        "worst_abs_pct": errs[-1],
        "p90_abs_pct": errs[int(0.9 * (len(errs) - 1))],
        "step_median_abs_pct": statistics.median(step),
        "step_worst_abs_pct": step[-1],
        "families": sorted({r["family"] for r in rows}),
        "rows": rows,
    }
