"""A stand-in for exact/worker.py's trace_job in tests: no torch. It sleeps for job["sleep_s"], appends one line
to job["count_file"] (so a test can count traces across processes) and returns a result shaped like a trace's."""

from __future__ import annotations

import os
import time


def trace_job(job: dict) -> dict:
    time.sleep(float(job.get("sleep_s", 0.0)))
    with open(job["count_file"], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    if job.get("fail"):
        return {"ok": False, "error": "fake failure"}
    return {"ok": True, "peak_bytes": 10_000_000_000, "seconds": 0.5, "traced_by": os.getpid()}


# --- what the test's child processes run (top level, so that spawn can find them) -----------------------------
def pool_child(cache_dir: str, count_file: str, key: str, barrier, out) -> None:
    """A server process: its own ExactPool over the shared folder, the fake tracer, one submit, wait."""
    import sys
    from pathlib import Path

    from estimator import exact

    root = str(Path(__file__).resolve().parents[1])
    interp = exact.Interpreter(sys.executable, (), (root, *[p for p in sys.path if p and p != root]))
    pool = exact.ExactPool(interp, time_limit_s=60, cache_dir=cache_dir, tracer="tests.fake_tracer")
    barrier.wait()
    pool.submit({"count_file": count_file, "sleep_s": 1.5}, key)
    st = pool.wait(key, timeout=60)
    out.put((st.state, st.result))
    pool.shutdown()


def cached_child(cache_dir: str, count_file: str, name: str, barrier, out) -> None:
    from estimator import exact

    barrier.wait()
    res = exact.cached_trace(exact.DirCache(cache_dir), name, {"count_file": count_file, "sleep_s": 1.0}, trace_job)
    out.put(res)


def hold_lock_forever(cache_dir: str, name: str, ready) -> None:
    from estimator import exact

    with exact.DirCache(cache_dir).locked(name):
        ready.set()
        time.sleep(600)
