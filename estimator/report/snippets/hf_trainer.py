"""The HF Trainer + PEFT script for the setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from .common import (
    _adapter_cast_lines,
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


def _trainer_imports(setup: TrainingSetup) -> list[str]:
    """The launch line for several GPUs, torch, datasets, PEFT and transformers."""
    qlora = setup.method == "qlora"
    out: list[str] = []
    out += _launch_lines(setup)
    out += ["import torch", "from datasets import load_dataset"]
    if setup.method != "full":
        out.append("from peft import LoraConfig, get_peft_model"
                   + (", prepare_model_for_kbit_training" if qlora and setup.qlora_prep == "peft" else ""))
    out += [
        "from transformers import (",
        "    AutoModelForCausalLM,",
        "    AutoTokenizer,",
    ]
    if qlora:
        out.append("    BitsAndBytesConfig,")
    out += [
        "    DataCollatorForLanguageModeling,",
        "    Trainer,",
        "    TrainingArguments,",
        ")",
        "",
    ]
    return out


def _trainer_model_lines(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """The tokenizer, the model (4-bit for QLoRA, towers frozen) and its LoRA adapters."""
    qlora = setup.method == "qlora"
    out = ["tokenizer = AutoTokenizer.from_pretrained(model_id)",
           "tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token", ""]
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    out.append("")
    if setup.method != "full":
        out += _lora_config_lines(setup, spec)
        out += ["model = get_peft_model(model, peft_config)"] + _adapter_cast_lines(setup) + [""]
    return out


def _training_arguments_lines(setup: TrainingSetup) -> list[str]:
    """TrainingArguments with the estimate's batch, checkpointing, precision, optimizer, loss and sharding."""
    out = [
        f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label}.",
        "training_args = TrainingArguments(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    activation_checkpointing={setup.grad_ckpt},  # older transformers: gradient_checkpointing",
    ]
    if setup.grad_ckpt:
        offload = ', "offload": True' if setup.offload_activations else ""
        out.append(f'    activation_checkpointing_kwargs={{"use_reentrant": False{offload}}},')
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},"]
    if setup.loss == "fused":
        out.append("    use_liger_kernel=True,  # Liger's fused linear + cross-entropy: logits never materialised")
    out += _deepspeed_lines(setup)
    out.append(")")
    return out


def _trainer(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The HF Trainer script: imports, model, padded dataset, TrainingArguments and the Trainer."""
    _common_notes(setup, "trainer", notes)
    out = _trainer_imports(setup)
    out += _model_id_lines(_model_id(spec))
    out += _trainer_model_lines(spec, setup)
    out += [
        "def tokenize(row):  # every example padded to max length, as the estimate assumes",
        f'    return tokenizer(row["text"], max_length={setup.seq_len}, truncation=True, padding="max_length")',
        "",
        'train_dataset = load_dataset("json", data_files="train.jsonl", split="train")  # your data',
        'train_dataset = train_dataset.map(tokenize, remove_columns=train_dataset.column_names)',
        "",
    ]
    out += _training_arguments_lines(setup)
    out += [
        "",
        "trainer = Trainer(",
        "    model=model,",
        "    args=training_args,",
        "    train_dataset=train_dataset,",
        "    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),",
        ")",
        "trainer.train()",
    ]
    return out
