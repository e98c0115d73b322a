"""Shared helpers for bench/run.py and bench/load_test.py: start a local `streamlit run` server, wait for a
Streamlit page to settle, read the memory chart's data in the browser, and summarise latencies.

Everything binds to 127.0.0.1: these tools never load a remote host.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-renderer-backgrounding",
               "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows"]

# Selectors (Streamlit 1.67): widget containers carry .st-key-<key>; the slider is a native range input.
APP_RUNNING = "[data-testid='stApp'][data-test-script-state='running']"
APP_IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
APP_CONNECTED = "[data-testid='stApp'][data-test-connection-state='CONNECTED']"
EXCEPTION = "[data-testid='stException']"
SLIDER = ".st-key-{key} input[type='range']"
CHART = ".st-key-{key} .js-plotly-plot"
ECHARTS = ".st-key-{key} div[_echarts_instance_]"  # st.echarts_chart's container (SVG renderer)

# A signature of the plotly chart's data: changes whenever any bar changes.
CHART_SIGNATURE_JS = """(sel) => {
  const el = document.querySelector(sel);
  if (!el || !el.data || !el._fullLayout) return null;
  const arr = (v) => (v && typeof v === 'object' && 'length' in v) ? Array.from(v) : v;
  return JSON.stringify(el.data.map(t => [t.name, arr(t.x), arr(t.y)]));
}"""
CHART_CHANGED_JS = "([sel, prev]) => { const s = (" + CHART_SIGNATURE_JS + ")(sel); return s !== null && s !== prev; }"
# An SVG-rendered chart (ECharts): its markup changes whenever a bar or label does.
SVG_SIGNATURE_JS = """(sel) => { const el = document.querySelector(sel); return el ? el.innerHTML : null; }"""
SVG_CHANGED_JS = "([sel, prev]) => { const s = (" + SVG_SIGNATURE_JS + ")(sel); return s !== null && s !== prev; }"
TEXT_SIGNATURE_JS = """(sel) => { const el = document.querySelector(sel); return el ? el.textContent : null; }"""
TEXT_CHANGED_JS = "([sel, prev]) => { const s = (" + TEXT_SIGNATURE_JS + ")(sel); return s !== null && s !== prev; }"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_loopback_url(url: str) -> bool:
    """Only http(s) URLs on this machine (127.0.0.0/8, ::1, localhost) may be load-tested."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def wait_healthy(url: str, timeout_s: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as resp:
                if resp.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no healthy streamlit server at {url} after {timeout_s:.0f} s")


@contextmanager
def streamlit_server(script: Path | str = ROOT / "app.py", port: int | None = None, cwd: Path | str = ROOT,
                     extra_args: Sequence[str] = ()):
    """Run `streamlit run script` on 127.0.0.1 (stdout to a temp file, not a pipe); yield (url, proc, t_start)."""
    port = port or free_port()
    log = tempfile.TemporaryFile("w+")
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--server.runOnSave", "false", *extra_args]
    t_start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(cwd), stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, proc=proc)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError("streamlit did not start:\n" + log.read()[-3000:]) from None
        proc.log = log  # type: ignore[attr-defined]
        yield url, proc, t_start
    finally:
        stop_process(proc)
        log.close()


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Terminate a server process; kill it if it has not exited within timeout_s."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


_ERROR_START = re.compile(r"Uncaught app exception|Uncaught app execution|Traceback \(most recent call last\)")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def server_log_errors(proc: subprocess.Popen) -> list[str]:
    """Each error the server logged, as one block of text: its 'Uncaught app exception' line with the traceback
    below it (one error, counted once, however many lines it takes; the user sees a redacted box)."""
    log = getattr(proc, "log", None)
    if log is None:
        return []
    log.flush()
    log.seek(0)
    return error_blocks(log.read())


