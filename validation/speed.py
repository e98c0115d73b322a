"""Accuracy of the time model (estimator/speed/) against published throughputs of real fine-tuning runs
(validation/data/throughput.csv): every row replayed through step_time, its relative error, the median and worst
over the held-out rows and, apart, over the rows the constants were fit on; and the fit itself (`fit_constants`),
which reproduces estimator/speed/efficiency.py's CALIBRATION from the fit rows only.

Error = (predicted − measured) / measured, in the row's unit: tokens per second per GPU (the tokens the source
counts, `counted_tokens_per_step` per optimizer step) or optimizer steps per second (it/s)."""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from estimator import load_preset, preset_ids, spec_from_config
from estimator.job.stack import resolve_setup
from estimator.models.spec import ModelSpec
from estimator.options.devices import get_device, with_chip
from estimator.speed import CALIBRATION, Calibration, step_time

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT = ROOT / "validation" / "data" / "throughput.csv"
PUBLISHED_CONFIGS = ROOT / "validation" / "data" / "published_configs"
SPLITS = ("fit", "held_out")
TARGET_MEDIAN_PCT = 20.0  # issue 30: held-out median within 20 %
TARGET_WORST_PCT = 35.0  # and worst within 35 %


@lru_cache(maxsize=1)
def throughput_rows() -> tuple[dict[str, str], ...]:
    """The CSV, read once per process."""
    with THROUGHPUT.open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


@lru_cache(maxsize=32)
def _spec(config_id: str) -> ModelSpec:
    if config_id in preset_ids():
        return load_preset(config_id)
    path = PUBLISHED_CONFIGS / f"{config_id}.json"
    return spec_from_config(json.loads(path.read_text()), name=config_id, source=config_id)


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def replay(row: dict[str, str]) -> tuple[ModelSpec, Any, Any]:
    """(spec, setup, device) of a row: the stack's defaults with every setting the row states."""
    return _replay(tuple(sorted(row.items())))


@lru_cache(maxsize=256)
def _replay(items: tuple[tuple[str, str], ...]) -> tuple[ModelSpec, Any, Any]:
    row = dict(items)
    spec = _spec(row["config_id"])
    device = get_device(row["device"])
    if row["chip"]:
        device = with_chip(device, row["chip"])
    settings: dict[str, Any] = dict(
        method=row["method"], precision=row["precision"], optimizer=row["optimizer"], batch=int(row["batch"]),
        seq_len=int(row["seq_len"]), grad_accum=int(row["grad_accum"]), grad_ckpt=_bool(row["grad_ckpt"]),
        offload_activations=_bool(row["offload_activations"]), compile=_bool(row["compile"]) or None,
        loss=row["loss"], attention=row["attention"], gpus=int(row["gpus"]), sharding=row["sharding"],
        lora_layers=int(row["lora_layers"] or 0) or None,
        backend="metal" if device.kind == "unified" else "cuda")
    if row["lora_rank"]:
        settings["lora_rank"] = int(row["lora_rank"])
        settings["lora_targets"] = tuple(t for t in row["lora_targets"].split(";") if t)
    if row["stack"] != "torchtune":
        settings.pop("compile")
    setup = resolve_setup(row["stack"], **settings)
    if _bool(row["dora"]):
        setup = replace(setup, dora=True)  # PEFT's DoRA on the plain loop (the stack table prices DoRA on MLX only)
    return spec, setup, device


def predict(row: dict[str, str], calibration: Calibration = CALIBRATION) -> float:
    """The row's measured quantity as the model predicts it."""
    spec, setup, device = replay(row)
    step = step_time(spec, setup, device, calibration=calibration)
    if row["measured_unit"] == "it/s":
        return 1.0 / step.step_seconds
    return float(row["counted_tokens_per_step"]) / step.step_seconds


def speed_rows(calibration: Calibration = CALIBRATION) -> list[dict[str, Any]]:
    """Every row with its prediction and error (%)."""
    out = []
    for row in throughput_rows():
        measured = float(row["measured_value"])
        predicted = predict(row, calibration)
        out.append({"id": row["id"], "split": row["split"], "stack": row["stack"], "method": row["method"],
                    "device": row["device"] + (f" ({row['chip']})" if row["chip"] else ""), "unit": row["measured_unit"],
                    "measured": measured, "predicted": predicted,
                    "error_pct": 100.0 * (predicted - measured) / measured})
    return out


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [abs(r["error_pct"]) for r in rows]
    return {"n": len(rows), "median_abs_pct": statistics.median(errors) if errors else 0.0,
            "worst_abs_pct": max(errors, default=0.0),
            "mean_pct": statistics.fmean([r["error_pct"] for r in rows]) if rows else 0.0}


