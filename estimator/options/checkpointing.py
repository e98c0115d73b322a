"""Activation checkpointing: off, on, or on with the layer inputs offloaded to CPU RAM."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_


@dataclass(frozen=True)
class CheckpointingOption:
    """Activation (gradient) checkpointing and where the checkpointed layer inputs live."""

    id: str
    label: str
    summary: str
    source: str


CHECKPOINTING: dict[str, CheckpointingOption] = {o.id: o for o in (
    CheckpointingOption("off", N_("Off"), N_("Every layer keeps its saved tensors until its backward."), "—"),
    CheckpointingOption("on", N_("On"), N_("Each decoder layer keeps only its input and recomputes the rest in backward."),
                        "torch.utils.checkpoint (non-reentrant); Korthikanti et al. 2205.05198 §5"),
    CheckpointingOption("offload", N_("On, inputs offloaded to CPU"),
                        N_("Checkpointing whose saved layer inputs are moved to pinned CPU memory in forward and "
                        "brought back one layer at a time in backward."),
                        "transformers 5.24 modeling_utils.py activation_checkpointing_enable(offload=True) "
                        "(save_on_cpu); Unsloth use_gradient_checkpointing='unsloth'"),
)}
