"""Will it fit? The peak GPU memory of one fine-tuning step, from the architecture, and its verdict.

Pure Python: no Streamlit, Plotly or torch. Frozen dataclasses in (ModelSpec, TrainingSetup, Device),
frozen dataclasses out (Estimate, Verdict, Remedy). Bytes inside; GB = 1e9 B and GiB = 2^30 B for display.

This is the face: what the app, the pages and the CLI call. The layers below it, each importing only from the
ones listed before it (docs/architecture.md): i18n/units → options/ → models/ → job/ → memory/ and speed/ (the
time model, beside it) → advice/ → exact/ → report/.
"""

from __future__ import annotations

from .advice.advise import Advice, advise
from .advice.fastest import Constraints, FastestFit, fastest_fit
from .advice.remedies import Remedy, remedies
from .advice.solvers import max_batch, max_seq_len, min_gpus, min_gpus_for_devices, smallest_device
from .job.setup import TrainingSetup, parse_targets
from .job.trainer import TrainerSetup
from .job.trainer import check as check_trainer
from .memory.price import detailed_estimate, estimate, estimate_trainer
from .memory.result import (
    ALL_COMPONENT_KEYS,
    COMPONENT_KEYS,
    COMPONENT_LABELS,
    DetailItem,
    Estimate,
    Phase,
    component_keys,
)
from .memory.rule import rule_gb, seed_estimate, seed_figure_gb
from .memory.verdict import Verdict, verdict
from .models.config import parse_config_text, spec_from_config
from .models.presets import (
    MAX_SIZE_B,
    MIN_SIZE_B,
    Preset,
    generic_spec,
    list_presets,
    load_preset,
    preset_ids,
    resolve_model,
)
from .models.spec import ModelSpec
from .options.devices import CATALOG, Device, custom_device, device_ids, device_label, find_devices, get_device
from .options.trainers import TRAINER_IDS, TRAINERS
from .speed import DatasetSize, StepTime, run_cost, run_time, time_of
from .units import GB, GiB, fmt_both, fmt_gb, to_gb, to_gib

__all__ = [
    "Advice", "advise", "Constraints", "DatasetSize", "FastestFit", "StepTime", "fastest_fit", "run_cost", "run_time",
    "time_of", "ALL_COMPONENT_KEYS", "CATALOG", "COMPONENT_KEYS", "TRAINERS", "TRAINER_IDS", "TrainerSetup", "component_keys",
    "estimate_trainer", "COMPONENT_LABELS", "GB", "GiB", "MAX_SIZE_B", "MIN_SIZE_B",
    "DetailItem", "Device", "Estimate", "ModelSpec", "Phase", "Preset", "Remedy", "TrainingSetup", "Verdict",
    "check_trainer", "custom_device", "detailed_estimate", "device_ids", "device_label", "find_devices", "estimate",
    "fmt_both", "fmt_gb", "generic_spec", "get_device", "list_presets", "load_preset", "max_batch", "max_seq_len",
    "min_gpus", "min_gpus_for_devices", "parse_config_text", "parse_targets", "preset_ids", "remedies",
    "resolve_model", "rule_gb", "seed_estimate", "seed_figure_gb", "smallest_device", "spec_from_config", "to_gb",
    "to_gib", "verdict",
]
