"""The secondary pages' computations, kept out of the page scripts so they can be tested without Streamlit:
models × methods on one device (the seed's 36 GB laptop diagram, for any device), the size table, and
per-GPU memory against GPU count under each sharding. Everything here calls the estimator; no formulas."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd

from estimator import (
    CATALOG,
    COMPONENT_KEYS,
    GB,
    MAX_SIZE_B,
    MIN_SIZE_B,
    Device,
    Estimate,
    GiB,
    ModelSpec,
    TrainingSetup,
    Verdict,
    estimate,
    generic_spec,
    list_presets,
    load_preset,
    min_gpus_for_devices,
    preset_ids,
    rule_gb,
    verdict,
)
from estimator.advice.solvers import max_fitting_size_b, sharded
from estimator.i18n import N_, _, format_int, format_number, short_number
from estimator.job.stack import check_stack_setup, with_method
from estimator.job.tower import setup_for_model
from estimator.job.trainer import TrainerSetup
from estimator.memory.result import component_label
from estimator.options.methods import METHOD_LABELS, SHARDING_LABELS, SHARDINGS
from estimator.options.optimizers import OPTIMIZER_IDS
from estimator.options.precisions import PRECISION_IDS

# The model sizes the seed page uses (its size table, the 36 GB diagram and its conclusions), in billions.
SEED_SIZES_B: tuple[float, ...] = (0.5, 1.5, 3, 7, 14, 27, 32, 70)
# The seed diagram's order: LoRA first, then QLoRA, then full fine-tuning.
METHOD_ORDER: tuple[str, ...] = ("lora", "qlora", "full")
SHORT_METHOD = {"full": N_("full"), "lora": "LoRA", "qlora": "QLoRA"}  # N_: translated where shown
SHORT_SHARDING = {"none": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3 / FSDP"}


def size_label(size_b: float) -> str:
    """'0.5B', '7B', '1.5B': a seed size as the link and the Models box name it (an id, the same in every
    language)."""
    return f"{size_b:g}B"


def size_text(size_b: float) -> str:
    """A size as the page's language writes it: '6.5B' in English, '6,5B' in Spanish (size_label's figures)."""
    shown = short_number(size_b)
    return (shown if isinstance(shown, str) else format_number(*shown)) + "B"


@dataclass(frozen=True)
class FitCell:
    """One bar of the diagram: a model trained one way, its estimate and its verdict on the device."""

    model_label: str
    size_b: float
    method: str
    estimate: Estimate
    verdict: Verdict

    @property
    def label(self) -> str:
        return f"{self.model_label} · {_(SHORT_METHOD[self.method])}"


@dataclass(frozen=True)
class Conclusion:
    """The largest model that fits one way: among the listed models, and as a size of a generic decoder."""

    method: str
    largest_listed: FitCell | None  # the biggest listed model that fits
    smallest_too_big: FitCell | None  # the next listed model up, which does not fit
    max_size_b: float | None  # the largest generic decoder (billions) that fits; None if not even the smallest

    @property
    def text(self) -> str:
        name = _(METHOD_LABELS[self.method])
        if self.max_size_b is None:
            return _("{method}: not even a {size} model fits.").format(method=name, size=size_text(MIN_SIZE_B))
        if self.max_size_b >= MAX_SIZE_B:
            head = _("{method}: every size up to {size} fits").format(method=name, size=size_text(MAX_SIZE_B))
        else:
            head = _("{method}: up to about {size}").format(method=name,
                                                            size=size_text(round_size(self.max_size_b)))
        listed = []
        if self.largest_listed is not None:
            listed.append(_("{model} fits").format(model=self.largest_listed.model_label))
        if self.smallest_too_big is not None:
            listed.append(_("{model} is too big").format(model=self.smallest_too_big.model_label))
        return head + (f" ({', '.join(listed)})" if listed else "") + "."


@dataclass(frozen=True)
class FitsGrid:
    device: Device
    cells: tuple[FitCell, ...]  # grouped by method (METHOD_ORDER), smallest model first
    conclusions: tuple[Conclusion, ...]

    def cell(self, size_b: float, method: str) -> FitCell:
        for c in self.cells:
            if c.method == method and math.isclose(c.size_b, size_b, rel_tol=1e-9):
                return c
        raise KeyError((size_b, method))


def round_size(size_b: float) -> float:
    """Two significant figures: 12.04 → 12, 1.92 → 1.9, 34.47 → 34."""
    if size_b <= 0:
        return 0.0
    digits = 1 - int(math.floor(math.log10(size_b)))
    return round(size_b, max(digits, 0))


def size_and_preset_options() -> list[str]:
    """The fits page's model choices: the seed's sizes ('7B') then every preset id."""
    return [size_label(s) for s in SEED_SIZES_B] + list(preset_ids())


def chosen_models(choices: Sequence[str]) -> list[tuple[str, ModelSpec]]:
    """(label, spec) for each choice: a seed size ('7B') is a generic decoder of that size, a preset id its real
    architecture under its display name. Unknown choices are skipped."""
    sizes = {size_label(s): s for s in SEED_SIZES_B}
    names = {p.id: p.name for p in list_presets()}
    out: list[tuple[str, ModelSpec]] = []
    for choice in choices:
        if choice in sizes:
            out.append((size_text(sizes[choice]), generic_spec(sizes[choice])))  # '1,5B' on a Spanish page
        elif choice in names:
            out.append((names[choice], load_preset(choice)))
    return out


def page_estimate_fn(trainer: TrainerSetup | None, rule: str | None = None, device_capacity: float | None = None):
    """The estimate a page prices each bar, cell or GPU count with, through the one chooser
    (estimator.memory.price.estimate): the detailed one (or the rule's) for SFT, else the trainer's, whose pages
    show the detailed estimate since the rule covers SFT only. Without TRL's batch-shape checks, which
    resolve_trainer has already applied to the setup, since pages change the method, GPU count or model;
    setup_for_model: another method or model may not take the sidebar's tower/images."""
    if trainer is not None and trainer.trainer == "sft":
        trainer = None  # SFT's trainer checks were applied by resolve_trainer; the step is the detailed one
    if trainer is not None:
        rule = None
    return lambda spec, setup: estimate(spec, setup_for_model(spec, setup), rule, trainer=trainer,
                                        device_capacity=device_capacity, strict=False)


def fits_grid(models: Sequence[tuple[str, ModelSpec]], setup: TrainingSetup, device: Device,
              rule: str | None = None, methods: Sequence[str] = METHOD_ORDER,
              trainer: TrainerSetup | None = None) -> FitsGrid:
    """Every model × method on one device: estimates, verdicts and, per method, the conclusion line. A
    `trainer` other than SFT prices every cell and the largest size with its step (the rule is then unused)."""
    fn = page_estimate_fn(trainer, rule, device.runtime_total_bytes)
    solver = None if trainer is None or trainer.trainer == "sft" else fn
    ordered = sorted(models, key=lambda m: m[1].params_total)
    cells: list[FitCell] = []
    conclusions: list[Conclusion] = []
    for method in methods:
        method_setup = with_method(setup, method)
        row: list[FitCell] = []
        for label, spec in ordered:
            est = fn(spec, method_setup)
            row.append(FitCell(label, spec.params_total / 1e9, method, est,
                               verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)))
        cells.extend(row)
        fitting = [c for c in row if c.verdict.fits]
        largest = fitting[-1] if fitting else None
        above = [c for c in row if not c.verdict.fits and (largest is None or c.size_b > largest.size_b)]
        conclusions.append(Conclusion(method, largest, above[0] if above else None,
                                      max_fitting_size_b(method_setup, device, rule, estimate_fn=solver)))
    return FitsGrid(device, tuple(cells), tuple(conclusions))


