"""Load test: N concurrent sessions change inputs on a local Will-it-fit server for a bounded time.

Starts `streamlit run app.py` on 127.0.0.1 (or targets --url, which must be on this machine) and opens
--sessions concurrent sessions of one of two kinds:

  --client ws       (default) raw websocket clients speaking Streamlit's own protocol (the protobuf BackMsg /
                    ForwardMsg messages the browser sends and receives): each session changes the batch
                    slider's widget state (now and then gradient checkpointing, between explicit true and false,
                    starting from the stack's effective default so that every change changes the job), asks
                    for a rerun, and times the rerun until the memory chart's new spec arrives and until the run
                    finishes. Like a browser it first loads the page (keeping its cookies, e.g. the proxy's
                    affinity cookie) and reconnects when its connection drops. Cheap on the client side, so it
                    measures the server. --reruns full (default) reruns the whole page for every change, as
                    any input outside the sliders does; --reruns browser sends what the browser sends: the
                    batch slider's change reruns only its fragment (ui.inputs.live_page), checkpointing the
                    whole page.
  --client browser  Playwright browser contexts in one Chromium: the batch slider moved by keyboard (now and
                    then the checkpointing toggle clicked), timed until the chart's data changed in the page.
                    Measures what a user sees, but on a 2-core machine 20 Chromium pages mostly measure
                    Chromium.

Each session waits for its previous change to finish (as a user does), then pauses --think-ms. The run stops
after --duration seconds or --max-changes changes, whichever comes first, and reports:

  errors   exception elements, disconnects (websocket closed; in the browser also leaving CONNECTED), page
           crashes and JS errors (browser), changes whose chart never updated (timeout or unchanged),
           runs that did not finish cleanly, server-logged tracebacks: must all be 0
  reruns   input changes answered with an updated chart
  latency  p50 / p95 / max from the change to the updated chart (ms); ws mode adds change → run finished
  per process (ws) reruns per upstream process: behind the proxy (deploy/nginx.conf.template) the X-Upstream
           response header names the process that served the session
  lost     (ws) sessions whose connection dropped (counted in errors as disconnects) and what became of them:
           resumed on their own process (same Streamlit session), reloaded on another with their URL (a new
           session whose chart matches the one before the drop), state lost, or never reconnected

Usage:
  .venv/bin/python bench/load_test.py                       # 20 websocket sessions, 60 s
  .venv/bin/python bench/load_test.py --client browser      # 20 browser contexts, 60 s
  .venv/bin/python bench/load_test.py --sessions 5 --duration 10 --max-changes 100
  .venv/bin/python bench/load_test.py --url http://127.0.0.1:8501 --write-docs
  deploy/serve.sh 2 & .venv/bin/python bench/load_test.py --sessions 40 --url http://127.0.0.1:8501   # the proxy

Exit status: 0 when there were no errors, 1 when there were, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookies
import json
import os
import random
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    APP_CONNECTED,
    APP_IDLE,
    CHART,
    CHART_CHANGED_JS,
    CHART_SIGNATURE_JS,
    EXCEPTION,
    ROOT,
    SLIDER,
    OneLineParser,
    in_range,
    is_loopback_url,
    launch_kwargs,
    median,
    percentile,
    process_cpu_s,
    replace_section,
    server_log_errors,
    streamlit_server,
)

CHART_SEL = CHART.format(key="memory_bar")
BATCH_SEL = SLIDER.format(key="batch")
CKPT_SEL = ".st-key-ckpt label"
DOC = ROOT / "docs" / "performance.md"


def _local_url(text: str) -> str:
    if not is_loopback_url(text):
        raise argparse.ArgumentTypeError(f"only a server on this machine may be load-tested "
                                         f"(http://127.0.0.1:PORT or http://localhost:PORT), got {text!r}")
    return text.rstrip("/")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = OneLineParser(prog="load_test.py", description="Concurrent-session load test of the Will-it-fit Streamlit app (127.0.0.1 only).")
    p.add_argument("--client", choices=["ws", "browser"], default="ws",
                   help="ws: Streamlit-protocol websocket clients (default); browser: Playwright contexts")
    p.add_argument("--sessions", type=in_range(int, 1, 100), default=20, help="concurrent sessions (default 20)")
    p.add_argument("--duration", type=in_range(float, 1, 600), default=60.0, help="seconds of input changes (default 60)")
    p.add_argument("--max-changes", type=in_range(int, 1, 100_000), default=3000,
                   help="stop after this many input changes in total (default 3000)")
    p.add_argument("--think-ms", type=in_range(int, 0, 60_000), default=250,
                   help="pause between a session's changes, randomised ±50%% (default 250)")
    p.add_argument("--timeout", type=in_range(float, 1, 300), default=60.0,
                   help="seconds a change may take to update the chart before it counts as an error (default 60)")
    p.add_argument("--reruns", choices=["full", "browser"], default="full",
                   help="ws: full = every change reruns the whole page (default); browser = as the browser sends "
                        "them (a slider change reruns its fragment only)")
    p.add_argument("--url", type=_local_url, help="target a running server instead of starting one")
    p.add_argument("--seed", type=in_range(int, 0, 2**31), default=1, help="random seed (default 1)")
    p.add_argument("--write-docs", action="store_true", help=f"write the figures into {DOC.relative_to(ROOT)}")
    p.add_argument("--json", action="store_true", help="print the result as JSON too")
    return p.parse_args(argv)


@dataclass
class Stats:
    latencies_ms: list[float] = field(default_factory=list)
    changes: int = 0  # changes attempted during the measured window
    reruns: int = 0  # changes answered with an updated chart
    exceptions: int = 0
    disconnects: int = 0
    crashes: int = 0
    js_errors: list[str] = field(default_factory=list)
    timeouts: int = 0
    bad_runs: int = 0  # ws: a run that finished with a compile error, or a change that left the chart unchanged
    load_failures: int = 0
    server_errors: int = 0
    load_s: list[float] = field(default_factory=list)
    finish_ms: list[float] = field(default_factory=list)  # ws: change → script_finished
    per_upstream: Counter = field(default_factory=Counter)  # ws: reruns per serving process
    sessions_per_upstream: Counter = field(default_factory=Counter)  # ws: sessions per process at load
    lost: int = 0  # ws: sessions whose connection dropped (each drop is also a disconnect)
    resumed: int = 0  # ... reconnected to their own process's session
    reloaded: int = 0  # ... a new session (another or a restarted process) rebuilt from their URL
    state_lost: int = 0  # ... a new session whose chart differs from the one before the drop
    never_back: int = 0  # ... no connection again within --timeout
    server_pids: list[int] = field(default_factory=list)  # the server processes, when known: their CPU is read
    server_cpu_s: float | None = None  # ... over the measured window (all of them together)
    client_cpu_s: float = 0.0  # this process (the clients) over the measured window: it shares the machine

    @property
    def errors(self) -> int:
        return (self.exceptions + self.disconnects + self.crashes + len(self.js_errors) + self.timeouts
                + self.bad_runs + self.load_failures + self.server_errors + self.state_lost + self.never_back)


def _default_ckpt() -> bool:
    """Gradient checkpointing as the page's default ('auto') resolves it: the default stack's own setting."""
    from estimator.job.stack import resolve_setup
    from estimator.options.stacks import DEFAULT_STACK

    return bool(resolve_setup(DEFAULT_STACK).grad_ckpt)


class _Dropped(Exception):
    """The session's websocket closed under it."""