def error_blocks(text: str) -> list[str]:
    """The error blocks of a server log (see server_log_errors)."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if not _ERROR_START.search(lines[i]):
            i += 1
            continue
        start, i = i, i + 1
        while i < len(lines):
            line = lines[i]
            if line.startswith((" ", "\t")) or line.startswith("Traceback (most recent call last)") \
                    or line.startswith(_CHAINED) or not line.strip():
                i += 1
            elif i > start and lines[i - 1].startswith((" ", "\t")):  # the exception's own line ends the block
                i += 1
                if i < len(lines) and not lines[i].strip() and i + 1 < len(lines) and lines[i + 1].startswith(_CHAINED):
                    continue
                break
            else:
                break
        blocks.append("\n".join(lines[start:i]).rstrip())
    return blocks


@contextmanager
def as_a_running_server():
    """AppTest as a running server runs a rerun: AppTest (Streamlit 1.67, testing/v1/app_test.py _run) starts every
    run afresh where a server keeps its state, so an AppTest rerun also pays for (1) compiling app.py and the page
    again (a new ScriptCache per run; the server's Runtime keeps one for its life) and (2) legacy pages mode: it
    resets PagesManager.uses_pages_directory, so with a pages/ folder beside app.py every run starts in v1
    navigation and the page's first lines rerun it (ui.inputs._leave_legacy_pages_mode), which a server does
    once per process, and (3) a new mock Runtime, whose component registry is new too, so what the app declares
    once per server (ui/live_chart.py's plotly.js folder) is declared on every run. Within this block AppTest
    keeps one ScriptCache and one component registry and starts with legacy mode left; the page code runs
    exactly as before."""
    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime import Runtime
    from streamlit.runtime.pages_manager import PagesManager

    shared = app_test.ScriptCache()
    registry = app_test.MagicMock()
    plain_mock = app_test.MagicMock

    class SettledPagesManager(PagesManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False  # what st.navigation leaves for the process

    def runtime_mock(*args, **kwargs):
        mock = plain_mock(*args, **kwargs)
        if kwargs.get("spec") is Runtime:
            mock.component_registry = registry  # one server, one registry
        return mock

    saved = app_test.ScriptCache, app_test.PagesManager, app_test.MagicMock
    app_test.ScriptCache, app_test.PagesManager, app_test.MagicMock = (lambda: shared), SettledPagesManager, runtime_mock
    try:
        yield
    finally:
        app_test.ScriptCache, app_test.PagesManager, app_test.MagicMock = saved


def process_cpu_s(pid: int) -> float:
    """User + system CPU time of a process so far, in seconds (Linux /proc; clock ticks of 10 ms: read it over
    many reruns). 0 when the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def system_chromium() -> str | None:
    """A system Chromium (CHROMIUM_PATH, /usr/bin/chromium, chromium or chromium-browser on PATH), if any."""
    for candidate in (CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def launch_kwargs(headed: bool = False) -> dict[str, object]:
    """Playwright launch options: a system Chromium if there is one, else Playwright's own browser."""
    kwargs: dict[str, object] = {"headless": not headed, "args": LAUNCH_ARGS}
    exe = system_chromium()
    if exe:
        kwargs["executable_path"] = exe
    return kwargs


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def replace_section(path: Path, name: str, body: str) -> None:
    """Replace the text between <!-- name:begin --> and <!-- name:end --> in a Markdown file (append if absent)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")


class OneLineParser(argparse.ArgumentParser):
    """argparse for the performance tools: a bad flag gives one clear line and exit status 2 (argparse's
    default prints the usage too)."""

    def error(self, message: str) -> None:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def in_range(convert, low: float, high: float):
    """An argparse type: convert (int or float), then check low <= value <= high (which also rejects nan)."""
    what = "a whole number" if convert is int else "a number"

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not low <= value <= high:
            bounds = f"{low} and {high}" if convert is int else f"{low:g} and {high:g}"
            raise argparse.ArgumentTypeError(f"must be between {bounds}, got {text}")
        return value
    return parse
