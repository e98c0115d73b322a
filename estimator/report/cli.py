"""`python -m estimator`: the same estimate() and advise() as the app's calculator, for scripts and checks.

Bad flags exit 2 with one clear line on stderr (argparse's own convention); a flag the setup cannot use is such an
error, or a note in the output, never silence."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .. import exact as exact
from ..advice.advise import advise
from ..advice.oom import diagnose_oom
from ..job.setup import parse_targets
from ..job.stack import resolve_setup, setup_json
from ..job.trainer import TrainerSetup, trainer_json
from ..memory.price import estimate
from ..memory.result import component_keys
from ..memory.verdict import verdict
from ..models.config import parse_config_text
from ..models.hub import HubConfigRefused, HubError, fetch_model
from ..models.presets import generic_spec, list_presets, load_preset, preset_ids
from ..oom_message import MAX_TEXT_CHARS, parse_oom
from ..options.backends import BACKENDS, device_backend
from ..options.devices import (
    CATALOG,
    CUSTOM_MAX_GB,
    CUSTOM_MIN_GB,
    custom_device,
    device_ids,
    get_device,
    lookup_devices,
    nearest_device_ids,
)
from ..options.stacks import MLX_STACK, default_stack
from ..options.trainers import TRL_VERSION
from ..units import fmt_both
from . import cli_config
from .cli_flags import build_parser
from .document import _device_json, advice_json, estimate_host, estimate_json
from .text import advice_lines, band_line, host_lines, note_lines, oom_lines

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..advice.advise import Advice
    from ..advice.oom import OomDiagnosis
    from ..job.setup import TrainingSetup
    from ..memory.host import HostVerdict
    from ..memory.result import Estimate
    from ..models.hub import HubModel
    from ..models.spec import ModelSpec
    from ..oom_message import OomReading
    from ..options.devices import Device


def _nearest(value: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(value, list(choices), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


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
        try:
            return fetch_model(args.model)
        except HubError as exc:
            if args.model != getattr(args, "config_model", None):
                raise
            raise ValueError(f"the config's model {args.model[:80]}: {exc}; give --model or --config (the rest of "
                             "the config applies)") from None
    pid = args.model or "llama-3.1-8b"
    if pid not in preset_ids():  # the nearest presets, not all of them on one line
        raise ValueError(f"unknown model preset '{pid[:60]}'{_nearest(pid, preset_ids())} (see --list-presets); "
                         f"or a Hugging Face model id ORG/NAME[@REVISION]")
    return load_preset(pid), None


def _device(args: argparse.Namespace) -> Device | None:
    """The device the flags name: custom (--capacity), a catalog id, or a name that means exactly one device."""
    if args.device == "custom" or (args.device is None and args.capacity is not None):
        if args.capacity is None:
            raise ValueError("--device custom needs --capacity GB")
        return custom_device(args.capacity, "unified" if args.unified else "discrete")
    if args.capacity is not None:
        raise ValueError(f"--capacity describes a custom device; '{args.device[:60]}' has its own memory "
                         "(drop --capacity, or use --device custom)")
    if args.unified:
        raise ValueError("--unified describes a custom device: use it with --device custom --capacity GB")
    if not args.device:
        return None
    if args.device in device_ids():
        return get_device(args.device)
    found = lookup_devices(args.device)  # a name or nickname ("4080", "A6000", "T4") finds its catalog entry
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"--device '{args.device[:60]}' matches several devices: {', '.join(d.id for d in found)}; "
                         "give one of these ids")
    near = nearest_device_ids(args.device)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise ValueError(f"unknown device '{args.device[:60]}'{hint} (see --list-devices)")


def _host_ram(args: argparse.Namespace) -> float | None:
    """--host-ram GB in bytes (decimal GB, like --capacity), or None."""
    if args.host_ram is None:
        return None
    gb = args.host_ram
    if not (CUSTOM_MIN_GB <= gb <= CUSTOM_MAX_GB):  # also refuses nan and inf
        raise ValueError(f"--host-ram must be between {CUSTOM_MIN_GB:g} and {CUSTOM_MAX_GB:g} GB, got {gb:g}")
    return gb * 1e9


def _oom_reading(args: argparse.Namespace) -> OomReading | None:
    """--oom-log's message, read; every failure (missing file, too large, no message in it) is one line."""
    if not args.oom_log:
        return None
    path = Path(args.oom_log)
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_CHARS:
            raise ValueError(f"--oom-log {args.oom_log[:60]}: the file is {size:,} bytes; the limit is "
                             f"{MAX_TEXT_CHARS:,} (keep the error's last lines)")
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read --oom-log {args.oom_log[:60]}: {exc.strerror}") from None
    try:
        return parse_oom(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ValueError(f"--oom-log {args.oom_log[:60]}: {exc}") from None


def _flag_notes(args: argparse.Namespace, device: Device | None = None) -> list[str]:
    """Flags this setup accepts but that change nothing here: said, not ignored."""
    notes = []
    if args.sharding != "none" and args.gpus == 1 and not args.offload_params:  # valid: a note, not an error
        notes.append(f"--sharding {args.sharding} over 1 GPU changes nothing: one GPU keeps every weight, "
                     "gradient and optimizer state (give --gpus N to shard)")
    if args.method == "full" and (args.lora_rank is not None or args.lora_targets is not None):
        notes.append("--lora-rank and --lora-targets shape LoRA adapters; full fine-tuning has none")
    if args.host_ram is not None and device is not None and device.kind == "unified":
        notes.append(f"--host-ram {args.host_ram:g} is not used: on {device.id} the device's RAM is the machine's "
                     "RAM, so the GPU and the host add up against it")
    return notes


def _hub_config_refused(args: argparse.Namespace, exc: Exception) -> bool:
    """A Hub id whose config.json was read but that the fast estimator cannot use (hub.HubConfigRefused)."""
    return bool(args.model and "/" in args.model and isinstance(exc, HubConfigRefused))


def _exact_config(args: argparse.Namespace, hub: HubModel | None) -> dict[str, Any]:
    """The config dict the exact trace builds the model from (a preset's, the file's, or the Hub's config.json)."""
    if args.size is not None:
        raise ValueError("--exact needs a real architecture (--model or --config); a size alone has no config.json")
    if args.config:
        try:
            cfg = json.loads(Path(args.config).read_bytes().decode("utf-8-sig"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"cannot read {args.config} as JSON: {str(exc)[:80]}") from None
        return cfg
    if hub is not None:
        return exact.hub_config(hub)
    if args.model and "/" in args.model:
        return exact.hub_config_cached(args.model)  # the fast estimator refused it; its config.json is cached
    return exact.preset_config(args.model or "llama-3.1-8b")


def _run_exact(args: argparse.Namespace, hub: HubModel | None, setup: TrainingSetup,
               est: Estimate | None) -> exact.ExactResult:
    """Trace (minutes); every failure is a ValueError with one line."""
    cfg = _exact_config(args, hub)
    sys.stderr.write("estimator: tracing with PyTorch (FakeTensorMode) in a worker process; this takes minutes\n")
    pool = exact.get_pool()
    try:
        return exact.trace_exact(cfg, setup, est, pool=pool)
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None
    finally:
        pool.shutdown()


def _exact_text(res: exact.ExactResult, est: Estimate | None) -> list[str]:
    added = ", ".join(f"{a.label} {'+' if a.bytes >= 0 else '−'}{fmt_both(abs(a.bytes))}" for a in res.added)
    lines = [f"  {'exact':<12} {fmt_both(res.total_bytes)}  (traced {fmt_both(res.peak_bytes)}; added: {added})",
             f"  {'':<12} peak: {res.peak_phase}/{res.peak_region}, {res.peak_op}; {res.versions_label}; "
             f"{res.seconds:.0f} s"]
    if res.depth_line:
        lines.append(f"  {'':<12} depth: {res.depth_line}")
    if est is not None:
        diff = est.total_bytes - res.total_bytes
        lines.append(f"  {'difference':<12} fast − exact = {'+' if diff >= 0 else '−'}{fmt_both(abs(diff))} "
                     f"({100 * diff / res.total_bytes:+.1f} %)")
    else:
        lines.append(f"  {'difference':<12} none: the fast estimate is missing for this model")
    lines.extend(f"  note: {n}" for n in res.notes)
    return lines


def _print_list(args: argparse.Namespace) -> bool:
    """--list-presets / --list-devices: print the list; False when neither was asked."""
    if args.list_presets:
        rows = []
        for p in list_presets():
            spec = load_preset(p.id)
            row = {"id": p.id, "name": p.name, "family": p.family, "hf_repo": p.hf_repo,
                   "params_total": spec.params_total}
            if spec.is_moe:  # MoE presets, wrapped (llama4, qwen3_5_moe, gemma4) or not: parameters used per token
                row["params_active"] = spec.params_active
            rows.append(row)
        print(json.dumps(rows, indent=2) if args.json else "\n".join(f"{r['id']:<20} {r['name']}" for r in rows))
        return True
    if args.list_devices:
        rows = [_device_json(d) for d in CATALOG]
        print(json.dumps(rows, indent=2) if args.json else "\n".join(
            f"{d.id:<14} {d.name} — usable {fmt_both(d.usable_bytes)}" for d in CATALOG))
        return True
    return False


def _backend(args: argparse.Namespace, device: Device | None) -> str | None:
    """The runtime: --backend, or the device's (device_backend); without either, None (the stack's: Metal for
    mlx-lm, CUDA otherwise). A --backend the device does not run is refused."""
    derived = device_backend(device)
    if args.backend is None:
        return derived if device is not None else None
    if device is not None and args.backend not in (derived, "cpu"):
        raise ValueError(f"--backend {args.backend} does not match {device.id}, which runs "
                         f"{BACKENDS[derived].runtime}; drop --backend")
    return args.backend


def _stack_id(args: argparse.Namespace, device: Device | None) -> str:
    """--stack, else MLX-LM on a unified-memory Apple device (its default stack) and TRL elsewhere."""
    if args.stack is not None:
        return args.stack
    return default_stack(device is not None and device.kind == "unified", args.trainer)


def _setup(args: argparse.Namespace, device: Device | None = None) -> TrainingSetup:
    """The training setup the flags describe, the stack's defaults filling the rest (batch, length, rank, trained
    blocks and quantisation included; a preference/RL trainer's own batch default wins)."""
    stack = _stack_id(args, device)
    if stack == MLX_STACK and args.trainer != "sft":
        raise ValueError(f"mlx-lm trains SFT only (mlx_lm lora); the {args.trainer} trainer is {TRL_VERSION}'s: "
                         "choose another --stack")
    return resolve_setup(
        stack, trainer=args.trainer, method=args.method, precision=args.precision, optimizer=args.optimizer,
        batch=args.batch, seq_len=args.seq_len, grad_ckpt=args.grad_ckpt,
        offload_activations=args.offload_activations, attention=args.attention, loss=args.loss,
        lora_rank=args.lora_rank,
        lora_targets=parse_targets("all-linear" if args.lora_targets is None else args.lora_targets),
        gpus=args.gpus,
        sharding=args.sharding, offload_optimizer=args.offload_optimizer, grad_accum=args.grad_accum,
        offload_params=args.offload_params or None,
        compile=args.compile or None, optimizer_in_bwd=args.optimizer_in_bwd or None,
        image_tokens=args.image_tokens, train_tower=args.train_tower, lora_layers=args.lora_layers,
        dora=args.dora or None, quant_mode=args.quant, quant_bits=args.quant_bits, quant_group=args.quant_group,
        backend=_backend(args, device), **args.config_extra,
    )


def _trainer(args: argparse.Namespace) -> TrainerSetup:
    """The trainer the flags describe (SFT unless --trainer)."""
    return TrainerSetup(
        args.trainer, beta=args.beta, precompute_ref=args.precompute_ref, num_generations=args.num_generations,
        prompt_len=args.prompt_len, completion_len=args.completion_len, generation=args.generation,
        vllm_gpu_util=args.vllm_gpu_util, vllm_sleep=args.vllm_sleep,
    )


class _Run(NamedTuple):
    """Everything one CLI run computed."""

    spec: ModelSpec | None  # None only with --exact, when the fast estimator refused the model
    hub: HubModel | None
    setup: TrainingSetup
    trainer: TrainerSetup
    device: Device | None
    est: Estimate | None
    exact_res: exact.ExactResult | None
    advice: Advice | None
    fast_error: str | None
    host: HostVerdict | None = None
    oom: OomDiagnosis | None = None


def _spec(args: argparse.Namespace) -> tuple[ModelSpec | None, HubModel | None, str | None]:
    """The model, its Hub record, and (with --exact) why the fast estimator refused it instead of an error."""
    try:
        spec, hub = _model(args)
    except ValueError as exc:
        if not (args.exact and (args.config or _hub_config_refused(args, exc))):
            raise  # a Hub id the fast estimator refused (its config.json was read) may still be traced
        return None, None, str(exc)  # the exact trace may still know this model_type
    return spec, hub, None


def _compute(args: argparse.Namespace) -> _Run:
    """The estimate, the exact trace and the advice the flags ask for; every refusal is a ValueError."""
    if args.trainer == "grpo" and args.seq_len is not None:
        raise ValueError("GRPO's sequences are --prompt-len + --completion-len tokens; drop --seq-len")
    spec, hub, fast_error = _spec(args)
    device = _device(args)
    setup = cli_config.fit_config_targets(args, spec, _setup(args, device))
    trainer = _trainer(args)
    if args.advice and device is None:
        raise ValueError("--advice needs --device: the remedies and solvers are priced against a device's "
                         "memory (see --list-devices)")
    capacity = device.capacity_bytes if device is not None else None
    host_ram = _host_ram(args)
    reading = _oom_reading(args)  # a bad file stops here, before any pricing
    est = estimate(spec, setup, rule=args.rule, trainer=trainer, device_capacity=capacity) \
        if spec is not None else None
    if args.exact and trainer.trainer != "sft":
        raise ValueError(f"--exact traces a supervised (SFT) step; the {args.trainer} trainer is not traced")
    exact_res = _run_exact(args, hub, setup, est) if args.exact else None
    advice = None
    if args.advice and est is not None and device is not None:  # the calculator's own call
        try:
            advice = advise(spec, setup, device, trainer, rule=args.rule)
        except ValueError as exc:
            raise ValueError(f"the changes could not be priced for this model: {exc}") from None
    host = None
    if est is not None:  # the rule of thumb has no host side: the detailed estimate's
        detailed_host = None if est.host is not None else estimate(spec, setup).host
        host = estimate_host(est, device, host_ram, detailed_host)
    oom = None
    if reading is not None:
        oom = diagnose_oom(reading, spec, setup, trainer, device=device)
    return _Run(spec, hub, setup, trainer, device, est, exact_res, advice, fast_error, host, oom)


def _print_exact_only(args: argparse.Namespace, run: _Run) -> None:
    """Only with --exact: the fast estimator refused this config, the trace did not."""
    setup, exact_res, fast_error = run.setup, run.exact_res, run.fast_error
    assert exact_res is not None
    name = Path(args.config).name if args.config else args.model
    doc = {"model": name, "fast_estimate_error": fast_error, "setup": setup_json(setup),
           "exact": exact_res.as_json()}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"{name} · {setup.method} · {setup.precision} · batch {setup.batch} × "
              f"{setup.seq_len} tokens")
        print(f"  fast estimate missing: {fast_error}")
        print("\n".join(_exact_text(exact_res, None)))


def _document(args: argparse.Namespace, run: _Run, est: Estimate, notes: list[str]) -> dict[str, Any]:
    """The JSON document: the estimate, the notes, and the exact trace, Hub record and advice when present."""
    doc = estimate_json(est, run.device, run.host)
    doc["notes"] = notes
    if run_config := cli_config.config_json(args):
        doc["config_import"] = run_config
    if run.exact_res is not None:
        doc["exact"] = run.exact_res.as_json(est.total_bytes)
    if run.hub is not None:
        doc["hub"] = run.hub.as_json()
    if run.advice is not None:
        doc["advice"] = advice_json(run.advice, run.trainer)
    if run.oom is not None:
        doc["oom"] = run.oom.as_json()
        if run.oom.advice is not None:
            doc["oom"]["diagnosis"]["advice"] = advice_json(run.oom.advice, run.trainer)
    return doc


def _heading(est: Estimate, setup: TrainingSetup, trainer: TrainerSetup) -> list[str]:
    """The text's first lines: the model and setup, then the stack's defaults in use."""
    head = f"{est.model.name} · {setup.method} · {setup.precision} · batch {setup.batch} × {setup.seq_len} tokens"
    if trainer.option.generates:
        head = (f"{est.model.name} · {setup.method} · {setup.precision} · batch {setup.batch} completions × "
                f"({trainer.prompt_length:,} + {trainer.completion_length:,}) tokens")
    if trainer.trainer != "sft":
        head += f" · {trainer.option.label} ({trainer_json(trainer)['trainer_version']})"
    ckpt = "offloaded checkpointing" if setup.offload_activations else (
        "checkpointing" if setup.grad_ckpt else "no checkpointing")
    return [head, f"  stack {setup.stack} ({setup_json(setup)['stack_version']}): {ckpt}, loss {setup.loss}, "
                  f"optimizer {setup.optimizer}"]


def _print_text(args: argparse.Namespace, run: _Run, est: Estimate, notes: list[str]) -> None:
    """The human-readable report: heading, components, total and band, verdict, notes, exact trace, advice."""
    setup, device = run.setup, run.device
    if run.hub is not None:
        print(run.hub.label)
    print("\n".join(cli_config.config_lines(args) + _heading(est, setup, run.trainer)))
    for key in component_keys(est):
        print(f"  {key:<12} {fmt_both(est.components_bytes[key])}")
    print(f"  {'total':<12} {fmt_both(est.total_bytes)}  (band {fmt_both(est.low_bytes)} – "
          f"{fmt_both(est.high_bytes)}; peak: {est.peak_phase})")
    if device is not None:
        v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
        print(f"  {device.name}: {v.headline}")
        print(band_line(est, v))
    if run.host is not None:
        print("\n".join(host_lines(run.host, device)))
    for line in note_lines(notes):
        print(line)
    if run.exact_res is not None:
        print("\n".join(_exact_text(run.exact_res, est)))
    if run.advice is not None and device is not None:
        print("\n".join(advice_lines(run.advice, est, setup, run.trainer, device, args.rule)))
    if run.oom is not None:
        print("\n".join(oom_lines(run.oom)))
        diag = run.oom
        if diag.advice is not None and diag.device is not None and diag.estimate is not None:
            print("\n".join(advice_lines(diag.advice, diag.estimate, setup, run.trainer, diag.device, None)))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags, estimate (and trace, and advise), print text or JSON; exit 2 on a bad flag."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        cli_config.apply_config(args)
    except ValueError as exc:
        parser.error(str(exc))
    cli_config.fill_defaults(args)
    if args.exact:
        ok, why = exact.available()
        if not ok:
            parser.error(why)
    if _print_list(args):
        return 0
    try:
        run = _compute(args)
    except ValueError as exc:
        parser.error(str(exc))
        return 2  # unreachable: error() exits
    est = run.est
    if est is None:  # only with --exact: the fast estimator refused this config, the trace did not
        if args.export_config:
            parser.error("--export-config needs a model the fast estimate reads (this one is traced only)")
        _print_exact_only(args, run)
        return 0
    notes = [*est.notes, *_flag_notes(args, run.device)]
    try:
        if cli_config.write_export(args, run.spec, run.setup, run.trainer):
            return 0
    except ValueError as exc:
        parser.error(str(exc))
    doc = _document(args, run, est, notes)  # built in text mode too, as before: both modes run the same code
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_text(args, run, est, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
