"""LLaMA-Factory's YAML config for `llamafactory-cli train` (0.9.5: the keys of its hparams dataclasses and
transformers' TrainingArguments), with the command that runs it. Every value in JSON syntax (a subset of YAML)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...models.hub import is_model_id, parse_model_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import QLORA_PREPS
from .axolotl import _line
from .common import (
    _DEEPSPEED_STAGES,
    PLACEHOLDER_MODEL_ID,
    _common_notes,
    _deepspeed_dict,
    _learning_rate,
    _model_id,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

CONFIG_FILE = "llamafactory_config.yaml"


def run_command(setup: TrainingSetup, filename: str = CONFIG_FILE) -> str:
    """llamafactory-cli train: on several GPUs it starts torchrun over NPROC_PER_NODE processes (every visible device
    unless told, launcher.py:58-66); DeepSpeed on one GPU needs FORCE_TORCHRUN=1 (hparams/parser.py:353-354)."""
    if setup.gpus > 1:
        return f"NPROC_PER_NODE={setup.gpus} llamafactory-cli train {filename}"
    if setup.sharding != "none" or setup.offload_optimizer:
        return f"FORCE_TORCHRUN=1 llamafactory-cli train {filename}"
    return f"llamafactory-cli train {filename}"


def _precision_pairs(setup: TrainingSetup, notes: list[str]) -> list[tuple[str, object]]:
    """pure_bf16 / bf16 / fp16. LLaMA-Factory loads the checkpoint in its own dtype (model/loader.py:155) and casts the
    trained weights to fp32 unless pure_bf16 (model/adapter.py:313-325)."""
    full = setup.method == "full"
    p = setup.precision
    if full and p == "bf16":
        if setup.sharding == "zero3":
            notes.append("pure bf16 under ZeRO-3: LLaMA-Factory refuses pure_bf16 with DeepSpeed ZeRO-3 "
                         "(hparams/parser.py:384-385); bf16: true trains fp32 master weights instead.")
            return [("bf16", True), ("fp16", False)]
        return [("pure_bf16", True), ("bf16", True), ("fp16", False)]
    if full and p == "fp16":
        notes.append("pure fp16: LLaMA-Factory's fp16: true trains fp32 weights under fp16 autocast "
                     "(model/adapter.py:313-325); it has no pure fp16.")
    if not full and p in ("mixed", "fp32"):
        notes.append(f"{p} base weights: LLaMA-Factory loads the base in the checkpoint's dtype (model/loader.py:155 "
                     "torch_dtype='auto'), 16-bit for current models.")
    return [("bf16", p in ("bf16", "mixed")), ("fp16", p == "fp16")]


def _llamafactory_notes(setup: TrainingSetup, notes: list[str]) -> None:
    """What the estimate assumes that LLaMA-Factory's keys cannot express."""
    _common_notes(setup, "llamafactory", notes)
    if setup.method != "full" and setup.adapter_dtype != "fp32":
        notes.append(f"{setup.adapter_dtype} LoRA adapters: PEFT's get_peft_model(autocast_adapter_dtype=True) keeps "
                     "them fp32 under LLaMA-Factory, and no key casts them.")
    if setup.method == "qlora" and setup.qlora_prep == "peft":
        notes.append(f"QLoRA preparation '{QLORA_PREPS['peft'].label}': LLaMA-Factory never calls "
                     "prepare_model_for_kbit_training; upcast_layernorm casts the norms only.")


def _method_pairs(setup: TrainingSetup) -> list[tuple[str, object]]:
    """finetuning_type, LoRA, the 4-bit base and the vision tower."""
    pairs: list[tuple[str, object]] = [("stage", "sft"), ("do_train", True),
                                       ("finetuning_type", "full" if setup.method == "full" else "lora")]
    if setup.method != "full":
        targets = "all" if setup.lora_targets == (ALL_LINEAR,) else ",".join(setup.lora_targets)
        pairs += [("lora_rank", setup.lora_rank), ("lora_alpha", 2 * setup.lora_rank), ("lora_dropout", 0.0),
                  ("lora_target", targets)]
    if setup.method == "qlora":
        pairs += [("quantization_bit", 4), ("quantization_method", "bnb"), ("quantization_type", "nf4"),
                  ("double_quantization", setup.nf4_double_quant)]
        if setup.qlora_prep == "norms":
            pairs.append(("upcast_layernorm", True))
    if setup.train_tower:
        pairs += [("freeze_vision_tower", False), ("freeze_multi_modal_projector", False)]
    return pairs


def _deepspeed_pair(setup: TrainingSetup) -> list[tuple[str, object]]:
    """An inline DeepSpeed config (transformers' TrainingArguments.deepspeed takes a dict as well as a file)."""
    if setup.sharding == "none" and not setup.offload_optimizer:
        return []
    return [("deepspeed", _deepspeed_dict(setup, _DEEPSPEED_STAGES.get(setup.sharding, 2)))]


def config_lines(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The YAML body (sections as LLaMA-Factory's examples lay them out) and the command, as comments."""
    _llamafactory_notes(setup, notes)
    model_id = _model_id(spec)
    out: list[str] = ["### model"]
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append("# model_name_or_path: the Hub id (or local folder) of the model you estimated")
    out.append(_line("model_name_or_path", model_id))
    revision = parse_model_id(spec.name)[1] if spec.source == "hub" and is_model_id(spec.name) else None
    if revision:
        out.append(_line("model_revision", revision))
    flash = "disabled" if attention_impl(setup, spec.family) == "eager" else "sdpa"
    out += [_line("flash_attn", flash), "", "### method"]
    out += [_line(k, v) for k, v in _method_pairs(setup)]
    out.append(_line("disable_gradient_checkpointing", not setup.grad_ckpt))
    if setup.offload_activations:
        out += ["# Each checkpointed layer's input in CPU RAM (model/model_utils/checkpointing.py:43-77).",
                _line("use_unsloth_gc", True)]
    out.append(f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label}.")
    if setup.loss == "fused":
        out.append(_line("enable_liger_kernel", True))
    out += [_line(k, v) for k, v in _deepspeed_pair(setup)]
    out += ["", "### dataset", _line("dataset", "alpaca_en_demo"),
            "# template: the model's chat template (left out, LLaMA-Factory parses the tokenizer's)",
            _line("cutoff_len", setup.seq_len), "", "### output", _line("output_dir", "saves/will-it-fit"), "",
            "### train", _line("per_device_train_batch_size", setup.batch),
            _line("gradient_accumulation_steps", setup.grad_accum), _line("learning_rate", _learning_rate(setup))]
    out += [_line(k, v) for k, v in _precision_pairs(setup, notes)]
    out.append(_line("optim", OPTIMIZERS[setup.optimizer].hf_optim))
    if setup.optimizer == "sgd":
        out.append(_line("optim_args", f"momentum={SGD_MOMENTUM}"))
    out.append(_line("max_grad_norm", float(setup.max_grad_norm)))
    out += ["", f"# Run with: {run_command(setup)}"]
    return out


def _llamafactory(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    return config_lines(spec, setup, notes)
