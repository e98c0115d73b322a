"""`python -m estimator`: the same estimate() and advise() as the app's calculator, for scripts and checks.

Bad flags exit 2 with one clear line on stderr (argparse's own convention); a flag the setup cannot use is such an
error, or a note in the output, never silence. The flags are declared in cli_flags.py and read into the model,
device, setup and trainer in cli_args.py (a training config's in cli_config.py); this module computes what they ask
for (the estimate, the exact trace, the advice, the host verdict, an OOM message's diagnosis) and prints it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .. import exact as exact
from ..advice.advise import advise
from ..advice.explain import explain
from ..advice.oom import diagnose_oom
from ..job.stack import setup_json
from ..job.trainer import TrainerSetup
from ..memory.forks import version_notes
from ..memory.price import estimate
from ..memory.result import component_keys
from ..memory.verdict import verdict
from ..models.presets import list_presets, load_preset
from ..options.devices import CATALOG
from ..units import fmt_both
from . import cli_config, cli_time
from .cli_args import (
    flag_notes,
    hub_config_refused,
    job_trainer,
    read_device,
    read_host_ram,
    read_installed,
    read_job,
    read_model,
    read_oom_log,
    read_setup,
    read_trainer,
)
from .cli_flags import build_parser
from .document import _device_json, advice_json, cost_json, estimate_host, estimate_json, time_json
from .text import (
    advice_lines,
    assumption_lines,
    band_line,
    condition_lines,
    exact_lines,
    heading_lines,
    host_lines,
    measured_lines,
    note_lines,
    oom_lines,
    time_lines,
    usable_lines,
    why_lines,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..advice.advise import Advice
    from ..advice.explain import Explanation
    from ..advice.oom import OomDiagnosis
    from ..job.setup import TrainingSetup
    from ..memory.host import HostVerdict
    from ..memory.result import Estimate
    from ..models.hub import HubModel
    from ..models.spec import ModelSpec
    from ..options.devices import Device


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
    time: cli_time.TimeAnswer | None = None  # the step time on the device (and the run, the cost) when there is one
    explanation: Explanation | None = None  # why this number (advice.explain), for the text and the JSON


def _spec(args: argparse.Namespace) -> tuple[ModelSpec | None, HubModel | None, str | None]:
    """The model, its Hub record, and (with --exact) why the fast estimator refused it instead of an error."""
    try:
        spec, hub = read_model(args)
    except ValueError as exc:
        if not (args.exact and (args.config or hub_config_refused(args, exc))):
            raise  # a Hub id the fast estimator refused (its config.json was read) may still be traced
        return None, None, str(exc)  # the exact trace may still know this model_type
    return spec, hub, None


def _compute(args: argparse.Namespace) -> _Run:
    """The estimate, the exact trace and the advice the flags ask for; every refusal is a ValueError."""
    job = read_job(args)  # the flags' settings, merged with --from-config's
    if job_trainer(job) == "grpo" and args.seq_len is not None:
        raise ValueError("GRPO's sequences are --prompt-len + --completion-len tokens; drop --seq-len")
    spec, hub, fast_error = _spec(args)
    device = read_device(args)
    setup = cli_config.fit_config_targets(args, spec, read_setup(job, device, read_installed(args)))
    trainer = read_trainer(job)
    if args.advice and device is None:
        raise ValueError("--advice needs --device: the remedies and solvers are priced against a device's "
                         "memory (see --list-devices)")
    request = cli_time.read_time_request(args, device)  # a bad dataset size or price stops here, before pricing
    capacity = device.runtime_total_bytes if device is not None else None
    host_ram = read_host_ram(args)
    reading = read_oom_log(args)  # a bad file stops here, before any pricing
    est = estimate(spec, setup, rule=args.rule, trainer=trainer, device_capacity=capacity) \
        if spec is not None else None
    if args.exact and trainer.trainer != "sft":
        raise ValueError(f"--exact traces a supervised (SFT) step; the {trainer.trainer} trainer is not traced")
    timing = cli_time.price_time(request, spec, setup, device, trainer) if spec is not None else None
    exact_res = _run_exact(args, hub, setup, est) if args.exact else None
    advice = None
    if args.advice and est is not None and device is not None:  # the calculator's own call
        try:
            advice = advise(spec, setup, device, trainer, rule=args.rule, compute=request.compute,
                            fastest=request.constraints)
        except ValueError as exc:
            raise ValueError(f"the changes could not be priced for this model: {exc}") from None
    host = None
    if est is not None:  # the rule of thumb has no host side: the detailed estimate's
        detailed_host = None if est.host is not None else estimate(spec, setup).host
        host = estimate_host(est, device, host_ram, detailed_host)
    oom = None
    if reading is not None:
        oom = diagnose_oom(reading, spec, setup, trainer, device=device)
    explanation = explain(spec, est, device) if est is not None and spec is not None else None
    return _Run(spec, hub, setup, trainer, device, est, exact_res, advice, fast_error, host, oom, timing, explanation)


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
        print("\n".join(exact_lines(exact_res, None)))


def _document(args: argparse.Namespace, run: _Run, est: Estimate, notes: list[str]) -> dict[str, Any]:
    """The JSON document: the estimate, the notes, and the exact trace, Hub record and advice when present."""
    doc = estimate_json(est, run.device, run.host, run.explanation)
    doc["notes"] = notes
    if run.time is not None and run.time.step is not None:
        doc["time"] = time_json(run.time)
        if run.time.cost is not None:
            doc["cost"] = cost_json(run.time.cost)
    if run_config := cli_config.config_json(args):
        doc["config_import"] = run_config
    if run.exact_res is not None:
        doc["exact"] = run.exact_res.as_json(est.total_bytes)
    if run.hub is not None:
        doc["hub"] = run.hub.as_json()
    if run.advice is not None:
        doc["advice"] = advice_json(run.advice, run.trainer, run.setup)
    if run.oom is not None:
        doc["oom"] = run.oom.as_json()
        if run.oom.advice is not None:
            doc["oom"]["diagnosis"]["advice"] = advice_json(run.oom.advice, run.trainer, run.setup)
    return doc


def _print_text(args: argparse.Namespace, run: _Run, est: Estimate, notes: list[str]) -> None:
    """The human-readable report: heading, components, total and band, verdict, notes, exact trace, advice."""
    setup, device = run.setup, run.device
    if run.hub is not None:
        print(run.hub.label)
    print("\n".join(cli_config.config_lines(args) + heading_lines(est, setup, run.trainer)))
    for key in component_keys(est):
        print(f"  {key:<12} {fmt_both(est.components_bytes[key])}")
    print(f"  {'total':<12} {fmt_both(est.total_bytes)}  (band {fmt_both(est.low_bytes)} – "
          f"{fmt_both(est.high_bytes)}; peak: {est.peak_phase})")
    if device is not None:
        v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
        print(f"  {device.name}: {v.headline}")
        print("\n".join([*usable_lines(device), band_line(est, v)]))
        if run.explanation is not None:
            print("\n".join(condition_lines(run.explanation)))
    if run.time is not None and run.time.step is not None:
        print("\n".join(time_lines(run.time)))
    if run.explanation is not None:
        print("\n".join(why_lines(run.explanation) + assumption_lines(run.explanation)
                        + measured_lines(run.explanation)))
    if run.host is not None:
        print("\n".join(host_lines(run.host, device)))
    for line in note_lines(notes):
        print(line)
    if run.exact_res is not None:
        print("\n".join(exact_lines(run.exact_res, est)))
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
        cli_config.read_config(args)
    except ValueError as exc:
        parser.error(str(exc))
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
    notes = [*est.notes, *flag_notes(args, run.setup, run.device)]
    if run.setup.versions is not None:  # the releases given, and the forks that move this estimate (issue 28)
        capacity = run.device.runtime_total_bytes if run.device is not None else None
        notes += version_notes(run.spec, run.setup, est, run.trainer, capacity, args.rule)
    if run.time is not None and run.time.unknown:
        notes.append(f"time unknown: {run.time.unknown}")
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
