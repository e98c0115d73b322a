"""Record the allocations of Unsloth's traced step and replay them through the caching allocator's rules.

calibration/unsloth_trace.py runs Unsloth's own training step (2026.10.9) under FakeTensorMode and the calibration
tracker. This module runs the same trace with a tracker that also logs every storage it sees made and freed, in
order (the CUDA caching allocator gets one request per storage: a resize is a new request, then the old block's
free), and puts a model load in front: each decoder weight as bitsandbytes quantises it on the GPU (the 16-bit
weight, its packed NF4 codes, the fp32 absmax, the quantised absmax and the second-level absmax; the 16-bit weight and
the fp32 absmax then freed: bitsandbytes 0.45 Params4bit._quantize → functional.quantize_4bit with
compress_statistics), every other base tensor as loaded, then PEFT's adapters (made in the base dtype and upcast to
fp32: peft 0.21 tuners/lora/layer.py _move_adapter_to_device_of_base_layer, get_peft_model(autocast_adapter_dtype=
True)). calibration/allocator_sim.py replays the log under each allocator configuration and finds the least memory
the whole sequence (load, step 1, step 2) runs in; validation/data/allocator_replays.json keeps the results.

Usage (.venv-cal, torch 2.13 CPU):

    .venv-cal/bin/python -m calibration.allocator_trace --all --out validation/data/allocator_replays.json
    .venv-cal/bin/python -m calibration.allocator_trace --case a-llama8b-L32-qlora-r32-b1s8192 --events /tmp/ev.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from calibration import unsloth_trace as ut
from calibration.allocator_sim import peak_requested, replay, smallest_capacity
from estimator.memory.allocator import TORCH_DEFAULT, stack_allocator
from estimator.memory.unsloth.model import ALLOCATOR_2024

MiB = 1 << 20


class _LoggingTracker(ut._HostlessTracker):
    """The Unsloth tracer's tracker, logging each storage's creation and release."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []
        self.keys: dict[int, int] = {}
        self._n = 0
        self.registered: list[tuple[int, int]] = []  # (key, bytes) of the tensors track_external found
        self.registering = False

    def _key(self, winfo) -> int:
        k = self.keys.get(id(winfo))
        if k is None:
            self._n += 1
            k = self.keys[id(winfo)] = self._n
        return k

    def _update_snap(self, u_type, winfo, old_mem_consumed=None, old_reftype=None) -> None:
        super()._update_snap(u_type, winfo, old_mem_consumed=old_mem_consumed, old_reftype=old_reftype)
        name = getattr(u_type, "name", str(u_type))
        if name == "ADD":
            if self.registering:
                self.registered.append((self._key(winfo), winfo.mem_consumed))
            else:
                self.events.append(("a", self._key(winfo), winfo.mem_consumed))
        elif name == "DEL":
            self.events.append(("f", self.keys.pop(id(winfo))))
        elif name == "SIZE":  # a storage resized: a new block, then the old one freed
            old = self.keys.pop(id(winfo))
            self.events.append(("a", self._key(winfo), winfo.mem_consumed))
            self.events.append(("f", old))

    def track_external(self, *external) -> None:
        self.registering = True
        try:
            super().track_external(*external)
        finally:
            self.registering = False


def _storage_key(tracker: _LoggingTracker, t) -> int | None:
    from torch.distributed._tools.mem_tracker import get_untyped_storages

    for st in get_untyped_storages(t):
        winfo, _ = tracker._WINFO.get(st, (None, None))
        if winfo is not None:
            return tracker.keys.get(id(winfo))
    return None