def speed_report(calibration: Calibration = CALIBRATION) -> dict[str, Any]:
    """Held-out and fit rows apart: n, median and worst |error| %, mean signed error; the rows; the targets."""
    rows = speed_rows(calibration)
    return {**{split: _summary([r for r in rows if r["split"] == split]) for split in SPLITS}, "rows": rows,
            "target_median_pct": TARGET_MEDIAN_PCT, "target_worst_pct": TARGET_WORST_PCT}


def format_speed_report(report: dict[str, Any]) -> str:
    """The report as text (a section of `python -m validation`)."""
    held, fit = report["held_out"], report["fit"]
    lines = [f"Time model (published throughputs, validation/data/throughput.csv): held-out n={held['n']}  median "
             f"|err| {held['median_abs_pct']:.1f} %  worst {held['worst_abs_pct']:.1f} %  mean signed "
             f"{held['mean_pct']:+.1f} % (targets {report['target_median_pct']:.0f} % / "
             f"{report['target_worst_pct']:.0f} %); fit n={fit['n']}  median {fit['median_abs_pct']:.1f} %  worst "
             f"{fit['worst_abs_pct']:.1f} %"]
    for r in report["rows"]:
        lines.append(f"    {r['id']:<9} {r['split']:<8} {r['stack']:<9} {r['method']:<5} {r['device']:<24} measured "
                     f"{r['measured']:9.1f} {r['unit']:<12} predicted {r['predicted']:9.1f}  {r['error_pct']:+6.1f} %")
    return "\n".join(lines)


# --- the fit --------------------------------------------------------------------------------------------------------
# Each constant with its bounds; the fit minimises the sum of squared log errors over the fit rows with Nelder-Mead
# (Nelder & Mead 1965, Computer Journal 7(4)) on the constants scaled to [0, 1] by their bounds, from CALIBRATION's
# neighbourhood: deterministic and pure Python. The held-out rows are never read.
BOUNDS: dict[str, tuple[float, float]] = {
    "pytorch": (0.05, 0.95), "mlx_apple": (0.05, 0.95), "compile_speedup": (1.0, 2.0), "hopper": (0.3, 1.0),
    "launch_pytorch": (0.0, 2e-3), "launch_mlx": (0.0, 5e-3), "bandwidth": (0.5, 0.95),
}


def fit_loss(calibration: Calibration) -> float:
    """Sum over the fit rows of ln(predicted / measured)²."""
    total = 0.0
    for row in throughput_rows():
        if row["split"] == "fit":
            total += math.log(predict(row, calibration) / float(row["measured_value"])) ** 2
    return total


def _calibration(x: list[float]) -> Calibration:
    values = {name: lo + (hi - lo) * min(1.0, max(0.0, v)) for (name, (lo, hi)), v in zip(BOUNDS.items(), x, strict=True)}
    return Calibration(**values)


def fit_constants(start: Calibration = CALIBRATION, max_evals: int = 4000) -> Calibration:
    """The constants that minimise fit_loss on the fit rows."""
    names = list(BOUNDS)
    x0 = [(getattr(start, n) - lo) / (hi - lo) for n, (lo, hi) in BOUNDS.items()]
    simplex = [x0] + [[v + (0.1 if i == j else 0.0) for j, v in enumerate(x0)] for i in range(len(names))]
    scored = sorted((fit_loss(_calibration(x)), x) for x in simplex)
    evals = len(scored)
    while evals < max_evals and scored[-1][0] - scored[0][0] > 1e-12:
        centroid = [sum(x[i] for _, x in scored[:-1]) / len(names) for i in range(len(names))]
        worst_f, worst = scored[-1]

        def point(t: float, worst: list[float] = worst, centroid: list[float] = centroid) -> list[float]:
            return [c + t * (w - c) for c, w in zip(centroid, worst, strict=True)]

        reflected = point(-1.0)
        f_r = fit_loss(_calibration(reflected))
        evals += 1
        if f_r < scored[0][0]:
            expanded = point(-2.0)
            f_e = fit_loss(_calibration(expanded))
            evals += 1
            scored[-1] = (f_e, expanded) if f_e < f_r else (f_r, reflected)
        elif f_r < scored[-2][0]:
            scored[-1] = (f_r, reflected)
        else:
            contracted = point(0.5)
            f_c = fit_loss(_calibration(contracted))
            evals += 1
            if f_c < worst_f:
                scored[-1] = (f_c, contracted)
            else:  # shrink towards the best
                best = scored[0][1]
                scored = [scored[0]] + [(fit_loss(_calibration(p)), p) for p in
                                        ([b + 0.5 * (v - b) for b, v in zip(best, x, strict=True)] for _, x in scored[1:])]
                evals += len(names)
        scored.sort(key=lambda item: item[0])
    return _calibration(scored[0][1])
