"""A plain PyTorch training loop for the setup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS
from ...options.precisions import PRECISIONS
from .common import (
    _adapter_cast_lines,
    _bnb_lines,
    _comment,
    _common_notes,
    _freeze_tower_lines,
    _from_pretrained_lines,
    _learning_rate,
    _lora_config_lines,
    _model_id,
    _model_id_lines,
    _py,
    _qlora_prep_lines,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _plain_imports(setup: TrainingSetup) -> list[str]:
    """torch, the optimizer's module, datasets, PEFT and transformers."""
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    module, _, cls_name = OPTIMIZERS[setup.optimizer].torch_class.rpartition(".")
    out = ["import torch"]
    if module != "torch.optim":
        out.append(f"from {module} import {cls_name}")
    out.append("from datasets import load_dataset")
    if lora:
        out.append("from peft import LoraConfig, get_peft_model"
                   + (", prepare_model_for_kbit_training" if qlora and setup.qlora_prep == "peft" else ""))
    out.append("from transformers import AutoModelForCausalLM, AutoTokenizer"
               + (", BitsAndBytesConfig" if qlora else ""))
    return out


def _plain_model_lines(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """The model (4-bit for QLoRA, towers frozen), its checkpointing and its LoRA adapters."""
    qlora = setup.method == "qlora"
    out: list[str] = []
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup, device_map=True) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    if setup.grad_ckpt:
        out += [
            "# Activation checkpointing" + (", checkpointed layer inputs in CPU RAM" if setup.offload_activations
                                            else "") + " (transformers 5.24 modeling_utils.py).",
            'model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False}, '
            f"offload={setup.offload_activations})",
        ]
    else:
        out.append("# No activation checkpointing: every layer keeps its saved tensors until backward.")
    if setup.method != "full":
        out += _lora_config_lines(setup, spec)
        out += ["model = get_peft_model(model, peft_config)"] + _adapter_cast_lines(setup)
    return out


def _plain_optimizer_lines(setup: TrainingSetup) -> list[str]:
    """The optimizer over the trainable parameters, by its torch class."""
    optimizer_cls = OPTIMIZERS[setup.optimizer].torch_class
    optimizer_kwargs = OPTIMIZERS[setup.optimizer].torch_init_kwargs
    module, _, cls_name = optimizer_cls.rpartition(".")
    kwargs = "".join(f", {key}={_py(value) if isinstance(value, str) else value}"
                     for key, value in optimizer_kwargs.items())
    cls_ref = optimizer_cls if module == "torch.optim" else cls_name
    return [
        "",
        *_comment(f"{OPTIMIZERS[setup.optimizer].label}: {OPTIMIZERS[setup.optimizer].summary}"),
        "params = [p for p in model.parameters() if p.requires_grad]",
        f"optimizer = {cls_ref}(params, lr={_learning_rate(setup)}{kwargs})",
    ]


def _plain_loop_lines(setup: TrainingSetup) -> list[str]:
    """The padded batches and the training loop (autocast, the model's loss, accumulation, clipping)."""
    precision = PRECISIONS[setup.precision]
    out = [
        'dataset = load_dataset("json", data_files="train.jsonl", split="train")  # your data',
        "",
        "",
        "def batches():",
        "    rows = []",
        "    for row in dataset:",
        '        rows.append(row["text"])',
        "        if len(rows) == BATCH_SIZE:  # every example padded to max length, as the estimate assumes",
        '            batch = tokenizer(rows, max_length=MAX_LENGTH, truncation=True, padding="max_length",',
        '                              return_tensors="pt").to("cuda")',
        '            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)',
        "            yield batch",
        "            rows = []",
        "",
        "",
        "model.train()",
        "for step, batch in enumerate(batches(), start=1):",
        f'    with torch.autocast("cuda", dtype=torch.{precision.compute_dtype}, enabled={setup.autocast}):',
        f"        # {LOSS_IMPLS[loss_impl_id(setup)].label}: the model's own loss; the logits are not kept",
        "        loss = model(**batch).loss / GRAD_ACCUM",
        "    loss.backward()",
        "    if step % GRAD_ACCUM == 0:",
    ]
    if setup.max_grad_norm > 0:
        out.append(f"        torch.nn.utils.clip_grad_norm_(params, max_norm={float(setup.max_grad_norm)})")
    out += ["        optimizer.step()", "        optimizer.zero_grad(set_to_none=True)"]
    return out


def _plain(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The plain PyTorch script: imports, constants, tokenizer, model, optimizer and loop."""
    _common_notes(setup, "plain", notes)
    if setup.gpus > 1 or setup.sharding != "none":
        notes.append(f"{setup.gpus} GPUs with {setup.sharding} sharding: this loop runs on one GPU; wrap the model "
                     "in DDP or FSDP (torchrun) to match the estimate's parallel setup.")
    if setup.offload_optimizer:
        notes.append("optimizer offload to CPU: a plain torch optimizer keeps its states on the GPU.")
    if setup.offload_params:
        notes.append("parameter offload to CPU: a plain loop keeps its parameters on the GPU (DeepSpeed or FSDP "
                     "offloads them).")
    out = _plain_imports(setup) + [""]
    out += _model_id_lines(_model_id(spec))
    out += [
        f"BATCH_SIZE = {setup.batch}",
        f"MAX_LENGTH = {setup.seq_len}",
        f"GRAD_ACCUM = {setup.grad_accum}",
        "",
        "tokenizer = AutoTokenizer.from_pretrained(model_id)",
        "tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token",
    ]
    out += _plain_model_lines(spec, setup)
    out += _plain_optimizer_lines(setup)
    out += _plain_loop_lines(setup)
    return out
