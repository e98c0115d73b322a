"""The exact trace, as the estimator sees it: no torch here.

"Exact" = PyTorch's own count of one steady-state training step of the user's model and setup: the real
transformers model (built from the config dict), PEFT LoRA, HF-Trainer steps, run under FakeTensorMode (shapes
only, no memory, no GPU) and counted by MemTracker (exact/trace.py, driven by exact/worker.py). It is the
tensor-level peak that torch.cuda.max_memory_allocated would show. What a CPU trace cannot see is added from the
estimator and listed (`ExactResult.added`): the CUDA context and workspaces, the caching allocator's slack,
bitsandbytes' 4-bit storage and dequantisation buffer (QLoRA is traced as its 16-bit equivalent), optimizers
that only exist as CUDA kernels (8-bit, paged, Lion). FlashAttention's and cuDNN's own workspaces are not counted.

The trace runs in a separate worker process: a `concurrent.futures.ProcessPoolExecutor` with one worker, spawned
with the interpreter that has the optional install (requirements-exact.txt): $WIF_EXACT_PYTHON, else this
Python when it has torch. One trace at a time per process; others wait in the pool's queue and can ask their
place; results are cached by (config, setup), in memory and, with $WIF_EXACT_CACHE_DIR, in a folder that
several server processes share (one trace per setup across them: `DirCache`); a trace past its time limit, a killed worker or one out of host
memory ends with a one-line note and a fresh worker for the next job."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.context
import multiprocessing.popen_spawn_posix
import multiprocessing.spawn
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ExactUnavailable, check_config, job_key, tracer_setup
from .result import combine
from .shared_cache import CACHE_DIR_ENV, DIR_CACHE_FILES, DirCache, cached_trace  # noqa: F401 - the face

if TYPE_CHECKING:
    from concurrent.futures import Future
    from typing import Any

    from ..job.setup import TrainingSetup
    from ..memory.result import Estimate
    from .result import ExactResult


ROOT = Path(__file__).resolve().parents[2]  # the repository: exact/ lives here
PYTHON_ENV = "WIF_EXACT_PYTHON"  # a Python with requirements-exact.txt installed
TIMEOUT_ENV = "WIF_EXACT_TIMEOUT_S"
HOST_MEMORY_ENV = "WIF_EXACT_MAX_HOST_GB"
INSTALL_HINT = ("the exact trace needs the optional install: pip install -r requirements-exact.txt "
                f"(or set {PYTHON_ENV} to a Python that has it)")
DEFAULT_TIMEOUT_S = 900.0  # a full-depth 16-layer 1B trace took ~4 min on two busy CPU cores (most are shallow)
DEFAULT_MAX_HOST_BYTES = 16 * 10**9  # the worker's address-space cap (fake tensors need no data memory)
CACHE_SIZE = 64


# --------------------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------------------
# Reads the installed versions without importing torch (milliseconds, not the ~10 s of `import torch`): the
# page asks on every run. A broken install still ends with the worker's one-line error.
_PROBE = (
    "import json, sys\n"
    "from importlib import metadata, util\n"
    "missing = [m for m in ('torch', 'transformers', 'peft') if util.find_spec(m) is None]\n"
    "if missing:\n"
    "    print(json.dumps({'ok': False, 'error': 'no module ' + ', '.join(missing)}))\n"
    "else:\n"
    "    print(json.dumps({'ok': True, 'sys_path': sys.path,\n"
    "        'versions': {m: metadata.version(m) for m in ('torch', 'transformers', 'peft')}}))\n"
)


@dataclass(frozen=True)
class Interpreter:
    """A Python that has torch, transformers and peft."""

    python: str
    versions: tuple[tuple[str, str], ...]
    sys_path: tuple[str, ...]  # its own default import path (the spawned worker uses it, not ours)

    @property
    def label(self) -> str:
        v = dict(self.versions)
        return f"torch {v['torch']}, transformers {v['transformers']}, peft {v['peft']}"


@lru_cache(maxsize=8)
def _probe(python: str) -> Interpreter | str:
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              cwd=str(ROOT), env={**os.environ, "PYTHONPATH": ""})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python} cannot be run ({type(exc).__name__})"
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"{python} did not answer ({proc.stderr.strip()[-200:]})"
    if not info.get("ok"):
        return f"{python} lacks the optional install ({info.get('error', '')})"
    path = tuple(p for p in info["sys_path"] if p and p != str(ROOT))
    return Interpreter(python, tuple(sorted(info["versions"].items())), (str(ROOT), *path))


def _has_torch_here() -> bool:
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("torch", "transformers", "peft"))


def find_interpreter() -> Interpreter:
    """$WIF_EXACT_PYTHON, else this Python when it has the optional install. Raises ExactUnavailable."""
    chosen = os.environ.get(PYTHON_ENV, "").strip()
    if not chosen:
        if not _has_torch_here():
            raise ExactUnavailable(INSTALL_HINT)
        chosen = sys.executable
    found = _probe(chosen)
    if isinstance(found, str):
        raise ExactUnavailable(f"{INSTALL_HINT}; {found}")
    return found


def available() -> tuple[bool, str]:
    """(True, 'torch X, transformers Y, peft Z') or (False, what to install)."""
    try:
        return True, find_interpreter().label
    except ExactUnavailable as exc:
        return False, str(exc)


# --------------------------------------------------------------------------------------------------
# The worker process pool
# --------------------------------------------------------------------------------------------------
def _run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Runs in the worker (the interpreter with torch): import the worker there, never here. With a shared cache
    folder in the job, the trace runs under its lock (`cached_trace`)."""
    import importlib

    job = dict(job)
    tracer = job.pop("_tracer", "exact.worker")
    shared = job.pop("_shared_cache", None)
    trace = importlib.import_module(tracer).trace_job
    if shared is None:
        return trace(job)
    return cached_trace(DirCache(shared["dir"]), shared["name"], job, trace)


