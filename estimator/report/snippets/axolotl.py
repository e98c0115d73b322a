"""The Axolotl YAML config (and command) for the setup."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS, QLORA_PREPS
from .common import (
    _DEEPSPEED_STAGES,
    PLACEHOLDER_MODEL_ID,
    _common_notes,
    _launch_lines,
    _learning_rate,
    _model_id,
    last_layers,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


# --- Axolotl: a YAML config. Every value is written in JSON syntax (a subset of YAML) ------------------------

def _line(key: str, value: object) -> str:
    """One YAML line, the value in JSON syntax."""
    text = json.dumps(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        text = text.replace("e", ".0e", 1)  # YAML 1.1 (PyYAML, axolotl) reads 2e-05 as a string, 2.0e-05 as a float
    return f"{key}: {text}"


def _axolotl_notes(setup: TrainingSetup, notes: list[str]) -> None:
    """What the estimate assumes that Axolotl's keys cannot express."""
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    _common_notes(setup, "axolotl", notes)
    if setup.precision == "mixed":
        notes.append("mixed precision (fp32 weights, bf16 autocast): with bf16: true Axolotl loads the model in "
                     "bf16 (utils/config resolve_dtype), so weights are 16-bit here.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': Axolotl 0.19 runs "
                     "prepare_model_for_kbit_training and then casts norms, embed_tokens and lm_head back to the "
                     "model dtype for adapter runs without FSDP (loaders/model.py _configure_embedding_dtypes); "
                     "fp32_norms needs FSDP2, so no key keeps them fp32 on one GPU.")
    if qlora and setup.adapter_dtype == "bf16":
        notes.append("bf16 LoRA adapters on a 4-bit base: PEFT creates them in fp32 and no Axolotl key casts them.")
    elif setup.method == "lora" and setup.adapter_dtype == "bf16" and precision.model_dtype == "float32":
        notes.append("bf16 LoRA adapters on an fp32 model: peft_autocast_adapter_dtype: false keeps them in the "
                     "model dtype (fp32).")
    if qlora and precision.compute_dtype != precision.model_dtype:
        notes.append(f"Axolotl computes the 4-bit matmuls in the load dtype; the estimate assumes "
                     f"{precision.compute_dtype}.")


def _axolotl_adapter_lines(setup: TrainingSetup, spec: ModelSpec | None = None) -> list[str]:
    """The adapter keys (LoRA / QLoRA), or a comment for full fine-tuning."""
    if setup.method == "full":
        return ["# Full fine-tuning: no adapter.", ""]
    out = [_line("adapter", setup.method)]
    if setup.method == "qlora":
        out += [_line("load_in_4bit", True),
                _line("bnb_config_kwargs", {"bnb_4bit_use_double_quant": setup.nf4_double_quant})]
    out += [_line("lora_r", setup.lora_rank), _line("lora_alpha", 2 * setup.lora_rank), _line("lora_dropout", 0.0)]
    if setup.lora_targets == (ALL_LINEAR,):
        out.append(_line("lora_target_linear", True))
    else:
        out.append(_line("lora_target_modules", list(setup.lora_targets)))
    if setup.method == "lora" and setup.adapter_dtype == "bf16":
        out.append(_line("peft_autocast_adapter_dtype", False))
    if last_layers(spec, setup):
        out.append(_line("peft_layers_to_transform", last_layers(spec, setup)))  # axolotl 0.19 PEFT key
    out.append("")
    return out


def _axolotl_step_lines(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """Lengths and batch, checkpointing and offloading, attention, optimizer, precision and loss."""
    precision = PRECISIONS[setup.precision]
    out = [_line("sequence_len", setup.seq_len), _line("micro_batch_size", setup.batch),
           _line("gradient_accumulation_steps", setup.grad_accum)]
    out += [_line("gradient_checkpointing", setup.grad_ckpt)]
    if setup.grad_ckpt:
        out.append(_line("gradient_checkpointing_kwargs", {"use_reentrant": False}))
    if setup.offload_activations:
        out += ["# Checkpointed layer inputs offloaded to CPU RAM ('offload' / true would offload every activation",
                "# of a LoRA run without recompute instead).",
                _line("activation_offloading", "hidden_states")]
    out += [_line("attn_implementation", attention_impl(setup, spec.family)), ""]
    out += [_line("optimizer", OPTIMIZERS[setup.optimizer].hf_optim)]
    if setup.optimizer == "sgd":
        out.append(_line("optim_args", f"momentum={SGD_MOMENTUM}"))
    out += [_line("learning_rate", _learning_rate(setup)), _line("max_grad_norm", float(setup.max_grad_norm)),
            _line("bf16", precision.bf16_flag), _line("fp16", precision.fp16_flag), ""]
    out.append(f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label}.")
    if setup.loss == "fused":
        out += [_line("plugins", ["axolotl.integrations.liger.LigerPlugin"]),
                _line("liger_fused_linear_cross_entropy", True)]
    return out


def _axolotl_launch_lines(setup: TrainingSetup) -> list[str]:
    """The inline DeepSpeed config when sharding or offloading, and the launch command."""
    out: list[str] = []
    if setup.sharding != "none" or setup.offload_optimizer:
        stage = _DEEPSPEED_STAGES.get(setup.sharding, 2)
        zero: dict[str, object] = {"stage": stage}
        if setup.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        if setup.offload_params:
            zero["offload_param"] = {"device": "cpu"}
        out += ["", "# DeepSpeed config inline (a path such as deepspeed_configs/zero3.json works too).",
                _line("deepspeed", {"zero_optimization": zero, "bf16": {"enabled": "auto"},
                                    "fp16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
                                    "gradient_accumulation_steps": "auto"})]
    if setup.gpus > 1:
        out += _launch_lines(setup, "-m axolotl.cli.train config.yml")
    else:
        out.append("# Launch with: axolotl train config.yml")
    return out


def _axolotl(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The Axolotl config: model and data, adapter, step settings, DeepSpeed and the launch command."""
    _axolotl_notes(setup, notes)
    model_id = _model_id(spec)
    out: list[str] = []
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append("# base_model: the Hub id of the model you estimated")
    out += [_line("base_model", model_id), _line("output_dir", "./out"),
            _line("datasets", [{"path": "train.jsonl", "ds_type": "json", "type": "completion"}]), ""]
    out += _axolotl_adapter_lines(setup, spec)
    out += _axolotl_step_lines(spec, setup)
    out += _axolotl_launch_lines(setup)
    return out
