"""Screenshots of every page at 1440×900, 1920×1080 and a phone's 390×844, light and dark, into screenshots/
(git-ignored), plus the secondary pages on the seed's examples at 1440×900.

    .venv/bin/python scripts/screenshots.py                 # starts its own server on a free port
    .venv/bin/python scripts/screenshots.py --url http://127.0.0.1:8501 --only calculator
    .venv/bin/python scripts/screenshots.py --themes light --width 390  # one theme, the phone only

Server and browser come from bench/common.py (a system Chromium if there is one, else Playwright's own).
Each shot is the first screen (what a visitor sees) plus the whole page."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import launch_kwargs, streamlit_server  # noqa: E402

OUT = ROOT / "screenshots"
SIZES = ((1440, 900), (1920, 1080), (390, 844))  # the widths the team looks at: laptop, screen, phone
THEMES = ("light", "dark")
# (name, path and query, sizes): every page at its defaults in both sizes, then the seed's examples.
VIEWS: tuple[tuple[str, str, tuple[tuple[int, int], ...]], ...] = (
    ("calculator", "/", SIZES),
    ("calculator-laptop-seed", "/?model=by-size&size=7&device=laptop-36gb&rule=true", SIZES),
    ("calculator-laptop-detailed", "/?model=by-size&size=7&device=laptop-36gb", SIZES),
    ("calculator-qlora-present", "/?method=qlora&device=gpu-16gb&present=true", SIZES),
    ("calculator-why-time", "/?model=llama-3.1-8b&device=a100-80gb&tokens=200000000&price=2.5", SIZES),
    ("compare-pins", "/compare?pins=model.llama-3.1-8b~device.a100-80gb~stack.trl~method.lora~batch.4~max_len.2048"
                     "&pins=model.qwen2.5-7b~device.rtx-4090~stack.trl~method.qlora~batch.1~max_len.2048"
                     "&tokens=200000000&price=2.5", SIZES),
    ("compare", "/compare", SIZES),
    ("fits", "/fits", SIZES),
    ("sizes", "/sizes", SIZES),
    ("scale", "/scale", SIZES),
    ("how", "/how", SIZES),
    ("oom", "/oom", SIZES),
    ("calculator-host-offload", "/?model=llama-3.1-8b&method=full&gpus=2&sharding=zero3&offload_params=true"
                                "&offload=true&host_ram=64&device=h100-80gb&ckpt=offload", SIZES[:1]),
    ("calculator-host-mac", "/?model=qwen2.5-1.5b&device=mac-64gb", SIZES[:1]),
    ("pages-compare-seed7b", "/compare?model=by-size&size=7&rule=true&device=h100-80gb", SIZES[:1]),
    ("pages-compare-detailed", "/compare?model=llama-3.1-8b&device=a100-80gb&variants=adamw_8bit", SIZES[:1]),
    ("pages-fits-laptop-seed", "/fits?device=laptop-36gb&rule=true", SIZES[:1]),
    ("pages-fits-laptop-detailed", "/fits?device=laptop-36gb&ckpt=true", SIZES[:1]),
    ("calculator-laptop-mlx", "/?device=laptop-36gb&stack=mlx&method=qlora", SIZES[:1]),
    ("how-mlx", "/how?device=laptop-36gb&stack=mlx", SIZES[:1]),
    ("fits-laptop-mlx", "/fits?device=laptop-36gb", SIZES[:1]),
    ("pages-scale-70b", "/scale?model=llama-3.1-70b&method=full&device=h100-80gb&ckpt=true", SIZES[:1]),
    ("pages-fits-present", "/fits?device=laptop-36gb&rule=true&present=true", SIZES[:1]),
)


def wait_for_app(page: Page) -> None:
    """Connected, script finished, no skeletons left, every plotly chart drawn."""
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=30_000)
    page.wait_for_timeout(300)
    for state in ("[data-test-connection-state='CONNECTED']", "[data-test-script-state='notRunning']"):
        page.locator(f"[data-testid='stApp']{state}").wait_for(state="attached", timeout=30_000)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=30_000)
    # every chart drawn: st.plotly_chart's and the live charts' (ui/live_chart.py, a .wif-live-plot host)
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart], .wif-live-plot')]"
                           ".every(c => c.querySelector('.main-svg'))", timeout=30_000)
    page.wait_for_timeout(500)


def with_theme(path: str, theme: str) -> str:
    return path + ("&" if "?" in path else "?") + f"embed_options={theme}_theme"


def shoot(page: Page, url: str, name: str, path: str, theme: str, width: int, height: int) -> None:
    page.goto(url.rstrip("/") + with_theme(path, theme))
    wait_for_app(page)
    stem = f"{name}-{width}x{height}-{theme}"
    page.screenshot(path=str(OUT / f"{stem}.png"))
    # The whole page: Streamlit scrolls inside its main container, so grow the viewport.
    full = page.evaluate("() => { const m = document.querySelector('[data-testid=stMain]');"
                         " return m ? m.scrollHeight : document.body.scrollHeight; }")
    page.set_viewport_size({"width": width, "height": max(height, int(full))})
    page.wait_for_timeout(500)
    page.screenshot(path=str(OUT / f"{stem}-full.png"))
    page.set_viewport_size({"width": width, "height": height})
    print(stem)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one)")
    parser.add_argument("--only", help="only views whose name contains this")
    parser.add_argument("--themes", default=",".join(THEMES), help="comma-separated: light, dark")
    parser.add_argument("--width", type=int, help="only this viewport width (1440, 1920 or 390)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(streamlit_server())[0]
        with sync_playwright() as p:
            browser = p.chromium.launch(**launch_kwargs())
            # Open the entrypoint once first: until some session has run app.py's st.navigation, Streamlit
            # serves a deep link such as /fits from the legacy pages/ folder (no top navigation).
            warm = browser.new_page()
            warm.goto(url)
            wait_for_app(warm)
            warm.close()
            for theme in args.themes.split(","):
                for width, height in SIZES:
                    if args.width and width != args.width:
                        continue
                    ctx = browser.new_context(viewport={"width": width, "height": height})
                    page = ctx.new_page()
                    for name, path, sizes in VIEWS:
                        if (width, height) in sizes and (not args.only or args.only in name):
                            shoot(page, url, name, path, theme, width, height)
                    ctx.close()
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
