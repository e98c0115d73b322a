"""One process against several behind nginx, in the same run: the load test on one `streamlit run` (as
bench/load_test.py runs it), then deploy/serve.sh N (N processes and nginx, exactly as docs/hosting.md says to
run it) with N times the sessions through the proxy. Optionally one process is killed partway through the proxy
run (serve.sh starts it again after 1 s), and the sessions it served are followed: resumed on their own process,
reloaded on another from their URL, state lost, or never back.

Usage:
  .venv/bin/python bench/multi_process.py                          # 1 vs 2 processes, 20 vs 40 sessions, 60 s each
  .venv/bin/python bench/multi_process.py --kill-at 30             # ... one process killed 30 s into the proxy run
                                                                   # (its sessions move to the other one and stay:
                                                                   # a throughput ratio only without --kill-at)
  .venv/bin/python bench/multi_process.py --fresh-clone            # serve.sh from a `git clone` of this checkout
  .venv/bin/python bench/multi_process.py --duration 20 --write-docs

Needs nginx (Debian: apt-get install -y nginx). Prints numbers, asserts nothing about them. Exit status: 0 when
neither run had errors other than the killed process's dropped connections, 1 otherwise, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import load_test  # noqa: E402
from bench.common import ROOT, OneLineParser, error_blocks, free_port, in_range, replace_section  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
SECTION = "multi-process"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = OneLineParser(prog="multi_process.py", description="One Streamlit process against N behind nginx.")
    p.add_argument("--processes", type=in_range(int, 2, 16), default=2, help="processes behind nginx (default 2)")
    p.add_argument("--sessions", type=in_range(int, 1, 50), default=20,
                   help="sessions per process: the single process gets this many, the proxy N times it (default 20)")
    p.add_argument("--duration", type=in_range(float, 5, 600), default=60.0, help="seconds per run (default 60)")
    p.add_argument("--think-ms", type=in_range(int, 0, 60_000), default=250, help="as in load_test.py (default 250)")
    p.add_argument("--reruns", choices=["full", "browser"], default="full", help="as in load_test.py (default full)")
    p.add_argument("--kill-at", type=in_range(float, 0, 600), default=0.0,
                   help="seconds into the proxy run to kill one process (0: none, the default)")
    p.add_argument("--fresh-clone", action="store_true",
                   help="run deploy/serve.sh from a `git clone` of this checkout (committed files only)")
    p.add_argument("--write-docs", action="store_true", help=f"write the figures into {DOC.relative_to(ROOT)}")
    p.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = p.parse_args(argv)
    if args.kill_at and args.kill_at >= args.duration:
        p.error("--kill-at must be within --duration")
    return args


def _load_args(args: argparse.Namespace, sessions: int, url: str | None) -> argparse.Namespace:
    argv = ["--sessions", str(sessions), "--duration", f"{args.duration:g}", "--think-ms", str(args.think_ms),
            "--reruns", args.reruns, "--max-changes", "100000"]
    return load_test.parse_args(argv + (["--url", url] if url else []))


def _checkout(args: argparse.Namespace, tmp: Path) -> Path:
    """Where serve.sh runs from: this checkout, or a fresh clone of its committed state."""
    if not args.fresh_clone:
        return ROOT
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    return clone


def _wait(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("deploy/serve.sh exited:\n" + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"{url}/nginx-health", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("nginx did not answer /nginx-health:\n" + log.read_text()[-3000:])


def proxy_run(args: argparse.Namespace) -> dict[str, object]:
    """deploy/serve.sh N, the load test through nginx with N × sessions, and (--kill-at) one process killed."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        raise SystemExit("multi_process.py: no nginx (Debian: apt-get install -y nginx)")
    with tempfile.TemporaryDirectory(prefix="wif-multi-") as tmp_name:
        tmp = Path(tmp_name)
        where = _checkout(args, tmp)
        runtime = tmp / "runtime"
        listen, base = free_port(), free_port()
        while listen in range(base, base + args.processes):
            listen = free_port()
        env = {**os.environ, "PYTHON": sys.executable, "NGINX": nginx, "WIF_LISTEN": str(listen),
               "WIF_BASE_PORT": str(base), "WIF_RUNTIME_DIR": str(runtime), "WIF_RESTART": "1"}
        log = tmp / "serve.log"
        with log.open("w") as out:
            serve = subprocess.Popen(["bash", str(where / "deploy" / "serve.sh"), str(args.processes)], cwd=where,
                                     env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{listen}"
        killed: dict[str, object] = {}
        try:
            _wait(url, serve, log)
            timer = None
            if args.kill_at:
                def kill() -> None:
                    pid = int((runtime / f"streamlit-{base}.pid").read_text())
                    os.kill(pid, signal.SIGKILL)
                    killed.update(port=base, pid=pid, at_s=args.kill_at)
                timer = threading.Timer(args.kill_at + 2, kill)  # + the sessions' ramp, roughly
                timer.start()
            pids = [int((runtime / f"streamlit-{base + i}.pid").read_text()) for i in range(args.processes)]
            stats, elapsed = load_test.run(_load_args(args, args.sessions * args.processes, url), pids)
            if timer is not None:
                timer.cancel()
            errors = [b for f in sorted(runtime.glob("streamlit-*.log")) for b in error_blocks(f.read_text())]
            stats.server_errors = len(errors)
            for block in errors[:5]:
                print(f"server error:\n{block}", file=sys.stderr)
        finally:
            os.killpg(serve.pid, signal.SIGTERM)
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
    result = load_test.report(stats, elapsed, _load_args(args, args.sessions * args.processes, url))
    result["killed"] = killed
    return result


def _errors_besides_drops(result: dict[str, object]) -> int:
    """Errors other than the dropped connections of a killed process (each counted once as a disconnect)."""
    return int(result["errors"]) - (int(result["lost"]) if result.get("killed") else 0)


def table(one: dict[str, object], many: dict[str, object], args: argparse.Namespace) -> list[tuple[str, str]]:
    ratio = many["reruns_per_s"] / one["reruns_per_s"] if one["reruns_per_s"] else float("nan")
    def cpu(r: dict[str, object]) -> str:
        return (f"; server CPU {r['server_cpu_cores']} cores busy, {r['reruns_per_cpu_s']} reruns per CPU-second; "
                f"the clients {r['client_cpu_cores']} cores" if r.get("server_cpu_cores") is not None else "")

    rows = [
        ("One process, direct", f"{one['sessions']} sessions: {one['reruns_per_s']} reruns/s, change → chart p50 / "
                                f"p95 {one['p50_ms']} / {one['p95_ms']} ms, errors {one['errors']}{cpu(one)}"),
        (f"{args.processes} processes behind nginx (deploy/serve.sh)",
         f"{many['sessions']} sessions: {many['reruns_per_s']} reruns/s, p50 / p95 {many['p50_ms']} / "
         f"{many['p95_ms']} ms, errors {many['errors']}{cpu(many)}"),
        ("Throughput ratio (proxy / one process)" + (": not the capacity ratio, the killed process's sessions moved "
                                                     "to the other one for the rest of the run" if many.get("killed")
                                                     else ""), f"{ratio:.2f}"),
    ]
    for up, row in many["per_process"].items():
        rows.append((f"  process {up}", f"{row['sessions']} sessions, {row['reruns']} reruns, {row['reruns_per_s']}/s"))
    if many.get("killed"):
        k = many["killed"]
        rows.append((f"Process on port {k['port']} killed ~{k['at_s']:g} s in (restarted by serve.sh)",
                     f"{many['lost']} sessions dropped: {many['resumed']} resumed / {many['reloaded']} reloaded from "
                     f"their URL / {many['state_lost']} lost their state / {many['never_back']} never back"))
        rows.append(("Errors besides those drops", str(_errors_besides_drops(many))))
    return rows


def docs_section(rows: list[tuple[str, str]], args: argparse.Namespace) -> str:
    cmd = ".venv/bin/python bench/multi_process.py " + " ".join(
        [f"--processes {args.processes}", f"--sessions {args.sessions}", f"--duration {args.duration:g}"]
        + ([f"--think-ms {args.think_ms}"] if args.think_ms != 250 else [])
        + ([f"--reruns {args.reruns}"] if args.reruns != "full" else [])
        + ([f"--kill-at {args.kill_at:g}"] if args.kill_at else []) + (["--fresh-clone"] if args.fresh_clone else [])
        + ["--write-docs"])
    head = (f"Measured {time.strftime('%Y-%m-%d %H:%M')} on this machine ({os.cpu_count()} cores, load average "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; servers, nginx and clients share them); "
            f"reproduce with `{cmd}`.")
    return "\n".join([head, "", "| Multi-process run | Value |", "|---|---|", *(f"| {k.strip()} | {v} |" for k, v in rows)])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"one process, {args.sessions} sessions", file=sys.stderr)
    stats, elapsed = load_test.run(_load_args(args, args.sessions, None))
    one = load_test.report(stats, elapsed, _load_args(args, args.sessions, None))
    print(f"{args.processes} processes behind nginx, {args.sessions * args.processes} sessions", file=sys.stderr)
    many = proxy_run(args)
    rows = table(one, many, args)
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    if args.json:
        print(json.dumps({"one": one, "proxy": many}))
    if args.write_docs:
        replace_section(DOC, SECTION + ("-kill" if args.kill_at else ""), docs_section(rows, args))
        print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0 if one["errors"] == 0 and _errors_besides_drops(many) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
