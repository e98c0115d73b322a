"""The Unsloth FastLanguageModel script for the setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.precisions import PRECISIONS, QLORA_PREPS
from .common import (
    _common_notes,
    _hf_optim_lines,
    _learning_rate,
    _model_id,
    _model_id_lines,
    _precision_flag_lines,
    _py,
    _targets,
    last_layers,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _unsloth_notes(setup: TrainingSetup, notes: list[str]) -> None:
    """What the estimate assumes that Unsloth's script cannot express."""
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    _common_notes(setup, "unsloth", notes)
    if setup.attention == "eager":
        notes.append("eager attention: Unsloth chooses its own attention kernels (no s × s scores).")
    if qlora and not setup.nf4_double_quant:
        notes.append("NF4 without double quantisation: Unsloth's 4-bit loading always double-quantises.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': Unsloth keeps embeddings and "
                     "norms in 16-bit.")
    if qlora and precision.compute_dtype != precision.model_dtype:
        notes.append(f"Unsloth computes the 4-bit matmuls in the load dtype ({precision.model_dtype}); the "
                     f"estimate assumes {precision.compute_dtype}.")
    if lora and setup.adapter_dtype != "fp32":
        notes.append(f"{setup.adapter_dtype} LoRA adapters: Unsloth keeps PEFT's fp32 adapters.")
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        notes.append(f"{setup.gpus} GPUs, {setup.sharding} sharding"
                     + (", optimizer offload" if setup.offload_optimizer else "")
                     + (", parameter offload" if setup.offload_params else "")
                     + ": launch with accelerate/torchrun for data parallel; Unsloth has no ZeRO setting here.")


def _unsloth_checkpointing(setup: TrainingSetup) -> tuple[str, str]:
    """use_gradient_checkpointing's literal and what it means."""
    if setup.offload_activations:
        checkpointing: object = "unsloth"
    else:
        checkpointing = setup.grad_ckpt
    ckpt_literal = _py(checkpointing) if isinstance(checkpointing, str) else str(checkpointing)
    ckpt_comment = {"unsloth": "checkpointing with layer inputs offloaded to CPU RAM",
                    "True": "checkpointing, inputs kept on the GPU", "False": "no checkpointing"}
    return ckpt_literal, ckpt_comment[str(checkpointing)]


def _unsloth_model_lines(setup: TrainingSetup, spec: ModelSpec | None = None) -> list[str]:
    """FastLanguageModel.from_pretrained and, for LoRA/QLoRA, get_peft_model."""
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    ckpt_literal, ckpt_comment = _unsloth_checkpointing(setup)
    out = [
        "model, tokenizer = FastLanguageModel.from_pretrained(",
        "    model_name=model_id,",
        f"    max_seq_length={setup.seq_len},",
        f"    dtype=torch.{precision.model_dtype},",
        f"    load_in_4bit={qlora},  # Unsloth's default is True",
    ]
    if setup.method == "lora":
        out.append("    load_in_16bit=True,")
    if setup.method == "full":
        out.append("    full_finetuning=True,")
    out += [
        f"    use_gradient_checkpointing={ckpt_literal},  # {ckpt_comment}",
        "    # offload_embedding='auto' (the default): the frozen input embedding goes to CPU RAM only when memory is",
        "    # tight for a max_seq_length step, as the estimate decides for the card you picked",
        ")",
    ]
    if setup.method != "full":
        out += [
            "model = FastLanguageModel.get_peft_model(",
            "    model,",
            f"    r={setup.lora_rank},",
            f"    target_modules={_py(_targets(setup))},",
            *([f"    layers_to_transform={_py(last_layers(spec, setup))},"] if last_layers(spec, setup) else []),
            f"    lora_alpha={2 * setup.lora_rank},",
            "    lora_dropout=0.0,",
            f"    use_gradient_checkpointing={ckpt_literal},",
            ")",
        ]
    return out


def _unsloth_trainer_lines(setup: TrainingSetup) -> list[str]:
    """SFTConfig and SFTTrainer."""
    out = [
        "",
        "training_args = SFTConfig(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    max_length={setup.seq_len},",
        "    # checkpointing is the model's (use_gradient_checkpointing above); padding_free is left to Unsloth,",
        "    # which packs long rows without padding (the estimate counts every row at max_length)",
    ]
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},", ")"]
    out += [
        "trainer = SFTTrainer(",
        "    model=model,",
        "    processing_class=tokenizer,",
        "    args=training_args,",
        '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data',
        ")",
        "trainer.train()",
    ]
    return out


def _unsloth(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The Unsloth script: the loss switch, imports, the model and its adapters, the trainer."""
    impl = loss_impl_id(setup)
    _unsloth_notes(setup, notes)
    out: list[str] = []
    if impl in ("hf", "unsloth_ce"):
        out += ["import os", "",
                f"# Loss: {LOSS_IMPLS[impl].label} on the full logits (Unsloth's fused cross-entropy off).",
                'os.environ["UNSLOTH_RETURN_LOGITS"] = "1"']
    else:
        out.append(f"# Loss: {LOSS_IMPLS[impl].label} (Unsloth's default: no logits tensor).")
    out += [
        "from unsloth import FastLanguageModel  # import Unsloth before trl and transformers",
        "import torch",
        "from datasets import load_dataset",
        "from trl import SFTConfig, SFTTrainer",
        "",
    ]
    out += _model_id_lines(_model_id(spec))
    out += _unsloth_model_lines(setup, spec)
    out += _unsloth_trainer_lines(setup)
    return out