_LAUNCH_LOCK = threading.Lock()


class _Popen(multiprocessing.popen_spawn_posix.Popen):
    """Launches `process_obj._exact_interp.python` with that interpreter's own import path (see _ExactContext)."""

    def _launch(self, process_obj):
        interp: Interpreter = process_obj._exact_interp
        spawn = multiprocessing.spawn
        orig_prep, orig_exe = spawn.get_preparation_data, spawn.get_executable

        def prep(name):
            data = orig_prep(name)
            data.pop("init_main_from_path", None)  # never re-import the parent's __main__ (streamlit, pytest)
            data.pop("init_main_from_name", None)
            data["sys_path"] = list(interp.sys_path)
            data["dir"] = str(ROOT)
            return data

        with _LAUNCH_LOCK:
            spawn.get_preparation_data = prep
            spawn.get_executable = lambda: os.fsencode(interp.python)  # as spawn.set_executable stores it
            try:
                super()._launch(process_obj)
            finally:
                spawn.get_preparation_data, spawn.get_executable = orig_prep, orig_exe


class _Process(multiprocessing.context.SpawnProcess):
    _exact_interp: Interpreter

    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


class _ExactContext(multiprocessing.context.SpawnContext):
    """A spawn context whose processes run another interpreter (the one with torch) with its own import path.

    `ctx.set_executable` alone does not do it: in Python 3.11 it sets the executable of every spawn context in
    the process, and a spawned child gets the parent's sys.path (our venv's site-packages, without torch) and
    re-imports the parent's __main__ (e.g. the streamlit launcher) before any pool initializer runs. So this
    context's Popen swaps in the executable and a preparation dict with the child's own path and without the
    parent's __main__, under a lock, for its own launches only.
    """

    def __init__(self, interp: Interpreter):
        super().__init__()
        self._interp = interp

    def Process(self, *args, **kwargs):  # noqa: N802 - the multiprocessing context API
        proc = _Process(*args, **kwargs)
        proc._exact_interp = self._interp
        return proc


@dataclass
class _Job:
    key: str
    payload: dict[str, Any]
    created: float
    started: float | None = None
    finished: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    timed_out: bool = False
    fut: Future | None = None
    executor: ProcessPoolExecutor | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class JobStatus:
    state: str  # "queued", "running", "done", "failed", "unknown"
    position: int  # 0 = running, n = n jobs ahead of it
    elapsed_s: float  # running: seconds since it started; done/failed: the trace's duration
    time_limit_s: float
    result: dict[str, Any] | None = None
    error: str | None = None


