"""Check that fake tracing measures exactly what a real CPU run measures.

For a spread of calibration cases (every family, full/LoRA, each precision, checkpointing on/off, eager/SDPA)
the token count and vocabulary are shrunk so that a real CPU step is cheap, then the case is traced twice:
under FakeTensorMode and for real (real tensors, same MemTracker).  Every byte count must agree.

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.selfcheck        # ~2-3 minutes
"""

from __future__ import annotations

import copy
import sys

from calibration.cases import full_config, get_cases
from calibration.trace import trace_case

_KEYS = ("peak_bytes", "first_step_peak_bytes", "params_total", "params_trainable", "optimizer_state_bytes")


def _shrink(case: dict) -> dict:
    c = copy.deepcopy(case)
    c["id"] = c["id"] + "-small"
    c["setup"]["batch"] = min(2, c["setup"]["batch"])
    c["setup"]["seq_len"] = min(256, c["setup"]["seq_len"])
    cfg = c["config"]
    if cfg["vocab_size"] > 4000:
        spec = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
        spec["vocab_size"] = 4000
        c["config"] = full_config(c["family"], spec)
    c.pop("mode", None)
    return c


def pick_cases() -> list[dict]:
    cases = [c for c in get_cases() if "real_cpu_run" not in c["tags"]]
    picked, seen = [], set()
    for c in cases:
        s = c["setup"]
        key = (c["family"], s["method"], s["grad_ckpt"], s["attention"])
        if key in seen:
            continue
        seen.add(key)
        picked.append(c)
    # make sure every precision appears at least once per method
    for c in cases:
        s = c["setup"]
        if not any(p["setup"]["method"] == s["method"] and p["setup"]["precision"] == s["precision"]
                   for p in picked):
            picked.append(c)
    return [_shrink(c) for c in picked]


def main() -> int:
    bad = 0
    cases = pick_cases()
    print(f"{len(cases)} cases, fake vs real")
    for case in cases:
        fake = trace_case(dict(case, mode="fake"))["measured"]
        real = trace_case(dict(case, mode="real"))["measured"]
        diffs = [k for k in _KEYS if fake[k] != real[k]]
        for name in ("after_forward", "after_backward", "after_step"):
            if fake["snapshots"][name] != real["snapshots"][name]:
                diffs.append(name)
        if fake["peak_by_category"] != real["peak_by_category"]:
            diffs.append("peak_by_category")
        status = "OK  " if not diffs else "DIFF"
        bad += bool(diffs)
        print(f"{status} {case['id']:70s} peak {fake['peak_bytes']:>12,d} real {real['peak_bytes']:>12,d}"
              + (f"  differs: {diffs}" if diffs else ""), flush=True)
    print(f"{len(cases) - bad} of {len(cases)} identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
