"""Worker side of the exact trace: one (config dict, tracer setup dict) → the traced peak, by category.

It runs the tracer (exact/trace.py, the one the calibration fixtures come from: a real transformers model built
from the config dict, PEFT LoRA, HF-Trainer steps under FakeTensorMode counted by PyTorch's MemTracker) and adds only
what a user feature needs: input checks (never trust_remote_code, never a path, never eval), a host-memory limit on the
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

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # every job sets its own cap (a soft limit may go back up to the hard one)
    resource.setrlimit(resource.RLIMIT_AS, (int(max_bytes) if hard == resource.RLIM_INFINITY
                                            else min(int(max_bytes), hard), hard))


_MEMORY_WORDS = re.compile(r"cannot allocate memory|failed to map segment|bad_alloc|out of memory|errno 12\b", re.I)


def _host_memory_note(max_bytes: int | None) -> str:
    cap = max_bytes or 0
    return (f"the trace needed more host memory than the trace worker may use ({cap / 1e9:.1f} GB, "
            f"{cap / 2**30:.1f} GiB of address space; the server's WIF_EXACT_MAX_HOST_GB sets it)")


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


def model_class(case: dict):
    """The transformers class the tracer builds for this config (exact/trace.py build_model)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from exact.trace import hf_config

    cfg = hf_config(case)
    auto = AutoModelForImageTextToText if getattr(cfg, "vision_config", None) is not None else AutoModelForCausalLM
    try:
        return auto._model_mapping[type(cfg)]
    except KeyError:
        raise TraceRefused(f"transformers has no causal-LM class for model_type {case['family']!r} "
                           "(an encoder or another kind of model)") from None


def attention_fallback(case: dict) -> str | None:
    """Switch SDPA to eager attention where transformers refuses SDPA for the architecture (its class sets
    _supports_sdpa = False, transformers 5.24 modeling_utils.py _sdpa_can_dispatch: Gemma 2's soft-capping, gpt-oss'
    attention sinks). That is what training runs: an explicit attn_implementation="sdpa" raises, the default picks
    eager. Returns the note, or None when the asked attention is traced."""
    setup = case["setup"]
    if setup.get("attention") != "sdpa":
        return None
    cls = model_class(case)
    if getattr(cls, "_supports_sdpa", True):
        return None
    setup["attention"] = "eager"
    return (f"{cls.__name__} cannot run SDPA in transformers (its class sets _supports_sdpa = False, e.g. for "
            "soft-capped or sink attention): traced with eager attention, which it uses by default; "
            "its attention scores (batch × heads × tokens² per layer) are in the traced peak.")


def quantizable_linear_bytes(case: dict) -> tuple[int, int]:
    """(parameters, bytes) of the nn.Linear weights bitsandbytes would store in 4-bit: every Linear of the base
    model but the output head (transformers' BitsAndBytes quantizer skips the output embedding,
    transformers 5.24 integrations/bitsandbytes.py get_keys_to_not_convert) and the LoRA adapters."""
    import torch

    from exact.trace import build_model

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


# --------------------------------------------------------------------------------------------------
# Depth: trace two shallow copies and extrapolate (each decoder layer adds the same bytes)
# --------------------------------------------------------------------------------------------------
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
MAX_PERIOD = 12  # sliding/full patterns of released models repeat every 2–6 layers (Gemma 3: 5 local + 1 global)
LINEAR_FIELDS = ("peak_bytes", "first_step_peak_bytes", "params_total", "params_trainable", "optimizer_state_bytes")


def _text_scope(cfg: dict) -> dict:
    """The dict that holds the decoder's depth: text_config for multimodal wrappers, else the config itself."""
    tc = cfg.get("text_config")
    return tc if isinstance(tc, dict) and any(k in tc for k in LAYER_KEYS) else cfg


def _layer_key(scope: dict) -> str | None:
    return next((k for k in LAYER_KEYS if isinstance(scope.get(k), int) and not isinstance(scope.get(k), bool)), None)


def _decoder_layers(model):
    """The longest nn.ModuleList in the model whose name ends in 'layers' / 'h' / 'blocks' (the decoder stack)."""
    import torch

    best = None
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and name.split(".")[-1] in ("layers", "h", "blocks"):
            if best is None or len(mod) > len(best):
                best = mod
    return best


