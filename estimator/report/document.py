"""The JSON document of an estimate (the CLI's --json and the app's JSON export)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..advice.timing import gpu_time_factor
from ..job.stack import setup_json
from ..job.trainer import trainer_json
from ..memory.host import host_verdict
from ..memory.result import component_keys
from ..memory.verdict import verdict

if TYPE_CHECKING:
    from typing import Any

    from ..advice.advise import Advice
    from ..advice.explain import Explanation
    from ..advice.fastest import FastestFit
    from ..advice.remedies import Remedy
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..memory.host import HostRam, HostVerdict
    from ..memory.result import Estimate
    from ..options.devices import Device
    from ..speed.run import Cost
    from ..speed.step import StepTime
    from .cli_time import TimeAnswer


def _device_json(d: Device) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": d.id, "name": d.name, "kind": d.kind, "capacity_bytes": d.capacity_bytes,
                           "usable_bytes": d.usable_bytes}
    if d.usable_source:  # a Mac: Metal's recommended working set (with the log that prints it) or three quarters; a
        # catalog GPU: the total CUDA gives PyTorch, with the public output it is read from
        doc["usable_source"] = d.usable_source
    return doc


def host_json(hv: HostVerdict) -> dict[str, Any]:
    """The host object: what the setup needs in CPU RAM (all processes of the machine), each term with its stable
    key, and with a machine's RAM (or on unified memory, where the GPU and the host share it) the verdict."""
    host = hv.host
    doc: dict[str, Any] = {
        "pool": "unified" if hv.unified else "separate",
        "needs_bytes": int(round(hv.needs_bytes)),
        "load_bytes": int(round(host.load_bytes)), "train_bytes": int(round(host.train_bytes)),
        "peak": host.peak_phase, "processes": host.processes,
        "details": [{"key": x.key, "label": x.label, "bytes": int(round(x.bytes))} for x in host.details],
    }
    if hv.ram_bytes is not None:
        doc.update(ram_bytes=int(round(hv.ram_bytes)), fits=hv.fits, margin_bytes=int(round(hv.margin_bytes)))
    return doc


def estimate_host(est: Estimate, device: Device | None, ram_bytes: float | None,
                  host: HostRam | None = None) -> HostVerdict | None:
    """The host's verdict for an estimate (its own HostRam, or `host` from the detailed estimate when this one is
    the rule of thumb's), with a paged optimizer's spill priced against the device."""
    host = host if host is not None else est.host
    if host is None:
        return None
    opt = est.components_bytes.get("optimizer", 0.0)
    return host_verdict(host, device, ram_bytes, est.total_bytes, est.setup, opt)


def explained_json(x: Explanation, est: Estimate) -> dict[str, Any]:
    """Why this number (issue 29): the rule of thumb reconciled with the estimate (`why`: rule_bytes + Σ steps' bytes
    == total_bytes), the assumptions that move it most (`assumptions`), the closest measured runs (`measured`), and
    with a device the verdict's condition and the longest length per example that fits (the device object's
    `condition`, `longest_len_that_fits` and `longest_len`)."""
    doc: dict[str, Any] = {"why": x.why.as_json(), "assumptions": [a.as_json() for a in x.assumptions],
                           "measured": [c.as_json() for c in x.measured]}
    if x.longest is not None:
        doc["device"] = {
            "condition": {"batch": est.setup.batch, "seq_len": est.setup.seq_len, "padded_to": "max_length",
                          "sentence": str(x.condition)},
            "longest_len_that_fits": x.longest.tokens,
            "longest_len": {**x.longest.as_json(), "sentence": str(x.longest.sentence())},
        }
    return doc


