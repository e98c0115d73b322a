"""Unsloth's accuracy: the model of Unsloth's step against (1) traces of Unsloth's own autograd code
(validation/data/unsloth_traces.json, made by calibration/unsloth_trace.py) and (2) the longest trainable lengths
Unsloth published, with the transformers + FlashAttention 2 columns of the same tables
(validation/data/unsloth_context_lengths.csv).

Pure Python (no torch). The published tables measured unsloth 2024.12 with Apple's Cut Cross-Entropy; the estimate
prices the current release (2026.10.9) by default, whose kernels keep less. So each published Unsloth point is checked
at the release it ran (estimator.memory.unsloth.model.published_setup: the setup installed at unsloth 2024.12.4, as
`--installed unsloth==2024.12.4` gives it), and the current release's answer is reported beside it; the HF + FA2
points are checked with the HF Trainer stack and checkpointing."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import replace
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from estimator import load_preset, spec_from_config
from estimator.advice.solvers import max_seq_len
from estimator.job.stack import resolve_setup
from estimator.memory.allocator import step_slack
from estimator.memory.price import detailed_estimate as estimate
from estimator.memory.unsloth.model import (
    ALLOCATOR_2024,
    allocator_for,
    phase_requests,
    published_setup,
    unsloth_path,
)
from estimator.memory.unsloth.step import estimate_for_path
from estimator.options.devices import get_device
from estimator.units import GiB

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "validation" / "data" / "unsloth_traces.json"
CONTEXT = ROOT / "validation" / "data" / "unsloth_context_lengths.csv"
REPLAYS = ROOT / "validation" / "data" / "allocator_replays.json"
TARGET_PCT = 15.0  # issue 21: the longest trainable length within 15 % of each published measured run
TRACE_TARGET_PCT = 1.0  # the traces run Unsloth's own code: the model should match them to within 1 %

# Checked points the model misses by more than TARGET_PCT, and why (each re-derived when the numbers change). With the
# allocator priced as the 2024 release ran it (expandable segments, estimator/memory/allocator.py) and each card's
# usable memory the total CUDA gives PyTorch (options/devices.py CUDA_TOTALS), the Unsloth points land within 15 %:
# at the published lengths the model leaves unused 0.35-0.5 GB of the 12-24 GB cards, 0.9-1.5 GB of the 40-80 GB ones
# (Llama 3.1 8B), 0.5 GB of the 48 GB one (Llama 3.3 70B), and is 0.12 GB over at 80 GB (70B, −0.5 %).
KNOWN_MISSES: dict[str, str] = {
    "uns-8b-08": "an 8 GB card is almost all fixed memory with the 2024.12 code (5.7 GB of weights, 0.55 GB of "
                 "per-layer RoPE caches, Cut Cross-Entropy's 1.05 GB head-gradient buffer at the loss backward): "
                 "8.35 GB at any length with the 0.5 GB CUDA context, above the 8.32 GB (7.75 GiB) CUDA gives an "
                 "RTX 4060, so the model fits no length (0.12 GB over at the published 2,972 tokens, where the loss "
                 "backward adds only 81 kB per token); and its column is a straight line in the cards' nominal sizes "
                 "(4,719 tokens per GB between every pair, published_lines): this length is the line's value at 8 GB, "
                 "not a run on an 8 GB card",
}


def _pct(x: float, ref: float) -> float:
    return 100.0 * (x - ref) / ref


# ------------------------------------------------------------------------------------------------------------------
# Traces
# ------------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _traces() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(TRACES.read_text())) if TRACES.exists() else ()


def trace_case_estimate(case: dict[str, Any]):
    """The estimate of one traced case, on the path the trace fixed (trace_case_path)."""
    return estimate_for_path(*trace_case_path(case))


def trace_rows() -> list[dict[str, Any]]:
    """Every Unsloth trace with the model's tensor peak next to the traced one."""
    rows = []
    for case in _traces():
        est = trace_case_estimate(case)
        measured = float(case["measured"]["peak_bytes"])
        rows.append({"id": case["id"], "measured_bytes": measured, "estimated_bytes": est.tensor_bytes,
                     "error_pct": _pct(est.tensor_bytes, measured), "peak_phase": est.peak_phase,
                     "host_bytes": float(case["measured"]["host_bytes"]), "fused": case["measured"]["fused"]})
    return rows


