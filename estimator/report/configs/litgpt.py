"""LitGPT's finetune YAML (config_hub's layout) for `litgpt finetune_lora|finetune_full --config FILE`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from ...job.trainer import TrainerSetup
from ...options.optimizers import OPTIMIZERS
from ...options.stacks import STACKS
from ..snippets.common import (
    _ATTN_TARGETS,
    PLACEHOLDER_MODEL_ID,
    _adapter_switches,
    _common_notes,
    _header,
    _learning_rate,
    _model_id,
)
from ..snippets.litgpt import _litgpt_notes, _litgpt_precision
from ._common import ExportedConfig, _marker, _text, _trainer_marker

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _export_litgpt(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    _common_notes(setup, "litgpt", notes)
    precision = _litgpt_precision(setup, notes)
    _litgpt_notes(setup, precision, notes)
    lora = setup.method != "full"
    model_id = _model_id(spec)
    doc: dict[str, Any] = {"checkpoint_dir": f"checkpoints/{model_id}", "out_dir": f"out/finetune/{setup.method}",
                           "precision": precision,
                           "quantize": ("bnb.nf4-dq" if setup.nf4_double_quant else "bnb.nf4")
                           if setup.method == "qlora" else None,
                           "devices": setup.gpus, "num_nodes": 1}
    if lora:
        switches = _adapter_switches(setup, notes, "LitGPT")
        doc |= {"lora_r": setup.lora_rank, "lora_alpha": 2 * setup.lora_rank,
                "lora_dropout": STACKS["litgpt"].lora_dropout}
        doc |= {f"lora_{flag}": switches[name] for name, (_, flag) in _ATTN_TARGETS.items()}
        doc |= {"lora_mlp": switches["mlp"], "lora_head": switches["lm_head"]}
    doc["data"] = {"class_path": "litgpt.data.JSON", "init_args": {"json_path": "train.json",
                                                                    "val_split_fraction": 0.05}}
    doc["train"] = {"global_batch_size": setup.batch * setup.grad_accum * setup.gpus,
                    "micro_batch_size": setup.batch, "max_seq_length": setup.seq_len, "epochs": 1}
    if setup.method != "qlora":  # with quantize LitGPT builds its PagedAdamW (utils.py instantiate_bnb_optimizer)
        opt = OPTIMIZERS[setup.optimizer]
        init = {"lr": _learning_rate(setup)}
        if setup.optimizer == "adamw":
            init["fused"] = True  # type: ignore[assignment]
        elif setup.optimizer != "adamw_foreach":
            init |= opt.torch_init_kwargs  # type: ignore[arg-type]
        doc["optimizer"] = {"class_path": opt.torch_class, "init_args": init}
    if tr.trainer != "sft":
        notes.append(f"the {tr.option.label} trainer: the estimate prices TRL's {tr.option.trainer_class}; LitGPT "
                     "fine-tunes with SFT (the trainer is carried in the first line).")
    extra = _trainer_marker(tr, ("beta", "precompute_ref", "num_generations", "prompt_len", "completion_len",
                                 "generation", "vllm_gpu_util", "vllm_sleep"))
    command = "finetune_lora" if lora else "finetune_full"
    filename = f"litgpt_{setup.method}.yaml"
    run = f"litgpt {command} --config {filename}"
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if model_id == PLACEHOLDER_MODEL_ID:
        lines.append("# checkpoint_dir: download your model with `litgpt download ORG/NAME` (checkpoints/ORG/NAME).")
    lines.append(yaml.safe_dump(doc, sort_keys=False, width=120).rstrip("\n"))
    return ExportedConfig("litgpt", filename, _text(lines), run, tuple(notes))
