"""What a multimodal model's job may ask: image tokens and a trained vision tower need a tower; a generic or
text-only model gets the text-only setup (`setup_for_model`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text

if TYPE_CHECKING:
    from ..models.spec import ModelSpec
    from .setup import TrainingSetup


def check_tower(spec: ModelSpec, setup: TrainingSetup) -> None:
    """train_tower needs a multimodal wrapper whose tower is counted (and, for LoRA, whose linears are known)."""
    if not setup.train_tower:
        return
    if not spec.tower_kind:
        raise ValueError(Text(N_("training the vision tower needs a multimodal model; {model} has no vision tower"),
                              model=spec.name))
    if not spec.params_tower:
        raise ValueError(Text(N_("training the tower: {model}'s {kind} tower weights are not counted here, so its "
                                 "gradients and optimizer state cannot be estimated"), model=spec.name,
                              kind=_tower_kind(spec.tower_kind)))
    if setup.method != "full" and not spec.tower_linears:
        raise ValueError(Text(N_("LoRA on the tower: the {kind} tower's linear shapes of {model} are not modelled "
                                 "(gemma3, mistral3 and qwen3_5 are); train it fully or keep it frozen"),
                              kind=_tower_kind(spec.tower_kind), model=spec.name))


# ModelSpec.tower_kind's values (estimator/models/config.py _multimodal_spec), marked for the catalogue
TOWER_KINDS = {"vision": N_("vision"), "audio": N_("audio"), "vision and audio": N_("vision and audio"),
               "non-text": N_("non-text")}


def _tower_kind(kind: str) -> Text:
    """A tower kind inside a message: translated where it is shown."""
    return Text(TOWER_KINDS.get(kind, "{kind}"), kind=kind)


def setup_for_model(spec: ModelSpec, setup: TrainingSetup) -> TrainingSetup:
    """The setup as it applies to another model (pages that price many models or methods from one sidebar setup):
    image tokens and tower training dropped where the model has no tower or cannot train it this way; no more
    LoRA layers than the model has (the user's --lora-layers; the MLX-LM default of 16 is the model's own note)."""
    from dataclasses import replace

    if setup.lora_layers > spec.num_layers and "lora_layers" not in setup.from_stack:
        setup = replace(setup, lora_layers=spec.num_layers)
    if not spec.tower_kind and (setup.image_tokens or setup.train_tower):
        return replace(setup, image_tokens=0, train_tower=False)
    if setup.train_tower:
        try:
            check_tower(spec, setup)
        except ValueError:
            return replace(setup, train_tower=False)
    return setup
