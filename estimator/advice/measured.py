"""What people measured (issue 29 item 4): the published measured runs closest to a setup, from the project's own
validation data (validation/data/: published_measurements.csv, published_trainer_measurements.csv, mlx_fixtures.json,
unsloth_context_lengths.csv and, where present, real_runs.csv), each with its figure, what the figure measures, its
source, and the estimator's answer for that run's own settings beside it.

Product code reads the stored files only (it imports nothing from validation/ or calibration/). Each row is replayed
as the accuracy report replays it (validation/__init__.py published_rows, validation/trainers.py, validation/mlx.py
fixture_setup, validation/unsloth.py context_rows, the real-run check's row_job); tests/test_explain.py checks that
the two replays give the same estimate for every row. The rows are read once per process; only the runs shown are
priced."""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..i18n import N_, Text
from ..job.setup import TrainingSetup
from ..job.stack import resolve_setup
from ..job.trainer import TrainerSetup
from ..job.versions import resolve_versions
from ..memory.overhead import ALLOCATOR_SLACK
from ..memory.price import detailed_estimate, estimate
from ..memory.runtimes import RUNTIMES
from ..memory.unsloth.model import published_tables_path
from ..memory.unsloth.step import estimate_for_path
from ..models.config import spec_from_config
from ..models.presets import load_preset, preset_ids
from ..options.devices import get_device
from ..options.stacks import get_stack
from ..units import GB, GiB
from .solvers import max_seq_len

if TYPE_CHECKING:
    from ..job.versions import Versions
    from ..models.spec import ModelSpec

DATA = Path(__file__).resolve().parents[2] / "validation" / "data"
PUBLISHED = DATA / "published_measurements.csv"
PUBLISHED_TRAINERS = DATA / "published_trainer_measurements.csv"
MLX_FIXTURES = DATA / "mlx_fixtures.json"
UNSLOTH_CONTEXT = DATA / "unsloth_context_lengths.csv"
REAL_RUNS = DATA / "real_runs.csv"  # issue 28 item 5's published real runs, read when the file is there
CONFIGS = DATA / "published_configs"
UNITS = {"GB": GB, "GiB": GiB, "MiB": 2**20}
# What a figure measures (MeasuredRun.metric), as the accuracy report names it.
METRICS = ("max_allocated", "max_reserved", "nvidia-smi", "mx.get_peak_memory", "unknown", "longest_length")
METRIC_LABELS = {
    "max_allocated": N_("torch.cuda.max_memory_allocated: the tensors' peak, without the CUDA context and the "
                        "allocator's cache"),
    "max_reserved": N_("torch.cuda.max_memory_reserved: the caching allocator's peak, without the CUDA context"),
    "nvidia-smi": N_("nvidia-smi: the whole process, CUDA context and allocator cache included"),
    "mx.get_peak_memory": N_("mx.get_peak_memory: MLX's own peak"),
    "unknown": N_("a peak whose measure the source does not state"),
    "longest_length": N_("the longest length per example that trained on the card"),
}
# The training stack each published framework ran (validation/__init__.py FRAMEWORK_STACKS).
FRAMEWORK_STACKS = {"litgpt": "litgpt", "torchtune": "torchtune", "peft-bench": "plain", "hf-trainer": "trainer"}
FUSED_QKV = {"gpt_neox": "query_key_value", "phi3": "qkv_proj"}  # validation/__init__.py FUSED_QKV


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run from the project's validation data, replayed as a setup."""

    id: str  # the row's id in its file (a fixture's name for mlx_fixtures.json)
    model: str  # the model as the source names it
    spec: ModelSpec
    setup: TrainingSetup
    trainer: TrainerSetup
    device: str | None  # the catalog device it ran on, when stated
    figure: float  # the measured number: bytes, or tokens for a longest length
    unit: str  # "bytes" or "tokens"
    metric: str  # METRICS: what the figure measures
    source: str  # where it was published: "owner/repo path", a URL, or this project's trace
    file: str  # the data file it comes from (validation/data/…)
    note: str = ""  # what the run's code was, when the estimate prices another release
    # "unsloth_2024": priced on the code path Unsloth's published tables measured (memory/unsloth/model.py
    # published_tables_path), as the accuracy report checks it; "" = the calculator's own estimate
    code_path: str = ""

    @property
    def seq_len(self) -> int:
        """Tokens per sequence (GRPO: prompt + completion)."""
        if self.trainer.option.generates:
            return self.trainer.prompt_length + self.trainer.completion_length
        return self.setup.seq_len


