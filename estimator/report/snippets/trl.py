"""The TRL SFTTrainer script for the setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from .common import (
    _bnb_lines,
    _common_notes,
    _deepspeed_lines,
    _freeze_tower_lines,
    _from_pretrained_lines,
    _hf_optim_lines,
    _launch_lines,
    _learning_rate,
    _lora_config_lines,
    _model_id,
    _model_id_lines,
    _precision_flag_lines,
    _qlora_prep_lines,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _trl_imports(setup: TrainingSetup) -> list[str]:
    """The launch line for several GPUs, torch, datasets, PEFT, transformers (its loss for full logits) and TRL."""
    qlora = setup.method == "qlora"
    out: list[str] = []
    out += _launch_lines(setup)
    out += ["import torch", "from datasets import load_dataset"]
    if qlora and setup.qlora_prep == "peft":
        out.append("from peft import LoraConfig, prepare_model_for_kbit_training")
    elif setup.method != "full":
        out.append("from peft import LoraConfig")
    out.append("from transformers import AutoModelForCausalLM" + (", BitsAndBytesConfig" if qlora else ""))
    if loss_impl_id(setup) == "hf":
        out.append("from transformers.loss.loss_utils import ForCausalLMLoss")
    out += ["from trl import SFTConfig, SFTTrainer", ""]
    return out


def _trl_loss_lines(setup: TrainingSetup) -> list[str]:
    """The loss: TRL's fused default, or a compute_loss_func that sees the full logits."""
    impl = loss_impl_id(setup)
    loss = LOSS_IMPLS[impl]
    if impl != "hf":
        return [f"# Loss: {loss.label} (TRL's default for every SFT loss; no full logits)."]
    return [
        f"# Loss: {loss.label}. TRL 1.16 runs every SFT loss through its fused chunked LM head (no full logits);",
        "# only a compute_loss_func sees the full logits (deprecated, removed in TRL 2.0). TRL then also runs a",
        "# no-grad fused forward for its token-accuracy metrics.",
        "def full_logits_loss(outputs, labels, num_items_in_batch=None):",
        "    logits = outputs.logits",
        "    return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1], num_items_in_batch=num_items_in_batch)",
        "",
    ]


def _sft_config_lines(setup: TrainingSetup) -> list[str]:
    """SFTConfig with the estimate's batch, length, checkpointing, offloading, precision, optimizer and sharding."""
    out = [
        "training_args = SFTConfig(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    max_length={setup.seq_len},  # older TRL: max_seq_length",
        f"    gradient_checkpointing={setup.grad_ckpt},",
    ]
    if setup.grad_ckpt:
        # TRL forces reentrant checkpointing for PEFT under ZeRO-3; non-reentrant elsewhere.
        reentrant = setup.method != "full" and setup.sharding == "zero3"
        out.append(f'    gradient_checkpointing_kwargs={{"use_reentrant": {reentrant}}},')
    if setup.offload_activations:
        out.append("    activation_offloading=True,  # checkpointed layer inputs in CPU RAM")
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},"]
    out += _deepspeed_lines(setup)
    out += [")", ""]
    return out


def _trl(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The TRL SFT script: imports, model and LoRA config, the loss, SFTConfig and SFTTrainer."""
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    _common_notes(setup, "trl", notes)
    # TRL 1.16 sft_trainer.py: adapters on a 4-bit base are cast to bf16; under ZeRO-3 a 16-bit base keeps them
    # in its dtype (autocast_adapter_dtype=False); otherwise PEFT's fp32.
    trl_adapter = "bf16" if qlora or setup.sharding == "zero3" else "fp32"
    if lora and setup.adapter_dtype != trl_adapter:
        notes.append(f"TRL 1.16 makes the LoRA adapters {trl_adapter} here (sft_trainer.py); the estimate "
                     f"counts {setup.adapter_dtype} adapters.")
    out = _trl_imports(setup)
    out += _model_id_lines(_model_id(spec)) + [""]
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    out.append("")
    if lora:
        out += _lora_config_lines(setup, spec) + [""]
    out += _trl_loss_lines(setup)
    out += _sft_config_lines(setup)
    out += [
        "trainer = SFTTrainer(",
        "    model=model,",
        "    args=training_args,",
        '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data',
    ]
    if lora:
        out.append("    peft_config=peft_config,")
    if loss_impl_id(setup) == "hf":
        out.append("    compute_loss_func=full_logits_loss,")
    out += [")", "trainer.train()"]
    return out
