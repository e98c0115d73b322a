"""The exact trace, as the estimator sees it: no torch here.

"Exact" = PyTorch's own count of one steady-state training step of the user's model and setup: the real
transformers model (built from the config dict), PEFT LoRA, HF-Trainer steps, run under FakeTensorMode (shapes
only, no memory, no GPU) and counted by MemTracker (calibration/trace.py, driven by exact/worker.py). It is the
tensor-level peak that torch.cuda.max_memory_allocated would show. What a CPU trace cannot see is added from the
estimator and listed (`ExactResult.added`): the CUDA context and workspaces, the caching allocator's slack,
bitsandbytes' 4-bit storage and dequantisation buffer (QLoRA is traced as its 16-bit equivalent), optimizers
that only exist as CUDA kernels (8-bit, paged, Lion). FlashAttention's and cuDNN's own workspaces are not counted.

The trace runs in a separate worker process: a `concurrent.futures.ProcessPoolExecutor` with one worker, spawned
with the interpreter that has the optional install (requirements-exact.txt): $WIF_EXACT_PYTHON, else this
Python when it has torch. One trace at a time per process; others wait in the pool's queue and can ask their
place; results are cached by (config, setup); a trace past its time limit, a killed worker or one out of host
memory ends with a one-line note and a fresh worker for the next job.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import multiprocessing.context
import multiprocessing.popen_spawn_posix
import multiprocessing.spawn
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .i18n import N_, Text, error_message
from .memory import ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES, Estimate
from .precision import NF4_BYTES, NF4_DQ_BYTES
from .training import ALL_LINEAR, TrainingSetup

ROOT = Path(__file__).resolve().parents[1]  # the repository: exact/ and calibration/ live here
PYTHON_ENV = "WIF_EXACT_PYTHON"  # a Python with requirements-exact.txt installed
TIMEOUT_ENV = "WIF_EXACT_TIMEOUT_S"
HOST_MEMORY_ENV = "WIF_EXACT_MAX_HOST_GB"
INSTALL_HINT = ("the exact trace needs the optional install: pip install -r requirements-exact.txt "
                f"(or set {PYTHON_ENV} to a Python that has it)")
DEFAULT_TIMEOUT_S = 900.0  # a full-depth 16-layer 1B trace took ~4 min on two busy CPU cores (most are shallow)
DEFAULT_MAX_HOST_BYTES = 16 * 10**9  # the worker's address-space cap (fake tensors need no data memory)
# Fake tracing costs CPU time per op, not memory per byte: ~10–15 s per decoder layer on a slow CPU. Deeper
# configs are refused before a worker is started (the largest released decoders have ~130 layers).
MAX_TRACE_LAYERS = 160
MAX_TRACE_DIM = 1 << 20
MAX_CONFIG_CHARS = 1_000_000
CACHE_SIZE = 64
TRACED_OPTIMIZERS = ("adamw",)  # the tracer's optimizer: torch AdamW(fused=True), the HF Trainer default


# The How page shows these (one description of the feature; README.md says the same in prose).
WHAT_EXACT_MEANS = N_(  # N_: translated where shown (pages/how.py)
    "**Exact** is PyTorch's own count, not a formula: two real Hugging Face training steps of your model and "
    "setup — transformers builds the model from its config.json, PEFT adds the adapters, the HF Trainer's "
    "AdamW (fused), gradient clipping and autocast — run on the server's CPU under `FakeTensorMode` (shapes and "
    "dtypes only: no memory, no GPU, no weights downloaded), while `torch.distributed._tools.mem_tracker."
    "MemTracker` records every live tensor. The answer is the steady-state (second step) peak that "
    "`torch.cuda.max_memory_allocated()` would report, by category, with the phase and operation where it "
    "happens. Tracing costs CPU time per layer, so a deep model is traced at two shallow depths — multiples of "
    "its layer pattern (sliding/full attention, dense-first MoE layers, linear-attention hybrids), e.g. 2 and 4 "
    "layers — and the peak and every category are extrapolated linearly to the real depth: exact when the layers "
    "repeat (every period adds the same bytes), checked by the peak falling at the same moment at both depths "
    "and no other phase's peak, extrapolated too, overtaking it; "
    "otherwise, or when the pattern cannot be kept in fewer layers, the full depth is traced. The result says "
    "which. It is the tracer behind the accuracy fixtures (`calibration/trace.py`); on a CPU, fake and real "
    "runs agree byte for byte (`calibration/selfcheck.py`)."
)
WHAT_EXACT_LEAVES_OUT = (
    N_("CUDA context and cuBLAS workspaces: added from the estimator (docs/formulas.md §5)."),
    N_("The caching allocator's rounding and fragmentation: added, {slack} % of the traced bytes."),  # .format(slack=)
    N_("bitsandbytes' 4-bit kernels (QLoRA): the 16-bit equivalent is traced, its 16-bit linear weights are replaced "
       "by the NF4 storage and the dequantisation buffer is added; the result says so."),
    N_("Optimizers that exist only as CUDA kernels (8-bit, paged, Lion): AdamW is traced and its state replaced "
       "by the estimator's figure."),
    N_("Not counted at all: FlashAttention's and cuDNN's own workspaces, and memory outside PyTorch's allocator "
       "(vLLM, NCCL)."),
    N_("Not traced (refused, with the reason): several GPUs, ZeRO/FSDP sharding, optimizer offload, gradient "
       "accumulation, image inputs; a model given only by size; custom model code (`trust_remote_code`)."),
    N_("Attention transformers cannot run as SDPA (Gemma 2's soft-capping, gpt-oss' sinks) is traced as eager, "
       "which those models use by default; the result says so."),
)


class ExactUnavailable(RuntimeError):
    """No interpreter with the optional install: the message says what to install."""


class ExactRefused(ValueError):
    """This model or setup cannot be traced: the message (one line) says precisely why."""


# --------------------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------------------
# Reads the installed versions without importing torch (milliseconds, not the ~10 s of `import torch`): the
# page asks on every run. A broken install still ends with the worker's one-line error.
_PROBE = (
    "import json, sys\n"
    "from importlib import metadata, util\n"
    "missing = [m for m in ('torch', 'transformers', 'peft') if util.find_spec(m) is None]\n"
    "if missing:\n"
    "    print(json.dumps({'ok': False, 'error': 'no module ' + ', '.join(missing)}))\n"
    "else:\n"
    "    print(json.dumps({'ok': True, 'sys_path': sys.path,\n"
    "        'versions': {m: metadata.version(m) for m in ('torch', 'transformers', 'peft')}}))\n"
)


@dataclass(frozen=True)
class Interpreter:
    """A Python that has torch, transformers and peft."""

    python: str
    versions: tuple[tuple[str, str], ...]
    sys_path: tuple[str, ...]  # its own default import path (the spawned worker uses it, not ours)

    @property
    def label(self) -> str:
        v = dict(self.versions)
        return f"torch {v['torch']}, transformers {v['transformers']}, peft {v['peft']}"


@lru_cache(maxsize=8)
def _probe(python: str) -> Interpreter | str:
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              cwd=str(ROOT), env={**os.environ, "PYTHONPATH": ""})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python} cannot be run ({type(exc).__name__})"
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"{python} did not answer ({proc.stderr.strip()[-200:]})"
    if not info.get("ok"):
        return f"{python} lacks the optional install ({info.get('error', '')})"
    path = tuple(p for p in info["sys_path"] if p and p != str(ROOT))
    return Interpreter(python, tuple(sorted(info["versions"].items())), (str(ROOT), *path))


def _has_torch_here() -> bool:
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("torch", "transformers", "peft"))


def find_interpreter() -> Interpreter:
    """$WIF_EXACT_PYTHON, else this Python when it has the optional install. Raises ExactUnavailable."""
    chosen = os.environ.get(PYTHON_ENV, "").strip()
    if not chosen:
        if not _has_torch_here():
            raise ExactUnavailable(INSTALL_HINT)
        chosen = sys.executable
    found = _probe(chosen)
    if isinstance(found, str):
        raise ExactUnavailable(f"{INSTALL_HINT}; {found}")
    return found


def available() -> tuple[bool, str]:
    """(True, 'torch X, transformers Y, peft Z') or (False, what to install)."""
    try:
        return True, find_interpreter().label
    except ExactUnavailable as exc:
        return False, str(exc)


# --------------------------------------------------------------------------------------------------
# Inputs: the config dict and the tracer's setup dict
# --------------------------------------------------------------------------------------------------
def preset_config(preset_id: str) -> dict[str, Any]:
    """The config.json shipped with a preset (the presets folder, one JSON per id)."""
    from .model import preset_ids

    if preset_id not in preset_ids():
        raise ExactRefused(Text(N_("unknown preset {preset}"), preset=repr(preset_id[:60])))
    text = resources.files("estimator.presets").joinpath(f"{preset_id}.json").read_text(encoding="utf-8")
    return json.loads(text)


def hub_config(hub: Any) -> dict[str, Any]:
    """The config.json of a Hub model the estimator has just read (estimator.hub.fetch_model cached it locally)."""
    return _hub_config(hub.repo_id, hub.revision, hub.model_id, local_only=False)


def hub_config_cached(model: str) -> dict[str, Any]:
    """The config.json of a Hub model id the fast estimator refused: huggingface_hub downloaded it into the local
    Hub cache before estimator.hub.fetch_model found it unusable, so it is read from there (never fetched again:
    a failed download stays a failure)."""
    from .hub import HubError, model_id, parse_model_id

    try:
        repo, revision = parse_model_id(model)
    except HubError as exc:
        raise ExactRefused(error_message(exc)) from None
    return _hub_config(repo, revision, model_id(repo, revision), local_only=True)


def _hub_config(repo: str, revision: str | None, name: str, local_only: bool) -> dict[str, Any]:
    try:
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(repo, "config.json", revision=revision, local_files_only=True)
        except Exception:  # noqa: BLE001 - not in the local cache (e.g. another HF_HUB_CACHE): ask the Hub
            if local_only:
                raise
            path = hf_hub_download(repo, "config.json", revision=revision,
                                   endpoint=(os.environ.get("HF_ENDPOINT") or "").strip().rstrip("/") or None,
                                   token=os.environ.get("HF_TOKEN") or None)
        data = Path(path).read_bytes()
    except Exception as exc:  # noqa: BLE001 - any Hub failure is one line
        raise ExactRefused(Text(N_("the config.json of {model} could not be read again ({error})"), model=name,
                                error=type(exc).__name__)) from None
    if len(data) > MAX_CONFIG_CHARS:
        raise ExactRefused(Text(N_("the config is larger than 1 MB; a config.json is a few kB")))
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ExactRefused(Text(N_("the config.json of {model} is not JSON"), model=name)) from None


def check_config(cfg: Any) -> dict[str, Any]:
    """A JSON-clean copy of a config dict that may be traced, or ExactRefused (size guard: layers, widths)."""
    if not isinstance(cfg, dict):
        raise ExactRefused(Text(N_("the config must be a JSON object (a Hugging Face config.json)")))
    try:
        text = json.dumps(cfg, sort_keys=True)
    except (TypeError, ValueError):
        raise ExactRefused(Text(N_("the config holds values that are not JSON"))) from None
    if len(text) > MAX_CONFIG_CHARS:
        raise ExactRefused(Text(N_("the config is larger than 1 MB; a config.json is a few kB")))
    clean = json.loads(text)
    mt = clean.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise ExactRefused(Text(N_("the config has no model_type, so transformers cannot build it")))
    # Custom code is never run (transformers' own class for model_type builds the model), no quantisation is
    # applied on the CPU, and private keys ("_name_or_path", "_attn_implementation") never steer the build.
    for key in [k for k in clean if k in ("auto_map", "quantization_config", "trust_remote_code") or k.startswith("_")]:
        clean.pop(key)
    text_cfg = clean.get("text_config") if isinstance(clean.get("text_config"), dict) else {}
    for scope in (clean, text_cfg):
        layers = scope.get("num_hidden_layers", scope.get("n_layer", scope.get("num_layers")))
        if isinstance(layers, int) and not isinstance(layers, bool) and layers > MAX_TRACE_LAYERS:
            raise ExactRefused(Text(N_("{layers} layers are more than the exact trace takes ({limit}): tracing "
                                       "costs ~10 s per layer, so this would run for hours"), layers=layers,
                                    limit=str(MAX_TRACE_LAYERS)))
        for key in ("hidden_size", "intermediate_size", "vocab_size", "num_attention_heads"):
            val = scope.get(key)
            if isinstance(val, int) and not isinstance(val, bool) and not 0 < val <= MAX_TRACE_DIM:
                raise ExactRefused(Text(N_("{key} = {value} is outside what a real model has (1 … {limit})"),
                                        key=key, value=val, limit=MAX_TRACE_DIM))
    return clean


def tracer_setup(setup: TrainingSetup) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The tracer's setup dict for `setup`, and notes on what is traced differently. ExactRefused when the
    setup has something a one-device CPU trace cannot represent."""
    if setup.gpus > 1 or setup.sharding != "none":
        raise ExactRefused(Text(N_("the exact trace runs one device without sharding; set GPUs to 1 (ZeRO/FSDP are "
                                   "not traced)")))
    if setup.offload_optimizer:
        raise ExactRefused(Text(N_("optimizer offloading (DeepSpeed/FSDP) is not traced; turn it off")))
    if setup.grad_accum > 1:
        raise ExactRefused(Text(N_("gradient accumulation is not traced (the tracer frees gradients every step); set it "
                                   "to 1")))
    if setup.image_tokens:
        raise ExactRefused(Text(N_("image inputs are not traced (a fake trace through a vision tower ran for over 20 "
                                   "minutes on two CPU cores); set image tokens to 0 to trace the language model on "
                                   "text")))
    notes: list[str] = []
    precision = setup.precision
    if precision == "fp16":
        precision = "bf16"  # same byte counts; CPU autocast is bf16 only
        notes.append(Text(N_("fp16 is traced as bf16 (the same bytes per value; CPU autocast only has bf16).")))
    method = "full" if setup.method == "full" else "lora"
    if setup.method == "qlora":
        notes.append(Text(N_("QLoRA's 4-bit kernels need CUDA: the 16-bit equivalent was traced, then its 16-bit "
                             "linear weights were replaced by bitsandbytes' NF4 storage and its dequantisation "
                             "buffer added.")))
        if setup.qlora_prep != "none":
            notes.append(Text(N_("prepare_model_for_kbit_training's fp32 upcast is not traced (16-bit embeddings "
                                 "and norms).")))
    if setup.method != "full" and setup.adapter_dtype != "fp32":
        notes.append(Text(N_("Adapters are traced in fp32 (PEFT's default); this stack keeps them in bf16.")))
    if setup.optimizer not in TRACED_OPTIMIZERS:
        notes.append(Text(N_("The optimizer {optimizer} runs CUDA or other kernels the trace does not have: AdamW "
                             "was traced and its state replaced by the estimator's figure for this optimizer."),
                          optimizer=setup.optimizer))
    if getattr(setup, "compile", False):
        notes.append(Text(N_("torch.compile is not traced: the step runs eagerly (a compiled loss may keep less).")))
    if getattr(setup, "optimizer_in_bwd", False):
        notes.append(Text(N_("The optimizer step is traced after backward, not inside it (optimizer_in_bwd): "
                             "gradients of all parameters exist at once in the trace.")))
    targets: Any = ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets)
    out: dict[str, Any] = {
        "method": method, "precision": precision, "optimizer": "adamw", "batch": setup.batch,
        "seq_len": setup.seq_len, "grad_ckpt": setup.grad_ckpt, "attention": setup.attention,
        "loss": setup.loss, "max_grad_norm": setup.max_grad_norm,
    }
    if method == "lora":
        out.update(lora_rank=setup.lora_rank, lora_targets=targets)
    if setup.offload_activations:
        out["offload_activations"] = True
    return out, tuple(notes)


