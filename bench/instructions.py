"""Instructions per page rerun, counted by valgrind's callgrind: a figure other work on the machine cannot move,
for comparing a change with the code before it on a busy machine (timings there swing by 2x).

Each checkout runs in one Python process under callgrind: every page is opened with AppTest as a running
server runs it (bench.common.as_a_running_server), warmed up with 3 reruns, then rerun --runs times after a
batch change (a full rerun, as bench/run.py's page section does) between a zero and a dump of callgrind's
counters requested from outside (callgrind_control), so each dump holds exactly those reruns.

Usage:
  .venv/bin/python bench/instructions.py                               # this checkout, 10 reruns per page
  .venv/bin/python bench/instructions.py --app before=../old-checkout  # and another checkout, side by side

Needs valgrind (Debian: apt-get install -y valgrind). Slow: callgrind runs Python about 50x slower (a few minutes
per checkout; the checkouts run at the same time). Prints millions of instructions per rerun; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, OneLineParser, in_range  # noqa: E402

PAGES = ("pages/calculator.py", "pages/compare.py", "pages/fits.py", "pages/sizes.py", "pages/scale.py",
         "pages/oom.py", "pages/how.py")


def _child(root: str, sync: str, runs: int) -> None:
    """Inside callgrind: each page warmed up, then `runs` reruns between two handshakes with the parent."""
    import logging

    from bench.common import as_a_running_server  # this checkout's harness, imported before the app's path

    sys.path.insert(0, root)
    logging.disable(logging.WARNING)
    from streamlit.testing.v1 import AppTest

    def handshake(tag: str) -> None:
        Path(sync, f"{tag}.ready").touch()
        while not Path(sync, f"{tag}.go").exists():
            time.sleep(0.05)

    with as_a_running_server():
        for page in PAGES:
            if not (Path(root) / page).is_file():  # an older checkout without this page: nothing to count
                Path(sync, f"{Path(page).stem}.missing").touch()
                handshake(f"{Path(page).stem}-start")
                handshake(f"{Path(page).stem}-end")
                continue
            at = AppTest.from_file(str(Path(root) / "app.py"), default_timeout=900).run()
            if page != PAGES[0]:
                at.switch_page(page).run()
            for i in range(3 + runs):
                if i == 3:
                    handshake(f"{Path(page).stem}-start")  # the parent zeroes the counters
                at.slider(key="batch").set_value(2 if i % 2 == 0 else 1)
                at.run()
                if at.exception:
                    raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")
            handshake(f"{Path(page).stem}-end")  # the parent dumps them


def _count(root: Path, runs: int, work: Path) -> subprocess.Popen:
    work.mkdir(parents=True)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out", "--dump-instr=no",
           sys.executable, str(Path(__file__).resolve()), "--child", str(root), str(work), str(runs)]
    return subprocess.Popen(cmd, cwd=work, stdout=(work / "log.txt").open("w"), stderr=subprocess.STDOUT)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"the counted process exited ({proc.returncode}); see {path.parent / 'log.txt'}")
        time.sleep(0.2)


def _summary(work: Path, page: str) -> float:
    """The instructions of one dump (its 'summary:' line); NaN for a page the checkout does not have."""
    if (work / f"{page}.missing").exists():
        return float("nan")
    dumps = [p for p in work.glob("callgrind.out.*") if f"Trigger: dump {page}" in p.read_text(errors="replace")[:2000]]
    match = re.search(r"^summary: (\d+)", dumps[0].read_text(errors="replace"), re.MULTILINE)
    return int(match.group(1)) if match else 0


def count(apps: dict[str, Path], runs: int) -> dict[str, dict[str, float]]:
    """{checkout name: {page: millions of instructions per rerun}}, the checkouts counted at the same time."""
    with tempfile.TemporaryDirectory(prefix="wif-callgrind-") as tmp:
        procs = {name: _count(root, runs, Path(tmp) / name) for name, root in apps.items()}
        try:
            for page in PAGES:
                stem = Path(page).stem
                for name, proc in procs.items():
                    work = Path(tmp) / name
                    _wait_for(work / f"{stem}-start.ready", proc)
                    subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
                    (work / f"{stem}-start.go").touch()
                for name, proc in procs.items():
                    work = Path(tmp) / name
                    _wait_for(work / f"{stem}-end.ready", proc)
                    subprocess.run(["callgrind_control", "-d", stem, str(proc.pid)], check=True, capture_output=True)
                    (work / f"{stem}-end.go").touch()
            for proc in procs.values():
                proc.wait(timeout=600)
            return {name: {page: _summary(Path(tmp) / name, Path(page).stem) / runs / 1e6 for page in PAGES}
                    for name in apps}
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()


def _app(text: str) -> tuple[str, Path]:
    name, _, path = text.partition("=")
    root = Path(path).resolve()
    if not name or not (root / "app.py").is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=CHECKOUT (a folder with app.py), got {text!r}")
    return name, root


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[2], int(argv[3]))
        return 0
    p = OneLineParser(prog="bench/instructions.py", description="Instructions per page rerun (callgrind).")
    p.add_argument("--runs", type=in_range(int, 1, 100), default=10, help="reruns counted per page (default 10)")
    p.add_argument("--app", type=_app, action="append", default=[], help="NAME=CHECKOUT: count another checkout too")
    args = p.parse_args(argv)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            p.error(f"{tool} is not installed (Debian: apt-get install -y valgrind)")
    apps = {"this": ROOT, **dict(args.app)}
    result = count(apps, args.runs)
    print(f"\n== Instructions per full page rerun (millions; callgrind, {args.runs} reruns per page; "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}) ==")
    names = list(apps)
    print(f"  {'page':<24}" + "".join(f"{n:>12}" for n in names)
          + ("".join(f"{'this/' + n:>14}" for n in names[1:])))
    for page in PAGES:
        row = [result[n][page] for n in names]
        print(f"  {page:<24}" + "".join(f"{v:12.1f}" for v in row)
              + "".join(f"{row[0] / v:14.2f}" if v == v and v else f"{'':>14}" for v in row[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
