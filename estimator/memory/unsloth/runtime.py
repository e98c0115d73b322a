"""Unsloth's runtime (Stack.model_code "unsloth"): its own kernels (memory/unsloth/step.py, on the model
memory/unsloth/model.py reads) where they run, transformers' modules with Unsloth's defaults everywhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hf.runtime import HfRuntime, Step
from ..overhead import unsloth_context
from .model import allocator_for, kernels_apply, not_modelled_note, phase_requests
from .step import unsloth_step

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..hf.activations.common import ActivationContext
    from ..hf.states import States
    from ..overhead import RuntimeContext


class UnslothRuntime(HfRuntime):
    """Unsloth (unsloth 2026.10.9): FastLlamaModel's fused LoRA kernels on the families of Stack.families, FastModel
    (transformers' modules, compiled) on the others and for full fine-tuning."""

    id = "unsloth"

    def own_model_code(self, spec: ModelSpec, setup: TrainingSetup) -> bool:
        return kernels_apply(spec, setup)

    def needs_capacity(self, spec: ModelSpec, setup: TrainingSetup) -> bool:
        """Unsloth decides three things by the card's memory (the embedding offload, double buffering, the loss
        pass) where its kernels run."""
        return kernels_apply(self.build(spec, setup), setup)

    def process_context(self, setup: TrainingSetup) -> RuntimeContext:
        """The CUDA context with its high end at Unsloth Studio's calibrated overhead (overhead.unsloth_context)."""
        return unsloth_context(setup)

    def experts_16bit(self, spec: ModelSpec, setup: TrainingSetup) -> int:
        """unsloth_zoo quantises transformers 5's fused expert tensors to 4 bits (temporary_patches/
        moe_utils_bnb4bit.py:1-8, 2026.10.9; version fork unsloth_zoo_moe_4bit_experts, from 2026.6.2); before it,
        and on transformers 4, the experts load as transformers' bitsandbytes integration leaves them."""
        if not setup.older("unsloth_zoo_moe_4bit_experts"):
            return 0
        return super().experts_16bit(spec, setup)

    def step(self, spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, st: States,
             device_capacity: float | None) -> Step:
        if not kernels_apply(spec, setup):  # FastModel: transformers' modules
            step = super().step(spec, setup, ctx, st, device_capacity)
            return step._replace(notes=(not_modelled_note(setup),))
        u = unsloth_step(spec, setup, st, device_capacity)
        return Step(u.phases, u.states, u.host, tuple(u.notes), phase_requests(spec, setup, u.path), allocator_for(u.path),
                    traced_qlora=True)