def estimate_json(est: Estimate, device: Device | None = None, host: HostVerdict | None = None,
                  explanation: Explanation | None = None) -> dict[str, Any]:
    """The JSON document the CLI prints (also the app's JSON export); with an explanation (advice.explain.explain:
    the CLI always gives one), why this number (explained_json)."""
    doc: dict[str, Any] = {
        "model": est.model.name, "family": est.model.family, "mode": est.mode,
        "setup": setup_json(est.setup),
        "params_total": est.params_total, "params_trainable": est.params_trainable,
        "components_bytes": {k: int(round(est.components_bytes[k])) for k in component_keys(est)},
        "peak_phase": est.peak_phase,
        "details": [{"key": x.key, "component": x.component, "label": x.label, "bytes": int(round(x.bytes))}
                    for x in est.details],
        "notes": list(est.notes),
    }
    doc["total_bytes"] = sum(doc["components_bytes"].values())
    doc["low_bytes"] = int(round(est.low_bytes))
    doc["high_bytes"] = int(round(est.high_bytes))
    trainer = getattr(est, "trainer", None)
    if trainer is not None:
        doc["trainer"] = trainer_json(trainer)
        ps = est.policy_setup  # the training forward as the estimate prices it
        doc["trainer"].update(forward_sequences=ps.batch, forward_seq_len=ps.seq_len, forward_loss=ps.loss)
    if est.cpu_offload_bytes:
        doc["cpu_offload_bytes"] = int(round(est.cpu_offload_bytes))
    host = host if host is not None else estimate_host(est, device, None)
    if host is not None:
        doc["host"] = host_json(host)
    if device is not None:
        v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
        # band: Verdict.band's id ("fits", "close call", "borderline", "too big"), English whatever the language
        doc["device"] = {**_device_json(device), "fits": v.fits, "margin_bytes": int(round(v.margin_bytes)),
                         "band": v.band}
    if explanation is not None:
        explained = explained_json(explanation, est)
        on_device = explained.pop("device", None)
        if device is not None and on_device is not None:
            doc["device"].update(on_device)
        doc.update(explained)
    return doc


def advice_json(advice: Advice, trainer: TrainerSetup, setup: TrainingSetup | None = None) -> dict[str, Any]:
    """The advice object of the JSON document: advise()'s remedies in the order to try them (with their stable keys
    and, on a device with compute figures, their time factors), the largest batch, the longest max length (GRPO:
    max completion length), the smallest catalog device's id and, when asked (the CLI always asks), the fastest
    setup that fits."""
    timed = not advice.time_note
    doc: dict[str, Any] = {
        "remedies": [{"order": r.order, "key": r.key, "title": r.title, "change": r.change,
                      "saves_bytes": int(round(r.saves_bytes)), "applicable": r.applicable,
                      **(_remedy_time(r, setup) if timed else {})}
                     for r in advice.remedies],
        "max_batch": advice.max_batch,
    }
    doc["max_completion_len" if trainer.option.generates else "max_seq_len"] = advice.max_length
    doc["smallest_device"] = advice.smallest_device.id if advice.smallest_device else None
    if advice.time_note:
        doc["time_unknown"] = advice.time_note
    if advice.fastest_fit is not None or advice.fastest_note:
        doc["fastest_fit"] = fastest_fit_json(advice.fastest_fit) if advice.fastest_fit is not None else None
        if advice.fastest_note:
            doc["fastest_fit_none"] = advice.fastest_note
    return doc


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _remedy_time(r: Remedy, setup: TrainingSetup | None) -> dict[str, Any]:
    """A remedy's time_factor (the same tokens' time, changed over current; null where it cannot be priced) and,
    when it runs on another GPU count, that count and its factor in GPU-hours."""
    doc: dict[str, Any] = {"time_factor": _round(r.time_factor, 4)}
    gpus = setup.gpus if setup is not None else 1
    if r.time_factor is not None and r.new_setup is not None and r.new_setup.gpus != gpus:
        doc.update(gpus=r.new_setup.gpus, gpu_hours_factor=_round(gpu_time_factor(r, gpus), 4))
    return doc


