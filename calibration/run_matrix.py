"""Trace every calibration case and write validation/data/fixtures.json.

Regenerate (from the repository root, with the calibration venv; ~20-25 minutes on 2 cores for all 186 cases,
~16 of them for the 84 real-width "rw-" cases):

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.run_matrix            # 2 worker processes
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.run_matrix -j 1       # serial
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.run_matrix --only llama --out /tmp/llama.json
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.run_matrix --only-prefix rw- --merge   # new cases only

``--merge`` traces only the selected cases and merges them into the existing output file: the other entries are
kept byte-for-byte as stored (not re-traced), traced ones replace entries with the same id, and the file is
written in ``get_cases()`` order (entries whose id is no longer in the matrix are dropped, with a warning).

The .venv-cal environment: ``python3 -m venv .venv-cal && .venv-cal/bin/pip install -r
requirements-calibration.txt`` (torch 2.13.0 CPU build, transformers, peft, accelerate).

The output is a JSON list of the case dicts from calibration/cases.py, each with ``measured`` (see
exact/trace.py and calibration/README.md) and ``tool`` (torch/transformers/peft versions) added.  Apart
from the tool versions it is deterministic: timings are printed, not stored.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "validation" / "data" / "fixtures.json"


def _worker(case: dict) -> tuple[dict | None, str | None, float]:
    # one torch thread per worker: two workers on two cores
    import torch

    torch.set_num_threads(1)
    from exact.trace import trace_case

    t0 = time.perf_counter()
    try:
        res = trace_case(case)
        return res, None, time.perf_counter() - t0
    except Exception:  # noqa: BLE001
        return None, f"{case['id']}: {traceback.format_exc()}", time.perf_counter() - t0


def _mib(n: int) -> str:
    return f"{n / 2**20:10.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"output JSON (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--only", action="append", default=[], help="substring filter on case ids (repeatable)")
    ap.add_argument("--only-prefix", action="append", default=[],
                    help="prefix filter on case ids, e.g. rw- (repeatable; combined with --only by AND)")
    ap.add_argument("--merge", action="store_true",
                    help="merge the traced cases into the existing --out file instead of overwriting it")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from calibration.cases import get_cases

    all_cases = get_cases()
    cases = all_cases
    if args.only:
        cases = [c for c in cases if any(s in c["id"] for s in args.only)]
    if args.only_prefix:
        cases = [c for c in cases if any(c["id"].startswith(p) for p in args.only_prefix)]
    print(f"tracing {len(cases)} cases with {args.jobs} process(es)", flush=True)

    t_start = time.perf_counter()
    results: dict[str, dict] = {}
    timings: dict[str, float] = {}
    errors: list[str] = []
    if args.jobs <= 1:
        it = map(_worker, cases)
        pool = None
    else:
        pool = mp.get_context("spawn").Pool(args.jobs)
        it = pool.imap_unordered(_worker, cases)
    for res, err, dt in it:
        if err:
            errors.append(err)
            print("FAILED", err.splitlines()[0], flush=True)
            continue
        assert res is not None
        m = res["measured"]
        results[res["id"]] = res
        timings[res["id"]] = dt
        print(
            f"{dt:6.1f}s {m['mode']:4s} peak {_mib(m['peak_bytes'])} MiB  {m['peak_phase']:<18s} {res['id']}",
            flush=True,
        )
    if pool is not None:
        pool.close()
        pool.join()
    wall = time.perf_counter() - t_start

    for r in results.values():
        r["measured"].pop("trace_seconds", None)
    out = Path(args.out)
    if args.merge and out.exists():
        with open(out) as f:
            stored = {r["id"]: r for r in json.load(f)}
        known = {c["id"] for c in all_cases}
        dropped = sorted(set(stored) - known)
        if dropped:
            print(f"warning: dropping {len(dropped)} stored case(s) no longer in the matrix: {dropped}", flush=True)
        merged = {**stored, **results}
        ordered = [merged[c["id"]] for c in all_cases if c["id"] in merged]  # get_cases() order
        print(f"merge: {len(results)} traced, {len(ordered) - len(results)} kept from {out}", flush=True)
    else:
        ordered = [results[c["id"]] for c in cases if c["id"] in results]  # keep the deterministic case order
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump(ordered, f, indent=1, sort_keys=False)
        f.write("\n")

    # ---- summary ---------------------------------------------------------------------------------
    print()
    print(f"wrote {len(ordered)} traced cases to {out}")
    print(f"wall time {wall:.1f} s, summed trace time {sum(timings.values()):.1f} s, "
          f"slowest {max(timings.values(), default=0):.1f} s")
    by = collections.Counter((r["family"], r["setup"]["method"], r["setup"]["precision"]) for r in ordered)
    fams = sorted({k[0] for k in by})
    cols = [(m, p) for m in ("full", "lora") for p in ("bf16", "mixed", "fp32")]
    print(f"{'family':10s} " + " ".join(f"{m}/{p:5s}" for m, p in cols) + "  total")
    for fam in fams:
        row = [by.get((fam, m, p), 0) for m, p in cols]
        print(f"{fam:10s} " + " ".join(f"{n:10d}" for n in row) + f"  {sum(row):5d}")
    losses = collections.Counter(
        (r["setup"].get("loss") or "standard") + ("+offload" if r["setup"].get("offload_activations") else "")
        for r in ordered
    )
    print("losses:", dict(sorted(losses.items())))
    modes = collections.Counter(r["measured"]["mode"] for r in ordered)
    phases = collections.Counter(r["measured"]["peak_phase"] for r in ordered)
    print("modes:", dict(modes), " peak phases:", dict(phases))
    if errors:
        print(f"{len(errors)} case(s) FAILED:")
        for e in errors:
            print(e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
