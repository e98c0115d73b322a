"""Slow: the exact trace for real, in a worker running the interpreter that has the optional install
(requirements-exact.txt; $WIF_EXACT_PYTHON, else the calibration venv .venv-cal, which CI installs it into).

* `python -m estimator --exact` on committed calibration cases: the traced peak is byte-equal to the fixture,
  a mixture-of-experts model among them; Gemma 2 and gpt-oss asked for with SDPA are traced with eager attention
  (transformers refuses SDPA for them) and say so.
* Reliability: a worker killed mid-trace, a trace past its time limit, ten requests at once (one runs, nine
  queue and know their place; duplicates share one job), a trace over the host-memory cap, and a 10,000-layer
  config refused before any work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from estimator import TrainingSetup
from estimator import exact as ex

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "validation" / "data" / "fixtures.json"
EXACT_PY = os.environ.get(ex.PYTHON_ENV) or str(ROOT / ".venv-cal" / "bin" / "python")
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2000, "tie_word_embeddings": False}
# A full FT, a LoRA with eager attention + checkpointing, a real-width TRL chunked loss with offloading, and a
# mixture of experts (Qwen3-MoE: 16 experts, 4 per token; transformers' grouped-mm experts).
CASES = ("qwen2-b-full-bf16-b1s256-sdpa", "llama-b-lora-r8-all-mixed-b1s512-ckpt-eager",
         "rw-llama3.2-3b-L2-full-bf16-b1s1024-ckpt-offload-chunked-sdpa", "qwen3_moe-b-full-bf16-b1s256-sdpa")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def interp() -> ex.Interpreter:
    found = ex._probe(EXACT_PY)
    if isinstance(found, str):
        pytest.skip(f"no exact interpreter: {found}")
    return found


def _fixture(case_id: str) -> dict:
    return next(c for c in json.loads(FIXTURES.read_text()) if c["id"] == case_id)


def _cli_args(case: dict, cfg_path: Path, attention: str | None = None) -> list[str]:
    s = case["setup"]
    stack = "trl" if s.get("loss") == "chunked" else "trainer"  # the stack that has this loss; every setting given
    args = ["--config", str(cfg_path), "--stack", stack, "--method", s["method"], "--precision", s["precision"],
            "--optimizer", s.get("optimizer", "adamw"), "--batch", str(s["batch"]), "--seq-len", str(s["seq_len"]),
            "--attention", attention or s["attention"], "--loss", s.get("loss") or "standard",
            "--grad-ckpt" if s["grad_ckpt"] else "--no-grad-ckpt",
            "--offload-activations" if s.get("offload_activations") else "--no-offload-activations"]
    if s["method"] == "lora":
        targets = s["lora_targets"]
        args += ["--lora-rank", str(s["lora_rank"]),
                 "--lora-targets", targets if isinstance(targets, str) else ",".join(targets)]
    return args

def _exact_cli(case: dict, interp, tmp_path, *, timeout: int, attention: str | None = None,
               whole: bool = False) -> dict:
    """`python -m estimator --config <case's config> … --exact --json` with the exact interpreter: the `exact` object
    (or the whole answer)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(case["config"]))
    env = {**os.environ, ex.PYTHON_ENV: interp.python}
    proc = subprocess.run([sys.executable, "-m", "estimator", *_cli_args(case, cfg, attention), "--exact", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    return doc if whole else doc["exact"]


@pytest.mark.parametrize("case_id", CASES)
def test_cli_exact_is_byte_equal_to_the_committed_fixture(case_id, interp, tmp_path):
    case = _fixture(case_id)
    assert case["setup"].get("lora_alpha") in (None, 2 * (case["setup"].get("lora_rank") or 0))  # the tracer's default
    got = _exact_cli(case, interp, tmp_path, timeout=1200)
    m = case["measured"]
    assert got["peak_bytes"] == m["peak_bytes"]
    assert got["peak_by_category"] == m["peak_by_category"]
    assert (got["peak_phase"], got["peak_region"], got["peak_op"]) == (m["peak_phase"], m["peak_region"], m["peak_op"])
    assert got["versions"]["torch"].startswith("2.13.0") and got["versions"]["transformers"] == "5.24.0"
    assert got["total_bytes"] == got["peak_bytes"] + sum(a["bytes"] for a in got["added"])
    assert got["seconds"] > 0


@pytest.mark.parametrize("case_id", ["gemma2-a-full-bf16-b1s256-eager",
                                     "rw-gpt-oss-20b-L2-full-bf16-b1s1024-standard-eager"])
def test_sdpa_that_transformers_refuses_is_traced_eager_and_said(case_id, interp, tmp_path):
    """Gemma 2 (soft-capping) and gpt-oss (attention sinks) asked for with SDPA: transformers raises for an explicit
    attn_implementation="sdpa" and uses eager by default, so the trace runs eager: byte-equal to the eager fixture."""
    case = _fixture(case_id)
    assert case["setup"]["attention"] == "eager"
    doc = _exact_cli(case, interp, tmp_path, timeout=1200, attention="sdpa", whole=True)
    got, m = doc["exact"], case["measured"]
    assert got["peak_bytes"] == m["peak_bytes"] and got["peak_by_category"] == m["peak_by_category"]
    assert "cannot run SDPA in transformers" in got["notes"][0] and "traced with eager attention" in got["notes"][0]
    if case["family"] == "gpt_oss":  # the fast estimate models the sinks' eager scores: it stays close
        assert abs(got["fast_minus_exact_pct"]) < 5, got["fast_minus_exact_pct"]


def test_a_linear_attention_hybrid_traces_and_agrees_with_the_fast_estimate(interp, tmp_path):
    """Qwen3.5's text model at a small width, one period of its pattern (3 Gated DeltaNet layers + 1 full attention):
    transformers' torch fallback of the delta rule runs under FakeTensorMode. The parameters match the fast
    estimator's count exactly and the totals agree within a few percent."""
    from estimator import estimate, spec_from_config

    cfg = json.loads((ROOT / "estimator" / "models" / "presets" / "qwen3.5-27b.json").read_text())["text_config"]
    cfg.update(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, head_dim=64, linear_key_head_dim=32, linear_value_head_dim=32,
               linear_num_key_heads=4, linear_num_value_heads=8, vocab_size=4000)
    cfg["layer_types"] = cfg["layer_types"][:4]
    assert cfg["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    case = {"config": cfg, "setup": {"method": "full", "precision": "bf16", "batch": 1, "seq_len": 256,
                                     "grad_ckpt": False, "attention": "sdpa", "loss": "standard"}}
    doc = _exact_cli(case, interp, tmp_path, timeout=1200, whole=True)
    got = doc["exact"]
    assert got["params_total"] == estimate(spec_from_config(cfg), TrainingSetup()).params_total == doc["params_total"]
    assert got["peak_bytes"] > 0 and got["depth"]["traced"] == [4]
    assert abs(got["fast_minus_exact_pct"]) < 5, got["fast_minus_exact_pct"]


def test_a_deeper_model_is_traced_at_2_and_4_layers_and_extrapolated_byte_equal(interp, tmp_path):
    """The 6-layer fixture (a committed full-depth trace) from two shallow traces: the same bytes, every category."""
    case = next(c for c in json.loads(FIXTURES.read_text()) if c["id"] == "llama-c-full-mixed-b1s256-sdpa")
    assert case["config"]["num_hidden_layers"] == 6
    got, m = _exact_cli(case, interp, tmp_path, timeout=600), case["measured"]
    assert got["depth"] == {"traced": [2, 4], "extrapolated_to": 6,
                            "note": "traced at 2 and 4 layers, extrapolated to 6: exact for identical layers"}
    assert got["peak_bytes"] == m["peak_bytes"] and got["peak_by_category"] == m["peak_by_category"]
    assert (got["params_total"], got["params_trainable"]) == (m["params_total"], m["params_trainable"])
    assert (got["peak_phase"], got["peak_region"], got["peak_op"]) == (m["peak_phase"], m["peak_region"], m["peak_op"])


def _job(seq_len: int) -> tuple[str, dict]:
    key, payload, _ = ex.make_job(TINY, TrainingSetup(method="lora", seq_len=seq_len))
    return key, payload


def _wait_for(pred, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_a_worker_killed_mid_trace_ends_with_a_note_and_the_pool_keeps_working(interp):
    pool = ex.ExactPool(interp, time_limit_s=600)
    try:
        key, payload = _job(128)
        pool.submit(payload, key)
        _wait_for(lambda: pool.worker_pids() and pool.status(key).state == "running", 120)
        time.sleep(3)  # inside the worker: importing torch or tracing
        for pid in pool.worker_pids():
            os.kill(pid, signal.SIGKILL)
        st = pool.wait(key, timeout=60)
        assert st.state == "failed" and "worker stopped" in st.error
        key2, payload2 = _job(192)  # a fresh worker answers the next request
        pool.submit(payload2, key2)
        st2 = pool.wait(key2, timeout=600)
        assert st2.state == "done", st2.error
        assert st2.result["peak_bytes"] > 0 and st2.result["versions"]["peft"]
        # the failed job may be asked again: it is retried, not answered from a stale failure
        pool.submit(payload, key)
        assert pool.status(key).state in ("queued", "running")
    finally:
        pool.shutdown()


def test_ten_requests_at_once_queue_behind_one_trace_and_a_time_limit_frees_the_worker(interp):
    pool = ex.ExactPool(interp, time_limit_s=4)
    try:
        jobs = [_job(64 * (i + 1)) for i in range(10)]
        barrier = threading.Barrier(10)

        def send(job):
            barrier.wait()
            pool.submit(job[1], job[0])
            pool.submit(job[1], job[0])  # asking twice does not queue twice

        threads = [threading.Thread(target=send, args=(j,)) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        states = [pool.status(k) for k, _ in jobs]
        assert sorted(s.position for s in states) == list(range(10))
        assert sum(s.state == "running" for s in states) == 1 and sum(s.state == "queued" for s in states) == 9
        first = next(k for (k, _), s in zip(jobs, states, strict=True) if s.state == "running")
        st = pool.wait(first, timeout=120)  # 4 s limit: torch alone takes longer to import
        assert st.state == "failed" and "time limit (4 s)" in st.error
        # the next one in the queue runs on a fresh worker; the others move up one place
        _wait_for(lambda: sum(pool.status(k).state == "running" for k, _ in jobs) == 1, 60)
        assert sorted(pool.status(k).position for k, _ in jobs if k != first) == list(range(9))
    finally:
        pool.shutdown()


def test_a_trace_over_the_host_memory_cap_ends_with_a_note_and_the_next_trace_runs(interp):
    """The worker's address space is capped (RLIMIT_AS): 0.3 GB cannot even map libtorch. The job ends with a note
    naming the cap; the worker is replaced, so the trace queued behind it (normal cap) runs and finishes."""
    pool = ex.ExactPool(interp, time_limit_s=600, max_host_bytes=int(0.3e9))
    try:
        key, payload = _job(96)
        pool.submit(payload, key)
        pool.max_host_bytes = ex.DEFAULT_MAX_HOST_BYTES
        key2, payload2 = _job(160)
        pool.submit(payload2, key2)
        assert pool.status(key2).state == "queued"
        st = pool.wait(key, timeout=300)
        assert st.state == "failed" and "host memory" in st.error, st.error
        assert "0.3 GB" in st.error or "out of host memory" in st.error
        st2 = pool.wait(key2, timeout=900)
        assert st2.state == "done", st2.error
        assert st2.result["peak_bytes"] > 0
    finally:
        pool.shutdown()


def test_ten_thousand_layers_are_refused_and_never_reach_a_worker(interp):
    pool = ex.ExactPool(interp)
    with pytest.raises(ex.ExactRefused, match="10,000 layers"):
        ex.trace_exact({**TINY, "num_hidden_layers": 10_000}, TrainingSetup(), pool=pool)
    assert pool.worker_pids() == []


def test_the_worker_refuses_unknown_model_types_and_never_runs_remote_code(interp):
    pool = ex.ExactPool(interp)
    try:
        cfg = {**TINY, "model_type": "acme_secret_arch", "auto_map": {"AutoModelForCausalLM": "x.Y"}}
        with pytest.raises(RuntimeError, match="does not know model_type 'acme_secret_arch'"):
            ex.trace_exact(cfg, TrainingSetup(), pool=pool)
        t5 = {"model_type": "t5", "d_model": 64, "num_layers": 2, "num_heads": 2, "vocab_size": 100}
        with pytest.raises(RuntimeError, match="no causal-LM class for model_type 't5'"):
            ex.trace_exact(t5, TrainingSetup(), pool=pool)
    finally:
        pool.shutdown()