class WsSession:
    """One Streamlit session over a raw websocket: the messages the browser would send, without a browser."""

    def __init__(self, idx: int, url: str, stats: Stats, rng: random.Random, args: argparse.Namespace):
        self.idx, self.url, self.stats, self.rng, self.args = idx, url, stats, rng, args
        self.ws = None
        self.closing = False
        self.page_hash = ""
        self.ids: dict[str, str] = {}  # widget key → widget id
        self.fragment_id = ""  # the live fragment holding the sliders (ui.inputs.live_page)
        self.batch, self.direction = 1, 1
        self.ckpt = _default_ckpt()  # the effective value: the first toggle sends its opposite
        self.send_ckpt = False  # 'auto' until the first toggle, then explicit true/false
        self.chart = b""
        self.cookies: dict[str, str] = {}
        self.upstream = ""
        self.session_id = ""
        self.shown: dict[str, object] = {}  # what the last run's batch slider and checkpointing control showed

    def _url_query(self) -> str:
        """The page's address after this session's changes: the app binds every input to the URL (the frontend
        writes each bound widget's value there), so a reload with it restores them."""
        params = {"batch": str(self.batch)}
        if self.send_ckpt:
            params["ckpt"] = "true" if self.ckpt else "false"
        return urllib.parse.urlencode(params) if self.chart else ""

    def _load_page(self) -> None:
        """GET the page as a browser does before its websocket: keeps Set-Cookie values (the proxy's affinity
        cookie, Streamlit's XSRF cookie) and the serving process from the X-Upstream header."""
        query = self._url_query()
        req = urllib.request.Request(self.url + "/" + (f"?{query}" if query else ""))
        if self.cookies:
            req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        with urllib.request.urlopen(req, timeout=self.args.timeout) as resp:
            resp.read()
            for header in resp.headers.get_all("Set-Cookie") or []:
                jar = http.cookies.SimpleCookie()
                jar.load(header)
                self.cookies.update({k: m.value for k, m in jar.items()})
            self.upstream = resp.headers.get("X-Upstream") or urllib.parse.urlsplit(self.url).netloc

    async def _connect(self) -> None:
        import websockets

        await asyncio.to_thread(self._load_page)
        protocols = ["streamlit"]
        if self.session_id and self.cookies.get("_streamlit_xsrf"):
            protocols += [self.cookies["_streamlit_xsrf"], self.session_id]  # as the frontend reconnects
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        self.ws = await websockets.connect(self.url.replace("http", "ws", 1) + "/_stcore/stream",
                                           subprotocols=protocols, additional_headers=headers, max_size=None,
                                           open_timeout=self.args.timeout)
        upstream = self.ws.response.headers.get("X-Upstream") if self.ws.response else None
        self.upstream = upstream or self.upstream

    async def _send_rerun(self, fragment: bool = False) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self._url_query()
        state.page_script_hash = self.page_hash
        if fragment and self.fragment_id:
            state.fragment_id = self.fragment_id  # what the browser sends for a widget inside a fragment
        if "batch" in self.ids:
            widget = state.widget_states.widgets.add()
            widget.id = self.ids["batch"]
            widget.double_array_value.data.append(self.batch)  # sliders carry a list of doubles
        if "ckpt" in self.ids and self.send_ckpt:
            widget = state.widget_states.widgets.add()
            widget.id = self.ids["ckpt"]  # a segmented control (auto/true/false/offload): its option as text
            widget.string_array_value.data.append("true" if self.ckpt else "false")
        await self.ws.send(msg.SerializeToString())

    async def _send_rerun_with(self, query: str) -> None:
        """A fresh page's first rerun: only its address, no widget states."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = self.page_hash
        await self.ws.send(msg.SerializeToString())

    async def _collect(self, t0: float) -> tuple[float | None, float, int, int]:
        """Read ForwardMsgs until the run finishes: (ms to a changed chart or None, ms to finish, exceptions,
        finish status)."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        chart_ms: float | None = None
        import websockets

        exceptions = 0
        while True:
            try:
                raw = await asyncio.wait_for(self.ws.recv(), timeout=self.args.timeout)
            except websockets.ConnectionClosed as exc:
                raise _Dropped(str(exc)) from None
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.session_id = msg.new_session.initialize.session_id or self.session_id
            elif kind == "navigation":
                self.page_hash = msg.navigation.page_script_hash
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                etype = element.WhichOneof("type")
                inner = getattr(element, etype)
                widget_id = getattr(inner, "id", "")
                if isinstance(widget_id, str) and widget_id.endswith(("-batch", "-ckpt")):
                    name = widget_id.rsplit("-", 1)[1]
                    self.ids[name] = widget_id
                    if name == "batch":
                        self.fragment_id = msg.delta.fragment_id
                    if etype == "slider":
                        self.shown[name] = int((inner.value if inner.set_value else inner.default)[0])
                    elif etype == "button_group":
                        self.shown[name] = inner.raw_values[0] if inner.raw_values else "auto"
                # The memory chart: the calculator's live chart (ui/live_chart.py), or an st.plotly_chart.
                spec = (inner.json if etype == "bidi_component" and widget_id.endswith("-memory_bar") else
                        inner.spec if etype == "plotly_chart" else None)
                if spec is not None and spec.encode() != self.chart:
                    if chart_ms is None:
                        chart_ms = (time.perf_counter() - t0) * 1000
                    self.chart = spec.encode()
                elif etype == "exception":
                    exceptions += 1
            elif kind == "script_finished":
                if msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue  # the script asked for a rerun (st.rerun): the run goes on, as in the browser
                return chart_ms, (time.perf_counter() - t0) * 1000, exceptions, int(msg.script_finished)

    async def open(self) -> bool:
        t = time.perf_counter()
        try:
            await self._connect()
            await self._send_rerun()
            _, _, exceptions, _ = await self._collect(time.perf_counter())
            if exceptions:
                self.stats.exceptions += exceptions
            if "batch" not in self.ids or not self.chart:
                raise RuntimeError("the first run showed no batch slider or no memory chart")
        except Exception as exc:  # noqa: BLE001 - any failure to load counts as an error, and is reported
            self.stats.load_failures += 1
            print(f"session {self.idx}: did not load: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                  file=sys.stderr)
            return False
        self.stats.load_s.append(time.perf_counter() - t)
        self.stats.sessions_per_upstream[self.upstream] += 1
        return True

    async def _recover(self) -> bool:
        """The connection dropped: reconnect as the frontend does (same cookies, its session id), then rerun with
        the URL it had. Resumed = the same Streamlit session answered; otherwise a fresh session must show the
        session's inputs from the URL alone (the batch and, once chosen, checkpointing) and a chart."""
        self.stats.disconnects += 1
        self.stats.lost += 1
        old_session, deadline = self.session_id, time.perf_counter() + self.args.timeout
        while True:
            try:
                await self._connect()
                break
            except Exception:  # noqa: BLE001 - the process or the proxy is still down: retry, as the page does
                if time.perf_counter() > deadline:
                    self.stats.never_back += 1
                    return False
                await asyncio.sleep(0.5)
        query = self._url_query()
        self.chart, self.ids, self.shown = b"", {}, {}
        try:
            await self._send_rerun_with(query)
            _, _, exceptions, _ = await self._collect(time.perf_counter())
        except (Exception, _Dropped):  # noqa: BLE001
            self.stats.never_back += 1
            return False
        self.stats.exceptions += exceptions
        if self.session_id == old_session:
            self.stats.resumed += 1
        elif self.chart and self.shown.get("batch") == self.batch and (
                not self.send_ckpt or self.shown.get("ckpt") == ("true" if self.ckpt else "false")):
            self.stats.reloaded += 1
        else:
            self.stats.state_lost += 1
            print(f"session {self.idx}: reloaded on {self.upstream} with ?{query} but shows {self.shown}",
                  file=sys.stderr)
        return True

    async def change(self) -> None:
        slider = True
        if self.rng.random() < 0.15 and "ckpt" in self.ids:
            self.ckpt = not self.ckpt
            self.send_ckpt = True
            slider = False
        else:
            if self.batch >= 16:
                self.direction = -1
            elif self.batch <= 1:
                self.direction = 1
            self.batch += self.direction
        self.stats.changes += 1
        import websockets

        t0 = time.perf_counter()
        try:
            await self._send_rerun(fragment=slider and self.args.reruns == "browser")
            chart_ms, finish_ms, exceptions, status = await self._collect(t0)
        except TimeoutError:
            self.stats.timeouts += 1
            return
        except (_Dropped, websockets.ConnectionClosed):
            if not await self._recover():
                raise RuntimeError("the connection dropped and did not come back") from None
            return
        self.stats.exceptions += exceptions
        self.stats.finish_ms.append(finish_ms)
        if status == 1:  # FINISHED_WITH_COMPILE_ERROR
            self.stats.bad_runs += 1
        if chart_ms is None:  # the chart did not change: the input did not reach the script
            self.stats.bad_runs += 1
            return
        self.stats.latencies_ms.append(chart_ms)
        self.stats.reruns += 1
        self.stats.per_upstream[self.upstream] += 1

    async def close(self) -> None:
        self.closing = True
        if self.ws is not None:
            await self.ws.close()


class Session:
    def __init__(self, idx: int, browser, url: str, stats: Stats, rng: random.Random, args: argparse.Namespace):
        self.idx, self.browser, self.url, self.stats, self.rng, self.args = idx, browser, url, stats, rng, args
        self.page = None
        self.context = None
        self.closing = False
        self.direction = 1

    async def open(self) -> bool:
        self.context = await self.browser.new_context(viewport={"width": 1280, "height": 900})
        page = self.page = await self.context.new_page()
        page.on("websocket", self._on_websocket)
        page.on("crash", lambda *_: self._count("crashes"))
        page.on("pageerror", lambda exc: self.stats.js_errors.append(f"session {self.idx}: {exc}"[:300]))
        t = time.perf_counter()
        try:
            await page.goto(self.url, timeout=self.args.timeout * 1000)
            await page.wait_for_selector(CHART_SEL, timeout=self.args.timeout * 1000)
            await page.wait_for_selector(APP_IDLE, state="attached", timeout=self.args.timeout * 1000)
        except Exception as exc:  # noqa: BLE001 - any failure to load counts as an error, and is reported
            self.stats.load_failures += 1
            print(f"session {self.idx}: did not load: {str(exc).splitlines()[0]}", file=sys.stderr)
            return False
        self.stats.load_s.append(time.perf_counter() - t)
        return True

    def _count(self, name: str) -> None:
        if not self.closing:
            setattr(self.stats, name, getattr(self.stats, name) + 1)

    def _on_websocket(self, ws) -> None:
        if "_stcore/stream" in ws.url:
            ws.on("close", lambda *_: self._count("disconnects"))

    async def change(self) -> None:
        """One input change, then wait for the chart's data to differ."""
        page = self.page
        prev = await page.evaluate(CHART_SIGNATURE_JS, CHART_SEL)
        use_toggle = self.rng.random() < 0.15
        t0 = time.perf_counter()
        if use_toggle:
            await page.locator(CKPT_SEL).click()
        else:
            slider = page.locator(BATCH_SEL)
            value = int(await slider.input_value())
            if value >= 16:
                self.direction = -1
            elif value <= 1:
                self.direction = 1
            await slider.press("ArrowRight" if self.direction > 0 else "ArrowLeft")
        self.stats.changes += 1
        try:
            await page.wait_for_function(CHART_CHANGED_JS, arg=[CHART_SEL, prev], polling=10,
                                         timeout=self.args.timeout * 1000)
        except Exception:  # noqa: BLE001 - a Playwright timeout: the chart never updated
            self.stats.timeouts += 1
            return
        self.stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
        self.stats.reruns += 1
        # Let the run finish before the next change, then check the page is healthy.
        await page.wait_for_selector(APP_IDLE, state="attached", timeout=self.args.timeout * 1000)
        if await page.locator(EXCEPTION).count():
            self.stats.exceptions += 1
        if not await page.locator(APP_CONNECTED).count():
            self.stats.disconnects += 1

    async def close(self) -> None:
        self.closing = True
        if self.context is not None:
            await self.context.close()


async def _ramp_and_loop(sessions: list, args: argparse.Namespace, stats: Stats) -> float:
    """Open the sessions a few at a time (on 2 cores, all at once would only measure the ramp), then let every
    loaded session change inputs until the deadline or the change budget. Returns the measured seconds."""
    opened = []
    for start in range(0, len(sessions), 4):
        batch = sessions[start:start + 4]
        results = await asyncio.gather(*(s.open() for s in batch))
        opened += [s for s, ok in zip(batch, results, strict=True) if ok]
    print(f"{len(opened)}/{len(sessions)} sessions loaded; changing inputs for up to {args.duration:g} s "
          f"or {args.max_changes} changes", file=sys.stderr)
    t_begin = time.perf_counter()
    deadline = t_begin + args.duration
    cpu_begin = sum(process_cpu_s(pid) for pid in stats.server_pids)
    client_begin = time.process_time()

    async def loop(s) -> None:
        while time.perf_counter() < deadline and stats.changes < args.max_changes:
            try:
                await s.change()
            except Exception as exc:  # noqa: BLE001 - e.g. the connection closed for good: count it, stop this session
                if not isinstance(exc, RuntimeError):
                    stats.disconnects += 1
                print(f"session {s.idx}: {str(exc).splitlines()[0] if str(exc) else exc!r}", file=sys.stderr)
                return
            if args.think_ms:
                await asyncio.sleep(args.think_ms * s.rng.uniform(0.5, 1.5) / 1000)

    await asyncio.gather(*(loop(s) for s in opened))
    elapsed = time.perf_counter() - t_begin
    stats.client_cpu_s = time.process_time() - client_begin
    if stats.server_pids:
        stats.server_cpu_s = sum(process_cpu_s(pid) for pid in stats.server_pids) - cpu_begin
    for s in sessions:
        await s.close()
    return elapsed


async def _drive(url: str, args: argparse.Namespace, stats: Stats) -> float:
    rng = random.Random(args.seed)
    if args.client == "ws":
        sessions = [WsSession(i, url, stats, random.Random(rng.random()), args) for i in range(args.sessions)]
        return await _ramp_and_loop(sessions, args, stats)

    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**launch_kwargs())
        sessions = [Session(i, browser, url, stats, random.Random(rng.random()), args) for i in range(args.sessions)]
        elapsed = await _ramp_and_loop(sessions, args, stats)
        await browser.close()
    return elapsed