def job_key(cfg: dict[str, Any], tsetup: dict[str, Any], quantizable: bool) -> str:
    text = json.dumps({"config": cfg, "setup": tsetup, "q": quantizable}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Added:
    label: str
    bytes: int
    source: str


@dataclass(frozen=True)
class ExactResult:
    """One trace, with what the trace cannot see added from the estimator."""

    peak_bytes: int  # the traced tensor-level peak (MemTracker, steady-state step)
    peak_by_category: dict[str, int]
    peak_phase: str
    peak_region: str
    peak_module: str
    peak_op: str
    seconds: float
    versions: dict[str, str]
    params_total: int
    params_trainable: int
    added: tuple[Added, ...]
    notes: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    # {"traced": [a, b], "extrapolated_to": L, "how": one line} when two shallow copies were traced and the peak
    # extrapolated in depth; {"traced": [L], "extrapolated_to": None, ...} for a full-depth trace
    depth: dict[str, Any] = field(default_factory=dict)

    @property
    def depth_line(self) -> str:
        """One line: the depths traced and whether they were extrapolated ("" for an older worker's answer)."""
        return str(self.depth.get("how", ""))

    @property
    def total_bytes(self) -> int:
        """The device-level peak: the trace plus what it cannot see."""
        return self.peak_bytes + sum(a.bytes for a in self.added)

    @property
    def versions_label(self) -> str:
        v = self.versions
        return Text(N_("traced with torch {torch}, transformers {transformers}, peft {peft}"), torch=v.get("torch"),
                    transformers=v.get("transformers"), peft=v.get("peft"))

    def as_json(self, fast_total: float | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "peak_bytes": self.peak_bytes, "peak_by_category": dict(self.peak_by_category),
            "peak_phase": self.peak_phase, "peak_region": self.peak_region, "peak_module": self.peak_module,
            "peak_op": self.peak_op, "seconds": self.seconds, "versions": dict(self.versions),
            "params_total": self.params_total, "params_trainable": self.params_trainable,
            "added": [{"label": a.label, "bytes": a.bytes, "source": a.source} for a in self.added],
            "total_bytes": self.total_bytes, "notes": list(self.notes),
            "depth": {k: v for k, v in self.depth.items() if k != "how"} | {"note": self.depth_line},
        }
        if fast_total is not None:
            doc["fast_minus_exact_bytes"] = int(round(fast_total)) - self.total_bytes
            doc["fast_minus_exact_pct"] = round(100.0 * (fast_total - self.total_bytes) / self.total_bytes, 2)
        return doc


def _detail(est: Estimate | None, label: str) -> float:
    """The estimator's term `label`: at its peak phase, else the largest over its phases (the QLoRA dequantisation
    buffer is not part of every phase, but one matmul of the traced peak's phase would need it)."""
    if est is None:
        return 0.0
    at_peak = sum(d.bytes for d in est.details if d.label == label)
    return at_peak or max((sum(d.bytes for d in p.details if d.label == label) for p in est.phases), default=0.0)


def combine(raw: dict[str, Any], setup: TrainingSetup, est: Estimate | None,
            notes: tuple[str, ...] = ()) -> ExactResult:
    """The worker's answer + what a CPU trace cannot see (from the estimator, each item named)."""
    added: list[Added] = []
    peak = int(raw["peak_bytes"])
    if setup.method == "qlora":
        nf4 = NF4_DQ_BYTES if setup.nf4_double_quant else NF4_BYTES
        q_params, q_bytes = int(raw["quantizable_params"]), int(raw["quantizable_bytes"])
        added.append(Added(Text(N_("16-bit linear weights bitsandbytes stores in 4-bit (traced, removed)")), -q_bytes,
                           f"{q_params:,} parameters counted in the trace"))
        added.append(Added(Text(N_("NF4 storage of those weights")), int(round(q_params * nf4)),
                           f"{nf4:.4f} B/parameter (bitsandbytes quantize_4bit, estimator/precision.py)"))
        deq = _detail(est, "QLoRA dequantisation buffer")
        if deq:
            added.append(Added(Text(N_("QLoRA dequantisation buffer (CUDA kernel)")), int(round(deq)), "estimator"))
    if setup.optimizer not in TRACED_OPTIMIZERS and est is not None:
        traced_opt = int(raw["peak_by_category"].get("optimizer_states", 0))
        added.append(Added(Text(N_("AdamW state at the peak (traced, replaced by {optimizer})"),
                                optimizer=setup.optimizer), -traced_opt, "trace"))
        added.append(Added(Text(N_("{optimizer} state"), optimizer=setup.optimizer),
                           int(round(_detail(est, "Optimizer state"))), "estimator"))
    tensor = peak + sum(a.bytes for a in added)
    ctx = _detail(est, "CUDA context and workspaces") if est is not None else CUDA_CONTEXT_BYTES
    added.append(Added(Text(N_("CUDA context and workspaces")), int(round(ctx)), "estimator (docs/formulas.md §5)"))
    added.append(Added(Text(N_("Allocator slack")), int(round(ALLOCATOR_SLACK * tensor)),
                       f"estimator: {ALLOCATOR_SLACK:.0%} of the allocated bytes (docs/formulas.md §5)"))
    all_notes = (*[str(n) for n in raw.get("worker_notes") or ()], *notes, Text(N_(
        "Not counted: FlashAttention's and cuDNN's own workspaces (the CPU trace runs PyTorch's flash-style SDPA "
        "kernel, which saves the same tensors), and anything outside PyTorch's allocator (vLLM, NCCL).")))
    return ExactResult(
        peak_bytes=peak, peak_by_category={k: int(v) for k, v in raw["peak_by_category"].items()},
        peak_phase=str(raw.get("peak_phase")), peak_region=str(raw.get("peak_region")),
        peak_module=str(raw.get("peak_module")), peak_op=str(raw.get("peak_op")),
        seconds=float(raw.get("seconds", 0.0)), versions=dict(raw.get("versions", {})),
        params_total=int(raw.get("params_total", 0)), params_trainable=int(raw.get("params_trainable", 0)),
        added=tuple(added), notes=all_notes, raw=raw, depth=dict(raw.get("depth") or {}),
    )


# --------------------------------------------------------------------------------------------------
# The worker process pool
# --------------------------------------------------------------------------------------------------
def _run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Runs in the worker (the interpreter with torch): import the worker there, never here."""
    import importlib

    return importlib.import_module("exact.worker").trace_job(job)


_LAUNCH_LOCK = threading.Lock()


class _Popen(multiprocessing.popen_spawn_posix.Popen):
    """Launches `process_obj._exact_interp.python` with that interpreter's own import path (see _ExactContext)."""

    def _launch(self, process_obj):
        interp: Interpreter = process_obj._exact_interp
        spawn = multiprocessing.spawn
        orig_prep, orig_exe = spawn.get_preparation_data, spawn.get_executable

        def prep(name):
            data = orig_prep(name)
            data.pop("init_main_from_path", None)  # never re-import the parent's __main__ (streamlit, pytest)
            data.pop("init_main_from_name", None)
            data["sys_path"] = list(interp.sys_path)
            data["dir"] = str(ROOT)
            return data

        with _LAUNCH_LOCK:
            spawn.get_preparation_data = prep
            spawn.get_executable = lambda: os.fsencode(interp.python)  # as spawn.set_executable stores it
            try:
                super()._launch(process_obj)
            finally:
                spawn.get_preparation_data, spawn.get_executable = orig_prep, orig_exe


class _Process(multiprocessing.context.SpawnProcess):
    _exact_interp: Interpreter

    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


class _ExactContext(multiprocessing.context.SpawnContext):
    """A spawn context whose processes run another interpreter (the one with torch) with its own import path.

    `ctx.set_executable` alone does not do it: in Python 3.11 it sets the executable of every spawn context in
    the process, and a spawned child gets the parent's sys.path (our venv's site-packages, without torch) and
    re-imports the parent's __main__ (e.g. the streamlit launcher) before any pool initializer runs. So this
    context's Popen swaps in the executable and a preparation dict with the child's own path and without the
    parent's __main__, under a lock, for its own launches only.
    """

    def __init__(self, interp: Interpreter):
        super().__init__()
        self._interp = interp

    def Process(self, *args, **kwargs):  # noqa: N802 - the multiprocessing context API
        proc = _Process(*args, **kwargs)
        proc._exact_interp = self._interp
        return proc


@dataclass
class _Job:
    key: str
    payload: dict[str, Any]
    created: float
    started: float | None = None
    finished: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    timed_out: bool = False
    fut: Future | None = None
    executor: ProcessPoolExecutor | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class JobStatus:
    state: str  # "queued", "running", "done", "failed", "unknown"
    position: int  # 0 = running, n = n jobs ahead of it
    elapsed_s: float  # running: seconds since it started; done/failed: the trace's duration
    time_limit_s: float
    result: dict[str, Any] | None = None
    error: str | None = None


class ExactPool:
    """One worker process, traces queued in the process pool's own queue, results cached by job key."""

    def __init__(self, interp: Interpreter, time_limit_s: float | None = None, max_host_bytes: int | None = None):
        self.interp = interp
        self.time_limit_s = float(time_limit_s or os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
        gb = os.environ.get(HOST_MEMORY_ENV)
        self.max_host_bytes = max_host_bytes or (int(float(gb) * 1e9) if gb else DEFAULT_MAX_HOST_BYTES)
        self._lock = threading.RLock()
        self._executor: ProcessPoolExecutor | None = None
        self._order: list[_Job] = []  # unfinished jobs, submission order (the first one is running)
        self._jobs: dict[str, _Job] = {}
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._failed: dict[str, _Job] = {}  # the last failure per key (a new submit retries it)
        self._broken_heads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._watchdog: threading.Thread | None = None
        self._closed = False

    # -- executor ---------------------------------------------------------------------------------
    def _get_executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(max_workers=1, mp_context=_ExactContext(self.interp))
        return self._executor

    def _dispatch(self, job: _Job) -> None:
        ex = self._get_executor()
        job.executor = ex
        job.fut = ex.submit(_run_job, job.payload)
        job.fut.add_done_callback(lambda fut, job=job: self._on_done(job, fut))

    def worker_pids(self) -> list[int]:
        ex = self._executor
        procs = getattr(ex, "_processes", None) or {}
        return [p.pid for p in list(procs.values()) if p.pid]

    def _kill_workers(self, ex: ProcessPoolExecutor | None) -> None:
        for proc in list((getattr(ex, "_processes", None) or {}).values()):
            try:
                proc.kill()
            except (OSError, AttributeError):
                pass

    # -- jobs -------------------------------------------------------------------------------------
    def submit(self, payload: dict[str, Any], key: str) -> str:
        """Queue a trace (or find it in the cache / already queued). Returns its key."""
        with self._lock:
            if key in self._cache:
                return key
            job = self._jobs.get(key)
            if job is not None and job.error is None:
                return key
            job = _Job(key, {**payload, "max_host_bytes": self.max_host_bytes}, time.monotonic())
            self._jobs[key] = job
            self._order.append(job)
            if len(self._order) == 1:
                job.started = time.monotonic()
            self._dispatch(job)
            self._ensure_watchdog()
            return key

    def _on_done(self, job: _Job, fut: Future) -> None:
        with self._lock:
            if job.fut is not fut:
                return
            exc = BrokenProcessPool("cancelled") if fut.cancelled() else fut.exception()
            if isinstance(exc, BrokenProcessPool):
                # Every job of a dead worker's pool fails at once; the one that was running is the queue's head
                # when the first of them arrives here (the others are still behind it).
                head = self._broken_heads.setdefault(job.executor, self._order[0] if self._order else None)
                running = head is job
            else:
                running = bool(self._order) and self._order[0] is job
            if exc is None:
                res = fut.result()
                if res.get("ok"):
                    job.result = res
                    self._cache[job.key] = res
                    self._jobs.pop(job.key, None)  # the cache answers from now on
                    while len(self._cache) > CACHE_SIZE:
                        self._cache.popitem(last=False)
                else:
                    job.error = str(res.get("error") or "the trace failed")
                    if res.get("recycle"):
                        self._retire(job.executor)
            elif isinstance(exc, BrokenProcessPool):
                if job.executor is self._executor:  # the worker died: the next job gets a fresh one
                    self._executor = None
                if not running and not self._closed:  # it never started: run it on the fresh worker
                    try:
                        self._dispatch(job)
                        return
                    except RuntimeError:  # the interpreter is shutting down
                        pass
                job.error = (f"the trace ran past its time limit ({self.time_limit_s:.0f} s) and was stopped"
                             if job.timed_out else
                             "the trace worker stopped (killed, or out of host memory); try again" if running else
                             "the trace service was stopped before this trace started; try again")
            else:
                job.error = f"the trace failed: {type(exc).__name__}: {str(exc)[:200]}"
            job.finished = time.monotonic()
            if job in self._order:
                self._order.remove(job)
            if self._order and self._order[0].started is None:
                self._order[0].started = time.monotonic()
            if job.error is not None:
                self._jobs.pop(job.key, None)
                self._failed[job.key] = job
            job.done.set()

    def _retire(self, ex: ProcessPoolExecutor | None) -> None:
        """Replace a worker left unfit by its job (out of host memory, perhaps mid-import): the jobs queued behind
        it fail over to a fresh worker (none of them was running) and run there."""
        if ex is None:
            return
        if ex is self._executor:
            self._executor = None
        self._broken_heads[ex] = None
        self._kill_workers(ex)

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, name="exact-trace-watchdog", daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                if not self._order:
                    continue
                head = self._order[0]
                if head.started is not None and time.monotonic() - head.started > self.time_limit_s \
                        and not head.timed_out:
                    head.timed_out = True
                    self._kill_workers(head.executor)

    def status(self, key: str) -> JobStatus:
        with self._lock:
            now = time.monotonic()
            if key in self._cache:
                res = self._cache[key]
                return JobStatus("done", 0, float(res.get("seconds", 0.0)), self.time_limit_s, result=res)
            job = self._jobs.get(key) or self._failed.get(key)
            if job is None:
                return JobStatus("unknown", 0, 0.0, self.time_limit_s)
            if job.error is not None:
                return JobStatus("failed", 0, (job.finished or now) - (job.started or job.created),
                                 self.time_limit_s, error=job.error)
            pos = self._order.index(job) if job in self._order else 0
            if pos == 0 and job.started is not None:
                return JobStatus("running", 0, now - job.started, self.time_limit_s)
            return JobStatus("queued", pos, now - job.created, self.time_limit_s)

    def wait(self, key: str, timeout: float | None = None) -> JobStatus:
        with self._lock:
            job = self._jobs.get(key) or self._failed.get(key)
        if job is not None:
            job.done.wait(timeout)
        return self.status(key)

    def shutdown(self) -> None:
        """Stop the worker (queued traces end with a note). The pool may be used again afterwards."""
        with self._lock:
            self._closed = True
            ex, self._executor = self._executor, None
        if ex is not None:
            self._kill_workers(ex)
            ex.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._closed = False


_POOLS: dict[str, ExactPool] = {}
_POOLS_LOCK = threading.Lock()


def _kill_running_traces() -> None:
    """At interpreter exit, stop the workers first: concurrent.futures' own exit hook would otherwise wait for a
    running trace (minutes) before the server can stop."""
    for pool in list(_POOLS.values()):
        pool._closed = True
        pool._kill_workers(pool._executor)


# threading's exit hooks run in reverse order of registration, so this runs before concurrent.futures' join.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_kill_running_traces)


def get_pool() -> ExactPool:
    """The process-wide pool for the configured interpreter (one trace at a time per server)."""
    interp = find_interpreter()
    with _POOLS_LOCK:
        pool = _POOLS.get(interp.python)
        if pool is None:
            pool = _POOLS[interp.python] = ExactPool(interp)
        return pool


def make_job(cfg: Any, setup: TrainingSetup) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """(key, payload, notes) for a config dict and a setup; ExactRefused when it cannot be traced."""
    clean = check_config(cfg)
    tsetup, notes = tracer_setup(setup)
    quantizable = setup.method == "qlora"
    key = job_key(clean, tsetup, quantizable)
    payload = {"config": clean, "setup": tsetup, "quantizable": quantizable}
    return key, payload, notes


def trace_exact(cfg: Any, setup: TrainingSetup, est: Estimate | None = None,
                pool: ExactPool | None = None) -> ExactResult:
    """Trace and wait (the CLI). Raises ExactUnavailable, ExactRefused, or RuntimeError(one line) on failure."""
    key, payload, notes = make_job(cfg, setup)
    pool = pool or get_pool()
    pool.submit(payload, key)
    st = pool.wait(key)
    if st.state != "done" or st.result is None:
        raise RuntimeError(st.error or "the trace did not finish")
    return combine(st.result, setup, est, notes)