def layer_signatures(case: dict) -> list[tuple]:
    """One hashable description per decoder layer of the (meta) model: every submodule's class and parameter shape,
    plus the layer's attention type. Two layers with the same signature keep the same bytes in a training step."""
    from exact.trace import build_model

    model = build_model(case, "meta")
    layers = _decoder_layers(model)
    if layers is None:
        return []
    sigs = []
    for layer in layers:
        parts = [(n, type(m).__name__, tuple((pn, tuple(p.shape), str(p.dtype), p.requires_grad)
                                             for pn, p in m.named_parameters(recurse=False)))
                 for n, m in layer.named_modules()]
        attn = [getattr(m, a) for _, m in layer.named_modules() for a in ("attention_type", "sliding_window",
                                                                           "is_sliding", "layer_type")
                if isinstance(getattr(m, a, None), (str, int, bool))]
        sigs.append((tuple(parts), tuple(attn)))
    return sigs


def _pattern(sigs: list) -> tuple[int, int]:
    """(k, p): the layers from k on repeat with period p (k dense-first / odd layers before the pattern)."""
    n = len(sigs)
    best = (n, 1)
    for p in range(1, min(MAX_PERIOD, n) + 1):
        k = 0
        for i in range(n - 1, p - 1, -1):  # the smallest k with sigs[i] == sigs[i - p] for every i >= k + p
            if sigs[i] != sigs[i - p]:
                k = i - p + 1
                break
        if k + p < best[0] + best[1]:
            best = (k, p)
    return best