def trace_case_path(case: dict[str, Any]):
    """(spec, setup, path) of one traced case: the path the trace fixed (attention backend, double buffering, loss
    pass, checkpointing and loss kind)."""
    s = case["setup"]
    spec = spec_from_config(case["config"], name=case["id"])
    mode = s.get("checkpointing", "offload")
    setup = resolve_setup("unsloth", method=s["method"], lora_rank=s["lora_rank"],
                          lora_targets=tuple(s["lora_targets"]), batch=s["batch"], seq_len=s["seq_len"],
                          grad_ckpt=mode != "none", offload_activations=mode == "offload", loss=s.get("loss", "fused"))
    # the tracer's loss pass: flash_min_rows 0 is a card ≤ 24.5 GiB, 4096 a larger one
    capacity = 20 * GiB if s.get("flash_min_rows", 0) == 0 else 60 * GiB
    path = unsloth_path(spec, setup, capacity)
    padding_free = s.get("padding_free", True)
    path = replace(path, double_buffer=s.get("double_buffer", True) and path.offloaded,
                   attention="sdpa" if padding_free else "xformers", padding_free=padding_free)
    return spec, setup, path


# ------------------------------------------------------------------------------------------------------------------
# The caching allocator: replays of traced steps
# ------------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _replays() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(REPLAYS.read_text())) if REPLAYS.exists() else ()


def replay_rows() -> list[dict[str, Any]]:
    """Each full-depth step whose allocations were replayed through the caching allocator's rules
    (calibration/allocator_trace.py): the least memory above the tensors' peak it runs in under Unsloth's settings
    (current release and 2024.12) and PyTorch's defaults, beside the estimate's slack for the same step (expected and
    high under the current release's settings, expected under the 2024 settings)."""
    rows = []
    for case in _replays():
        spec, setup, path = trace_case_path(case)
        est = estimate_for_path(spec, setup, path)
        peak = next(p for p in est.phases if p.name == est.peak_phase)
        requests = phase_requests(spec, setup, path)(peak)
        grads = max(p.gradients for p in est.phases)
        current = step_slack(allocator_for(path), peak.total, requests, grads)
        old = step_slack(ALLOCATOR_2024, peak.total, requests, grads)
        r = case["replay"]
        rows.append({
            "id": case["id"], "layers": case["config"]["num_hidden_layers"], "tensor_peak": r["tensor_peak_bytes"],
            "trace_peak": case["trace_peak_bytes"], "estimated_tensor_peak": est.tensor_bytes,
            "replay_current": r["unsloth_current"]["slack_bytes"], "replay_2024": r["unsloth_2024"]["slack_bytes"],
            "replay_default": r["torch_default"]["slack_bytes"],
            "replay_default_pct": r["torch_default"]["slack_pct"],
            "expected": current.expected, "high": current.high, "expected_2024": old.expected,
        })
    return rows


# ------------------------------------------------------------------------------------------------------------------
# Published longest lengths
# ------------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _context() -> tuple[dict[str, str], ...]:
    with CONTEXT.open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def _setup(stack: str, r: dict[str, str]):
    kw: dict[str, Any] = {"method": "qlora", "lora_rank": int(r["lora_rank"]), "batch": int(r["batch"]),
                          "seq_len": 2048}
    if stack == "trainer":
        kw["grad_ckpt"] = True  # HF + FA2 ran with gradient checkpointing (the Trainer's default is off)
    return resolve_setup(stack, **kw)


def longest_unsloth(spec, setup, device) -> int | None:
    """The stack's answer, as the calculator gives it (the current release, priced on this card)."""
    return max_seq_len(spec, setup, device.usable_bytes,
                       lambda sp, st: estimate(sp, st, device.runtime_total_bytes))


def longest_published_code(spec, setup, device) -> int | None:
    """The same model at the release the published tables measured (published_setup: what `--installed
    unsloth==2024.12.4` gives), priced on this card as the calculator prices it."""
    return max_seq_len(spec, published_setup(setup), device.usable_bytes,
                       lambda sp, st: estimate(sp, st, device.runtime_total_bytes))