def run(args: argparse.Namespace, server_pids: list[int] | None = None) -> tuple[Stats, float]:
    """The load test against --url (server_pids: its processes, to read their CPU) or a server of its own."""
    stats = Stats(server_pids=list(server_pids or []))
    if args.url:
        elapsed = asyncio.run(_drive(args.url, args, stats))
        return stats, elapsed
    with streamlit_server() as (url, proc, _):
        stats.server_pids = [proc.pid]
        elapsed = asyncio.run(_drive(url, args, stats))
        errors = server_log_errors(proc)
        stats.server_errors = len(errors)
        for block in errors[:5]:  # what went wrong, as the server logged it
            print(f"server error:\n{block}", file=sys.stderr)
    return stats, elapsed


def report(stats: Stats, elapsed: float, args: argparse.Namespace) -> dict[str, object]:
    lat = stats.latencies_ms
    return {
        "sessions": args.sessions, "duration_s": round(elapsed, 1), "changes": stats.changes,
        "reruns_served": stats.reruns, "reruns_per_s": round(stats.reruns / elapsed, 1) if elapsed else 0.0,
        "errors": stats.errors, "exceptions": stats.exceptions, "disconnects": stats.disconnects,
        "client": args.client, "crashes": stats.crashes, "js_errors": len(stats.js_errors),
        "timeouts": stats.timeouts, "bad_runs": stats.bad_runs,
        "load_failures": stats.load_failures, "server_errors": stats.server_errors,
        "p50_ms": round(percentile(lat, 50)), "p95_ms": round(percentile(lat, 95)),
        "max_ms": round(max(lat)) if lat else float("nan"),
        "load_median_s": round(median(stats.load_s), 1) if stats.load_s else float("nan"),
        "finish_p50_ms": round(percentile(stats.finish_ms, 50)) if stats.finish_ms else None,
        "finish_p95_ms": round(percentile(stats.finish_ms, 95)) if stats.finish_ms else None,
        "per_process": {up: {"sessions": stats.sessions_per_upstream[up], "reruns": n,
                             "reruns_per_s": round(n / elapsed, 1) if elapsed else 0.0}
                        for up, n in sorted(stats.per_upstream.items())},
        "server_cpu_cores": round(stats.server_cpu_s / elapsed, 2) if stats.server_cpu_s is not None and elapsed
        else None,
        "reruns_per_cpu_s": round(stats.reruns / stats.server_cpu_s, 1) if stats.server_cpu_s else None,
        "client_cpu_cores": round(stats.client_cpu_s / elapsed, 2) if elapsed else None,
        "lost": stats.lost, "resumed": stats.resumed, "reloaded": stats.reloaded,
        "state_lost": stats.state_lost, "never_back": stats.never_back,
    }


