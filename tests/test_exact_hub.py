"""`--exact --model org/name` through the local Hub stand-in of tests/test_hub.py (the real huggingface_hub client,
real HTTP on 127.0.0.1). Slow: the config.json comes from the stand-in, the worker traces it (it never talks to the
Hub), and the traced peak is byte-equal to the committed fixture of the same config; the repo's custom code
(auto_map) is never fetched or run. Default suite (the trace replaced by a stand-in): a Hub model the fast estimator
refuses is still traced, from the config.json the client cached."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from estimator import exact as ex
from estimator.report.cli import main
from tests.test_hub import _never_the_internet, hub  # noqa: F401 - pytest fixtures (the stand-in; loopback only)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "validation" / "data" / "fixtures.json"
EXACT_PY = os.environ.get(ex.PYTHON_ENV) or str(ROOT / ".venv-cal" / "bin" / "python")
CASE_ID = "qwen3_moe-b-full-bf16-b1s256-sdpa"  # a mixture of experts, 3 layers: ~15 s of tracing


@pytest.mark.slow
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


def test_cli_exact_traces_a_hub_model_the_fast_estimator_refuses(hub, capsys, monkeypatch):  # noqa: F811
    cfg = {"model_type": "t5", "d_model": 512, "vocab_size": 32128, "num_layers": 6, "num_heads": 8}
    hub.add("acme/t5-small", {"config.json": json.dumps(cfg).encode()})
    monkeypatch.setattr(ex, "available", lambda: (True, "torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2"))
    seen: dict = {}

    class _Pool:
        def shutdown(self):
            pass

    def fake(config, setup, est=None, pool=None):
        seen["config"], seen["est"] = config, est
        raw = {"peak_bytes": 1_000_000, "peak_by_category": {"parameters": 1_000_000}, "peak_phase": "backward",
               "peak_region": "layers", "peak_module": "m", "peak_op": "mm", "seconds": 1.0,
               "versions": {"torch": "2.13.0+cpu", "transformers": "5.24.0", "peft": "0.21.2"}}
        return ex.combine(raw, setup, est, ex.make_job(config, setup)[2])

    monkeypatch.setattr(ex, "get_pool", lambda: _Pool())
    monkeypatch.setattr(ex, "trace_exact", fake)
    assert main(["--model", "acme/t5-small", "--exact", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "could not be used" in doc["fast_estimate_error"] and doc["exact"]["peak_bytes"] == 1_000_000
    assert seen["config"] == cfg and seen["est"] is None
    gets = [path for method, path, _ in hub.requests if method == "GET" and path.endswith("config.json")]
    assert gets == ["/acme/t5-small/resolve/main/config.json"]  # read once, by the estimator's fetch
    with pytest.raises(SystemExit) as info:  # without --exact: the usual one-line refusal
        main(["--model", "acme/t5-small"])
    assert info.value.code == 2
