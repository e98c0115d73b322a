"""Adapters on the last N decoder layers only (`--lora-layers`, PEFT's layers_to_transform) on the PyTorch stacks:
what the layers before them keep, the note that says so, and the check PEFT makes (docs/formulas.md §3.9; the
MLX-LM stack's own rules are in memory/mlx/model.py and memory/mlx/step.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...i18n import N_, Text
from .activations.depth import layer_sizes, layers_per_token

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from .activations.common import ActivationContext


def last_layers_only(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """Do adapters sit on fewer layers than the model has (LoRA or QLoRA with setup.lora_layers below its depth)?"""
    return bool(setup.lora_layers and setup.lora_layers < spec.num_layers and setup.method != "full")


def input_requires_grad(setup: TrainingSetup) -> bool:
    """Does the embedding output require grad, so that frozen layers before the first adapted one keep their saved
    tensors? With checkpointing, yes: transformers 5.24 modeling_utils.py:3190-3198 (activation_checkpointing_enable
    calls enable_input_require_grads for input_ids models), TRL 1.16 sft_trainer.py:898-900 and PEFT 0.21
    peft_model.py:184-185; PEFT's QLoRA preparation does it too (peft/utils/other.py:222-233,
    use_gradient_checkpointing=True by default). Otherwise no gradient reaches them (docs/formulas.md §3.9)."""
    return setup.grad_ckpt or (setup.method == "qlora" and setup.qlora_prep == "peft")


def frozen_prefix_bytes(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, per_layer_adapted: float
                        ) -> float:
    """With adapters on the last N layers only (setup.lora_layers): the saved tensors of the layers, per token. The
    last N keep what an adapted layer keeps; the ones before keep nothing unless the input requires grad, and then
    what a layer without adapters keeps (the frozen linears need no inputs for a weight gradient)."""
    n = setup.lora_layers
    frozen = spec.num_layers - n
    kept = per_layer_adapted * n / spec.num_layers
    if input_requires_grad(setup):
        bare = replace(ctx, adapted=frozenset())
        kept += layers_per_token(spec, bare, layer_sizes(spec, bare)) * frozen / spec.num_layers
    return kept


def lora_layers_note(setup: TrainingSetup, spec: ModelSpec) -> Text:
    """What the layers before the adapted ones keep, in words (for an estimate with last_layers_only)."""
    return Text(N_("Adapters on the last {n} of {layers} layers (layers_to_transform); the layers before them "
                   "keep {what}."), n=setup.lora_layers, layers=spec.num_layers,
                what=Text(N_("their saved tensors: the input requires grad (checkpointing or PEFT's QLoRA "
                             "preparation calls enable_input_require_grads)")) if input_requires_grad(setup)
                else Text(N_("no activations: no gradient reaches them")))


def check_lora_layers(spec: ModelSpec, setup: TrainingSetup) -> None:
    """ValueError when the setup adapts more layers than the model has (PEFT raises for a layers_to_transform index
    it cannot find)."""
    if setup.lora_layers > spec.num_layers:
        raise ValueError(Text(N_("--lora-layers {n} is more than {model}'s {layers} decoder layers (PEFT raises for "
                                 "a layers_to_transform index it cannot find)"), n=setup.lora_layers, model=spec.name,
                              layers=spec.num_layers))