def load_events(model, tracker: _LoggingTracker) -> list[tuple]:
    """The model's tensors in the order a load makes them, with the load's temporaries (module docstring)."""
    events: list[tuple] = []
    temp = [10**9]

    def tmp(nbytes: int) -> int:
        temp[0] += 1
        events.append(("a", temp[0], int(nbytes)))
        return temp[0]

    def own(t) -> None:
        k = _storage_key(tracker, t)
        if k is not None and k not in done:
            done.add(k)
            events.append(("a", k, t.numel() * t.element_size()))

    done: set[int] = set()
    lora = []
    for name, mod in model.named_modules():
        tensors = list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False))
        if isinstance(mod, ut.Linear4bit):
            n = mod.in_features * mod.out_features
            w16 = tmp(2 * n)  # the bf16 weight moved to the GPU (Params4bit._quantize: w.to(device))
            own(mod.weight)  # packed NF4 codes
            absmax32 = tmp(4 * (n // ut.NF4_BLOCK))  # fp32 absmax per 64
            own(mod.absmax)  # quantised absmax (uint8)
            own(mod.absmax2)  # second-level absmax
            events.append(("f", absmax32))
            events.append(("f", w16))
            for _, t in tensors:
                own(t)
            continue
        for pname, t in tensors:
            if ".lora_" in f"{name}.{pname}" or "lora_" in name:
                lora.append(t)
            else:
                own(t)
    for t in lora:  # PEFT: the adapter in the base dtype, then upcast to fp32
        half = tmp(t.numel() * 2)
        own(t)
        events.append(("f", half))
    for k, nbytes in tracker.registered:  # anything track_external saw that the walk did not (optimizer state)
        if k not in done:
            events.append(("a", k, nbytes))
    return events


def record(case: dict) -> tuple[list[tuple], dict]:
    """The event log of one case (load + two steps) and the trace's own measurement."""
    holder: dict[str, Any] = {}
    orig = ut._HostlessTracker

    class _Tracker(_LoggingTracker):
        def __init__(self) -> None:
            super().__init__()
            holder["tracker"] = self

    captured: dict[str, Any] = {}
    orig_track = _LoggingTracker.track_external

    def track_external(self, *external):
        captured["model"] = external[0]
        return orig_track(self, *external)

    ut._HostlessTracker = _Tracker
    _Tracker.track_external = track_external
    try:
        measured = ut.trace_case(case)
    finally:
        ut._HostlessTracker = orig
    tracker = holder["tracker"]
    return load_events(captured["model"], tracker) + tracker.events, measured


CONFIGS = {"torch_default": TORCH_DEFAULT, "unsloth_current": stack_allocator("unsloth"),
           "unsloth_2024": ALLOCATOR_2024}


def replay_case(events: list[tuple]) -> dict:
    """Per allocator configuration: the least capacity the log runs in, its margin over the tensors' peak, and an
    unconstrained run's reserved and allocated peaks."""
    tensors = peak_requested(events)
    out: dict[str, Any] = {"tensor_peak_bytes": tensors, "events": len(events)}
    for cid, cfg in CONFIGS.items():
        free = replay(events, cfg, 1 << 62)
        need = smallest_capacity(events, cfg)
        out[cid] = {"capacity_bytes": need, "slack_bytes": need - tensors,
                    "slack_pct": round(100.0 * (need - tensors) / tensors, 3),
                    "unconstrained_reserved_bytes": free.peak_reserved,
                    "allocated_peak_bytes": free.peak_allocated}
    return out


def get_cases() -> list[dict]:
    """Full-depth cases (the allocator's page waste depends on how many layers leave blocks behind): Llama-3.1-8B
    widths, 32 layers, QLoRA and LoRA at two lengths; Llama-3.2-3B; Llama-3.3-70B widths, 80 layers."""
    c = ut._case
    return [
        c("a-llama8b-L32-qlora-r32-b1s8192", ut.LLAMA_8B, 32, seq_len=8192),
        c("a-llama8b-L32-qlora-r32-b1s16384", ut.LLAMA_8B, 32, seq_len=16384),
        c("a-llama8b-L32-qlora-r32-b1s2048", ut.LLAMA_8B, 32, seq_len=2048),
        c("a-llama8b-L32-lora-r16-b1s8192", ut.LLAMA_8B, 32, method="lora", lora_rank=16, seq_len=8192),
        c("a-llama3b-L28-qlora-r32-b1s8192", ut.LLAMA_3B, 28, seq_len=8192),
        c("a-llama70b-L80-qlora-r32-b1s4096", ut.LLAMA_70B, 80, seq_len=4096, flash_min_rows=4096, free_gb=60),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", default=[])
    p.add_argument("--all", action="store_true")
    p.add_argument("--out")
    p.add_argument("--events", help="also write the event log (one case) to this JSON file")
    args = p.parse_args(argv)
    cases = [c for c in get_cases() if args.all or c["id"] in args.case]
    if not cases:
        print("no case selected; ids: " + ", ".join(c["id"] for c in get_cases()), file=sys.stderr)
        return 2
    rows = []
    for case in cases:
        t0 = time.time()
        events, measured = record(case)
        if args.events:
            with open(args.events, "w") as fh:
                json.dump(events, fh)
        row = {**case, "trace_peak_bytes": measured["peak_bytes"], "replay": replay_case(events)}
        rows.append(row)
        r = row["replay"]
        print(f"{case['id']:<40} tensors {r['tensor_peak_bytes'] / 1e9:7.3f} GB  "
              + "  ".join(f"{k} +{r[k]['slack_bytes'] / MiB:7.1f} MiB ({r[k]['slack_pct']:.2f} %)" for k in CONFIGS)
              + f"  ({time.time() - t0:.0f} s)", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1, sort_keys=True)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
