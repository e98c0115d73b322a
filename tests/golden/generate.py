"""The golden file: at least 500 CLI runs (every preset family × stack × method × trainer, with and without
--advice, several devices), text and JSON, so a refactor can show it changed no number.

    .venv/bin/python -m tests.golden.generate            # rewrite tests/golden/cli.jsonl
    .venv/bin/python -m tests.golden.generate --check    # compare, print the cases that differ

Each line: {"argv": [...], "rc": N, "out": "...", "err": "..."}; runs in-process (estimator.cli.main)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).with_name("cli.jsonl")

STACKS = ("trl", "trainer", "unsloth", "axolotl", "torchtune", "litgpt", "plain")
MAC_DEVICES = ("laptop-36gb", "mac-64gb", "mac-16gb", "mac-128gb")  # the MLX-LM stack's own loop (issue 21)
METHODS = ("full", "lora", "qlora")
TRAINERS = ("sft", "dpo", "orpo", "simpo", "kto", "grpo", "reward")
DEVICES = ("rtx-4090", "h100-80gb", "laptop-36gb", "t4", "mac-64gb", "h200")


def _presets() -> list[tuple[str, str]]:
    index = json.loads((Path(__file__).parents[2] / "estimator" / "models" / "presets" / "index.json").read_text())
    rows = index if isinstance(index, list) else index.get("presets", index)
    return [(r["id"], r["family"]) for r in rows]


def cases() -> list[list[str]]:
    """Deterministic argv lists: one preset per family over stacks × methods, every preset once, trainers."""
    out: list[list[str]] = []
    presets = _presets()
    seen: dict[str, str] = {}
    for pid, fam in presets:
        seen.setdefault(fam, pid)
    fams = sorted(seen.items())
    i = 0
    for _fam, pid in fams:  # family × stack × method, devices and advice rotating
        for stack in STACKS:
            for method in METHODS:
                dev = DEVICES[i % len(DEVICES)]
                argv = ["--model", pid, "--stack", stack, "--method", method, "--device", dev]
                if i % 2 == 0:
                    argv.append("--advice")
                if i % 3 == 0:
                    argv.append("--json")
                out.append(argv)
                i += 1
    for j, (_fam, pid) in enumerate(fams):  # issue 21: MLX-LM per family × method on the Macs (refusals included)
        for k, method in enumerate(METHODS):
            argv = ["--model", pid, "--stack", "mlx", "--method", method,
                    "--device", MAC_DEVICES[(3 * j + k) % len(MAC_DEVICES)]]
            argv += ["--advice"] if (j + k) % 2 == 0 else []
            argv += ["--json"] if (j + k) % 3 == 0 else []
            out.append(argv)
    for pid, _ in presets:  # every preset, default setup, JSON with advice and text
        out.append(["--model", pid, "--device", "h100-80gb", "--advice", "--json"])
        out.append(["--model", pid, "--batch", "4", "--seq-len", "4096", "--device", "rtx-4090"])
    for _fam, pid in fams[:12]:  # trainers × method
        for trainer in TRAINERS:
            for method in ("lora", "full"):
                dev = DEVICES[i % len(DEVICES)]
                argv = ["--model", pid, "--trainer", trainer, "--method", method, "--device", dev]
                if trainer in ("grpo", "kto"):
                    argv += ["--batch", "8"]
                argv += ["--advice"] if i % 2 else []
                argv += ["--json"] if i % 3 != 1 else []
                out.append(argv)
                i += 1
    extras = [
        ["--size", "7", "--rule", "seed", "--device", "laptop-36gb"],
        ["--size", "13", "--method", "full", "--rule", "seed", "--json"],
        ["--size", "70", "--method", "full", "--gpus", "16", "--sharding", "zero3", "--device", "h100-80gb"],
        ["--model", "llama-3.1-70b", "--method", "full", "--gpus", "16", "--sharding", "zero3",
         "--device", "h100-80gb", "--json", "--advice"],
        ["--model", "llama-3.1-8b", "--batch", "8", "--seq-len", "4096", "--device", "rtx-4090", "--advice", "--json"],
        ["--model", "llama-3.1-8b", "--batch", "8", "--seq-len", "4096", "--device", "rtx-4090", "--advice"],
        ["--model", "qwen2.5-0.5b", "--trainer", "dpo", "--device", "h200", "--seq-len", "8", "--advice", "--json"],
        ["--model", "qwen2.5-7b", "--trainer", "grpo", "--device", "h100-80gb"],
        ["--model", "qwen2.5-7b", "--trainer", "grpo", "--batch", "8", "--generation", "vllm-colocate",
         "--device", "h100-80gb", "--json", "--advice"],
        ["--model", "gemma-3-4b", "--image-tokens", "256", "--train-tower", "--device", "rtx-4090", "--json"],
        ["--model", "gemma-3-4b", "--train-tower", "--device", "rtx-4090", "--json"],
        ["--model", "gemma-3-4b", "--method", "full", "--train-tower", "--device", "h100-80gb", "--json"],
        ["--model", "qwen3.5-27b", "--train-tower", "--method", "full", "--device", "h200", "--json"],
        ["--model", "llama-4-scout", "--device", "h200", "--json"],
        ["--size", "7", "--device", "24gb"],
        ["--model", "llama-3-8b"],
        ["--model", "llama-3.1-8b", "--sharding", "zero3", "--device", "rtx-4090"],
        ["--model", "llama-3.1-8b", "--advice"],
        ["--model", "llama-3.1-8b", "--advice", "--rule", "seed", "--device", "rtx-4090"],
        ["--model", "llama-3.1-8b", "--optimizer", "adamw_8bit", "--grad-ckpt", "--loss", "chunked",
         "--device", "a100-40gb", "--json"],
        ["--model", "llama-3.1-8b", "--stack", "torchtune", "--method", "full", "--compile", "--optimizer-in-bwd",
         "--device", "a100-80gb", "--json"],
        ["--model", "llama-3.1-8b", "--offload-activations", "--device", "rtx-4090"],
        ["--model", "llama-3.1-8b", "--device", "custom", "--capacity", "20", "--unified", "--advice"],
        ["--model", "llama-3.1-8b", "--device", "4080", "--json"],
        ["--model", "mixtral-8x7b", "--method", "qlora", "--device", "h100-80gb", "--advice", "--json"],
        ["--list-presets", "--json"], ["--list-devices"],
        # issue 21: MLX-LM at its defaults on a Mac, its quantisation modes, LoRA layers on a PEFT stack, MPS
        ["--model", "llama-3.1-8b", "--device", "laptop-36gb", "--advice", "--json"],
        ["--model", "llama-3.1-8b", "--device", "laptop-36gb", "--method", "qlora", "--batch", "1"],
        ["--model", "qwen2.5-7b", "--stack", "mlx", "--method", "qlora", "--quant", "mxfp4", "--device", "mac-64gb",
         "--json"],
        ["--model", "qwen3-8b", "--stack", "mlx", "--dora", "--grad-ckpt", "--lora-layers", "8", "--device",
         "mac-32gb", "--advice"],
        ["--model", "llama-3.2-1b", "--stack", "mlx", "--method", "full", "--device", "h100-80gb", "--json"],
        ["--model", "llama-3.1-8b", "--stack", "trl", "--lora-layers", "8", "--no-grad-ckpt", "--device",
         "rtx-4090", "--json"],
        ["--model", "llama-3.1-8b", "--stack", "trl", "--device", "mac-64gb", "--method", "qlora", "--json"],
        ["--model", "llama-3.1-8b", "--stack", "mlx", "--device", "mi300x"],
        # issue 30: the run's time and cost, a custom device's figures, the fastest fit's constraints
        ["--model", "llama-3.1-8b", "--device", "rtx-4090", "--tokens", "50000000", "--price-per-gpu-hour", "0.7"],
        ["--model", "llama-3.1-8b", "--device", "rtx-4090", "--tokens", "50000000", "--epochs", "2",
         "--price-per-gpu-hour", "0.7", "--json"],
        ["--model", "qwen2.5-7b", "--method", "full", "--gpus", "8", "--sharding", "zero3", "--device", "h100-80gb",
         "--examples", "20000", "--typical-len", "900", "--epochs", "3", "--price-per-gpu-hour", "2.5", "--json"],
        ["--model", "llama-3.1-8b", "--device", "custom", "--capacity", "30", "--device-tflops", "165",
         "--device-bandwidth", "1008", "--tokens", "1000000000", "--advice", "--json"],
        ["--model", "llama-3.1-8b", "--method", "full", "--batch", "4", "--device", "rtx-4090", "--advice",
         "--allow-method-change"],
        ["--model", "llama-3.1-8b", "--method", "full", "--batch", "4", "--device", "rtx-4090", "--advice",
         "--allow-more-gpus", "8", "--json"],
        ["--model", "llama-3.1-70b", "--method", "full", "--batch", "8", "--device", "h100-80gb", "--advice",
         "--allow-method-change", "--allow-more-gpus", "64"],
        ["--model", "llama-3.1-8b", "--device", "laptop-36gb", "--examples", "5000", "--advice"],
        ["--model", "llama-3.1-8b", "--device", "rtx-4090", "--tokens", "0"],
        ["--model", "llama-3.1-70b", "--method", "qlora", "--device", "rtx-3060", "--tokens", "1e14"],
    ]
    out.extend(extras)
    return out


def run(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    from estimator.report.cli import main

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # a traceback in the CLI: recorded as such
            rc, err = 99, io.StringIO(f"{type(exc).__name__}: {exc}")
    return {"argv": argv, "rc": rc, "out": out.getvalue(), "err": err.getvalue()}


def main(args: list[str]) -> int:
    rows = [run(a) for a in cases()]
    if "--check" not in args:
        GOLDEN.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(f"{len(rows)} cases written to {GOLDEN}")
        return 0
    old = {json.dumps(r["argv"]): r for r in map(json.loads, GOLDEN.read_text().splitlines())}
    bad = [r for r in rows if old.get(json.dumps(r["argv"])) != r]
    for r in bad:
        print(" ".join(r["argv"]))
    print(f"{len(rows)} cases, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
