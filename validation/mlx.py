"""Accuracy of the MLX-LM stack's model (estimator/memory/mlx/step.py) against real mlx-lm training steps measured
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

from calibration.mlx_cases import PROBE_CASES
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
        # the tracer's batches are L + 1 tokens and the model runs on L (its seq_len): max_seq_length = L + 1
        batch=s["batch"], seq_len=s["seq_len"] + 1, grad_ckpt=s["grad_checkpoint"], optimizer=s["optimizer"],
        lora_layers=0 if layers == -1 else layers, backend="cpu")
    if method != "full":
        kwargs["lora_rank"] = s["rank"]
    if q:
        kwargs.update(quant_mode=q.get("mode", "affine"), quant_bits=q["bits"], quant_group=q["group_size"])
    return resolve_setup("mlx", **kwargs)


# The probes that fix the constants (calibration/mlx_cases.py PROBE_CASES, fitted by calibration/mlx_fit.py): the
# targets are checked on the other fixtures, which no constant was fitted to alone; the probes are reported too.
PROBES = frozenset(c["name"] for c in PROBE_CASES)


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
            "dtype": fx["setup"]["dtype"], "counted": counted(fx), "probe": fx["name"] in PROBES,
            "hidden": fx["config"]["hidden_size"], "vocab": fx["config"]["vocab_size"],
            "measured": measured, "estimated": est.total_bytes, "resident": resident,
            "error_pct": 100 * (est.total_bytes - measured) / measured,
            "step_error_pct": 100 * ((est.total_bytes - resident) - (measured - resident)) / (measured - resident),
            "peak_phase": est.peak_phase,
        })
    return rows


def _stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
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


@lru_cache(maxsize=1)
def mlx_report() -> dict[str, Any]:
    """The statistics issue 21 asks for: median and worst |error| on the total peak, and on peak − resident, over
    the validation fixtures (the targets) and, separately, over the calibration probes."""
    rows = [r for r in mlx_rows() if r["counted"]]
    report = _stats([r for r in rows if not r["probe"]])
    report["probes"] = _stats([r for r in rows if r["probe"]])
    report["all"] = _stats(rows)
    return report


LAPTOP = "laptop-36gb"
SEED_SIZES_B = (0.5, 1.5, 3, 7, 14, 27, 32, 70)  # ui/grids.py SEED_SIZES_B: the seed page's model sizes


def laptop_table(device_id: str = LAPTOP) -> list[dict[str, Any]]:
    """Issue 21's question: the seed's 36 GB laptop re-answered. For each of the seed's sizes and LoRA / QLoRA / full:
    the verdict before this change (TRL priced as a CUDA GPU: the app's default stack, batch 1, 2,048 tokens), and
    MLX-LM on Metal at mlx-lm's defaults (batch 4, 2,048 tokens, 16 trained blocks) and at batch 1."""
    from dataclasses import replace

    from estimator import generic_spec, get_device, verdict

    device = get_device(device_id)
    rows = []
    for size in SEED_SIZES_B:
        spec = generic_spec(size)
        for method in ("lora", "qlora", "full"):
            before = resolve_setup("trl", method=method, batch=1, backend="cuda")
            mlx = resolve_setup("mlx", method=method, backend="metal")
            row: dict[str, Any] = {"size_b": size, "method": method}
            for key, setup in (("trl_cuda", before), ("mlx_defaults", mlx), ("mlx_batch1", replace(mlx, batch=1))):
                est = estimate(spec, setup)
                v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
                row[key] = {"gb": est.total_bytes / 1e9, "band": v.band, "peak": est.peak_phase}
            rows.append(row)
    return rows


def laptop_markdown(device_id: str = LAPTOP) -> str:
    """laptop_table as the markdown table docs/mlx.md shows."""
    from estimator import get_device

    device = get_device(device_id)
    lines = [f"{device.name}: usable {device.usable_bytes / 1e9:.1f} GB ({device.usable_source.split(':')[0]}).", "",
             "| model | method | before: TRL as CUDA, batch 1 | MLX-LM defaults (batch 4, 16 blocks) | MLX-LM batch 1 "
             "| verdict changes |", "|---|---|---|---|---|---|"]
    for r in laptop_table(device_id):
        cells = [f"{r[k]['gb']:.1f} GB {r[k]['band']}" for k in ("trl_cuda", "mlx_defaults", "mlx_batch1")]
        changed = ", ".join(name for name, k in (("defaults", "mlx_defaults"), ("batch 1", "mlx_batch1"))
                            if r[k]["band"] != r["trl_cuda"]["band"]) or "no"
        lines.append(f"| {r['size_b']:g}B | {r['method']} | " + " | ".join(cells) + f" | {changed} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if "--laptop" in sys.argv:
        print(laptop_markdown())
    else:
        r = mlx_report()
        for name, part in (("validation", r), ("probes", r["probes"]), ("all", r["all"])):
            print(f"{name}: n={part['n']} median {part['median_abs_pct']:.2f} % worst {part['worst_abs_pct']:.2f} % "
                  f"(peak − resident: median {part['step_median_abs_pct']:.2f} % worst "
                  f"{part['step_worst_abs_pct']:.2f} %)")
