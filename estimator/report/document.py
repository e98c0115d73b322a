"""The JSON document of an estimate (the CLI's --json and the app's JSON export)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..job.stack import setup_json
from ..job.trainer import trainer_json
from ..memory.host import host_verdict
from ..memory.result import component_keys
from ..memory.verdict import verdict

if TYPE_CHECKING:
    from typing import Any

    from ..advice.advise import Advice
    from ..advice.explain import Explanation
    from ..job.trainer import TrainerSetup
    from ..memory.host import HostRam, HostVerdict
    from ..memory.result import Estimate
    from ..options.devices import Device


def _device_json(d: Device) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": d.id, "name": d.name, "kind": d.kind, "capacity_bytes": d.capacity_bytes,
                           "usable_bytes": d.usable_bytes}
    if d.usable_source:  # a Mac: Metal's recommended working set (with the log that prints it) or three quarters
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


def advice_json(advice: Advice, trainer: TrainerSetup) -> dict[str, Any]:
    """The advice object of the JSON document: advise()'s remedies (with their stable keys), the largest batch,
    the longest max length (GRPO: max completion length) and the smallest catalog device's id."""
    doc: dict[str, Any] = {
        "remedies": [{"order": r.order, "key": r.key, "title": r.title, "change": r.change,
                      "saves_bytes": int(round(r.saves_bytes)), "applicable": r.applicable}
                     for r in advice.remedies],
        "max_batch": advice.max_batch,
    }
    doc["max_completion_len" if trainer.option.generates else "max_seq_len"] = advice.max_length
    doc["smallest_device"] = advice.smallest_device.id if advice.smallest_device else None
    return doc
