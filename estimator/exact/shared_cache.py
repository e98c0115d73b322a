"""The exact trace's result cache shared between server processes: a folder ($WIF_EXACT_CACHE_DIR, a shared
volume under compose) of result files written atomically, with one advisory lock per setup so two processes
tracing the same setup at once trace it once (docs/hosting.md)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_DIR_ENV = "WIF_EXACT_CACHE_DIR"  # a folder shared by the server processes (docs/hosting.md)
DIR_CACHE_FILES = 2048  # results kept in the folder (a few kB each); the oldest go first


class DirCache:
    """Trace results as files in a folder that several server processes share ($WIF_EXACT_CACHE_DIR).

    `<name>.json` holds one result, written whole or not at all (a temp file in the same folder, then
    `os.replace`); readers never see half a file. `<name>.lock` is an advisory lock (`fcntl.flock`) that the
    worker tracing that setup holds for the whole trace: a second process asked for the same setup at the same
    time waits on the lock and then reads the first one's result instead of tracing it again. The kernel drops
    the lock when its holder dies (time limit, out of memory), and the waiter then traces it itself. Failures
    are not stored: a new request retries them, as the in-memory cache does."""

    def __init__(self, path: str | os.PathLike[str], max_files: int = DIR_CACHE_FILES):
        self.path = Path(path)
        self.max_files = max_files

    @classmethod
    def from_env(cls) -> DirCache | None:
        path = os.environ.get(CACHE_DIR_ENV, "").strip()
        return cls(path) if path else None

    def name(self, scope: str, key: str) -> str:
        """The file stem for a job key under one interpreter (its versions are part of the traced numbers)."""
        return hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()[:32]

    def result_path(self, name: str) -> Path:
        return self.path / f"{name}.json"

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.result_path(name).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("ok") else None

    def put(self, name: str, result: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(result, fh)
            os.replace(tmp, self.result_path(name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._prune()

    @contextlib.contextmanager
    def locked(self, name: str):
        """Hold `<name>.lock` exclusively (waiting for any other holder) for the body."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / f"{name}.lock", "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _prune(self) -> None:
        try:
            files = list(self.path.glob("*.json"))
            if len(files) <= self.max_files:
                return
            files.sort(key=lambda p: p.stat().st_mtime)
            for old in files[:len(files) - self.max_files]:
                with contextlib.suppress(OSError):
                    old.unlink()
                    (old.parent / f"{old.stem}.lock").unlink()
        except OSError:
            pass


def cached_trace(cache: DirCache, name: str, job: dict[str, Any], trace) -> dict[str, Any]:
    """`trace(job)` once across processes: under the key's lock, the stored result if another process traced it
    meanwhile, else trace and store an ok result."""
    with cache.locked(name):
        found = cache.get(name)
        if found is not None:
            return found
        res = trace(job)
        if res.get("ok"):
            try:
                cache.put(name, res)
            except OSError:  # a full or read-only folder: the result still reaches this process
                pass
        return res


