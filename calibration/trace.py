"""Trace the tensor-level memory peak of real Hugging Face training steps: the command around the tracer
(exact/trace.py, which the exact trace runs too), printing each case's breakdown and writing the traced cases.

Usage (developer tool; needs .venv-cal, see calibration/README.md):

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.trace CASE.json [-o OUT.json]
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.trace --case CASE_ID [-o OUT.json]

CASE.json holds one case dict (or a list of them); see calibration/cases.py for the schema.
"""

from __future__ import annotations

import argparse
import json
import sys

from exact.trace import trace_case


def _fmt(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case_json", nargs="?", help="JSON file with one case dict or a list of them")
    ap.add_argument("--case", action="append", default=[], help="case id from calibration.cases (repeatable)")
    ap.add_argument("-o", "--out", help="write the traced case(s) here as JSON")
    args = ap.parse_args(argv)
    cases: list[dict] = []
    if args.case_json:
        with open(args.case_json) as f:
            data = json.load(f)
        cases.extend(data if isinstance(data, list) else [data])
    if args.case:
        from calibration.cases import get_cases

        by_id = {c["id"]: c for c in get_cases()}
        cases.extend(by_id[i] for i in args.case)
    if not cases:
        ap.error("give a case JSON file or --case ID")
    results = []
    for case in cases:
        r = trace_case(case)
        m = r["measured"]
        print(
            f"{r['id']}: peak {_fmt(m['peak_bytes'])} ({m['mode']}, {m['peak_phase']}"
            f"/{m['peak_region']} @ {m['peak_module']}), first step {_fmt(m['first_step_peak_bytes'])}, {m['trace_seconds']} s"
        )
        for k, v in m["peak_by_category"].items():
            if v:
                print(f"    {k:18s} {_fmt(v)}")
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results if len(results) > 1 else results[0], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
