"""The exact trace's result cache shared between server processes (estimator.exact.DirCache, $WIF_EXACT_CACHE_DIR):
atomic files, one trace per setup across processes (an flock per key), a dead lock holder does not block anyone.
The traces are fakes (tests/fake_tracer.py): no torch."""

from __future__ import annotations

import json
import multiprocessing
import sys

import pytest

from estimator import exact
from tests import fake_tracer

CTX = multiprocessing.get_context("spawn")


def traces(count_file) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def test_results_are_written_whole_and_read_by_key(tmp_path):
    cache = exact.DirCache(tmp_path / "c")
    name = cache.name("py|torch=2", "k1")
    assert name != cache.name("py|torch=3", "k1")  # another interpreter's versions: another entry
    assert cache.get(name) is None
    cache.put(name, {"ok": True, "peak_bytes": 5})
    assert cache.get(name) == {"ok": True, "peak_bytes": 5}
    assert [p.name for p in (tmp_path / "c").iterdir()] == [f"{name}.json"]  # no temp file left behind
    (tmp_path / "c" / f"{name}.json").write_text('{"ok": tr')  # a torn file (never written so) reads as a miss
    assert cache.get(name) is None


def test_the_folder_keeps_only_the_newest_results(tmp_path):
    cache = exact.DirCache(tmp_path, max_files=3)
    for i in range(5):
        cache.put(f"n{i}", {"ok": True, "i": i})
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["n2", "n3", "n4"]


def test_two_processes_tracing_the_same_setup_trace_it_once(tmp_path):
    count = tmp_path / "traces.txt"
    barrier, out = CTX.Barrier(2), CTX.Queue()
    procs = [CTX.Process(target=fake_tracer.cached_child, args=(str(tmp_path / "c"), str(count), "n", barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert traces(count) == 1
    assert results[0] == results[1] and results[0]["ok"]


def test_two_server_processes_share_one_trace_through_their_pools(tmp_path):
    """Two processes, each with its own ExactPool and worker (the fake tracer), submit the same job at once: one
    traces, the other's worker waits on the key's lock and answers with that result; a third pool (a process
    started later) finds it done without submitting anything."""
    count, cache_dir = tmp_path / "traces.txt", tmp_path / "shared"
    barrier, out = CTX.Barrier(2), CTX.Queue()
    procs = [CTX.Process(target=fake_tracer.pool_child, args=(str(cache_dir), str(count), "job-1", barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert [state for state, _ in results] == ["done", "done"]
    assert results[0][1] == results[1][1] and traces(count) == 1
    (stored,) = cache_dir.glob("*.json")
    assert json.loads(stored.read_text()) == results[0][1]

    interp = exact.Interpreter(sys.executable, (), ())
    late = exact.ExactPool(interp, cache_dir=cache_dir, tracer="tests.fake_tracer")
    st = late.status("job-1")
    assert st.state == "done" and st.result == results[0][1]
    assert late.submit({"count_file": str(count)}, "job-1") == "job-1" and traces(count) == 1  # no new trace
    assert late.status("job-2").state == "unknown"


def test_a_lock_holder_that_dies_does_not_block_the_next_trace(tmp_path):
    cache_dir, count = str(tmp_path / "c"), tmp_path / "traces.txt"
    ready = CTX.Event()
    holder = CTX.Process(target=fake_tracer.hold_lock_forever, args=(cache_dir, "n", ready))
    holder.start()
    try:
        assert ready.wait(30)
        holder.kill()  # e.g. the worker killed at its time limit, mid-trace
        holder.join(timeout=10)
        res = exact.cached_trace(exact.DirCache(cache_dir), "n", {"count_file": str(count)}, fake_tracer.trace_job)
    finally:
        if holder.is_alive():
            holder.kill()
    assert res["ok"] and traces(count) == 1


def test_failures_are_not_stored(tmp_path):
    cache, count = exact.DirCache(tmp_path), tmp_path / "traces.txt"
    job = {"count_file": str(count), "fail": True}
    assert not exact.cached_trace(cache, "n", job, fake_tracer.trace_job)["ok"]
    assert cache.get("n") is None
    exact.cached_trace(cache, "n", job, fake_tracer.trace_job)
    assert traces(count) == 2  # retried, as the in-memory cache retries a failure


def test_without_the_variable_there_is_no_shared_folder(monkeypatch, tmp_path):
    interp = exact.Interpreter(sys.executable, (), ())
    monkeypatch.delenv(exact.CACHE_DIR_ENV, raising=False)
    assert exact.ExactPool(interp).shared is None
    monkeypatch.setenv(exact.CACHE_DIR_ENV, str(tmp_path))
    assert exact.ExactPool(interp).shared.path == tmp_path


@pytest.fixture(autouse=True)
def _no_env_leak(monkeypatch):
    monkeypatch.delenv(exact.CACHE_DIR_ENV, raising=False)
