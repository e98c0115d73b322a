"""mlx-lm's lora_config.yaml for `mlx_lm.lora --config FILE` (SFT only); a base to quantise or cast is converted
first with mlx_lm.convert."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup, check
from ...models.spec import LM_HEAD
from ..snippets.common import (
    PLACEHOLDER_MODEL_ID,
    _comment,
    _header,
    _model_id,
)
from ..snippets.mlx import _line as mlx_line
from ..snippets.mlx import config_pairs, convert_args
from ._common import ExportedConfig, _marker, _text

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _mlx_notes(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> None:
    """What mlx-lm's LoRA YAML cannot hold for this setup."""
    if setup.method != "full" and LM_HEAD in setup.lora_targets:
        notes.append("LoRA target lm_head: left out of lora_parameters.keys; the estimate prices adapters inside the "
                     "trained blocks only (mlx-lm 0.32.2 would adapt a top-level lm_head named there, "
                     "tuner/utils.py:118-120).")
    if setup.backend == "cuda":
        notes.append("MLX's CUDA backend: install mlx[cuda] (pip install \"mlx[cuda]\" mlx-lm); the file is the "
                     "same.")
    if 0 < spec.num_layers < setup.lora_layers:
        notes.append(f"num_layers -1: {spec.num_layers} blocks, fewer than the {setup.lora_layers} asked for (mlx-lm "
                     "refuses more than the model has, lora.py:234-238).")


def _export_mlx(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    """mlx-lm's lora_config.yaml (mlx_lm/lora.py CONFIG_DEFAULTS' keys, 0.32.2) for `mlx_lm.lora --config`. A base
    to quantise or cast is converted first (mlx_lm.convert: the command in the header); the file then trains on the
    converted folder, and the marker names the model and the conversion, which the file has no key for."""
    check(setup, tr)  # mlx-lm trains SFT only (mlx_lm lora): the stack refuses another trainer (job/trainer.py)
    notes: list[str] = []
    _mlx_notes(spec, setup, notes)
    model_id = _model_id(spec)
    convert = convert_args(spec, setup)
    extra: dict[str, object] = {}
    if convert:
        extra = {"model": model_id, "dtype": convert[convert.index("--dtype") + 1]}
        if "-q" in convert:
            extra |= {"q_mode": setup.quant_mode, "q_bits": setup.quant_bits, "q_group": setup.quant_group}
    filename = "lora_config.yaml"
    run = f"mlx_lm.lora --config {filename}"
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if convert:
        lines += ["# First convert the checkpoint to the base the estimate prices (the marker above names it):",
                  f"#   mlx_lm.convert {' '.join(convert)}"]
    elif spec.quantization:
        mode, bits, group = spec.quantization
        lines += _comment(f"The checkpoint is already MLX-quantised ({mode} {bits}-bit, group {group}, its "
                          "config.json): it trains as it is.")
    else:
        lines += _comment(f"mlx-lm trains in the checkpoint's own dtype (mlx_lm/utils.py load() casts nothing): this "
                          "assumes a bfloat16 checkpoint; for another, convert it first (mlx_lm.convert --hf-path "
                          f"{model_id} --mlx-path ./mlx_model --dtype bfloat16) and set model: ./mlx_model.")
    if model_id == PLACEHOLDER_MODEL_ID:
        lines.append("# model: the Hub id (or local folder) of the model you estimated.")
    if setup.method == "full":
        lines += _comment("fine_tune_type full trains the last num_layers blocks in full (lora.py:240-244); "
                          "embeddings, the final norm and the head stay frozen.")
    lines += [mlx_line(k, v) for k, v in config_pairs(spec, setup, "./mlx_model" if convert else model_id)]
    return ExportedConfig("mlx", filename, _text(lines), run, tuple(notes))
