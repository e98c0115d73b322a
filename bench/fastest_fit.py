"""Benchmark of the time in the advice (issue 30): prints numbers, never asserts them.

For each case: the fastest-fit solver alone and advise() (remedies with their time factors, the solvers) without and
with the fastest fit, from cold caches (the estimate and time caches cleared: a first visit) and warm (the same call
again: a calculator rerun that changed nothing the advice reads), as median milliseconds over several runs, and the
detailed estimates the cold call computes.

    .venv/bin/python bench/fastest_fit.py            # about 20 s on 2 busy cores
    .venv/bin/python bench/fastest_fit.py --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from estimator.advice.advise import advise  # noqa: E402
from estimator.advice.fastest import Constraints, fastest_fit  # noqa: E402
from estimator.job.stack import resolve_setup  # noqa: E402
from estimator.job.trainer import TrainerSetup  # noqa: E402
from estimator.memory.price import detailed_estimate, estimate_trainer  # noqa: E402
from estimator.models.presets import load_preset  # noqa: E402
from estimator.options.devices import get_device  # noqa: E402
from estimator.speed import price as time_price  # noqa: E402

CASES = [
    ("Llama-3.1-8B LoRA 8 × 4,096, RTX 4090", "llama-3.1-8b", {"batch": 8, "seq_len": 4096}, "rtx-4090", None,
     Constraints()),
    ("  the same, method may change", "llama-3.1-8b", {"batch": 8, "seq_len": 4096}, "rtx-4090", None,
     Constraints(change_method=True)),
    ("Llama-3.1-8B LoRA defaults, RTX 4090", "llama-3.1-8b", {}, "rtx-4090", None, Constraints()),
    ("Llama-3.1-8B full, A100 80GB", "llama-3.1-8b", {"method": "full"}, "a100-80gb", None, Constraints()),
    ("Llama-3.1-8B full batch 4, RTX 4090, method may change", "llama-3.1-8b", {"method": "full", "batch": 4},
     "rtx-4090", None, Constraints(change_method=True)),
    ("  the same, up to 8 GPUs", "llama-3.1-8b", {"method": "full", "batch": 4}, "rtx-4090", None,
     Constraints(max_gpus=8)),
    ("  the same, method and up to 64 GPUs", "llama-3.1-8b", {"method": "full", "batch": 4}, "rtx-4090", None,
     Constraints(change_method=True, max_gpus=64)),
    ("Llama-3.1-70B full batch 8, H100, up to 64 GPUs", "llama-3.1-70b", {"method": "full", "batch": 8}, "h100-80gb",
     None, Constraints(max_gpus=64)),
    ("Llama-3.1-8B MLX-LM defaults, 36 GB Mac", "llama-3.1-8b", {"stack": "mlx", "backend": "metal"}, "laptop-36gb",
     None, Constraints()),
    ("Qwen2.5-7B GRPO batch 16, A100 40GB", "qwen2.5-7b", {"trainer": "grpo", "batch": 16}, "a100-40gb", "grpo",
     Constraints()),
]


def clear() -> None:
    detailed_estimate.cache_clear()
    estimate_trainer.cache_clear()
    time_price._cached.cache_clear()


def median_ms(fn, runs: int, cold: bool) -> float:
    times = []
    if not cold:
        fn()
    for _ in range(runs):
        if cold:
            clear()
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"{'case':<56} {'solver':>16} {'advise':>16} {'advise+fastest':>16} {'estimates':>9}  answer")
    print(f"{'':<56} {'cold / warm ms':>16} {'cold / warm ms':>16} {'cold / warm ms':>16} {'(cold)':>9}")
    for name, preset, kwargs, device_id, trainer_id, constraints in CASES:
        kwargs = dict(kwargs)
        stack = kwargs.pop("stack", "trl")
        spec, device = load_preset(preset), get_device(device_id)
        setup = resolve_setup(stack, **kwargs)
        tr = TrainerSetup(trainer_id) if trainer_id else None

        job = (spec, setup, device, tr)

        def solve(job=job, constraints=constraints):
            return fastest_fit(*job, constraints)

        def plain(job=job):
            return advise(*job)

        def full(job=job, constraints=constraints):
            return advise(*job, fastest=constraints)

        cells = [f"{median_ms(f, args.runs, True):7.1f} / {median_ms(f, args.runs, False):5.1f}"
                 for f in (solve, plain, full)]
        clear()
        solve()
        counted = detailed_estimate.cache_info().misses + estimate_trainer.cache_info().misses
        fit = solve()
        answer = ("none" if fit is None else ", ".join(f"{c.key} {c.before}→{c.after}" for c in fit.changes)
                  or "as it is") + (f"; {fit.tokens_per_second:,.0f} tok/s" if fit else "")
        print(f"{name:<56} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {counted:>9}  {answer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
