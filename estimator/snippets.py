"""A copyable training script (TRL SFTConfig + PEFT LoraConfig, + BitsAndBytesConfig for QLoRA) that runs the
setup the estimate describes: same micro-batch, max length, checkpointing, dtypes, optimizer, attention, LoRA
rank and targets, and sharding. Pure text generation: no imports beyond the estimator."""

from __future__ import annotations

import json

from .model import ModelSpec, list_presets
from .training import ALL_LINEAR, METHOD_LABELS, TrainingSetup

# estimator optimizer → transformers TrainingArguments.optim (transformers OptimizerNames).
OPTIM_NAMES = {
    "adamw": "adamw_torch_fused",  # HF Trainer default on CUDA: fused kernel, no step temporaries
    "adamw_8bit": "adamw_bnb_8bit",
    "paged_adamw": "paged_adamw_32bit",
    "paged_adamw_8bit": "paged_adamw_8bit",
    "sgd": "sgd",
    "adafactor": "adafactor",
    "lion": "lion_32bit",
}
UNFUSED_ADAMW = "adamw_torch"  # foreach AdamW: one parameter-sized temporary per step

# estimator precision → (dtype the model is loaded in, Trainer bf16 flag, Trainer fp16 flag).
# "mixed" = fp32 weights with bf16 autocast (torch.amp), the classic master-copy recipe.
PRECISION_FLAGS = {
    "bf16": ("bfloat16", True, False),
    "fp16": ("float16", False, True),
    "mixed": ("float32", True, False),
    "fp32": ("float32", False, False),
}
# QLoRA's 4-bit matmuls compute in this dtype.
COMPUTE_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "mixed": "bfloat16", "fp32": "float32"}
PLACEHOLDER_MODEL_ID = "your-org/your-model"


def _model_id(spec: ModelSpec) -> str:
    repos = {p.id: p.hf_repo for p in list_presets()}
    return repos.get(spec.source) or PLACEHOLDER_MODEL_ID


