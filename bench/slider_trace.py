"""Where does slider → updated output time go? Each change of the batch slider (ArrowRight: every change a new
value, so no cache holds its answer yet), from the browser's side, for our calculator, the reference pages of
bench/run.py and, with --app, other checkouts of this app (e.g. the code before a change), all on the same
server settings and measured side by side in one run (blocks of changes, taking turns). The calculator's
output is its verdict heading ("Fits: 17.3 GB of 25.8 GB usable", the main area's first h2) and the trivial
page's a heading with the slider's value (bench/run.py TRIVIAL_HEADING_PAGE), so "changed" is slider → the
answer on screen for both; --output chart times the calculator's memory chart and the trivial page's text
instead (the earlier tables in docs/performance.md):

  press → sent        the key press until the page sends the rerun request (BackMsg) on the websocket
  sent → last msg     until the browser handled the last server message (ForwardMsg) before the output
                      changed: the server's rerun up to the output's delta, and the browser working through
                      the deltas before it (a message is timed when the page's main thread handles it)
  last msg → changed  until the output's new content is in the page (React + the chart library's render)
  done                press → the rerun is done: the output changed and the script finished

With --phases, the server's side of the same changes for ours and each --app checkout: the page script rerun
under AppTest (the real script runner), split into the page's own estimates, the advice (remedies and
solvers), building and serialising the chart, and the rest (widgets, text, tables), each a median over the
changes (ms). Prints numbers; asserts nothing. A wrapper around window.WebSocket (an init script) records the
browser times.

Usage:
  .venv/bin/python bench/slider_trace.py                          # ours, trivial, chart_only (22 changes each)
  .venv/bin/python bench/slider_trace.py --pages ours,trivial --app before=/work/main   # verdict: ours vs before
  .venv/bin/python bench/slider_trace.py --pages ours,trivial --app before=/tmp/before --phases --write-docs
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    APP_IDLE,
    ROOT,
    SLIDER,
    OneLineParser,
    in_range,
    launch_kwargs,
    median,
    replace_section,
)
from bench.run import SLIDER_PAGES, _wait_idle, slider_servers  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
BLOCK = 4  # changes per page before the next page takes its turn
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
# Then wait for the script to finish, noting when.
DONE_AT = """(idle) => {
  if (document.querySelector(idle)) { window.__wifDone = performance.now(); return true; }
  return false;
}"""


def trace(page, target: str, signature_js: str, n: int) -> list[dict[str, float]]:
    slider = page.locator(SLIDER.format(key="batch"))
    rows = []
    for _ in range(n):
        prev = page.evaluate(signature_js, target)
        page.evaluate("() => { window.__wifMsgs = []; window.__wifPress = performance.now(); }")
        slider.press("ArrowRight")
        page.wait_for_function(CHANGED_AT, arg=[target, prev, signature_js], polling="raf", timeout=60_000)
        page.wait_for_function(DONE_AT, arg=APP_IDLE, polling="raf", timeout=60_000)
        _wait_idle(page)
        page.wait_for_timeout(200)
        press, changed, done, msgs = page.evaluate(
            "[window.__wifPress, window.__wifChanged, window.__wifDone, window.__wifMsgs]")
        sent = next((t for t, size in msgs if size < 0), press)
        last = max([t for t, size in msgs if size > 0 and t <= changed] or [sent])
        rows.append({"total": changed - press, "done": max(done, changed) - press, "press_sent": sent - press,
                     "sent_last": last - sent, "last_changed": changed - last,
                     "messages": sum(1 for _, size in msgs if size > 0)})
    return rows


# ---- the server's side: one checkout's calculator under AppTest, in its own process --------------------------

PHASES = ("estimate", "advice", "chart", "other", "rerun")


def server_phases(root: Path, n: int) -> dict[str, float]:
    """Median ms per phase of the calculator's rerun after a batch change (AppTest), for the checkout at root.
    The phases are timed by wrapping, in that checkout, the functions the page calls for them (whichever
    exist there): estimator.estimate (the page's own estimates); estimator.advice.advise, or before it
    ui.trainer_inputs.trainer_remedies_and_limits and estimator.advice.shard_remedy (the advice); ui.charts'
    memory_bar / memory_bar_spec and st.plotly_chart / ui.live_chart.live_plotly_chart (building and
    serialising the chart)."""
    import importlib
    import logging

    logging.disable(logging.WARNING)
    sys.path.insert(0, str(root))
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    spent: dict[str, float] = defaultdict(float)

    def timed(phase: str, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - start
        return wrapper

    def wrap(module_name: str, attr: str, phase: str) -> bool:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return False
        if not hasattr(module, attr):
            return False
        setattr(module, attr, timed(phase, getattr(module, attr)))
        return True

    wrap("estimator", "estimate", "estimate")
    if not (wrap("estimator.advice.advise", "advise", "advice") or wrap("estimator.advice", "advise", "advice")):
        wrap("ui.trainer_inputs", "trainer_remedies_and_limits", "advice")
        wrap("estimator.advice", "shard_remedy", "advice")
    for name in ("memory_bar", "memory_bar_spec"):
        wrap("ui.charts", name, "chart")
    wrap("ui.live_chart", "live_plotly_chart", "chart")
    st.plotly_chart = timed("chart", st.plotly_chart)

    at = AppTest.from_file(str(root / "app.py"), default_timeout=120).run()
    rows = []
    for i in range(n + 2):  # the first two are warm-up
        spent.clear()
        at.slider(key="batch").set_value(2 + i)
        start = time.perf_counter()
        at.run()
        total = time.perf_counter() - start
        if i >= 2:
            rows.append({"rerun": total, **spent, "other": total - sum(spent.values())})
    if at.exception:
        raise RuntimeError(f"{root}: the page raised {at.exception[0].value}")
    return {phase: 1000 * median([r.get(phase, 0.0) for r in rows]) for phase in PHASES}


def phases_in_subprocess(root: Path, n: int) -> dict[str, float]:
    """server_phases for one checkout, in a fresh interpreter (two checkouts' modules share names)."""
    out = subprocess.run([sys.executable, __file__, "--phases-of", str(root), "--changes", str(n)],
                         capture_output=True, text=True, timeout=900, cwd=str(root),
                         env={**os.environ, "PYTHONPATH": ""})
    if out.returncode != 0:
        raise RuntimeError(f"phases for {root} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- report ---------------------------------------------------------------------------------------------------

def report(browser: dict[str, dict[str, float]], phases: dict[str, dict[str, float]], n: int, argv: list[str],
           output: str = "verdict") -> str:
    trivial = browser.get("trivial", {})
    changed = ("verdict heading on screen (the trivial page: its heading)" if output == "verdict"
               else "memory chart's data (the trivial page: its text)")
    lines = [f"Slider → output changed ({changed}) and → rerun done (batch slider, ArrowRight: every change a new "
             f"value; medians of {n} changes per page, measured side by side in one run, blocks of "
             f"{BLOCK} changes taking turns; ms). Command: `.venv/bin/python bench/slider_trace.py "
             f"{' '.join(argv)}`.", "",
             "| page | changed | × trivial | done | × trivial | press → sent | sent → last msg | last msg → changed "
             "| messages |",
             "|---|---|---|---|---|---|---|---|---|"]

    def times(m: dict[str, float], key: str) -> str:
        return f"{m[key] / trivial[key]:.2f}" if trivial.get(key) else ""

    for name, m in browser.items():
        lines.append(f"| {name} | {m['total']:.0f} | {times(m, 'total')} | {m['done']:.0f} | {times(m, 'done')} | "
                     f"{m['press_sent']:.0f} | {m['sent_last']:.0f} | {m['last_changed']:.0f} | {m['messages']:.0f} |")
    if trivial.get("total"):
        lines += ["", "Slider → " + ("verdict" if output == "verdict" else "output") + " changed, × the trivial page: "
                  + ", ".join(f"{name} {m['total'] / trivial['total']:.2f}×" for name, m in browser.items()
                              if name != "trivial") + "."]
    if phases:
        lines += ["", "Server side of the same kind of change (the calculator's rerun under AppTest, medians, ms):", "",
                  "| checkout | rerun | estimate | advice | chart build + serialise | other (widgets, text, tables) |",
                  "|---|---|---|---|---|---|"]
        for name, p in phases.items():
            lines.append(f"| {name} | {p['rerun']:.1f} | {p['estimate']:.1f} | {p['advice']:.1f} | {p['chart']:.1f} | "
                         f"{p['other']:.1f} |")
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    lines += ["", f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores; load "
              f"average {load} when the run ended."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = OneLineParser(prog="bench/slider_trace.py", description="Slider → output phases in Chromium (prints numbers).")
    p.add_argument("--pages", default="ours,trivial,chart_only",
                   help=f"comma-separated, from: {', '.join(SLIDER_PAGES)}")
    p.add_argument("--changes", type=in_range(int, 4, 200), default=22,
                   help="slider changes per page (the first 2 are warm-up and not counted)")
    p.add_argument("--app", action="append", default=[], metavar="NAME=PATH",
                   help="also measure another checkout of this app (its app.py), under this name")
    p.add_argument("--output", choices=("verdict", "chart"), default="verdict",
                   help="what 'changed' waits for on the calculator: its verdict heading (default) or memory chart")
    p.add_argument("--phases", action="store_true", help="also time the server's phases (AppTest) of ours and --app")
    p.add_argument("--write-docs", action="store_true", help="write the tables into docs/performance.md")
    p.add_argument("--phases-of", help=argparse_hidden())
    args = p.parse_args(argv)
    if args.phases_of:
        print(json.dumps(server_phases(Path(args.phases_of), args.changes - 2)))
        return 0
    names = [n.strip() for n in args.pages.split(",") if n.strip()]
    unknown = [n for n in names if n not in SLIDER_PAGES]
    if unknown or not names:
        p.error(f"unknown page(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(SLIDER_PAGES)}")
    apps: dict[str, Path] = {}
    for item in args.app:
        name, _, path = item.partition("=")
        if not name or not path or not (Path(path) / "app.py").is_file() or name in SLIDER_PAGES:
            p.error(f"--app wants NAME=PATH with PATH/app.py and a new name, got {item!r}")
        apps[name] = Path(path).resolve()
    from playwright.sync_api import sync_playwright

    counted = args.changes - 2
    with sync_playwright() as pw, slider_servers(names, apps, heading=args.output == "verdict") as targets:
        browser = pw.chromium.launch(**launch_kwargs())
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(RECORD_MESSAGES)
        pages = {}
        for name, (url, target, _changed_js, _signature_js) in targets.items():
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector(target, state="visible", timeout=120_000)
            _wait_idle(page)
            pages[name] = page
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in pages}
        for name, page in pages.items():  # warm-up: not counted
            page.bring_to_front()
            trace(page, targets[name][1], targets[name][3], 2)
        while any(len(r) < counted for r in rows.values()):
            for name, page in pages.items():
                page.bring_to_front()
                rows[name] += trace(page, targets[name][1], targets[name][3], min(BLOCK, counted - len(rows[name])))
        browser.close()
    measured = {name: {k: median([r[k] for r in rs]) for k in rs[0]} for name, rs in rows.items()}
    phases: dict[str, dict[str, float]] = {}
    if args.phases:
        for name, root in {"ours": ROOT, **apps}.items():
            phases[name] = phases_in_subprocess(root, args.changes)
    text = report(measured, phases, counted, argv, args.output)
    print(text)
    if args.write_docs:
        replace_section(DOC, "slider-trace", text)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
