"""Where does a page's rerun spend its time? Runs a page script under cProfile, repeatedly.

The page runs inside AppTest (the real script runner, so widgets, the URL and st.navigation behave as in
the app), as a running server runs it (bench.common.as_a_running_server: compiled scripts kept, legacy pages
mode left); cProfile is enabled in the script thread through threading.setprofile, so the profile covers the
page script itself plus Streamlit's element serialisation, not the test harness.

Usage:
  .venv/bin/python bench/profile_page.py pages/fits.py            # top 25 by cumulative time
  .venv/bin/python bench/profile_page.py pages/scale.py --runs 10 --sort tottime --top 40
  .venv/bin/python bench/profile_page.py pages/fits.py --fresh   # every rerun a new batch: nothing cached
  .venv/bin/python bench/profile_page.py estimate                  # the estimator alone
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, as_a_running_server  # noqa: E402

APP = ROOT / "app.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        sys.stderr.write(f"bench/profile_page.py: error: {message}\n")
        raise SystemExit(2)


def profile_estimate(runs: int) -> cProfile.Profile:
    from estimator import TrainingSetup, estimate, load_preset

    spec, setup = load_preset("llama-3.1-8b"), TrainingSetup(method="lora")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs * 1000):
        estimate(spec, setup)
    prof.disable()
    return prof


def profile_page(page: str, runs: int, fresh: bool = False) -> cProfile.Profile:
    logging.disable(logging.WARNING)
    from streamlit.testing.v1 import AppTest

    with as_a_running_server():  # compiled scripts kept, legacy pages mode left, as on a server
        return _profile(AppTest.from_file(str(APP), default_timeout=120), page, runs, fresh)


def _profile(at, page: str, runs: int, fresh: bool) -> cProfile.Profile:  # noqa: ANN001 - an AppTest
    at.run()
    if page != "pages/calculator.py":
        at.switch_page(page).run()
    prof = cProfile.Profile()
    local = threading.local()

    def tracer(frame, event, arg):  # first call in a new thread: hand over to cProfile for that thread
        if not getattr(local, "on", False):
            local.on = True
            threading.setprofile(None)
            sys.setprofile(None)
            prof.enable()
        return None

    for i in range(runs):
        at.slider(key="batch").set_value(40 + i if fresh else 2 if i % 2 == 0 else 1)
        threading.setprofile(tracer)
        local.on = False
        at.run()
        threading.setprofile(None)
    return prof


def main(argv: list[str] | None = None) -> int:
    p = _Parser(description="Profile one page's rerun (or the estimator) with cProfile.")
    p.add_argument("target", help="a page path such as pages/fits.py, or 'estimate'")
    p.add_argument("--runs", type=int, default=5, help="reruns to profile (default 5)")
    p.add_argument("--sort", choices=["cumulative", "tottime"], default="cumulative")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--fresh", action="store_true",
                   help="a batch value not seen before on every rerun (default: 2 and 1 in turn, mostly cached)")
    args = p.parse_args(argv)
    if args.runs < 1 or args.top < 1:
        p.error("--runs and --top must be at least 1")
    if args.target == "estimate":
        prof = profile_estimate(args.runs)
    else:
        if not (ROOT / args.target).is_file():
            p.error(f"no such page: {args.target}")
        prof = profile_page(args.target, args.runs, args.fresh)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