class ExactPool:
    """One worker process, traces queued in the process pool's own queue, results cached by job key."""

    def __init__(self, interp: Interpreter, time_limit_s: float | None = None, max_host_bytes: int | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, tracer: str = "exact.worker"):
        self.interp = interp
        # The folder shared with other server processes: cache_dir, else $WIF_EXACT_CACHE_DIR, else none.
        self.shared = DirCache(cache_dir) if cache_dir else DirCache.from_env()
        self._scope = "|".join([interp.python, *(f"{m}={v}" for m, v in interp.versions)])
        self.tracer = tracer  # the module whose trace_job the worker runs (tests use a fake one)
        self.time_limit_s = float(time_limit_s or os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
        gb = os.environ.get(HOST_MEMORY_ENV)
        self.max_host_bytes = max_host_bytes or (int(float(gb) * 1e9) if gb else DEFAULT_MAX_HOST_BYTES)
        self._lock = threading.RLock()
        self._executor: ProcessPoolExecutor | None = None
        self._order: list[_Job] = []  # unfinished jobs, submission order (the first one is running)
        self._jobs: dict[str, _Job] = {}
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._failed: dict[str, _Job] = {}  # the last failure per key (a new submit retries it)
        self._broken_heads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._watchdog: threading.Thread | None = None
        self._closed = False

    # -- executor ---------------------------------------------------------------------------------
    def _get_executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(max_workers=1, mp_context=_ExactContext(self.interp))
        return self._executor

    def _dispatch(self, job: _Job) -> None:
        ex = self._get_executor()
        job.executor = ex
        job.fut = ex.submit(_run_job, job.payload)
        job.fut.add_done_callback(lambda fut, job=job: self._on_done(job, fut))

    def worker_pids(self) -> list[int]:
        ex = self._executor
        procs = getattr(ex, "_processes", None) or {}
        return [p.pid for p in list(procs.values()) if p.pid]

    def _kill_workers(self, ex: ProcessPoolExecutor | None) -> None:
        for proc in list((getattr(ex, "_processes", None) or {}).values()):
            try:
                proc.kill()
            except (OSError, AttributeError):
                pass

    # -- jobs -------------------------------------------------------------------------------------
    def submit(self, payload: dict[str, Any], key: str) -> str:
        """Queue a trace (or find it in the cache / already queued). Returns its key."""
        with self._lock:
            if key in self._cache or self._from_shared(key) is not None:
                return key
            job = self._jobs.get(key)
            if job is not None and job.error is None:
                return key
            extra: dict[str, Any] = {"max_host_bytes": self.max_host_bytes}
            if self.tracer != "exact.worker":
                extra["_tracer"] = self.tracer
            if self.shared is not None:
                extra["_shared_cache"] = {"dir": str(self.shared.path), "name": self.shared.name(self._scope, key)}
            job = _Job(key, {**payload, **extra}, time.monotonic())
            self._jobs[key] = job
            self._order.append(job)
            if len(self._order) == 1:
                job.started = time.monotonic()
            self._dispatch(job)
            self._ensure_watchdog()
            return key

    def _from_shared(self, key: str) -> dict[str, Any] | None:
        """A result another process stored in the shared folder, taken into this process's cache (under the lock)."""
        if self.shared is None:
            return None
        res = self.shared.get(self.shared.name(self._scope, key))
        if res is not None:
            self._remember(key, res)
        return res

    def _remember(self, key: str, res: dict[str, Any]) -> None:
        self._cache[key] = res
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def _on_done(self, job: _Job, fut: Future) -> None:
        with self._lock:
            if job.fut is not fut:
                return
            exc = BrokenProcessPool("cancelled") if fut.cancelled() else fut.exception()
            if isinstance(exc, BrokenProcessPool):
                # Every job of a dead worker's pool fails at once; the one that was running is the queue's head
                # when the first of them arrives here (the others are still behind it).
                head = self._broken_heads.setdefault(job.executor, self._order[0] if self._order else None)
                running = head is job
            else:
                running = bool(self._order) and self._order[0] is job
            if exc is None:
                res = fut.result()
                if res.get("ok"):
                    job.result = res
                    self._remember(job.key, res)
                    self._jobs.pop(job.key, None)  # the cache answers from now on
                else:
                    job.error = str(res.get("error") or "the trace failed")
                    if res.get("recycle"):
                        self._retire(job.executor)
            elif isinstance(exc, BrokenProcessPool):
                if job.executor is self._executor:  # the worker died: the next job gets a fresh one
                    self._executor = None
                if not running and not self._closed:  # it never started: run it on the fresh worker
                    try:
                        self._dispatch(job)
                        return
                    except RuntimeError:  # the interpreter is shutting down
                        pass
                job.error = (f"the trace ran past its time limit ({self.time_limit_s:.0f} s) and was stopped"
                             if job.timed_out else
                             "the trace worker stopped (killed, or out of host memory); try again" if running else
                             "the trace service was stopped before this trace started; try again")
            else:
                job.error = f"the trace failed: {type(exc).__name__}: {str(exc)[:200]}"
            job.finished = time.monotonic()
            if job in self._order:
                self._order.remove(job)
            if self._order and self._order[0].started is None:
                self._order[0].started = time.monotonic()
            if job.error is not None:
                self._jobs.pop(job.key, None)
                self._failed[job.key] = job
            job.done.set()

    def _retire(self, ex: ProcessPoolExecutor | None) -> None:
        """Replace a worker left unfit by its job (out of host memory, perhaps mid-import): the jobs queued behind
        it fail over to a fresh worker (none of them was running) and run there."""
        if ex is None:
            return
        if ex is self._executor:
            self._executor = None
        self._broken_heads[ex] = None
        self._kill_workers(ex)

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, name="exact-trace-watchdog", daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                if not self._order:
                    continue
                head = self._order[0]
                if head.started is not None and time.monotonic() - head.started > self.time_limit_s \
                        and not head.timed_out:
                    head.timed_out = True
                    self._kill_workers(head.executor)

    def status(self, key: str) -> JobStatus:
        with self._lock:
            now = time.monotonic()
            res = self._cache.get(key)
            job = self._jobs.get(key) or self._failed.get(key)
            if res is None and job is None:  # traced by another server process?
                res = self._from_shared(key)
            if res is not None:
                return JobStatus("done", 0, float(res.get("seconds", 0.0)), self.time_limit_s, result=res)
            if job is None:
                return JobStatus("unknown", 0, 0.0, self.time_limit_s)
            if job.error is not None:
                return JobStatus("failed", 0, (job.finished or now) - (job.started or job.created),
                                 self.time_limit_s, error=job.error)
            pos = self._order.index(job) if job in self._order else 0
            if pos == 0 and job.started is not None:
                return JobStatus("running", 0, now - job.started, self.time_limit_s)
            return JobStatus("queued", pos, now - job.created, self.time_limit_s)

    def wait(self, key: str, timeout: float | None = None) -> JobStatus:
        with self._lock:
            job = self._jobs.get(key) or self._failed.get(key)
        if job is not None:
            job.done.wait(timeout)
        return self.status(key)

    def shutdown(self) -> None:
        """Stop the worker (queued traces end with a note). The pool may be used again afterwards."""
        with self._lock:
            self._closed = True
            ex, self._executor = self._executor, None
        if ex is not None:
            self._kill_workers(ex)
            ex.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._closed = False


_POOLS: dict[str, ExactPool] = {}
_POOLS_LOCK = threading.Lock()


def _kill_running_traces() -> None:
    """At interpreter exit, stop the workers first: concurrent.futures' own exit hook would otherwise wait for a
    running trace (minutes) before the server can stop."""
    for pool in list(_POOLS.values()):
        pool._closed = True
        pool._kill_workers(pool._executor)


# threading's exit hooks run in reverse order of registration, so this runs before concurrent.futures' join.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_kill_running_traces)


def get_pool() -> ExactPool:
    """The process-wide pool for the configured interpreter (one trace at a time per server)."""
    interp = find_interpreter()
    with _POOLS_LOCK:
        pool = _POOLS.get(interp.python)
        if pool is None:
            pool = _POOLS[interp.python] = ExactPool(interp)
        return pool


def make_job(cfg: Any, setup: TrainingSetup) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """(key, payload, notes) for a config dict and a setup; ExactRefused when it cannot be traced."""
    clean = check_config(cfg)
    tsetup, notes = tracer_setup(setup)
    quantizable = setup.method == "qlora"
    key = job_key(clean, tsetup, quantizable)
    payload = {"config": clean, "setup": tsetup, "quantizable": quantizable}
    return key, payload, notes


def trace_exact(cfg: Any, setup: TrainingSetup, est: Estimate | None = None,
                pool: ExactPool | None = None) -> ExactResult:
    """Trace and wait (the CLI). Raises ExactUnavailable, ExactRefused, or RuntimeError(one line) on failure."""
    key, payload, notes = make_job(cfg, setup)
    pool = pool or get_pool()
    pool.submit(payload, key)
    st = pool.wait(key)
    if st.state != "done" or st.result is None:
        raise RuntimeError(st.error or "the trace did not finish")
    return combine(st.result, setup, est, notes)

# The exact trace's face: what the CLI and the app call as `exact.<name>` (tests patch these names here).
from .config import (  # noqa: E402
    MAX_CONFIG_CHARS,
    MAX_TRACE_DIM,
    MAX_TRACE_LAYERS,
    TRACED_OPTIMIZERS,
    ExactRefused,
    hub_config,
    hub_config_cached,
    preset_config,
)
from .result import WHAT_EXACT_LEAVES_OUT, WHAT_EXACT_MEANS, Added, ExactResult  # noqa: E402

__all__ = [
    "MAX_CONFIG_CHARS", "MAX_TRACE_DIM", "MAX_TRACE_LAYERS", "TRACED_OPTIMIZERS", "WHAT_EXACT_LEAVES_OUT",
    "WHAT_EXACT_MEANS", "Added", "DirCache", "ExactPool", "ExactRefused", "ExactResult", "ExactUnavailable", "available",
    "check_config", "combine", "find_interpreter", "get_pool", "hub_config", "hub_config_cached", "make_job",
    "preset_config", "trace_exact", "tracer_setup",
]