@lru_cache(maxsize=1)
def context_rows() -> tuple[dict[str, Any], ...]:
    """Every published point: the model's answer for the code it measured (checked rows), the current release's
    answer (Unsloth rows) and the errors."""
    rows = []
    for r in _context():
        spec = load_preset(r["config_id"])
        device = get_device(r["device"])
        published = int(r["published_tokens"])
        current = longest_unsloth(spec, _setup("unsloth", r), device) if r["framework"] == "unsloth" else None
        if r["check"] == "unsloth_2024":
            modelled = longest_published_code(spec, _setup("unsloth", r), device)
        elif r["check"] == "hf_fa2":
            modelled = max_seq_len(spec, _setup("trainer", r), device.usable_bytes)
        else:
            modelled = None
        error = _pct(modelled, published) if modelled else None
        rows.append({
            "id": r["id"], "model": r["model"], "framework": r["framework"], "gpu_gb": int(r["gpu_gb"]),
            "device": r["device"], "batch": int(r["batch"]), "published": published, "check": r["check"],
            "modelled": modelled, "error_pct": error,
            "current": current, "current_vs_published_pct": _pct(current, published) if current else None,
            "within_target": error is not None and abs(error) <= TARGET_PCT,
            "code": r["code"], "source": r["source_url"], "note": r["note"],
            "explanation": KNOWN_MISSES.get(r["id"], ""),
        })
    return tuple(rows)


# Successive slopes (tokens per nominal GB between neighbouring card sizes) that agree to within this: the column is a
# straight line in the cards' nominal sizes, which runs on real cards cannot give: their memory is not proportional
# to the name (an 8 GB RTX 4060 has 8,188 MiB, a 40 GB A100 40,960 MiB, an 80 GB H100 81,559 MiB), and each run's
# longest length moves with the allocator's blocks. Unsloth's April 2024 table, which says "Numbers are extrapolated
# based on experiments" (unsloth.ai/blog/long-context), is such a line.
LINE_SPREAD_PCT = 0.05


def published_lines() -> tuple[dict[str, Any], ...]:
    """Each published column of three or more card sizes (one model, framework and check), with the tokens it gains
    per GB between neighbouring sizes. A column whose slopes agree to within LINE_SPREAD_PCT is one line drawn
    through fewer runs: its points at the small cards are the line's, not runs on those cards. For a checked column,
    the model's gains between the same cards beside it."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in context_rows():
        groups.setdefault((r["model"], r["framework"], r["check"]), []).append(r)
    lines = []
    for (model, framework, check), rows in groups.items():
        rows = sorted(rows, key=lambda r: r["gpu_gb"])
        sizes = [r["gpu_gb"] for r in rows]
        if len(rows) < 3 or len(set(sizes)) < len(sizes):
            continue
        pairs = list(pairwise(rows))
        slopes = [(b["published"] - a["published"]) / (b["gpu_gb"] - a["gpu_gb"]) for a, b in pairs]
        mean = statistics.mean(slopes)
        spread = 100.0 * (max(slopes) - min(slopes)) / mean
        # the model's gains between the cards where it gives a length (an 8 GB card the model fits nothing on drops)
        fitted = [r for r in rows if r["modelled"]]
        modelled = None
        if len(fitted) >= 2 and check != "not_comparable":
            modelled = [(b["modelled"] - a["modelled"]) / (b["gpu_gb"] - a["gpu_gb"]) for a, b in pairwise(fitted)]
        lines.append({
            "model": model, "framework": framework, "check": check, "ids": [r["id"] for r in rows],
            "sizes_gb": sizes, "slopes": slopes, "slope": mean, "spread_pct": spread,
            "is_line": spread <= LINE_SPREAD_PCT,
            # the card size (nominal GB) where the line reaches 0 tokens: the fixed memory the line implies
            "zero_at_gb": rows[0]["gpu_gb"] - rows[0]["published"] / mean,
            "modelled_sizes_gb": [r["gpu_gb"] for r in fitted] if modelled else None,
            "modelled_slopes": modelled,
            "modelled_slope": (fitted[-1]["modelled"] - fitted[0]["modelled"]) / (
                fitted[-1]["gpu_gb"] - fitted[0]["gpu_gb"]) if modelled else None,
        })
    return tuple(lines)


def unsloth_report() -> dict[str, Any]:
    """The traces' summary and rows, and the published points with their checks."""
    traces = trace_rows()
    errs = [abs(r["error_pct"]) for r in traces]
    context = list(context_rows())
    checked = [r for r in context if r["check"] in ("unsloth_2024", "hf_fa2")]
    return {
        "traces": {"n": len(traces), "median_abs_pct": statistics.median(errs) if errs else 0.0,
                   "worst_abs_pct": max(errs, default=0.0), "rows": traces},
        "context": {"checked": len(checked), "within_target": sum(r["within_target"] for r in checked),
                    "target_pct": TARGET_PCT, "rows": context},
        "allocator": {"rows": replay_rows()},
        "lines": list(published_lines()),
    }


