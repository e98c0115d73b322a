"""What a runtime is: the code that trains the model under a stack (Stack.model_code: transformers' modules, Unsloth's
kernels, LitGPT's model, mlx-lm's graph), asked two questions — can it run this job (`check`), and what are the parts
of one step (`parts`: phases, model states, host-RAM terms, the allocator's requests, notes). memory/price.py hangs
one runtime on each model code; memory/assemble.py adds the parts up. A runtime folder under memory/ subclasses this
and overrides the steps where its code differs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.tower import check_tower
from .adapters import adapted_modules
from .adapters import lora_params as peft_lora_params

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from .parts import StepParts


class Runtime:
    """One model code's runtime. `check` raises ValueError with the reason when it cannot run the job; `parts` prices
    one steady-state step. The model-independent refusals of a stack (its backend, optimizers, quantisation) are
    job.stack.check_stack_setup's, from the Stack row's capability fields."""

    id: str = ""
    # LoRA targets named per projection (q_proj, k_proj, v_proj) land on a fused QKV linear by the runtime's own
    # switches (LitGPT's lora_query/key/value); elsewhere PEFT needs the fused module's own name
    fused_qkv_names: bool = False

    def check(self, spec: ModelSpec, setup: TrainingSetup) -> None:
        """Every refusal that needs the model: image inputs without a vision tower, the tower's switches, then the
        runtime's own (check_model)."""
        if setup.image_tokens and not spec.tower_kind:
            raise ValueError(Text(N_("image tokens per example need a multimodal model; {model} has no vision tower"),
                                  model=spec.name))
        check_tower(spec, setup)
        self.check_model(spec, setup)

    def check_model(self, spec: ModelSpec, setup: TrainingSetup) -> None:
        """What this runtime cannot do with this model (nothing, by default)."""

    def parts(self, spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> StepParts:
        raise NotImplementedError

    def own_model_code(self, spec: ModelSpec, setup: TrainingSetup) -> bool:
        """Does this runtime's own model code run this model (True), or does it fall back to transformers' modules
        (Unsloth's kernels and LitGPT's model cover some families only: Stack.families)?"""
        return True

    def needs_capacity(self, spec: ModelSpec, setup: TrainingSetup) -> bool:
        """Does the step depend on the card's memory (Unsloth decides its embedding offload and double buffering by
        it)? Every other runtime prices the same step on any card."""
        return False

    def adapted(self, spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
        """The linears that carry adapters, by the names PEFT uses (memory/adapters.py)."""
        return adapted_modules(spec, setup) if setup.method != "full" else frozenset()

    def lora_params(self, spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str] | None = None) -> int:
        """The adapter parameters this code builds (PEFT's LoRA modules by default)."""
        return peft_lora_params(spec, setup, adapted)
