"""`python -m estimator`: the same estimate() as the app, for scripts and checks.

Bad flags exit 2 with one clear line on stderr (argparse's own convention)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import (
    CATALOG,
    COMPONENT_KEYS,
    Device,
    Estimate,
    ModelSpec,
    custom_device,
    estimate,
    find_devices,
    fmt_both,
    generic_spec,
    get_device,
    list_presets,
    load_preset,
    max_batch,
    max_seq_len,
    parse_config_text,
    parse_targets,
    remedies,
    verdict,
)
from .hub import HubModel, fetch_model
from .stacks import DEFAULT_STACK, STACK_IDS, resolve_setup, setup_json
from .training import ATTENTIONS, LOSSES, METHODS, OPTIMIZERS, PRECISIONS, SHARDINGS


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, exit 2
        sys.stderr.write(f"estimator: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m estimator", description="Peak GPU memory of one fine-tuning step.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="preset id (see --list-presets), or a Hugging Face model id ORG/NAME[@REVISION] "
                                      "(HF_TOKEN for gated or private models)")
    src.add_argument("--config", help="path to a Hugging Face config.json")
    src.add_argument("--size", type=float, help="model size in billions of parameters (generic decoder)")
    p.add_argument("--stack", choices=STACK_IDS, default=DEFAULT_STACK,
                   help="training stack whose defaults fill every setting not given (default: %(default)s)")
    p.add_argument("--method", choices=METHODS, default="lora")
    p.add_argument("--rule", choices=("seed",), help="use the rule of thumb instead of the detailed estimate")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help="default: the stack's")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None,
                   help="gradient checkpointing on/off (default: the stack's)")
    p.add_argument("--offload-activations", action=argparse.BooleanOptionalAction, default=None,
                   help="offload the checkpointed layer inputs to CPU RAM (default: the stack's)")
    p.add_argument("--attention", choices=ATTENTIONS, default="sdpa")
    p.add_argument("--loss", choices=LOSSES, default=None, help="default: the stack's")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default="all-linear")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--sharding", choices=SHARDINGS, default="none")
    p.add_argument("--offload-optimizer", action="store_true")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step (>1 keeps gradients)")
    p.add_argument("--compile", action="store_true",
                   help="torchtune compile=True: its compiled cross-entropy keeps 16-bit logits (torchtune stack)")
    p.add_argument("--optimizer-in-bwd", action="store_true",
                   help="torchtune optimizer_in_bwd=True: each gradient is applied and freed in backward "
                        "(torchtune stack, full fine-tuning)")
    p.add_argument("--device", help="device id (see --list-devices)")
    p.add_argument("--capacity", type=float, help="custom device capacity in GB (with --device custom)")
    p.add_argument("--unified", action="store_true", help="custom device shares RAM (75 %% usable)")
    p.add_argument("--advice", action="store_true", help="add remedies and solvers (needs --device)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--list-presets", action="store_true")
    p.add_argument("--list-devices", action="store_true")
    return p


def _device_json(d: Device) -> dict[str, Any]:
    return {"id": d.id, "name": d.name, "kind": d.kind, "capacity_bytes": d.capacity_bytes,
            "usable_bytes": d.usable_bytes}


def estimate_json(est: Estimate, device: Device | None = None) -> dict[str, Any]:
    """The JSON document the CLI prints (also the app's JSON export)."""
    doc: dict[str, Any] = {
        "model": est.model.name, "family": est.model.family, "mode": est.mode,
        "setup": setup_json(est.setup),
        "params_total": est.params_total, "params_trainable": est.params_trainable,
        "components_bytes": {k: int(round(est.components_bytes[k])) for k in COMPONENT_KEYS},
        "peak_phase": est.peak_phase,
        "details": [{"component": x.component, "label": x.label, "bytes": int(round(x.bytes))} for x in est.details],
        "notes": list(est.notes),
    }
    doc["total_bytes"] = sum(doc["components_bytes"].values())
    doc["low_bytes"] = int(round(est.low_bytes))
    doc["high_bytes"] = int(round(est.high_bytes))
    if est.cpu_offload_bytes:
        doc["cpu_offload_bytes"] = int(round(est.cpu_offload_bytes))
    if device is not None:
        v = verdict(est.total_bytes, device, est.high_bytes)
        doc["device"] = {**_device_json(device), "fits": v.fits, "margin_bytes": int(round(v.margin_bytes))}
    return doc


def _model(args: argparse.Namespace) -> tuple[ModelSpec, HubModel | None]:
    if args.config:
        path = Path(args.config)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {args.config}: {exc.strerror}") from None
        return parse_config_text(data, name=path.name), None
    if args.size is not None:
        return generic_spec(args.size), None
    if args.model and "/" in args.model:  # a Hugging Face model id (presets have no slash)
        return fetch_model(args.model)
    try:
        return load_preset(args.model or "llama-3.1-8b"), None
    except ValueError as exc:
        raise ValueError(f"{exc}; or a Hugging Face model id ORG/NAME[@REVISION]") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_presets:
        rows = [{"id": p.id, "name": p.name, "family": p.family, "hf_repo": p.hf_repo,
                 "params_total": load_preset(p.id).params_total} for p in list_presets()]
        print(json.dumps(rows, indent=2) if args.json else "\n".join(f"{r['id']:<20} {r['name']}" for r in rows))
        return 0
    if args.list_devices:
        rows = [_device_json(d) for d in CATALOG]
        print(json.dumps(rows, indent=2) if args.json else "\n".join(
            f"{d.id:<14} {d.name} — usable {fmt_both(d.usable_bytes)}" for d in CATALOG))
        return 0
    try:
        spec, hub = _model(args)
        setup = resolve_setup(
            args.stack, method=args.method, precision=args.precision, optimizer=args.optimizer,
            batch=args.batch, seq_len=args.seq_len, grad_ckpt=args.grad_ckpt,
            offload_activations=args.offload_activations, attention=args.attention, loss=args.loss,
            lora_rank=args.lora_rank, lora_targets=parse_targets(args.lora_targets), gpus=args.gpus,
            sharding=args.sharding, offload_optimizer=args.offload_optimizer, grad_accum=args.grad_accum,
            compile=args.compile or None, optimizer_in_bwd=args.optimizer_in_bwd or None,
        )
        device = None
        if args.device == "custom" or (args.device is None and args.capacity is not None):
            if args.capacity is None:
                raise ValueError("--device custom needs --capacity GB")
            device = custom_device(args.capacity, "unified" if args.unified else "discrete")
        elif args.device:
            try:
                device = get_device(args.device)
            except ValueError:  # a name or nickname ("4080", "A6000", "T4") finds its catalog entry
                matches = find_devices(args.device)
                if not matches:
                    raise
                device = matches[0]
        est = estimate(spec, setup, rule=args.rule)
    except ValueError as exc:
        parser.error(str(exc))
        return 2  # unreachable: error() exits
    doc = estimate_json(est, device)
    if hub is not None:
        doc["hub"] = hub.as_json()
    if args.advice and device is not None and args.rule is None:
        usable = device.usable_bytes
        doc["advice"] = {
            "remedies": [{"order": r.order, "title": r.title, "change": r.change,
                          "saves_bytes": int(round(r.saves_bytes)), "applicable": r.applicable}
                         for r in remedies(spec, setup)],
            "max_batch": max_batch(spec, setup, usable),
            "max_seq_len": max_seq_len(spec, replace(setup), usable),
        }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        if hub is not None:
            print(hub.label)
        print(f"{est.model.name} · {setup.method} · {setup.precision} · batch {setup.batch} × {setup.seq_len} tokens")
        ckpt = "offloaded checkpointing" if setup.offload_activations else (
            "checkpointing" if setup.grad_ckpt else "no checkpointing")
        print(f"  stack {setup.stack} ({setup_json(setup)['stack_version']}): {ckpt}, loss {setup.loss}, "
              f"optimizer {setup.optimizer}")
        for key in COMPONENT_KEYS:
            print(f"  {key:<12} {fmt_both(est.components_bytes[key])}")
        print(f"  {'total':<12} {fmt_both(est.total_bytes)}  (band {fmt_both(est.low_bytes)} – "
              f"{fmt_both(est.high_bytes)}; peak: {est.peak_phase})")
        if device is not None:
            v = verdict(est.total_bytes, device, est.high_bytes)
            print(f"  {device.name}: {v.headline}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