@dataclass(frozen=True)
class Comparison:
    """A measured run beside this setup: how alike they are, and the estimator's answer for the run's own
    settings in the figure's own measure."""

    run: MeasuredRun
    similarity: float  # higher is closer (see similarity)
    ours: float | None  # the estimate for the run's settings in the figure's measure (bytes or tokens)
    diff_pct: float | None  # 100 · (ours − figure) / figure

    def sentence(self) -> Text:
        """'Llama-3.1-8B · lora · litgpt · batch 4 × 512 tokens: measured 15.2 GB (max_allocated); our estimate for
        that run 14.8 GB (−2.6 %)'."""
        r = self.run
        what = Text(N_("{model} · {method} · {stack} · batch {batch} × {length} tokens"), model=r.model,
                    method=r.setup.method, stack=get_stack(r.setup.stack).label if r.setup.stack else "",
                    batch=r.setup.batch, length=r.seq_len)
        if r.unit == "tokens":
            measured = Text(N_("measured {n} tokens on {device}"), n=int(r.figure), device=r.device or "?")
            ours = Text(N_("our longest length there {n} tokens"), n=int(self.ours)) if self.ours else Text(
                N_("our estimate fits no length there"))
        else:
            measured = Text(N_("measured {gb} GB ({metric})"), gb=(r.figure / GB, 1), metric=r.metric)
            ours = Text(N_("our estimate for that run {gb} GB"), gb=((self.ours or 0) / GB, 1))
        diff = f" ({self.diff_pct:+.0f} %)" if self.diff_pct is not None else ""
        return Text(N_("{what}: {measured}; {ours}{diff}"), what=what, measured=measured, ours=ours, diff=diff)

    def as_json(self) -> dict[str, Any]:
        r = self.run
        return {"id": r.id, "model": r.model, "file": r.file, "stack": r.setup.stack, "trainer": r.trainer.trainer,
                "method": r.setup.method, "batch": r.setup.batch, "seq_len": r.seq_len, "gpus": r.setup.gpus,
                "device": r.device, "figure": r.figure if r.unit == "tokens" else int(round(r.figure)),
                "unit": r.unit, "metric": r.metric, "source": r.source, "note": r.note,
                "ours": None if self.ours is None else (int(self.ours) if r.unit == "tokens" else int(round(self.ours))),
                "diff_pct": None if self.diff_pct is None else round(self.diff_pct, 1),
                "similarity": round(self.similarity, 3)}


# ---- reading the files ------------------------------------------------------------------------------------------

