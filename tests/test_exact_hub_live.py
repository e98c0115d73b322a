"""Slow: `--exact --model org/name` through the local Hub stand-in of tests/test_hub.py (the real huggingface_hub
client, real HTTP on 127.0.0.1): the config.json comes from the stand-in, the worker traces it (it never talks to
the Hub), and the traced peak is byte-equal to the committed fixture of the same config. The repo's custom code
(auto_map) is never fetched or run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from estimator import exact as ex
from estimator.cli import main
from tests.test_hub import _never_the_internet, hub  # noqa: F401 - pytest fixtures (the stand-in; loopback only)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "calibration" / "fixtures.json"
EXACT_PY = os.environ.get(ex.PYTHON_ENV) or str(ROOT / ".venv-cal" / "bin" / "python")
CASE_ID = "qwen3_moe-b-full-bf16-b1s256-sdpa"  # a mixture of experts, 3 layers: ~15 s of tracing


def test_cli_exact_traces_a_hub_model_through_the_stand_in(hub, capsys, monkeypatch):  # noqa: F811 - the fixture
    if isinstance(ex._probe(EXACT_PY), str):
        pytest.skip("no exact interpreter (requirements-exact.txt)")
    monkeypatch.setenv(ex.PYTHON_ENV, EXACT_PY)
    case = next(c for c in json.loads(FIXTURES.read_text()) if c["id"] == CASE_ID)
    cfg = {**case["config"], "auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}}
    hub.add("acme/tiny-moe", {"config.json": json.dumps(cfg).encode(),
                              "modeling_evil.py": b"raise SystemExit('remote code ran')\n"})
    s = case["setup"]
    rc = main(["--model", "acme/tiny-moe", "--stack", "trainer", "--method", "full", "--precision", s["precision"],
               "--batch", str(s["batch"]), "--seq-len", str(s["seq_len"]), "--attention", s["attention"],
               "--no-grad-ckpt", "--loss", "standard", "--optimizer", "adamw", "--exact", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out)
    got, m = doc["exact"], case["measured"]
    assert doc["hub"]["repo_id"] == "acme/tiny-moe"
    assert got["peak_bytes"] == m["peak_bytes"] and got["peak_by_category"] == m["peak_by_category"]
    assert got["params_total"] == m["params_total"]
    # the fast estimate of this MoE: within a few percent of the trace (both add the same CUDA context)
    assert abs(got["fast_minus_exact_pct"]) < 3, got["fast_minus_exact_pct"]
    fetched = {path for method, path, _ in hub.requests if method == "GET"}
    assert "/acme/tiny-moe/resolve/main/config.json" in fetched
    assert not any("modeling_evil" in path for _, path, _ in hub.requests)
