"""Where does slider → updated output time go? Splits each change of the batch slider into phases, from the
browser's side, for our calculator and the reference pages of bench/run.py (same server settings):

  press → sent        the key press until the page sends the rerun request (BackMsg) on the websocket
  sent → last msg     until the browser handled the last server message (ForwardMsg) before the output
                      changed: the server's rerun up to the output's delta, and the browser working through
                      the deltas before it (a message is timed when the page's main thread handles it)
  last msg → changed  until the output's new content is in the page (React + the chart library's render)

Prints numbers; asserts nothing. A wrapper around window.WebSocket (an init script) records the times.

Usage:
  .venv/bin/python bench/slider_trace.py                          # ours, trivial, chart_only (16 changes each)
  .venv/bin/python bench/slider_trace.py --pages ours,echarts_only --changes 30
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SLIDER, OneLineParser, in_range, launch_kwargs, median  # noqa: E402
from bench.run import SLIDER_PAGES, _wait_idle, slider_servers  # noqa: E402

# Record (time, bytes) for every websocket message: received > 0, sent < 0.
RECORD_MESSAGES = """
window.__wifMsgs = [];
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const ws = new NativeWebSocket(...args);
  const size = (d) => d.byteLength || d.size || d.length || 0;
  ws.addEventListener('message', (ev) => window.__wifMsgs.push([performance.now(), size(ev.data)]));
  const send = ws.send.bind(ws);
  ws.send = (d) => { window.__wifMsgs.push([performance.now(), -size(d)]); return send(d); };
  return ws;
};
window.WebSocket.prototype = NativeWebSocket.prototype;
Object.assign(window.WebSocket, NativeWebSocket);
"""
# Wait for the output to change, noting when (performance.now()) the poll saw it.
CHANGED_AT = """([sel, prev, signatureSource]) => {
  const now = (0, eval)(signatureSource)(sel);
  if (now !== null && now !== prev) { window.__wifChanged = performance.now(); return true; }
  return false;
}"""


def trace(page, target: str, signature_js: str, n: int) -> list[dict[str, float]]:
    slider = page.locator(SLIDER.format(key="batch"))
    rows = []
    for i in range(n):
        prev = page.evaluate(signature_js, target)
        page.evaluate("() => { window.__wifMsgs = []; window.__wifPress = performance.now(); }")
        slider.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
        page.wait_for_function(CHANGED_AT, arg=[target, prev, signature_js], polling="raf", timeout=60_000)
        _wait_idle(page)
        page.wait_for_timeout(200)
        press, changed, msgs = page.evaluate("[window.__wifPress, window.__wifChanged, window.__wifMsgs]")
        sent = next((t for t, size in msgs if size < 0), press)
        last = max([t for t, size in msgs if size > 0 and t <= changed] or [sent])
        rows.append({"total": changed - press, "press_sent": sent - press, "sent_last": last - sent,
                     "last_changed": changed - last, "messages": sum(1 for _, size in msgs if size > 0)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="bench/slider_trace.py", description="Slider → output phases in Chromium (prints numbers).")
    p.add_argument("--pages", default="ours,trivial,chart_only",
                   help=f"comma-separated, from: {', '.join(SLIDER_PAGES)}")
    p.add_argument("--changes", type=in_range(int, 4, 200), default=16,
                   help="slider changes per page (the first 2 are warm-up and not counted)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.pages.split(",") if n.strip()]
    unknown = [n for n in names if n not in SLIDER_PAGES]
    if unknown or not names:
        p.error(f"unknown page(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(SLIDER_PAGES)}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, slider_servers(names) as targets:
        browser = pw.chromium.launch(**launch_kwargs())
        print(f"{'page':<16} {'total':>6} {'press→sent':>11} {'sent→last msg':>14} {'last msg→changed':>17} "
              f"{'messages':>9}   (ms, medians of {args.changes - 2})")
        for name, (url, target, _changed_js, signature_js) in targets.items():
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.add_init_script(RECORD_MESSAGES)
            page.goto(url)
            page.wait_for_selector(target, state="visible", timeout=120_000)
            _wait_idle(page)
            rows = trace(page, target, signature_js, args.changes)[2:]
            m = {k: median([r[k] for r in rows]) for k in rows[0]}
            print(f"{name:<16} {m['total']:6.0f} {m['press_sent']:11.0f} {m['sent_last']:14.0f} "
                  f"{m['last_changed']:17.0f} {m['messages']:9.0f}")
            page.close()
            time.sleep(0.2)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