# The setup fields the fastest fit searches (the rest is the user's setup, unchanged).
FASTEST_FIELDS = ("method", "batch", "grad_accum", "grad_ckpt", "offload_activations", "optimizer", "gpus",
                  "sharding", "offload_optimizer", "offload_params")


def fastest_fit_json(fit: FastestFit) -> dict[str, Any]:
    """advice.fastest_fit: the setup's searched fields, what changed (stable keys; a batch as [batch, accumulation]),
    its tokens per second and step time, its estimate, its speed over the user's setup's and the constraints."""
    def value(v: object) -> object:
        return list(v) if isinstance(v, tuple) else v

    return {
        "setup": {k: getattr(fit.setup, k) for k in FASTEST_FIELDS},
        "changes": [{"key": c.key, "before": value(c.before), "after": value(c.after)} for c in fit.changes],
        "tokens_per_second": round(fit.tokens_per_second, 1),
        "step_seconds": round(fit.step.step_seconds, 6),
        "speedup": round(fit.speedup, 4),
        "total_bytes": int(round(fit.estimate.total_bytes)),
        "effective_batch": fit.setup.batch * fit.setup.grad_accum * fit.setup.gpus,
        "allowed": {"method": fit.constraints.change_method, "max_gpus": fit.constraints.max_gpus},
    }


def step_json(step: StepTime) -> dict[str, Any]:
    """One optimizer step's time (speed.StepTime): throughput, seconds, and the seconds by category and by part."""
    return {
        "tokens_per_second": round(step.tokens_per_second, 1),
        "tokens_per_second_per_gpu": round(step.tokens_per_second_per_gpu, 1),
        "step_seconds": round(step.step_seconds, 6),
        "tokens_per_step": step.tokens_per_step,
        "examples_per_step": step.examples_per_step,
        "micro_steps": step.micro_steps,
        "gpus": step.gpus,
        "dtype": step.dtype,
        "peak_tflops": step.peak_tflops,
        "efficiency": round(step.efficiency, 4),
        "achieved_tflops": round(step.achieved_tflops, 2),
        "flops_per_step": int(round(step.flops_per_step)),
        "seconds_by_category": {k: round(v, 6) for k, v in step.seconds_by_category().items()},
        "terms": [{"key": t.key, "category": t.category, "seconds": round(t.seconds, 6)} for t in step.terms],
    }


def time_json(answer: TimeAnswer) -> dict[str, Any]:
    """The time object: the step of the priced setup on the device (tokens_per_second over all GPUs, step_seconds
    per optimizer step; tokens_per_step and examples_per_step per GPU), where its figures come from, and with a
    dataset size the run (run_seconds, run_hours, its optimizer steps and tokens, the dataset as given; with
    --typical-len the run's rows are that long, so its step is timed at that length: run_step)."""
    assert answer.step is not None
    doc = step_json(answer.step)
    doc["figures"] = answer.figures
    run = answer.run
    if run is not None and answer.dataset is not None:
        d = answer.dataset
        doc.update(run_seconds=round(run.seconds, 1), run_hours=round(run.hours, 4), run_steps=run.steps,
                   run_tokens=int(round(run.tokens)), gpu_hours=round(run.gpu_hours, 4),
                   dataset={"tokens": d.tokens, "examples": d.examples, "typical_len": d.typical_len,
                            "epochs": d.epochs})
        if run.step != answer.step:
            doc["run_step"] = {"tokens_per_second": round(run.step.tokens_per_second, 1),
                               "step_seconds": round(run.step.step_seconds, 6)}
    return doc


def cost_json(cost: Cost) -> dict[str, Any]:
    """The cost object: total = run hours × GPUs × price per GPU-hour, in the price's own currency (none is assumed:
    the unit of `total` is whatever --price-per-gpu-hour was given in)."""
    return {"total": round(cost.total, 2), "gpu_hours": round(cost.gpu_hours, 4),
            "price_per_gpu_hour": cost.price_per_gpu_hour,
            "unit": "the currency of price_per_gpu_hour (none is assumed): total = run hours × GPUs × price"}
