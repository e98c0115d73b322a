"""The mlx_lm lora YAML config (and the commands) for the setup: the keys of mlx_lm/lora.py's CONFIG_DEFAULTS
(mlx-lm 0.32.2), each set to what the estimate assumes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...models.spec import LM_HEAD
from ...options.optimizers import OPTIMIZERS
from ...options.precisions import MLX_CONVERT_DTYPES
from .common import _model_id

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _line(key: str, value: object) -> str:
    """One YAML line, the value in JSON syntax (a float keeps its dot: YAML 1.1 reads 1e-05 as a string)."""
    text = json.dumps(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        text = text.replace("e", ".0e", 1)
    return f"{key}: {text}"


def _keys(spec: ModelSpec, setup: TrainingSetup) -> list[str] | None:
    """lora_parameters.keys for named targets (tuner/utils.py:95-118 matches module paths inside each block:
    self_attn.q_proj, mlp.down_proj, ...); None = every linear of the block (mlx-lm's default)."""
    if setup.lora_targets == (ALL_LINEAR,):
        return None
    roles = {m.name: m.role for m in spec.linears}
    return [f"{'self_attn' if roles.get(t, '').startswith('attn') else 'mlp'}.{t}" for t in setup.lora_targets
            if t != LM_HEAD]  # outside the blocks: mlx-lm would not find it (the estimate's note says so)


def convert_args(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """mlx_lm.convert's arguments when the base must be converted before training ([] when not): quantised for QLoRA
    (-q with the setup's mode, bits and group; a pre-quantised checkpoint is used as it is) or cast to the setup's
    precision (mlx-lm trains in the checkpoint's own dtype; mlx_lm/utils.py load() casts nothing)."""
    quantise = setup.method == "qlora" and not spec.quantization
    if not quantise and setup.precision == "bf16":
        return []
    args = ["--hf-path", _model_id(spec), "--mlx-path", "./mlx_model", "--dtype", MLX_CONVERT_DTYPES.get(setup.precision,
                                                                                             "bfloat16")]
    if quantise:
        args += ["-q", "--q-bits", str(setup.quant_bits), "--q-group-size", str(setup.quant_group)]
        if setup.quant_mode != "affine":
            args += ["--q-mode", setup.quant_mode]
    return args


def fine_tune_type(setup: TrainingSetup) -> str:
    """mlx_lm/lora.py:111's choice for the setup's method."""
    return "full" if setup.method == "full" else ("dora" if setup.dora else "lora")


def config_pairs(spec: ModelSpec, setup: TrainingSetup, model: str) -> list[tuple[str, object]]:
    """The lora_config.yaml keys (mlx_lm/lora.py CONFIG_DEFAULTS' names, 0.32.2) set to what the estimate assumes;
    full fine-tuning has no lora_parameters (lora.py:244 sets them to None)."""
    lora: dict[str, object] = {"rank": setup.lora_rank, "dropout": 0.0, "scale": 20.0}
    keys = _keys(spec, setup)
    if keys is not None:
        lora["keys"] = keys
    trained = setup.lora_layers if 0 < setup.lora_layers <= spec.num_layers else -1
    pairs: list[tuple[str, object]] = [
        ("model", model), ("train", True), ("data", "path/to/data"),  # a folder with train.jsonl and valid.jsonl
        ("fine_tune_type", fine_tune_type(setup)), ("optimizer", OPTIMIZERS[setup.optimizer].mlx_name),
        ("num_layers", trained), ("batch_size", setup.batch), ("max_seq_length", setup.seq_len),
        ("grad_checkpoint", setup.grad_ckpt), ("grad_accumulation_steps", setup.grad_accum)]
    if setup.method != "full":
        pairs.append(("lora_parameters", lora))
    return pairs + [("learning_rate", 1e-5), ("iters", 1000)]


def _mlx(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """lora_config.yaml for `mlx_lm.lora --config lora_config.yaml`, with the conversion command first when the base
    must be quantised or cast."""
    model = _model_id(spec)
    out: list[str] = []
    convert = convert_args(spec, setup)
    if convert:
        out += ["# First convert the checkpoint (mlx_lm.convert: the base the estimate prices):",
                f"#   mlx_lm.convert {' '.join(convert)}", "# and train on ./mlx_model:"]
        model = "./mlx_model"
    out += ["# Run: mlx_lm.lora --config lora_config.yaml", ""]
    out += [_line(k, v) for k, v in config_pairs(spec, setup, model)]
    if setup.method == "full":
        out.insert(len(out) - 2, "# full fine-tuning trains the last num_layers blocks (no lora_parameters)")
    if setup.backend == "cuda":
        notes.append("MLX's CUDA backend: install mlx[cuda] (pip install \"mlx[cuda]\" mlx-lm).")
    return out