# --------------------------------------------------------------------------------------------
# The size table
# --------------------------------------------------------------------------------------------

# The size table: the seed's sizes and a few larger ones, up to Llama-3.1-405B's size.
TABLE_SIZES_B: tuple[float, ...] = (*SEED_SIZES_B, 100, 200, 405)
TABLE_METHODS: tuple[str, ...] = ("lora", "full", "qlora")  # the seed's columns (LoRA, full), then QLoRA


def size_table(setup: TrainingSetup, sizes: Sequence[float] = TABLE_SIZES_B,
               extra: Sequence[tuple[str, ModelSpec]] = (), methods: Sequence[str] = TABLE_METHODS,
               trainer: TrainerSetup | None = None, device_capacity: float | None = None) -> pd.DataFrame:
    """One row per model, smallest first: for each method the seed's rule of thumb (GB) next to the detailed
    estimate for this setup (batch, length, precision, optimizer...) in GB and GiB. Sizes are generic
    decoders of that many parameters; `extra` adds real models (e.g. the one chosen in the sidebar)."""
    fn = page_estimate_fn(trainer, None, device_capacity)  # the detailed columns: the trainer's step if not SFT
    models = [(size_text(s), generic_spec(s)) for s in sizes] + list(extra)
    models.sort(key=lambda m: m[1].params_total)
    master = setup.precision == "mixed"
    rows = []
    for label, spec in models:
        size_b = spec.params_total / 1e9
        row: dict[str, object] = {"Model": label, "Parameters (B)": size_b}
        for method in methods:
            est = fn(spec, with_method(setup, method))
            name = SHORT_METHOD[method]
            row[f"{name} · rule (GB)"] = rule_gb(size_b, method, master)
            row[f"{name} · detailed (GB)"] = est.total_bytes / GB
            row[f"{name} · detailed (GiB)"] = est.total_bytes / GiB
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Scale out
# --------------------------------------------------------------------------------------------

GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


_scaled = sharded  # the setup under one sharding (estimator.advice.solvers)


def scale_out_curves(spec: ModelSpec, setup: TrainingSetup, gpu_counts: Sequence[int] = GPU_COUNTS,
                     shardings: Sequence[str] = SHARDINGS, offload: bool = False, trainer: TrainerSetup | None = None,
                     device_capacity: float | None = None) -> dict[str, list[Estimate]]:
    """Per-GPU detailed estimates (a trainer's step when given) for each sharding at each GPU count."""
    fn = page_estimate_fn(trainer, None, device_capacity)
    return {sharding: [fn(spec, _scaled(setup, sharding, offload, n)) for n in gpu_counts]
            for sharding in shardings}


def min_gpus_table(spec: ModelSpec, setup: TrainingSetup, devices: Sequence[Device] = CATALOG,
                   shardings: Sequence[str] = SHARDINGS, offload: bool = False, max_gpus: int = 64,
                   per_node: int = 1, trainer: TrainerSetup | None = None) -> pd.DataFrame:
    """The smallest GPU count (≤ max_gpus; whole nodes of per_node GPUs) that fits each device under each
    sharding (columns named by SHORT_SHARDING); missing where none does. Only discrete GPUs: unified-memory
    laptops do not scale out. A `trainer` prices its step; vLLM colocated reserves a share of each device's
    own memory, so then each device is solved on its own."""
    gpus_only = [d for d in devices if d.kind == "discrete"]
    per_device = trainer is not None and trainer.option.generates and trainer.generation_mode == "vllm-colocate"
    monotone = trainer is None or not trainer.option.generates  # estimator.advice.solvers.min_gpus_for_devices
    if per_device and not trainer.vllm_sleep:
        # Held in every phase, vLLM's reservation adds util × capacity to the total and nothing else
        # (estimator.memory.trainers: a fixed amount, no allocator slack): price each count once at a 1-byte device and
        # answer each device with its memory less its own reservation.
        util = trainer.vllm_util
        shifted = [replace(d, capacity_bytes=int(d.runtime_total_bytes - util * (d.runtime_total_bytes - 1)),
                           cuda_total_mib=None) for d in gpus_only]
        fn = page_estimate_fn(trainer, None, 1.0)
        answers = {sharding: min_gpus_for_devices(spec, _scaled(setup, sharding, offload), shifted, max_gpus, fn,
                                                  per_node=per_node, monotone=monotone)
                   for sharding in shardings}
    elif per_device:
        answers = {sharding: {d.id: min_gpus_for_devices(spec, _scaled(setup, sharding, offload), [d], max_gpus,
                                                         page_estimate_fn(trainer, None, d.runtime_total_bytes),
                                                         per_node=per_node, monotone=monotone)[d.id]
                              for d in gpus_only}
                   for sharding in shardings}
    else:
        fn = page_estimate_fn(trainer)
        answers = {sharding: min_gpus_for_devices(spec, _scaled(setup, sharding, offload), gpus_only, max_gpus,
                                                  fn, per_node=per_node, monotone=monotone)
                   for sharding in shardings}  # each (sharding, count) estimated once for every device
    columns: dict[str, object] = {"Device": [d.name for d in gpus_only],
                                  "Memory (GB)": [d.capacity_bytes / 1e9 for d in gpus_only]}
    for sharding in shardings:  # whole GPU counts, missing where nothing up to max_gpus fits
        columns[SHORT_SHARDING[sharding]] = pd.array([answers[sharding][d.id] for d in gpus_only], dtype="Int64")
    return pd.DataFrame(columns)