def plan_depths(k: int, p: int, n: int) -> tuple[int, int] | None:
    """Two depths a < b, both past the first k layers, whose layer sequences are prefixes of the real one and
    with n - a and b - a whole periods (so x(n) = x(a) + (x(b) − x(a)) / (b − a) · (n − a) adds whole periods);
    None when they would not be shallower than the model."""
    r = (n - k) % p
    a = k + r
    while a < 2 or a < k + p:  # at least one whole period and two layers traced
        a += p
    b = a + p * max(1, -(-2 // p))  # two more layers at least
    return (a, b) if b < n else None


def with_depth(cfg: dict, depth: int, n: int) -> dict:
    """A copy of the config with `depth` decoder layers: per-layer lists cut to their first `depth` entries,
    layer-index lists (mlp_only_layers) filtered."""
    out = json.loads(json.dumps(cfg))
    scope = _text_scope(out)
    scope[_layer_key(scope)] = depth
    for key, val in list(scope.items()):
        if isinstance(val, list) and len(val) == n and key not in ("architectures",):
            scope[key] = val[:depth]
        elif key in ("mlp_only_layers",) and isinstance(val, list):
            scope[key] = [i for i in val if isinstance(i, int) and i < depth]
    return out


def extrapolate(ra: dict, rb: dict, a: int, b: int, n: int) -> dict:
    """x(n) = x(a) + (x(b) − x(a)) / (b − a) · (n − a) for the peak, every category and the counts; exact when each
    period of layers adds the same bytes (checked: the increment divides evenly)."""
    def lin(xa: int, xb: int) -> int:
        num = (int(xb) - int(xa)) * (n - a)
        if num % (b - a):
            raise ValueError(f"uneven increment {xb - xa} over {b - a} layers")
        return int(xa) + num // (b - a)

    out = dict(rb)
    for f in LINEAR_FIELDS:
        out[f] = lin(ra[f], rb[f])
    cats = set(ra["peak_by_category"]) | set(rb["peak_by_category"])
    out["peak_by_category"] = {c: lin(ra["peak_by_category"].get(c, 0), rb["peak_by_category"].get(c, 0))
                               for c in sorted(cats)}
    return out


def peak_moves(ma: dict, mb: dict, a: int, b: int, n: int) -> str | None:
    """Why the extrapolated peak may not be the peak at n layers, or None. Every phase:region peak is extrapolated
    too: another one that grows faster can overtake the traced peak's (e.g. the loss's logits at 2 and 4 layers, the
    stored activations at the end of the forward pass at 12)."""
    def candidates(m: dict) -> dict[str, int]:  # forward/backward by region, the other phases whole
        return {**{f"phase {p}": v for p, v in m["phase_peaks"].items()}, **m["region_peaks"]}

    ca, cb = candidates(ma), candidates(mb)
    if set(ca) != set(cb):
        return f"the traced steps differ between {a} and {b} layers"
    ext = {r: int(ca[r]) + (int(cb[r]) - int(ca[r])) * (n - a) / (b - a) for r in ca}
    here = (f"{mb['peak_phase']}:{mb['peak_region']}" if mb["peak_phase"] in ("forward", "backward")
            else f"phase {mb['peak_phase']}")
    if here not in ext:
        return f"the peak's phase and region ({here}) are not among the traced ones"
    top = max(ext, key=lambda r: ext[r])
    if ext[top] > ext[here]:
        return f"the peak moves from {here} (at {a} and {b} layers) to {top} by {n} layers"
    return None


def _moment(m: dict) -> tuple:
    """Where the peak is, with layer indices left out (layer 1 of 2 and layer 3 of 4 are the same moment)."""
    return (m["peak_phase"], m["peak_region"], m["peak_op"], re.sub(r"\.\d+(\.|$)", r".N\1", str(m["peak_module"])))


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


def _trace_depth(case: dict, job: dict) -> tuple[dict, dict, dict]:
    """(measured, trace record, depth note): two shallow traces extrapolated when the layers repeat, else the full
    depth. depth = {"traced": [a, b] or [n], "extrapolated_to": n or None, "how": one line}."""
    from exact.trace import trace_case

    cfg = case["config"]
    scope = _text_scope(cfg)
    key = _layer_key(scope)
    n = scope.get(key) if key else None
    full = {"traced": [n], "extrapolated_to": None}

    def run_full(why: str):
        traced = trace_case(case)
        return traced["measured"], traced, {**full, "how": why}

    if not job.get("extrapolate", True) or not isinstance(n, int) or n < 4:
        return run_full(f"traced at the full depth ({n} layers)")
    sigs = layer_signatures(case)
    if len(sigs) != n:
        return run_full(f"traced at the full depth ({n} layers): the decoder layers could not be compared")
    k, p = _pattern(sigs)
    ab = plan_depths(k, p, n)
    if ab is None:
        return run_full(f"traced at the full depth ({n} layers): the layer pattern (period {p}, {k} leading "
                        "layers) leaves no shallower copy")
    a, b = ab
    shallow = [{**case, "config": with_depth(cfg, d, n)} for d in (a, b)]
    if any(layer_signatures(c) != sigs[:d] for c, d in zip(shallow, (a, b), strict=True)):
        return run_full(f"traced at the full depth ({n} layers): a shallower config does not keep the layer pattern")
    ta, tb = (trace_case(c) for c in shallow)
    ma, mb = ta["measured"], tb["measured"]
    if _moment(ma) != _moment(mb) or ma["first_step_peak_phase"] != mb["first_step_peak_phase"]:
        return run_full(f"traced at the full depth ({n} layers): the peak is not at the same moment at {a} and "
                        f"{b} layers")
    moved = peak_moves(ma, mb, a, b, n)
    if moved:
        return run_full(f"traced at the full depth ({n} layers): {moved}")
    try:
        m = extrapolate(ma, mb, a, b, n)
    except ValueError as exc:
        return run_full(f"traced at the full depth ({n} layers): {exc}")
    pattern = ("identical layers" if p == 1 else f"a pattern repeating every {p} layers") + (
        f" after {k} leading layers" if k else "")
    how = f"traced at {a} and {b} layers, extrapolated to {n}: exact for {pattern}"
    return m, tb, {"traced": [a, b], "extrapolated_to": n, "how": how}


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
        case = {"id": "exact", "family": model_type, "config": cfg, "setup": dict(job["setup"]), "mode": "fake"}
        model_class(case)  # a causal LM transformers ships, or a precise refusal (e.g. an encoder such as t5)
        notes = [n for n in (attention_fallback(case),) if n]
        quant = quantizable_linear_bytes(case) if job.get("quantizable") else (0, 0)
        m, traced, depth = _trace_depth(case, job)
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
            "depth": depth,
            "attention": case["setup"].get("attention"),
            "worker_notes": notes,
            "seconds": round(time.perf_counter() - t0, 2),
        }
    except MemoryError:
        # the worker may be left half-initialised (an import cut short): the pool replaces it ("recycle")
        return {"ok": False, "error": _host_memory_note(job.get("max_host_bytes")), "recycle": True,
                "seconds": round(time.perf_counter() - t0, 2)}
    except TraceRefused as exc:
        return {"ok": False, "error": str(exc), "seconds": round(time.perf_counter() - t0, 2)}
    except Exception as exc:  # noqa: BLE001 - any failure of transformers/peft/torch becomes one line for the user
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        if job.get("max_host_bytes") and _MEMORY_WORDS.search(str(exc)):  # a C/C++ allocation or mmap refused
            return {"ok": False, "error": _host_memory_note(job.get("max_host_bytes")), "recycle": True,
                    "seconds": round(time.perf_counter() - t0, 2)}
        return {"ok": False, "error": f"the trace failed: {type(exc).__name__}: {first}",
                "seconds": round(time.perf_counter() - t0, 2)}
