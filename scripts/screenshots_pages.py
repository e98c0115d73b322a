"""Screenshots of the secondary pages on the seed's examples, light and dark, at 1280×800 (first screen and
whole page), into screenshots/ (git-ignored). Reuses scripts/screenshots.py's server, browser and waits.

    .venv/bin/python scripts/screenshots_pages.py
    .venv/bin/python scripts/screenshots_pages.py --url http://127.0.0.1:8501 --only fits
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import LAUNCH_ARGS, OUT, chromium_path, start_server, wait_for_app, with_theme  # noqa: E402

SIZE = (1280, 800)
THEMES = ("light", "dark")
VIEWS = (
    ("pages-compare-seed7b", "/compare?model=by-size&size=7&rule=true&device=h100-80gb"),
    ("pages-compare-detailed", "/compare?model=llama-3.1-8b&device=a100-80gb&variants=adamw_8bit"),
    ("pages-fits-laptop-seed", "/fits?device=laptop-36gb&rule=true"),
    ("pages-fits-laptop-detailed", "/fits?device=laptop-36gb&ckpt=true"),
    ("pages-sizes", "/sizes"),
    ("pages-scale-70b", "/scale?model=llama-3.1-70b&method=full&device=h100-80gb&ckpt=true"),
    ("pages-how", "/how"),
    ("pages-fits-present", "/fits?device=laptop-36gb&rule=true&present=true"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one)")
    parser.add_argument("--only", help="only views whose name contains this")
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
            width, height = SIZE
            # Open the entrypoint once first: until some session has run app.py's st.navigation, Streamlit
            # serves a deep link such as /fits from the legacy pages/ folder (no navigation, no wide layout).
            warm = browser.new_page()
            warm.goto(url)
            wait_for_app(warm)
            warm.close()
            for theme in THEMES:
                ctx = browser.new_context(viewport={"width": width, "height": height})
                page = ctx.new_page()
                for name, path in VIEWS:
                    if args.only and args.only not in name:
                        continue
                    page.goto(url.rstrip("/") + with_theme(path, theme))
                    wait_for_app(page)
                    stem = f"{name}-{width}x{height}-{theme}"
                    page.screenshot(path=str(OUT / f"{stem}.png"))
                    full = page.evaluate("() => { const m = document.querySelector('[data-testid=stMain]');"
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
