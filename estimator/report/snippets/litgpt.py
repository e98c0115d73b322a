"""The LitGPT `litgpt finetune` command for the setup."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...job.stack import loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS
from ...options.precisions import QLORA_PREPS
from ...options.stacks import STACKS
from .common import (
    _ATTN_TARGETS,
    LITGPT_PRECISIONS,
    PLACEHOLDER_MODEL_ID,
    _adapter_switches,
    _command,
    _comment,
    _common_notes,
    _learning_rate,
    _model_id,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _litgpt_precision(setup: TrainingSetup, notes: list[str]) -> str:
    """The --precision value (bf16-true where LitGPT refuses mixed precision with --quantize)."""
    precision = LITGPT_PRECISIONS[setup.precision]
    if setup.method == "qlora" and precision.endswith("-mixed"):
        notes.append("mixed precision with --quantize: LitGPT refuses the combination; bf16-true is used "
                     "(16-bit non-4-bit weights, no autocast).")
        precision = "bf16-true"
    return precision


def _litgpt_notes(setup: TrainingSetup, precision: str, notes: list[str]) -> None:
    """What the estimate assumes that LitGPT's finetune scripts cannot express."""
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    multi = setup.gpus > 1
    if setup.grad_ckpt != multi:
        notes.append("activation checkpointing " + ("on" if setup.grad_ckpt else "off") + ": LitGPT's finetune "
                     "scripts checkpoint only under FSDP on several GPUs and never on one.")
    if setup.offload_activations:
        notes.append("activation offloading: LitGPT 0.5.13 has none in finetune.")
    if setup.max_grad_norm > 0:
        notes.append(f"gradient clipping (max norm {setup.max_grad_norm:g}): LitGPT's finetune scripts reject "
                     "train.max_norm.")
    if setup.attention == "eager":
        notes.append("eager attention: LitGPT uses SDPA (no s × s scores).")
    model_dtype = "fp32" if precision == "32-true" or precision.endswith("-mixed") else "bf16"
    if lora and setup.adapter_dtype != model_dtype:
        notes.append(f"{setup.adapter_dtype} LoRA adapters: LitGPT keeps adapters in the model dtype "
                     f"({model_dtype}).")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': LitGPT keeps the non-4-bit "
                     "weights in the model dtype.")
    if qlora and setup.optimizer != STACKS["litgpt"].qlora_optimizer:
        notes.append(f"{OPTIMIZERS[setup.optimizer].label}: with --quantize LitGPT always builds bitsandbytes' "
                     "PagedAdamW (32-bit states; utils.py instantiate_bnb_optimizer).")
    if qlora and multi:
        notes.append(f"{setup.gpus} GPUs: LitGPT 0.5.13 raises for --quantize on more than one device.")
    if multi and setup.sharding != "zero3":
        notes.append(f"{setup.sharding} sharding: LitGPT shards fully on several devices (FSDP, like ZeRO-3).")
    if setup.offload_optimizer:
        notes.append("optimizer offload: LitGPT's finetune scripts set cpu_offload=False.")
    if setup.offload_params:
        notes.append("parameter offload: LitGPT's finetune scripts set cpu_offload=False.")


def _litgpt_tokens(setup: TrainingSetup, precision: str, notes: list[str]) -> list[str]:
    """The command's options in (flag, value) order: precision, devices, batch, length, optimizer, LoRA, 4-bit,
    data."""
    tokens = ["--precision", precision,
              "--devices", str(setup.gpus),
              "--train.micro_batch_size", str(setup.batch),
              "--train.global_batch_size", str(setup.batch * setup.grad_accum * setup.gpus),
              "--train.max_seq_length", str(setup.seq_len)]
    if setup.optimizer == "adamw_foreach":
        tokens += ["--optimizer", "AdamW"]
    else:
        component, kwargs = OPTIMIZERS[setup.optimizer].torch_class, OPTIMIZERS[setup.optimizer].torch_init_kwargs
        init_args = {"lr": _learning_rate(setup), **kwargs}
        tokens += ["--optimizer", json.dumps({"class_path": component, "init_args": init_args})]
    if setup.method != "full":
        switches = _adapter_switches(setup, notes, "LitGPT")
        tokens += ["--lora_r", str(setup.lora_rank), "--lora_alpha", str(2 * setup.lora_rank),
                   "--lora_dropout", str(STACKS["litgpt"].lora_dropout)]  # the dropout the estimate counts
        for name, (_, flag) in _ATTN_TARGETS.items():
            tokens += [f"--lora_{flag}", str(switches[name]).lower()]
        tokens += ["--lora_mlp", str(switches["mlp"]).lower(), "--lora_head", str(switches["lm_head"]).lower()]
    if setup.method == "qlora":
        tokens += ["--quantize", "bnb.nf4-dq" if setup.nf4_double_quant else "bnb.nf4"]
    tokens += ["--data", "JSON", "--data.json_path", "train.json", "--data.val_split_fraction", "0.05"]
    return tokens


def _litgpt(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The `litgpt finetune_lora` / `finetune_full` command, one option per line."""
    _common_notes(setup, "litgpt", notes)
    precision = _litgpt_precision(setup, notes)
    _litgpt_notes(setup, precision, notes)
    model_id = _model_id(spec)
    tokens = _litgpt_tokens(setup, precision, notes)
    out: list[str] = []
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append("# your-org/your-model: the Hub id (or checkpoint folder) of the model you estimated.")
    out.append(f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label} (lm_head_chunk_size=128, always on).")
    out += _comment("--optimizer takes a torch.optim name or a {class_path, init_args} dict (utils.py "
                    "instantiate_torch_optimizer); the global batch is micro-batch × accumulation × devices.")
    pairs = [tokens[i:i + 2] for i in range(0, len(tokens), 2)]
    lora = setup.method != "full"
    return out + _command([["litgpt", "finetune_lora" if lora else "finetune_full", model_id]] + pairs)