def format_unsloth_report(report: dict[str, Any] | None = None) -> str:
    """The Unsloth part of `python -m validation`."""
    report = report or unsloth_report()
    t, c = report["traces"], report["context"]
    lines = [f"Unsloth traces (its own autograd code, calibration/unsloth_trace.py): n={t['n']}  median |err| "
             f"{t['median_abs_pct']:.2f} %  worst {t['worst_abs_pct']:.2f} %"]
    for row in t["rows"]:
        lines.append(f"    {row['id']:<44} measured {row['measured_bytes'] / 1e9:7.3f} GB  estimated "
                     f"{row['estimated_bytes'] / 1e9:7.3f} GB  {row['error_pct']:+6.2f} %")
    MiB = 1 << 20
    lines.append("Caching allocator: replays of Unsloth's traced steps (load + 2 steps, calibration/allocator_trace.py): "
                 "least memory above the tensors' peak, MiB; the estimate's slack (expected … high)")
    for row in report.get("allocator", {}).get("rows", []):
        lines.append(f"    {row['id']:<36} tensors {row['tensor_peak'] / 1e9:6.2f} GB  replay: current "
                     f"{row['replay_current'] / MiB:6.1f}  2024 {row['replay_2024'] / MiB:6.1f}  PyTorch default "
                     f"{row['replay_default'] / MiB:6.1f} ({row['replay_default_pct']:.2f} %)  estimate: "
                     f"{row['expected'] / MiB:5.1f} … {row['high'] / MiB:6.1f} (2024: {row['expected_2024'] / MiB:5.1f})")
    lines.append(f"Unsloth published longest lengths: {c['within_target']} of {c['checked']} checked points within "
                 f"{c['target_pct']:.0f} % (Unsloth's on its 2024.12 code, HF + FA2 with the Trainer stack)")
    for row in c["rows"]:
        modelled = f"{row['modelled']:>7,}" if row["modelled"] else "   none"
        err = f"{row['error_pct']:+6.1f} %" if row["error_pct"] is not None else "    —   "
        current = (f"  current release {row['current']:>7,} ({row['current_vs_published_pct']:+.0f} %)"
                   if row["current"] else "")
        flag = ("  <-- " + row["explanation"]) if row["explanation"] else (
            "  (not checked: " + row["note"] + ")" if row["check"] == "not_comparable" else "")
        lines.append(f"    {row['id']:<11} {row['gpu_gb']:>3} GB  published {row['published']:>7,}  modelled "
                     f"{modelled}  {err}{current}{flag}")
    for line in report.get("lines", []):
        shape = "a straight line (one fit, not separate runs)" if line["is_line"] else "not a line"
        same = ("the same cards" if line["modelled_sizes_gb"] == line["sizes_gb"] else
                f"the cards it fits on ({line['modelled_sizes_gb'][0]}–{line['modelled_sizes_gb'][-1]} GB)"
                ) if line["modelled_slopes"] else ""
        model = (f"; the model between {same} {min(line['modelled_slopes']):,.0f}–"
                 f"{max(line['modelled_slopes']):,.0f} (end to end {line['modelled_slope']:,.0f})"
                 if line["modelled_slopes"] else "")
        lines.append(f"  published column {line['model']} / {line['framework']} ({line['sizes_gb'][0]}–"
                     f"{line['sizes_gb'][-1]} GB, {len(line['ids'])} sizes): {min(line['slopes']):,.2f}–"
                     f"{max(line['slopes']):,.2f} tokens per GB (spread {line['spread_pct']:.3f} %): {shape}, 0 tokens "
                     f"at {line['zero_at_gb']:.2f} GB{model}")
    return "\n".join(lines)
