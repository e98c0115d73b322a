"""ui/live_chart.py under concurrency: sessions' first runs declaring the plotly.js folder at once, and servers on
one host copying plotly.js at once."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import ui.live_chart as live_chart


def test_first_runs_declare_the_plotly_folder_one_at_a_time(monkeypatch):
    """declare_component finds its caller's module with inspect.getmodule, whose cache is filled without a lock:
    two declarations at once could raise 'module is None' (the load test's burst of errors on a fresh server).
    Sessions starting together must declare one at a time."""
    active, most, calls = [0], [0], []
    guard = threading.Lock()

    def declare(name: str, path: str) -> None:
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.02)  # long enough for every other thread to arrive
        with guard:
            active[0] -= 1
            calls.append((name, path))

    monkeypatch.setattr(live_chart.components_v1, "declare_component", declare)
    live_chart._declare_plotly_js.cache_clear()
    start = threading.Barrier(8)

    def session(registry: object) -> None:
        start.wait()
        live_chart._declare_plotly_js(registry)

    threads = [threading.Thread(target=session, args=(object(),)) for _ in range(8)]  # 8 servers' registries
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    live_chart._declare_plotly_js.cache_clear()
    assert len(calls) == 8 and {c[0] for c in calls} == {"plotly_js"}
    assert most[0] == 1


def _copy_in(tmp: str, out: multiprocessing.Queue) -> None:
    import tempfile

    tempfile.tempdir = tmp
    live_chart._asset_dir.cache_clear()
    out.put(live_chart._asset_dir())


def test_servers_starting_together_each_get_the_whole_plotly_js(tmp_path):
    """Several servers on one host copy plotly.js into the same folder at once: each through a partial file of its
    own, renamed into place, so every one ends with the whole file and no partial file is left behind."""
    out: multiprocessing.Queue = multiprocessing.Queue()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_copy_in, args=(str(tmp_path), out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    folders = {out.get(timeout=5) for _ in procs}
    assert len(folders) == 1
    folder = Path(folders.pop())
    assert [f.name for f in folder.iterdir()] == ["plotly.min.js"]
    assert (folder / "plotly.min.js").read_bytes() == live_chart.PLOTLY_JS.read_bytes()