def _csv(path: Path) -> tuple[dict[str, str], ...]:
    if not path.is_file():
        return ()
    with path.open(newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


@lru_cache(maxsize=128)
def _spec(config_id: str) -> ModelSpec:
    """A row's model: a preset, or a config in validation/data/published_configs/ (validation _published_spec)."""
    if config_id in preset_ids():
        return load_preset(config_id)
    path = CONFIGS / f"{config_id}.json"
    return spec_from_config(json.loads(path.read_text(encoding="utf-8")), name=config_id, source=config_id)


def _targets(text: str) -> tuple[str, ...]:
    if not text or text == "all-linear":
        return ("all-linear",)
    return tuple(t for t in text.replace(",", ";").split(";") if t)


def _map_targets(spec: ModelSpec, targets: tuple[str, ...]) -> tuple[str, ...]:
    """q/k/v adapters on a fused-qkv model go on the fused module (validation/__init__.py _map_targets)."""
    fused = FUSED_QKV.get(spec.family)
    if not fused:
        return targets
    return tuple(dict.fromkeys(fused if t in ("q_proj", "k_proj", "v_proj") else t for t in targets))


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip() else None


def published_setup(r: dict[str, str]) -> tuple[ModelSpec, TrainingSetup]:
    """A published_measurements.csv row as the accuracy report prices it (validation/__init__.py published_rows):
    the framework's stack, the row's settings, and the loss, offloading, compile and optimizer_in_bwd its notes
    state."""
    spec = _spec(r["config_id"])
    notes = r.get("notes", "")
    optimizer = None if r["optimizer"] == "adamw" else r["optimizer"]
    loss = None
    if "CEWithChunkedOutputLoss" in notes or "chunked CE" in notes:
        loss = "chunked"
    elif "standard cross-entropy" in notes or "plain CrossEntropyLoss" in notes:
        loss = "standard"
    offload = True if ("activation offloading" in notes or "enable_activation_offloading=True" in notes) else None
    compiled = bool(re.search(r"(?<!no )(?<!no torch\.)\bcompile\b(?!=False)", notes))
    in_bwd = bool(re.search(r"(?<!no )\boptimizer_in_bwd\b(?!=False)", notes))
    stack = FRAMEWORK_STACKS[r["framework"]]
    targets = _targets(r["lora_targets"])
    if not RUNTIMES[get_stack(stack).model_code].fused_qkv_names:
        targets = _map_targets(spec, targets)
    setup = resolve_setup(
        stack, method=r["method"], precision=r["precision"], optimizer=optimizer, batch=int(r["batch"]),
        seq_len=int(r["seq_len"]), grad_ckpt=r["grad_ckpt"].lower() == "true", attention=r["attention"] or "sdpa",
        lora_rank=int(r["lora_rank"] or 16), lora_targets=targets, gpus=int(r["gpus"] or 1),
        sharding=r["sharding"] or "none", loss=loss, offload_activations=offload,
        grad_accum=int(r.get("grad_accum") or 1), compile=compiled or None, optimizer_in_bwd=in_bwd or None)
    return spec, setup


def _published() -> list[MeasuredRun]:
    out = []
    for r in _csv(PUBLISHED):
        spec, setup = published_setup(r)
        unit = GiB if r["measured_unit"] == "GiB" else GB
        out.append(MeasuredRun(r["id"], r["model"], spec, setup, TrainerSetup("sft"), None,
                               float(r["measured_value"]) * unit, "bytes", r["measure"], r["source"],
                               PUBLISHED.name))
    return out


def _trainer_runs() -> list[MeasuredRun]:
    """published_trainer_measurements.csv rows that state their batch (validation/trainers.py replays the rest
    at several batches): the row's replay stack and trainer."""
    out = []
    for r in _csv(PUBLISHED_TRAINERS):
        batch = _int(r["batch"])
        if batch is None:
            continue
        kw: dict[str, Any] = {"method": r["method"], "precision": r["precision"], "batch": batch}
        if _int(r["seq_len"]):
            kw["seq_len"] = _int(r["seq_len"])
        if _int(r["lora_rank"]):
            kw["lora_rank"] = _int(r["lora_rank"])
        tr = TrainerSetup(r["trainer"])
        if r["trainer"] == "grpo":
            tr = TrainerSetup("grpo", num_generations=_int(r["num_generations"]), prompt_len=_int(r["prompt_len"]),
                              completion_len=_int(r["completion_len"]), generation=r["generation"] or None)
        setup = resolve_setup(r["replay_stack"], trainer=tr.trainer, **kw)
        device = r["device"] if r["device"] != "unknown" else None
        out.append(MeasuredRun(r["id"], r["model"], _spec(r["config_id"]), setup, tr, device,
                               float(r["measured_value"]) * UNITS[r["measured_unit"]], "bytes", r["measure"],
                               r["source"], PUBLISHED_TRAINERS.name))
    return out


def mlx_fixture_setup(fx: dict[str, Any]) -> TrainingSetup:
    """A traced mlx-lm step as the accuracy report prices it (validation/mlx.py fixture_setup): mlx-lm's stack on
    the CPU backend, every switch the fixture set."""
    s = fx["setup"]
    q = s.get("quant") or {}
    method = "full" if s["method"] == "full" else ("qlora" if q else "lora")
    layers = s["num_layers"]
    kwargs: dict[str, Any] = dict(
        method=method, dora=s["method"] == "dora", precision="fp32" if s["dtype"] == "float32" else "bf16",
        batch=s["batch"], seq_len=s["seq_len"] + 1, grad_ckpt=s["grad_checkpoint"], optimizer=s["optimizer"],
        lora_layers=0 if layers == -1 else layers, backend="cpu")
    if method != "full":
        kwargs["lora_rank"] = s["rank"]
    if q:
        kwargs.update(quant_mode=q.get("mode", "affine"), quant_bits=q["bits"], quant_group=q["group_size"])
    return resolve_setup("mlx", **kwargs)


def _mlx_runs() -> list[MeasuredRun]:
    """The traced mlx-lm steps the MLX accuracy figures count (compiled, as mlx_lm lora runs them)."""
    if not MLX_FIXTURES.is_file():
        return []
    out = []
    for fx in json.loads(MLX_FIXTURES.read_text(encoding="utf-8"))["fixtures"]:
        if not fx["setup"].get("compile", True):
            continue
        spec = spec_from_config(fx["config"])
        out.append(MeasuredRun(fx["name"], fx["name"], spec, mlx_fixture_setup(fx), TrainerSetup("sft"), None,
                               float(fx["measured"]["steady_peak_bytes"]), "bytes", "mx.get_peak_memory",
                               "this project's traces of mlx_lm lora steps (calibration/mlx_trace.py, CPU backend)",
                               MLX_FIXTURES.name))
    return out


def _unsloth_runs() -> list[MeasuredRun]:
    """Unsloth's published longest lengths, and the transformers + FlashAttention 2 columns of the same tables
    (validation/unsloth.py context_rows: QLoRA at the row's rank and batch; the HF Trainer with checkpointing)."""
    out = []
    for r in _csv(UNSLOTH_CONTEXT):
        if r["check"] not in ("unsloth_2024", "hf_fa2"):
            continue  # the points the accuracy report cannot check (other releases, extrapolated lines)
        unsloth = r["framework"] == "unsloth"  # the table's column: Unsloth's own runs, or HF + FA2's
        stack = "unsloth" if unsloth else "trainer"
        kw: dict[str, Any] = {"method": "qlora", "lora_rank": int(r["lora_rank"]), "batch": int(r["batch"]),
                              "seq_len": int(r["published_tokens"])}
        if not unsloth:
            kw["grad_ckpt"] = True  # HF + FA2 ran with gradient checkpointing (the Trainer's default is off)
        note = r["code"] if unsloth else ""
        out.append(MeasuredRun(r["id"], r["model"], load_preset(r["config_id"]), resolve_setup(stack, **kw),
                               TrainerSetup("sft"), r["device"], float(r["published_tokens"]), "tokens",
                               "longest_length", r["source_url"], UNSLOTH_CONTEXT.name, note,
                               "unsloth_2024" if r["check"] == "unsloth_2024" else ""))
    return out


_SETUP_TYPES = {f.name: type(f.default) for f in fields(TrainingSetup) if f.name not in ("stack", "from_stack")}
_TRAINER_TYPES = {"beta": float, "precompute_ref": bool, "num_generations": int, "prompt_len": int,
                  "completion_len": int, "generation": str, "vllm_gpu_util": float, "vllm_sleep": bool}


def _pairs(text: str, types: dict[str, type]) -> dict[str, Any]:
    """'k=v;k=v' → typed keyword arguments (real_runs.csv's settings and trainer_settings columns)."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        if not sep or key not in types:
            raise KeyError(part)  # a setting this release's TrainingSetup does not have: the row is left out
        kind = types[key]
        out[key] = value == "true" if kind is bool else kind(value)
    return out


def real_run_versions(stack: str, text: str) -> tuple[Versions | None, str]:
    """A real_runs.csv row's `versions` column (`pkg==X;pkg==Y`) resolved for its stack as the estimator resolves
    pins (job/versions.py resolve_versions): (the versions, "") when every release is one the stack models, else
    (None, the estimator's own line saying which release is not modelled); such a row is priced at the newest
    releases."""
    pins = tuple(p.strip() for p in text.split(";") if p.strip())
    try:
        return resolve_versions(stack, pins=pins), ""
    except ValueError as exc:
        return None, str(exc)


def real_run_job(r: dict[str, str]) -> tuple[ModelSpec, TrainingSetup, TrainerSetup]:
    """A real_runs.csv row as the real-run check (issue 28 item 5) prices it (its row_job): at the releases it ran
    where the stack models them (real_run_versions), else at the newest."""
    spec = _spec(r["config_id"])
    targets = _targets(r["lora_targets"])
    if not RUNTIMES[get_stack(r["stack"]).model_code].fused_qkv_names:
        targets = _map_targets(spec, targets)
    ckpt = r["grad_ckpt"].strip()
    kw: dict[str, Any] = {
        "method": r["method"], "precision": r["precision"] or None, "optimizer": r["optimizer"] or None,
        "batch": _int(r["batch"]), "seq_len": _int(r["seq_len"]), "grad_ckpt": None if not ckpt else ckpt == "true",
        "attention": r["attention"] or None, "loss": r["loss"] or None, "lora_rank": _int(r["lora_rank"]),
        "lora_targets": targets if r["method"] != "full" else None, "gpus": _int(r["gpus"]),
        "sharding": r["sharding"] or None, "grad_accum": _int(r["grad_accum"]),
    }
    kw.update(_pairs(r.get("settings", ""), _SETUP_TYPES))
    trainer = TrainerSetup(r["trainer"] or "sft", **_pairs(r.get("trainer_settings", ""), _TRAINER_TYPES))
    versions, _ = real_run_versions(r["stack"], r["versions"])
    return spec, resolve_setup(r["stack"], trainer=trainer.trainer, versions=versions, **kw), trainer


def _real_runs() -> list[MeasuredRun]:
    """real_runs.csv's runs that published a peak (an out-of-memory row has no figure)."""
    out = []
    for r in _csv(REAL_RUNS):
        if not r.get("measured_value"):
            continue
        try:
            spec, setup, tr = real_run_job(r)
        except (ValueError, KeyError, OSError):
            continue  # a row this release cannot replay (the real-run check reports it)
        out.append(MeasuredRun(r["id"], r["model"], spec, setup, tr, r["device"] or None,
                               float(r["measured_value"]) * UNITS[r["measured_unit"]], "bytes", r["measure"],
                               r["source"], REAL_RUNS.name))
    return out


@lru_cache(maxsize=1)
def measured_runs() -> tuple[MeasuredRun, ...]:
    """Every measured run of the validation data, replayed (read once per process)."""
    return tuple(_published() + _trainer_runs() + _real_runs() + _unsloth_runs() + _mlx_runs())


# ---- comparing ----------------------------------------------------------------------------------------------------

@lru_cache(maxsize=512)  # a run's own answer does not depend on the setup it is shown beside
def ours_for(run: MeasuredRun) -> float | None:
    """The estimator's answer for the run's own settings, in the figure's measure: the tensors' peak for
    max_allocated; for max_reserved the tensors with the allocator's slack (published_measurements.csv, as the
    accuracy report) or the whole total (real_runs.csv, as the real-run check); the total for nvidia-smi and MLX's
    peak; for a longest length the calculator's longest max length on the run's card."""
    if run.unit == "tokens":
        device = get_device(run.device) if run.device else None
        if device is None:
            return None
        if run.code_path == "unsloth_2024":  # the release the published tables measured (validation/unsloth.py)
            found = max_seq_len(run.spec, run.setup, device.usable_bytes,
                                lambda sp, st: estimate_for_path(sp, st, published_tables_path(sp, st)))
        else:
            found = max_seq_len(run.spec, run.setup, device.usable_bytes,
                                lambda sp, st: detailed_estimate(sp, st, device.runtime_total_bytes))
        return float(found) if found is not None else None
    capacity = get_device(run.device).runtime_total_bytes if run.device else None
    est = estimate(run.spec, run.setup, trainer=run.trainer, device_capacity=capacity)
    if run.metric == "max_allocated":
        return est.tensor_bytes
    if run.metric == "max_reserved" and run.file == PUBLISHED.name:
        return est.tensor_bytes * (1 + ALLOCATOR_SLACK)
    return est.total_bytes


def _log_gap(a: float, b: float) -> float:
    return abs(math.log2(max(a, 1.0) / max(b, 1.0)))


def similarity(run: MeasuredRun, spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup) -> float:
    """How close a measured run is to this setup (higher is closer): the same method (5), the same model (3; or
    family, 1.5), the same stack (2; the same array framework 0.5, another −1), the same trainer (2), a peak in bytes
    rather than a longest length (1), then the model's size, the length per sequence, the batch and the GPU count,
    each as a ratio on a log scale (1.5, 0.5, 0.25 and 0.25 per doubling)."""
    score = 0.0
    if run.spec.name == spec.name or run.model == spec.name:
        score += 3.0
    elif run.spec.family == spec.family:
        score += 1.5
    if run.setup.method == setup.method:  # the method moves memory most: it outweighs the model itself
        score += 5.0
    elif run.setup.method != "full" and setup.method != "full":
        score += 1.5  # LoRA and QLoRA share the adapters
    if run.setup.stack == setup.stack:
        score += 2.0
    elif run.setup.stack and setup.stack:  # the same array framework (PyTorch or MLX), or not
        score += 0.5 if get_stack(run.setup.stack).framework == get_stack(setup.stack).framework else -1.0
    score += 2.0 if run.trainer.trainer == trainer.trainer else 0.0
    if run.unit == "tokens":  # a longest length, not a peak in bytes: less direct beside a memory estimate
        score -= 1.0
    length = trainer.prompt_length + trainer.completion_length if trainer.option.generates else setup.seq_len
    score -= 1.5 * _log_gap(run.spec.params_total, spec.params_total)
    score -= 0.5 * _log_gap(run.seq_len, length)
    score -= 0.25 * _log_gap(run.setup.batch, setup.batch)
    score -= 0.25 * _log_gap(run.setup.gpus, setup.gpus)
    return score


@lru_cache(maxsize=256)  # the page asks again for the setup it shows (a rerun that changed nothing else)
def closest_measured(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None = None, count: int = 3,
                     runs: tuple[MeasuredRun, ...] | None = None) -> tuple[Comparison, ...]:
    """The `count` measured runs closest to this setup (most similar first; ties by id), each with the estimate
    for its own settings in its figure's measure."""
    tr = trainer or TrainerSetup("sft")
    pool = measured_runs() if runs is None else runs
    ranked = sorted(pool, key=lambda r: (-similarity(r, spec, setup, tr), r.file, r.id))[:count]
    out = []
    for run in ranked:
        ours = ours_for(run)
        diff = 100.0 * (ours - run.figure) / run.figure if ours is not None and run.figure else None
        out.append(Comparison(run, similarity(run, spec, setup, tr), ours, diff))
    return tuple(out)


def with_setup(run: MeasuredRun, **changes: Any) -> MeasuredRun:
    """A run with its setup changed (tests build runs this way)."""
    return replace(run, setup=replace(run.setup, **changes))