def close_calls(spec: ModelSpec, setup: TrainingSetup, table: pd.DataFrame, shardings: Sequence[str] = SHARDINGS,
                offload: bool = False) -> set[tuple[str, str]]:
    """(device name, sharding) cells of a min_gpus_table whose count fits only as a close call (estimator
    Verdict.band): the expected peak fits, the upper end of the likely range does not. One estimate per distinct
    (sharding, count): per-GPU memory does not depend on the device."""
    devices = {d.name: d for d in CATALOG}
    names = table["Device"].tolist()
    out: set[tuple[str, str]] = set()
    for sharding in shardings:
        counts = table[SHORT_SHARDING[sharding]].tolist()  # plain values: a Series is slow to walk
        ests = {int(n): estimate(spec, _scaled(setup, sharding, offload, int(n))) for n in set(counts) if n is not pd.NA}
        for name, n in zip(names, counts, strict=True):
            if n is pd.NA:
                continue
            est = ests[int(n)]
            if verdict(est.total_bytes, devices[name], est.high_bytes).band == "close call":
                out.add((name, sharding))
    return out


# --------------------------------------------------------------------------------------------
# Compare methods
# --------------------------------------------------------------------------------------------

# The compare page's extra bars: another precision or another optimizer, applied to every chosen method.
VARIANT_OPTIONS: tuple[str, ...] = PRECISION_IDS + OPTIMIZER_IDS
# The seed's 7B figure order: full fine-tuning, LoRA, QLoRA.
FIGURE_ORDER: tuple[str, ...] = ("full", "lora", "qlora")


def compare_setups(setup: TrainingSetup, methods: Sequence[str], variants: Sequence[str] = ()
                   ) -> list[tuple[str, TrainingSetup]]:
    """(label, setup) for each chosen method (seed figure order) and, after each, the same method with each
    variant precision or optimizer. A variant equal to the current setting adds nothing."""
    out: list[tuple[str, TrainingSetup]] = []
    for method in (m for m in FIGURE_ORDER if m in methods):
        base = with_method(setup, method)
        out.append((_(METHOD_LABELS[method]), base))
        for variant in variants:
            field = "precision" if variant in PRECISION_IDS else "optimizer"
            if variant not in VARIANT_OPTIONS or getattr(base, field) == variant:
                continue
            varied = replace(base, **{field: variant})
            try:
                check_stack_setup(varied)  # a variant the stack cannot run (MLX-LM: mixed precision, bnb optimizers)
            except ValueError:
                continue
            out.append((f"{_(SHORT_METHOD[method])} · {variant}", varied))
    return out


def components_table(rows: Sequence[tuple[str, Estimate]], device: Device | None = None) -> pd.DataFrame:
    """Components down, setups across: each setup's GB and GiB per component, then the total."""
    data: dict[str, list[object]] = {
        "Component": [component_label(k, device) for k in COMPONENT_KEYS] + [_("Total")]}
    for label, est in rows:
        values = [float(est.components_bytes[k]) for k in COMPONENT_KEYS] + [float(est.total_bytes)]
        data[f"{label} (GB)"] = [v / GB for v in values]
        data[f"{label} (GiB)"] = [v / GiB for v in values]
    return pd.DataFrame(data)


def setup_summary(spec: ModelSpec | None, setup: TrainingSetup, device: Device | None,
                  trainer: str = "") -> str:
    """One plain-text line naming what a page computes for: model, batch × length, precision, optimizer,
    checkpointing, GPUs, device (model and device left out when None), then the trainer (ui.trainer_inputs.
    trainer_summary; '' for SFT)."""
    parts = [spec.name] if spec is not None else []
    parts += [_("batch {batch} × {length} tokens").format(batch=setup.batch, length=format_int(setup.seq_len)),
              setup.precision, setup.optimizer, _("checkpointing on") if setup.grad_ckpt else _("checkpointing off")]
    if setup.gpus > 1:
        parts.append(_("{n} GPUs, {sharding}").format(n=setup.gpus, sharding=_(SHARDING_LABELS[setup.sharding])))
    if device is not None:
        parts.append(device.name)
    if trainer:
        parts.append(trainer)
    return " · ".join(parts)
