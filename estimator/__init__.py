"""Will it fit? The peak GPU memory of one fine-tuning step, from the architecture, and its verdict.

Pure Python: no Streamlit, Plotly or torch. Frozen dataclasses in (ModelSpec, TrainingSetup, Device),
frozen dataclasses out (Estimate, Verdict, Remedy). Bytes inside; GB = 1e9 B and GiB = 2^30 B for display.
"""

from __future__ import annotations

from .advice import Remedy, max_batch, max_seq_len, min_gpus, min_gpus_for_devices, remedies, smallest_device
from .devices import (
    CATALOG,
    Device,
    Verdict,
    custom_device,
    device_ids,
    device_label,
    find_devices,
    get_device,
    verdict,
)
from .i18n import N_, Text
from .memory import ALL_COMPONENT_KEYS, COMPONENT_KEYS, COMPONENT_LABELS, DetailItem, Estimate, Phase, component_keys
from .memory import estimate as detailed_estimate
from .model import (
    MAX_SIZE_B,
    MIN_SIZE_B,
    ModelSpec,
    Preset,
    generic_spec,
    list_presets,
    load_preset,
    parse_config_text,
    preset_ids,
    resolve_model,
    spec_from_config,
)
from .rule import rule_gb, seed_estimate, seed_figure_gb
from .trainers import TRAINER_IDS, TRAINERS, TrainerSetup, estimate_trainer
from .trainers import check as check_trainer
from .training import TrainingSetup, parse_targets
from .units import GB, GiB, fmt_both, fmt_gb, to_gb, to_gib


def estimate(model: ModelSpec, setup: TrainingSetup, rule: str | None = None, trainer: TrainerSetup | None = None,
             device_capacity: float | None = None) -> Estimate:
    """The one entry point pages and the CLI call: the detailed estimate, or the seed's rule of thumb
    with rule='seed'. `trainer` prices a preference/RL trainer's step (estimator/trainers.py); vLLM colocate
    mode needs the device's total memory in `device_capacity`."""
    if trainer is not None and trainer.trainer != "sft":
        if rule == "seed":
            raise ValueError(Text(N_("the rule of thumb covers SFT only; drop it to estimate the {trainer} trainer"),
                                  trainer=Text(trainer.option.label)))
        return estimate_trainer(model, setup, trainer, device_capacity)
    if trainer is not None:
        check_trainer(setup, trainer)  # SFT: only the checks (no second estimate)
    if rule is None or rule == "detailed":
        return detailed_estimate(model, setup)
    if rule == "seed":
        return seed_estimate(model, setup)
    raise ValueError(f"rule must be 'seed' or omitted, got {str(rule)[:20]!r}")


__all__ = [
    "ALL_COMPONENT_KEYS", "CATALOG", "COMPONENT_KEYS", "TRAINERS", "TRAINER_IDS", "TrainerSetup", "component_keys",
    "estimate_trainer", "COMPONENT_LABELS", "GB", "GiB", "MAX_SIZE_B", "MIN_SIZE_B",
    "DetailItem", "Device", "Estimate", "ModelSpec", "Phase", "Preset", "Remedy", "TrainingSetup", "Verdict",
    "custom_device", "detailed_estimate", "device_ids", "device_label", "find_devices", "estimate", "fmt_both", "fmt_gb", "generic_spec",
    "get_device", "list_presets", "load_preset", "max_batch", "max_seq_len", "min_gpus", "min_gpus_for_devices", "parse_config_text",
    "parse_targets", "preset_ids", "remedies", "resolve_model", "rule_gb", "seed_estimate", "seed_figure_gb",
    "smallest_device", "spec_from_config", "to_gb", "to_gib", "verdict",
]