def _comment_text(text: str, limit: int = 80) -> str:
    """Text safe inside a one-line # comment (the model name may come from an uploaded file)."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:limit]


def _py(value: str | list[str]) -> str:
    """A double-quoted Python literal for a string or a list of strings (JSON's syntax is Python's here)."""
    return json.dumps(value)


def _learning_rate(setup: TrainingSetup) -> str:
    return "2e-5" if setup.method == "full" else "2e-4"


def training_snippet(spec: ModelSpec, setup: TrainingSetup) -> str:
    """Python source for a TRL SFTTrainer run with exactly the estimate's assumptions. It compiles; it runs once
    a dataset path is filled in (the packages: torch, transformers, peft, trl, datasets, and bitsandbytes for
    QLoRA or 8-bit/paged optimizers)."""
    model_dtype, bf16, fp16 = PRECISION_FLAGS[setup.precision]
    lora = setup.method != "full"
    optim = OPTIM_NAMES[setup.optimizer]
    if setup.optimizer == "adamw" and not setup.fused_optimizer:
        optim = UNFUSED_ADAMW
    model_id = _model_id(spec)

    out: list[str] = [
        f"# Fine-tuning setup matching the 'Will it fit?' estimate: {_comment_text(spec.name)},",
        f"# {METHOD_LABELS[setup.method]}, {setup.precision}, micro-batch {setup.batch} x {setup.seq_len:,} tokens"
        + (f", {setup.gpus} GPUs ({setup.sharding})" if setup.gpus > 1 else "") + ".",
        "# The estimate assumes every example is max_length tokens long (the worst batch).",
    ]
    if setup.gpus > 1:
        out.append(f"# Launch with: accelerate launch --num_processes {setup.gpus} train.py")
    out += [
        "import torch",
        "from datasets import load_dataset",
    ]
    if setup.method == "qlora":
        out.append("from peft import LoraConfig, prepare_model_for_kbit_training")
    elif lora:
        out.append("from peft import LoraConfig")
    out.append("from transformers import AutoModelForCausalLM"
               + (", BitsAndBytesConfig" if setup.method == "qlora" else ""))
    out += ["from trl import SFTConfig, SFTTrainer", ""]
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append(f"model_id = {_py(model_id)}  # the Hub id of the model you estimated")
    else:
        out.append(f"model_id = {_py(model_id)}")
    out.append("")

    if setup.method == "qlora":
        out += [
            "bnb_config = BitsAndBytesConfig(",
            "    load_in_4bit=True,",
            '    bnb_4bit_quant_type="nf4",',
            "    bnb_4bit_use_double_quant=True,",
            f"    bnb_4bit_compute_dtype=torch.{COMPUTE_DTYPES[setup.precision]},",
        ]
        if setup.sharding == "zero3":
            out.append(f"    bnb_4bit_quant_storage=torch.{model_dtype},  # lets ZeRO-3 shard the 4-bit weights")
        out.append(")")
    out += [
        "model = AutoModelForCausalLM.from_pretrained(",
        "    model_id,",
        f"    dtype=torch.{model_dtype},  # transformers < 4.56: torch_dtype=",
        f"    attn_implementation={_py(setup.attention)},",
    ]
    if setup.method == "qlora":
        out.append("    quantization_config=bnb_config,")
    out += [")"]
    if setup.method == "qlora":
        out += ["# fp32 norms, embeddings and head, as the estimate assumes (recent TRL no longer does this itself).",
                f"model = prepare_model_for_kbit_training(model, use_gradient_checkpointing={setup.grad_ckpt})"]
    out.append("")

    if lora:
        targets: str | list[str] = ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets)
        out += [
            "peft_config = LoraConfig(",
            f"    r={setup.lora_rank},",
            f"    lora_alpha={2 * setup.lora_rank},",
            "    lora_dropout=0.0,  # the estimate counts no dropout masks",
            f"    target_modules={_py(targets)},",
            '    task_type="CAUSAL_LM",',
            ")",
            "",
        ]

    out += [
        "training_args = SFTConfig(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    max_length={setup.seq_len},  # older TRL: max_seq_length",
        f"    gradient_checkpointing={setup.grad_ckpt},",
    ]
    if setup.grad_ckpt:
        # TRL forces reentrant checkpointing for PEFT under ZeRO-3; non-reentrant elsewhere.
        reentrant = lora and setup.sharding == "zero3"
        out.append(f'    gradient_checkpointing_kwargs={{"use_reentrant": {reentrant}}},')
    out += [
        f"    bf16={bf16},",
        f"    fp16={fp16},",
        f"    optim={_py(optim)},",
        f"    learning_rate={_learning_rate(setup)},",
    ]
    if setup.loss == "chunked":
        out.append("    use_liger_kernel=True,  # fused linear + cross-entropy: logits never materialised")
    else:
        out.append('    loss_type="nll",  # HF cross-entropy on fp32 logits, as estimated (TRL may default to a chunked loss)')
    if setup.sharding != "none" or setup.offload_optimizer:
        stage = {"zero1": 1, "zero2": 2, "zero3": 3}.get(setup.sharding, 2)  # offload alone: ZeRO-Offload, stage 2
        offload = ', "offload_optimizer": {"device": "cpu"}' if setup.offload_optimizer else ""
        out += [
            "    deepspeed={",
            f'        "zero_optimization": {{"stage": {stage}{offload}}},',
            '        "bf16": {"enabled": "auto"},',
            '        "fp16": {"enabled": "auto"},',
            '        "train_micro_batch_size_per_gpu": "auto",',
            '        "gradient_accumulation_steps": "auto",',
            "    },",
        ]
    out += [")", ""]

    if setup.method == "qlora":
        out += ["# Recent TRL casts QLoRA adapters to bf16; the estimate counts fp32 adapters (slightly more memory)."]
    out += [
        "trainer = SFTTrainer(",
        "    model=model,",
        "    args=training_args,",
        '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data',
    ]
    if lora:
        out.append("    peft_config=peft_config,")
    if setup.optimizer == "sgd":
        # transformers' optim="sgd" builds torch.optim.SGD with momentum 0 (no state); the estimate counts one
        # momentum buffer, so pass the momentum explicitly.
        out.append('    optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": training_args.learning_rate, '
                   '"momentum": 0.9}),')
    out += [")", "trainer.train()", ""]
    return "\n".join(out)
