"""Slow: re-trace a few calibration cases live with the real tracer (torch, transformers, peft in
.venv-cal) and check the stored fixtures still match it, so the fixtures cannot drift from the tracer."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAL_PY = ROOT / ".venv-cal" / "bin" / "python"
FIXTURES = ROOT / "validation" / "data" / "fixtures.json"
# One llama full-FT, one LoRA with checkpointing, one eager gemma2, one MoE: different code paths.
PICKS = ("llama", "lora", "gemma2", "moe")

pytestmark = pytest.mark.slow


def _pick_cases() -> list[dict]:
    cases = json.loads(FIXTURES.read_text())
    chosen: list[dict] = []
    wanted = [
        lambda c: c["family"] == "llama" and c["setup"]["method"] == "full",
        lambda c: c["setup"]["method"] == "lora" and c["setup"]["grad_ckpt"],
        lambda c: c["family"] == "gemma2",
        lambda c: c["family"] in ("qwen3_moe", "mixtral", "qwen2_moe"),
    ]
    for test in wanted:
        match = next((c for c in cases if test(c) and c not in chosen), None)
        if match is not None:
            chosen.append(match)
    return chosen


@pytest.mark.skipif(not CAL_PY.exists(), reason="no calibration venv (.venv-cal); see README 'Calibration'")
def test_fixtures_match_a_live_trace(tmp_path):
    probe = subprocess.run([str(CAL_PY), "-c", "import torch, transformers, peft"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("calibration venv lacks torch/transformers/peft")
    chosen = _pick_cases()
    assert len(chosen) == len(PICKS)
    inputs = [{k: v for k, v in c.items() if k not in ("measured", "tool")} for c in chosen]
    case_file, out_file = tmp_path / "cases.json", tmp_path / "traced.json"
    case_file.write_text(json.dumps(inputs))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([str(CAL_PY), "-m", "calibration.trace", str(case_file), "-o", str(out_file)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    traced = json.loads(out_file.read_text())
    traced = traced if isinstance(traced, list) else [traced]
    for stored, live in zip(chosen, traced, strict=True):
        assert live["id"] == stored["id"]
        assert live["measured"]["peak_bytes"] == stored["measured"]["peak_bytes"], stored["id"]
