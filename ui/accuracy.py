"""The accuracy figures the How it works page shows (the estimate's, the time model's, the real-run check's), as
validation/ computed them: read from ui/data/accuracy_report.json, a plain JSON file (`python -m validation --write`
stores it; tests/test_accuracy.py checks that it is what validation/ computes from its data, so the two cannot
drift). The app never imports the
developer tools (validation/, calibration/): it reads their stored result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .once import once

REPORT = Path(__file__).resolve().parent / "data" / "accuracy_report.json"


def _stored() -> dict[str, Any]:
    return json.loads(REPORT.read_text(encoding="utf-8"))


def accuracy_report() -> dict[str, Any]:
    """The accuracy report (tracer, published, MLX-LM and Unsloth runs): it depends on no input and no language (its
    rows hold ids, numbers and English source notes), so it is read once per process (ui/once.py: shared, read
    only)."""
    return once("how.accuracy_report", _stored)["accuracy"]


def trainer_traces() -> dict[str, float]:
    """n, median and worst |error| (fractions) of the estimate against the stored traces of the preference/RL
    trainers (validation/trainers.py trainer_trace_summary)."""
    return once("how.accuracy_report", _stored)["trainer_traces"]


def real_runs_report() -> dict[str, Any]:
    """The real-run check (validation/real_runs.py real_runs_report): published runs' verdicts and peak errors."""
    return once("how.accuracy_report", _stored)["real_runs"]
