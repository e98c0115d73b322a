"""The host RAM a training process holds before it loads a model: Python with torch and the Hugging Face stack
imported. Each measurement runs in a fresh interpreter and reports its peak resident set (ru_maxrss), so one
import's memory is not hidden by another's; the estimator reads calibration/host_baseline.json
(estimator/memory/host.py HOST_IMPORT_BYTES).

    .venv-cal/bin/python -m calibration.host_baseline            # prints the table, writes host_baseline.json

The venv is requirements-calibration.txt's (torch 2.13.0 CPU build, transformers 5.24.0, trl 1.16.0, peft 0.21.2):
a CUDA build adds its own libraries and the CUDA context's host side, which this CPU machine cannot measure; the
estimator takes that part from a public measurement (pytorch/pytorch#106511)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).with_name("host_baseline.json")
IMPORTS = {
    "python": "pass",
    "torch": "import torch",
    "trl_stack": "import torch, transformers, peft, trl; from trl import SFTTrainer, SFTConfig; "
                 "from transformers import AutoModelForCausalLM; import peft.tuners.lora",
}
# mlx-lm's trainer, measured with the mlx venv's interpreter (requirements-mlx.txt) when it exists
MLX_IMPORTS = {
    "mlx_stack": "import mlx.core, mlx.nn, mlx.optimizers, mlx_lm; from mlx_lm import lora; "
                 "from mlx_lm.tuner import trainer, utils",
}
MLX_PYTHON = Path(__file__).resolve().parents[1] / ".venv-mlx" / "bin" / "python"
PROBE = "import resource\n{stmt}\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def measure(stmt: str, runs: int = 3, python: str = sys.executable) -> int:
    """Peak RSS in bytes of a fresh interpreter that runs `stmt` (the largest of `runs` tries; Linux: kB)."""
    peaks = []
    for _ in range(runs):
        out = subprocess.run([python, "-c", PROBE.format(stmt=stmt)], capture_output=True, text=True,
                             check=True)
        peaks.append(int(out.stdout.strip().splitlines()[-1]) * 1024)
    return max(peaks)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    found = {"python": platform.python_version(), "machine": platform.machine()}
    for name in ("torch", "transformers", "trl", "peft"):  # mlx and mlx-lm live in the mlx venv (requirements-mlx.txt)
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = "missing"
    return found


def main() -> int:
    rss = {name: measure(stmt) for name, stmt in IMPORTS.items()}
    if MLX_PYTHON.exists():
        rss |= {name: measure(stmt, python=str(MLX_PYTHON)) for name, stmt in MLX_IMPORTS.items()}
    doc = {"peak_rss_bytes": rss, "versions": versions(),
           "how": "fresh interpreter per row, ru_maxrss after the imports, largest of 3 runs"}
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    for name, value in rss.items():
        print(f"{name:<10} {value / 2**20:8.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
