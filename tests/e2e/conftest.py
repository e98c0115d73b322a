"""Browser tests (marker e2e): one real `streamlit run app.py` server per session, driven by Playwright.

The browser is a system Chromium when there is one (CHROMIUM_PATH, /usr/bin/chromium, chromium or
chromium-browser on PATH), else Playwright's own download; with neither, every test here is skipped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync"]


def system_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _playwright_chromium() -> bool:
    """Is Playwright's own Chromium installed? (Checked without launching it.)"""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            return Path(p.chromium.executable_path).is_file()
    except Exception:  # noqa: BLE001 - no driver, no browser: either way, no browser tests
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    ours = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in ours:
        item.add_marker(pytest.mark.e2e)
    if ours and system_chromium() is None and not _playwright_chromium():
        skip = pytest.mark.skip(reason="no Chromium: set CHROMIUM_PATH, install chromium, or "
                                       "`python -m playwright install chromium`")
        for item in ours:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's launch options, pointed at a system Chromium when there is one."""
    args = {**browser_type_launch_args, "args": [*browser_type_launch_args.get("args", []), *LAUNCH_FLAGS]}
    exe = system_chromium()
    if exe:
        args["executable_path"] = exe
    return args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    """A real server for the whole session; its log is printed if it fails to start."""
    port = _free_port()
    log = tempfile.TemporaryFile()  # not a pipe: a full pipe would block the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail("streamlit did not start:\n" + log.read().decode(errors="replace")[-4000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
