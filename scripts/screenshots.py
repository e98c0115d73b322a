"""Screenshots of every page at 1280×800 and 1920×1080, light and dark, into screenshots/ (git-ignored).

    .venv/bin/python scripts/screenshots.py                 # starts its own server on a free port
    .venv/bin/python scripts/screenshots.py --url http://127.0.0.1:8501 --only calculator

Uses a system Chromium (CHROMIUM_PATH, /usr/bin/chromium, chromium or chromium-browser on PATH), else
Playwright's own browser. Each shot is the first screen (what a visitor sees) plus the whole page."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "screenshots"
SIZES = ((1280, 800), (1920, 1080))
THEMES = ("light", "dark")
# (name, path and query): every page at its defaults, plus the calculator on the seed's laptop example.
VIEWS = (
    ("calculator", "/"),
    ("calculator-laptop-seed", "/?model=by-size&size=7&device=laptop-36gb&rule=true"),
    ("calculator-laptop-detailed", "/?model=by-size&size=7&device=laptop-36gb"),
    ("calculator-qlora-present", "/?method=qlora&device=gpu-16gb&present=true"),
    ("compare", "/compare"),
    ("fits", "/fits"),
    ("sizes", "/sizes"),
    ("scale", "/scale"),
    ("how", "/how"),
)
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync"]


def chromium_path() -> str | None:
    """A system Chromium, if there is one."""
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str, object]:
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return proc, url, log
        except OSError:
            time.sleep(0.2)
    proc.kill()
    log.seek(0)
    raise RuntimeError("streamlit did not start:\n" + log.read().decode(errors="replace"))


def wait_for_app(page: Page) -> None:
    """Connected, script finished, no skeletons left, every plotly chart drawn."""
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=30_000)
    page.wait_for_timeout(300)
    for state in ("[data-test-connection-state='CONNECTED']", "[data-test-script-state='notRunning']"):
        page.locator(f"[data-testid='stApp']{state}").wait_for(state="attached", timeout=30_000)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=30_000)
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".every(c => c.querySelector('.main-svg'))", timeout=30_000)
    page.wait_for_timeout(500)


def with_theme(path: str, theme: str) -> str:
    return path + ("&" if "?" in path else "?") + f"embed_options={theme}_theme"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one)")
    parser.add_argument("--only", help="only views whose name starts with this")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    proc = log = None
    url = args.url
    if not url:
        proc, url, log = start_server()
    try:
        with sync_playwright() as p:
            exe = chromium_path()
            browser = p.chromium.launch(executable_path=exe, args=LAUNCH_ARGS) if exe else p.chromium.launch()
            for width, height in SIZES:
                for theme in THEMES:
                    ctx = browser.new_context(viewport={"width": width, "height": height})
                    page = ctx.new_page()
                    for name, path in VIEWS:
                        if args.only and not name.startswith(args.only):
                            continue
                        page.goto(url.rstrip("/") + with_theme(path, theme))
                        wait_for_app(page)
                        stem = f"{name}-{width}x{height}-{theme}"
                        page.screenshot(path=str(OUT / f"{stem}.png"))
                        # The whole page: Streamlit scrolls inside its main container, so grow the viewport.
                        full = page.evaluate(
                            "() => { const m = document.querySelector('[data-testid=stMain]');"
                            " return m ? m.scrollHeight : document.body.scrollHeight; }")
                        page.set_viewport_size({"width": width, "height": max(height, int(full))})
                        page.wait_for_timeout(500)
                        page.screenshot(path=str(OUT / f"{stem}-full.png"))
                        page.set_viewport_size({"width": width, "height": height})
                        print(stem)
                    ctx.close()
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
            log.close()  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
