"""Worker side of the exact trace: one (config dict, tracer setup dict) → the traced peak, by category.

It reuses the calibration tracer (calibration/trace.py: a real transformers model built from the config dict,
PEFT LoRA, HF-Trainer steps under FakeTensorMode counted by PyTorch's MemTracker) and adds only what a user
feature needs: input checks (never trust_remote_code, never a path, never eval), a host-memory limit on the
worker, the fake mode only (the calibration's real-CPU fallback would allocate real memory), and the byte count
of the weights bitsandbytes would store in 4-bit (for QLoRA, traced as its 16-bit equivalent).
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

_MODEL_TYPE_RE = re.compile(r"[a-z0-9_]{1,64}")


class TraceRefused(ValueError):
    """The input cannot be traced; the message is one line, fit to show a user."""


def _limit_host_memory(max_bytes: int | None) -> None:
    """Cap this worker's address space so a runaway trace ends with MemoryError instead of the host's OOM killer."""
    if not max_bytes:
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or max_bytes < hard:
        resource.setrlimit(resource.RLIMIT_AS, (int(max_bytes), hard))


def _hf_config_class(model_type: str):
    """transformers' own config class for a model_type it ships (no remote code, no Hub access)."""
    from transformers import CONFIG_MAPPING

    if not _MODEL_TYPE_RE.fullmatch(model_type):
        raise TraceRefused(f"model_type {model_type[:40]!r} is not a transformers model type")
    if model_type not in CONFIG_MAPPING:
        import transformers

        raise TraceRefused(f"transformers {transformers.__version__} does not know model_type {model_type!r} "
                           "(custom code is never run)")
    return CONFIG_MAPPING[model_type]


def quantizable_linear_bytes(case: dict) -> tuple[int, int]:
    """(parameters, bytes) of the nn.Linear weights bitsandbytes would store in 4-bit: every Linear of the base
    model but the output head (transformers' BitsAndBytes quantizer skips the output embedding,
    transformers 5.24 integrations/bitsandbytes.py get_keys_to_not_convert) and the LoRA adapters."""
    import torch

    from calibration.trace import build_model

    model = build_model(case, "meta")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    seen: set[int] = set()
    n = nbytes = 0
    for name, mod in base.named_modules():
        if not isinstance(mod, torch.nn.Linear) or mod is head or ".lora_" in f".{name}":
            continue
        w = mod.weight
        if id(w) in seen or (head is not None and w is getattr(head, "weight", None)):
            continue
        seen.add(id(w))
        n += w.numel()
        nbytes += w.numel() * w.element_size()
    return int(n), int(nbytes)


def versions() -> dict[str, str]:
    import peft
    import torch
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    try:
        import trl

        out["trl"] = trl.__version__
    except ImportError:  # pragma: no cover - trl is in requirements-exact.txt; only the "chunked" loss needs it
        pass
    return out


def trace_job(job: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON types only (torch.__version__ is a torch class the parent, without torch, cannot unpickle).

    Trace one job: {"config": HF config dict, "setup": tracer setup dict, "quantizable": bool,
    "max_host_bytes": int|None}. Returns {"ok": True, ...} or {"ok": False, "error": one line}."""
    return json.loads(json.dumps(_trace_job(job), default=str))


def _trace_job(job: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        _limit_host_memory(job.get("max_host_bytes"))
        cfg = job["config"]
        if not isinstance(cfg, dict):
            raise TraceRefused("the config must be a JSON object")
        model_type = cfg.get("model_type")
        if not isinstance(model_type, str):
            raise TraceRefused("the config has no model_type")
        _hf_config_class(model_type)
        from calibration.trace import trace_case

        case = {"id": "exact", "family": model_type, "config": cfg, "setup": dict(job["setup"]), "mode": "fake"}
        quant = quantizable_linear_bytes(case) if job.get("quantizable") else (0, 0)
        traced = trace_case(case)
        m = traced["measured"]
        return {
            "ok": True,
            "peak_bytes": m["peak_bytes"],
            "peak_by_category": m["peak_by_category"],
            "peak_phase": m["peak_phase"],
            "peak_region": m["peak_region"],
            "peak_module": m["peak_module"],
            "peak_op": m["peak_op"],
            "first_step_peak_bytes": m["first_step_peak_bytes"],
            "params_total": m["params_total"],
            "params_trainable": m["params_trainable"],
            "optimizer_state_bytes": m["optimizer_state_bytes"],
            "quantizable_params": quant[0],
            "quantizable_bytes": quant[1],
            "mode": m["mode"],
            "tool": traced["tool"],
            "versions": versions(),
            "seconds": round(time.perf_counter() - t0, 2),
        }
    except MemoryError:
        return {"ok": False, "error": "the trace needed more host memory than the worker may use "
                                      f"({(job.get('max_host_bytes') or 0) / 1e9:.0f} GB)",
                "seconds": round(time.perf_counter() - t0, 2)}
    except TraceRefused as exc:
        return {"ok": False, "error": str(exc), "seconds": round(time.perf_counter() - t0, 2)}
    except Exception as exc:  # noqa: BLE001 - any failure of transformers/peft/torch becomes one line for the user
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return {"ok": False, "error": f"the trace failed: {type(exc).__name__}: {first}",
                "seconds": round(time.perf_counter() - t0, 2)}
