"""torchtune 0.6.1's shipped single-device recipe config for the model and method (torchtune_bases.json) with the
estimate's values, for `tune run <recipe> --config FILE`."""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from ...job.stack import loss_impl_id
from ...job.trainer import TrainerSetup
from ...options.optimizers import OPTIMIZERS
from ..snippets.common import (
    _ATTN_TARGETS,
    _TORCHTUNE_RECIPES,
    _TORCHTUNE_TEMPLATE,
    PLACEHOLDER_MODEL_ID,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_DTYPES,
    _adapter_switches,
    _comment,
    _header,
    _model_id,
)
from ..snippets.torchtune import _torchtune_notes
from ._common import ExportedConfig, _marker, _offload_note, _text, _trainer_marker

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _torchtune_bases() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("torchtune_bases.json").read_text(encoding="utf-8")
    return json.loads(text)["configs"]


_TORCHTUNE_LOSS = {"torchtune": "torchtune.modules.loss.CEWithChunkedOutputLoss",
                   "torchtune_full": "torch.nn.CrossEntropyLoss"}


def _torchtune_optimizer(setup: TrainingSetup, base: dict[str, Any]) -> dict[str, Any]:
    """The optimizer block: the estimate's class with the base config's lr and weight decay."""
    opt = OPTIMIZERS[setup.optimizer]
    out: dict[str, Any] = {"_component_": opt.torch_class}
    if setup.optimizer == "adamw":
        out["fused"] = True
    elif setup.optimizer == "adamw_foreach":
        out |= {"fused": False, "foreach": True}
    else:
        out |= opt.torch_init_kwargs
    for key in ("weight_decay", "lr"):
        if key in base.get("optimizer", {}):
            out[key] = base["optimizer"][key]
    return out


def _export_torchtune(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    _torchtune_notes(setup, notes)
    _offload_note(setup, notes, "the distributed recipes offload under FSDP's full shard")
    known = TORCHTUNE_CONFIGS.get(spec.source)
    placeholder = not (known and setup.method in known[1])
    prefix = _TORCHTUNE_TEMPLATE if placeholder else known[0]  # type: ignore[index]
    bases = _torchtune_bases()
    doc = json.loads(json.dumps(bases.get(f"{prefix}_{setup.method}") or bases[f"{_TORCHTUNE_TEMPLATE}_lora"]))
    if setup.method != "full":
        switches = _adapter_switches(setup, notes, "torchtune")
        builder = doc["model"]["_component_"]
        doc["model"] = {"_component_": builder,
                        "lora_attn_modules": [tt for name, (tt, _) in _ATTN_TARGETS.items() if switches[name]],
                        "apply_lora_to_mlp": switches["mlp"], "apply_lora_to_output": switches["lm_head"],
                        "lora_rank": setup.lora_rank, "lora_alpha": 2 * setup.lora_rank, "lora_dropout": 0.0}
    doc["tokenizer"]["max_seq_len"] = setup.seq_len
    doc["batch_size"] = setup.batch
    doc["gradient_accumulation_steps"] = setup.grad_accum
    doc["optimizer"] = _torchtune_optimizer(setup, doc)
    doc["loss"] = {"_component_": _TORCHTUNE_LOSS[loss_impl_id(setup)]}
    doc["clip_grad_norm"] = float(setup.max_grad_norm) if setup.max_grad_norm > 0 else None
    doc["compile"] = setup.compile
    doc["dtype"] = TORCHTUNE_DTYPES[setup.precision]
    doc["enable_activation_checkpointing"] = setup.grad_ckpt
    doc["enable_activation_offloading"] = setup.offload_activations
    if setup.method == "full":
        doc["optimizer_in_bwd"] = setup.optimizer_in_bwd
    else:
        doc.pop("optimizer_in_bwd", None)
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        # full_finetune_distributed.py / lora_finetune_distributed.py: FSDP; these keys make the importer read it
        doc["fsdp_reshard_after_forward"] = setup.sharding != "zero2"
        doc["fsdp_cpu_offload"] = setup.offload_optimizer or setup.offload_params
        if setup.offload_optimizer != (setup.offload_params and setup.sharding == "zero3"):
            notes.append("fsdp_cpu_offload offloads the parameters and the optimizer state together; the estimate "
                         "offloads " + ("the optimizer state only." if setup.offload_optimizer else "the parameters "
                                                                                                    "only."))
    extra: dict[str, object] = {}
    if placeholder and _model_id(spec) != PLACEHOLDER_MODEL_ID:
        extra["model"] = _model_id(spec)  # the builder below is a template's: the marker names the real model
    extra |= _trainer_marker(tr, ("beta", "precompute_ref", "num_generations", "prompt_len", "completion_len",
                                  "generation", "vllm_gpu_util", "vllm_sleep"))
    if tr.trainer != "sft":
        notes.append(f"the {tr.option.label} trainer: the estimate prices TRL's {tr.option.trainer_class}; this is "
                     "torchtune's SFT recipe config (the trainer is carried in the first line).")
    recipe = _TORCHTUNE_RECIPES[setup.method]
    if setup.gpus > 1 or setup.sharding != "none":
        recipe = recipe.replace("single_device", "distributed")
    filename = f"torchtune_{setup.method}.yaml"
    run = (f"tune run --nproc_per_node {setup.gpus} {recipe} --config {filename}" if "distributed" in recipe
           else f"tune run {recipe} --config {filename}")
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if placeholder:
        lines += _comment(f"torchtune 0.6.1 ships no single-device {setup.method} config for this model: this is "
                          f"{prefix}'s; set model._component_, tokenizer and checkpointer for your model.")
    else:
        lines += _comment(f"torchtune 0.6.1's recipes/configs/{prefix}_{setup.method}_single_device.yaml with the "
                          "estimate's values; download the weights to checkpointer.checkpoint_dir first.")
    lines.append(yaml.safe_dump(doc, sort_keys=False, width=120).rstrip("\n"))
    return ExportedConfig("torchtune", filename, _text(lines), run, tuple(notes))
