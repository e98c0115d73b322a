"""A shared link opened in a fresh browser: from the address entered to the answer readable on screen, for the
calculator (its verdict heading, the main area's first h2) and the trivial one-slider page (its heading), served the
same way (bench/run.py slider_servers: the same .streamlit/config.toml), each open in a new browser context (no
cache, no cookies, no session: what a teammate gets from a link in a meeting). The servers are warmed first (one open
each, not counted), so the figure is a second visitor's, not Streamlit's import. Opens take turns between the pages.
Prints medians and the ratio; asserts nothing (issue 29's target: ≤ 1.3 × the trivial page).

  .venv/bin/python bench/link_open.py                                  # 15 opens each
  .venv/bin/python bench/link_open.py --opens 25 --app before=/tmp/before   # also another checkout
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import launch_kwargs, median  # noqa: E402
from bench.run import HEADING_OUT, slider_servers  # noqa: E402

# A link a team would share: a named model on a named GPU at a batch and length of its own, the verdict a close one.
LINK = "?model=llama-3.1-8b&device=a100-80gb&method=lora&batch=8&max_len=4096"
READABLE_JS = """(sel) => { const el = document.querySelector(sel);
  return !!el && el.textContent.trim().length > 0 && el.getBoundingClientRect().height > 0; }"""


def open_once(browser, url: str) -> float:  # noqa: ANN001 - a Playwright Browser
    """ms from page.goto until the main area's first heading has text on screen, in a new context."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_function(READABLE_JS, arg=HEADING_OUT, timeout=60_000, polling="raf")
    ms = (time.perf_counter() - start) * 1000
    context.close()
    return ms


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--opens", type=int, default=15, help="opens per page (after one warm-up each)")
    p.add_argument("--app", action="append", default=[], metavar="NAME=PATH",
                   help="also another checkout of this app (its app.py), under this name")
    args = p.parse_args()
    apps = dict(a.split("=", 1) for a in args.app)
    from playwright.sync_api import sync_playwright

    with slider_servers(["ours", "trivial"], apps, heading=True) as targets, sync_playwright() as pw:
        browser = pw.chromium.launch(**launch_kwargs())
        urls = {name: t[0].rstrip("/") + "/" + (LINK if name != "trivial" else "") for name, t in targets.items()}
        for url in urls.values():
            open_once(browser, url)  # warm: the server's imports and first script run
        times: dict[str, list[float]] = {name: [] for name in urls}
        for _ in range(args.opens):
            for name, url in urls.items():
                times[name].append(open_once(browser, url))
        browser.close()
    trivial = median(times["trivial"])
    print(f"A link opened in a fresh browser context → the answer's heading on screen (median of {args.opens} opens, "
          f"ms; link {LINK}):")
    for name, ms in times.items():
        print(f"  {name:<10} {median(ms):7.0f} ms  (fastest {min(ms):.0f}, slowest {max(ms):.0f})  "
              f"{median(ms) / trivial:.2f} × trivial")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