def table(result: dict[str, object]) -> str:
    rows = [("client", result["client"]), ("sessions", result["sessions"]), ("duration (s)", result["duration_s"]),
            ("input changes", result["changes"]), ("reruns served (chart updated)", result["reruns_served"]),
            ("reruns / s", result["reruns_per_s"]), ("errors (total)", result["errors"]),
            ("  exception elements", result["exceptions"]), ("  disconnects", result["disconnects"]),
            ("  page crashes / JS errors", f"{result['crashes']} / {result['js_errors']}"),
            ("  chart never updated (timeout)", result["timeouts"]),
            ("  run not clean / chart unchanged", result["bad_runs"]),
            ("  sessions that failed to load", result["load_failures"]),
            ("  server-logged tracebacks", result["server_errors"]),
            ("change → chart p50 (ms)", result["p50_ms"]), ("change → chart p95 (ms)", result["p95_ms"]),
            ("change → chart max (ms)", result["max_ms"]), ("session load, median (s)", result["load_median_s"])]
    if result["server_cpu_cores"] is not None:
        rows.append(("server CPU (cores busy) / reruns per CPU-second / the clients' CPU (cores)",
                     f"{result['server_cpu_cores']} / {result['reruns_per_cpu_s']} / {result['client_cpu_cores']}"))
    if result["finish_p50_ms"] is not None:
        rows.append(("change → run finished p50 / p95 (ms)", f"{result['finish_p50_ms']} / {result['finish_p95_ms']}"))
    if result["client"] == "ws":
        for up, row in result["per_process"].items():
            rows.append((f"process {up}: sessions / reruns / per s", f"{row['sessions']} / {row['reruns']} / "
                                                                      f"{row['reruns_per_s']}"))
        rows.append(("sessions that lost the connection", result["lost"]))
        rows.append(("  resumed / reloaded from URL / state lost / never back",
                     f"{result['resumed']} / {result['reloaded']} / {result['state_lost']} / {result['never_back']}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def docs_section(result: dict[str, object], args: argparse.Namespace) -> str:
    cmd = (f".venv/bin/python bench/load_test.py --client {args.client} --sessions {args.sessions} "
           f"--duration {args.duration:g} --max-changes {args.max_changes} --think-ms {args.think_ms}"
           + (f" --reruns {args.reruns}" if args.client == "ws" and args.reruns != "full" else "")
           + (f" --url {args.url}" if args.url else "") + " --write-docs")
    kind = ("raw websocket clients (Streamlit protocol)" if args.client == "ws"
            else "Playwright browser contexts in one Chromium")
    if args.client == "ws":
        kind += (", slider changes as fragment reruns (as the browser sends them)" if args.reruns == "browser"
                 else ", every change a full rerun")
    rows = [
        (f"Concurrent sessions: {kind}", result["sessions"]),
        ("Measured window (s)", result["duration_s"]),
        ("Input changes", result["changes"]),
        ("Reruns served (chart updated)", f"{result['reruns_served']} ({result['reruns_per_s']}/s)"),
        ("Errors: exceptions / disconnects / crashes / JS errors / timeouts / unclean or unchanged runs / "
         "load failures / server tracebacks",
         f"**{result['errors']}**: {result['exceptions']} / {result['disconnects']} / {result['crashes']} / "
         f"{result['js_errors']} / {result['timeouts']} / {result['bad_runs']} / {result['load_failures']} / "
         f"{result['server_errors']}"),
        ("Input change → updated chart, p50 / p95 / max (ms)",
         f"{result['p50_ms']} / {result['p95_ms']} / {result['max_ms']}"),
    ]
    if result["finish_p50_ms"] is not None:
        rows.append(("Input change → run finished, p50 / p95 (ms)",
                     f"{result['finish_p50_ms']} / {result['finish_p95_ms']}"))
    if result["server_cpu_cores"] is not None:
        rows.append(("Server CPU: cores busy / reruns per CPU-second; the clients' CPU (cores)",
                     f"{result['server_cpu_cores']} / {result['reruns_per_cpu_s']}; {result['client_cpu_cores']}"))
    if args.client == "ws":
        for up, row in result["per_process"].items():
            rows.append((f"Process {up}: sessions / reruns / per s",
                         f"{row['sessions']} / {row['reruns']} / {row['reruns_per_s']}"))
        rows.append(("Sessions that lost the connection: resumed / reloaded from URL / state lost / never back",
                     f"{result['lost']}: {result['resumed']} / {result['reloaded']} / {result['state_lost']} / "
                     f"{result['never_back']}"))
    return "\n".join([
        f"{kind[0].upper() + kind[1:]}, measured {time.strftime('%Y-%m-%d %H:%M')} on this machine ({os.cpu_count()} cores, "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; the server and the clients "
        f"share them); reproduce with `{cmd}`.",
        "",
        "| Load test | Value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
    ])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stats, elapsed = run(args)
    result = report(stats, elapsed, args)
    print(table(result))
    for line in stats.js_errors[:5]:
        print(f"JS error: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    if args.write_docs:
        section = (f"load-test-{args.client}" + ("" if args.think_ms == 250 else f"-think{args.think_ms}")
                   + ("-browser-reruns" if args.client == "ws" and args.reruns == "browser" else "")
                   + ("-proxy" if args.url else ""))
        replace_section(DOC, section, docs_section(result, args))
        print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
