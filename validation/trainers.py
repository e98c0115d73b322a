"""Published peak-memory figures of preference/RL runs (validation/data/published_trainer_measurements.csv) next to the
calculator's answer. Each row is replayed with the stack of its TRL version (`replay_stack`), states what the
number measures (nvidia-smi totals include the CUDA context and the allocator's reserve), and is reported, not
asserted: the configurations are user reports, partly incomplete (see each row's notes)."""

from __future__ import annotations

import csv
from functools import lru_cache
from typing import Any

from estimator import TrainerSetup, estimate, get_device
from estimator.job.stack import resolve_setup
from estimator.units import GB, GiB

from . import ROOT, _published_spec

PUBLISHED_TRAINERS = ROOT / "validation" / "data" / "published_trainer_measurements.csv"
UNITS = {"GB": GB, "GiB": GiB, "MiB": 2**20}


@lru_cache(maxsize=1)
def _rows() -> tuple[dict[str, str], ...]:
    with PUBLISHED_TRAINERS.open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def trainer_rows(batches: tuple[int, ...] = (1, 2, 4, 8)) -> list[dict[str, Any]]:
    """Every published trainer row with the calculator's answer (TRL 1.16 defaults and the row's own stack).
    A row without a batch size gets one answer per batch in `batches` and no error."""
    out = []
    for row in _rows():
        spec = _published_spec(row["config_id"])
        measured = float(row["measured_value"]) * UNITS[row["measured_unit"]]
        device = get_device(row["device"]) if row["device"] != "unknown" else None
        kw: dict[str, Any] = {"method": row["method"], "precision": row["precision"]}
        if _int(row["seq_len"]):
            kw["seq_len"] = _int(row["seq_len"])
        if _int(row["lora_rank"]):
            kw["lora_rank"] = _int(row["lora_rank"])
        tr = TrainerSetup(row["trainer"])
        if row["trainer"] == "grpo":
            tr = TrainerSetup("grpo", num_generations=_int(row["num_generations"]), prompt_len=_int(row["prompt_len"]),
                              completion_len=_int(row["completion_len"]), generation=row["generation"] or None)
        capacity = device.runtime_total_bytes if device else None
        answers = {}
        for batch in ([_int(row["batch"])] if _int(row["batch"]) else list(batches)):
            for stack in dict.fromkeys((row["replay_stack"], "trl")):
                est = estimate(spec, resolve_setup(stack, batch=batch, **kw), trainer=tr, device_capacity=capacity)
                answers[f"{stack}, batch {batch}"] = {"total_bytes": est.total_bytes, "peak_phase": est.peak_phase}
        replay = answers.get(f"{row['replay_stack']}, batch {_int(row['batch'])}") if _int(row["batch"]) else None
        out.append({
            "id": row["id"], "model": row["model"], "trainer": row["trainer"], "method": row["method"],
            "measure": row["measure"], "framework_version": row["framework_version"], "source": row["source"],
            "measured_bytes": measured, "answers": answers,
            "error_pct": 100 * (replay["total_bytes"] / measured - 1) if replay else None,
        })
    return out


TRAINER_FINDINGS = ROOT / "validation" / "data" / "trainer_findings.json"  # written by calibration/trainer_trace.py


@lru_cache(maxsize=1)
def trainer_trace_summary() -> dict[str, float]:
    """n, median and worst |error| (fractions) of the estimator against the stored trainer traces
    (validation/data/trainer_findings.json; tests/test_trainer_calibration.py re-derives them)."""
    import json
    import statistics

    rows = json.loads(TRAINER_FINDINGS.read_text(encoding="utf-8"))["traces"]
    errors = [abs(r["error"]) for r in rows]
    return {"n": len(errors), "median_abs": statistics.median(errors), "worst_abs": max(errors)}
