"""Peak memory of one training step: phases, the peak phase, overhead and the low/expected/high band.

peak = max over phases of (weights + gradients + optimizer state + live activations) + overhead
(docs/formulas.md §0). Phases are the moments where the high-water mark can occur in a steady-state step
(step ≥ 2, so optimizer state exists; zero_grad(set_to_none=True), the Trainer default).

The stages, each in its own module: the model states per GPU (states.py), the activations of a PyTorch step
(step_activations.py, with lora_layers.py for adapters on the last N layers), the phases and the peak with its band
(phases.py); a stack that runs its own model code is dispatched by its model_code: MLX-LM (mlx_step.py) and
Unsloth's kernels (unsloth_step.py). The host RAM beside the GPU is host.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_, Text
from ...job.stack import attention_impl
from ...models.config import is_frozen_tower_note
from ...options.backends import MPS_ATTENTION
from ...options.optimizers import OPTIMIZERS
from ...options.stacks import NO_SDPA_FAMILIES, get_stack
from ..allocator import stack_allocator
from ..host import host_ram
from ..overhead import runtime_context
from ..parts import StepParts
from ..result import Phase
from ..runtime import Runtime
from ..towers import tower_notes
from .activations.common import ActivationContext, context
from .build import stack_spec
from .lora_layers import check_lora_layers, last_layers_only, lora_layers_note
from .phases import checkpointed_phases, closing_phases, stored_phases
from .states import States, model_states, unquantised_experts
from .step_activations import activation_items, activation_sizes, weight_casts

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..allocator import Allocations, AllocatorConfig
    from ..overhead import RuntimeContext


class Step(NamedTuple):
    """A runtime's step as HfRuntime.parts needs it: the phases, the model states (a runtime may move a weight to CPU
    RAM), host_ram's keyword terms, its own notes, and the allocator and the per-phase requests when it knows them."""

    phases: list[Phase]
    states: States
    host: dict[str, float | int]
    notes: tuple[str, ...] = ()
    requests: Callable[[Phase], Allocations] | None = None
    allocator: AllocatorConfig | None = None  # None: the stack's (memory/allocator.py stack_allocator)
    traced_qlora: bool = False  # the runtime's QLoRA path was traced on the CPU (Unsloth's): no NF4 note


def _notes(spec: ModelSpec, setup: TrainingSetup, learns: bool, shard_note: str, traced_qlora: bool) -> list[str]:
    """What the user should know about this estimate, in plain words (marked for translation)."""
    notes = list(spec.notes)
    if learns:  # the wrapper's note says the tower is frozen (models.config.FROZEN_TOWER_NOTES); the
        notes = [n for n in notes if not is_frozen_tower_note(n)]  # trained tower's own note follows
    if shard_note:
        notes.append(shard_note)
    if OPTIMIZERS[setup.optimizer].paged:
        notes.append(N_("Paged optimizer state is counted on the GPU; under memory pressure bitsandbytes pages it "
                     "to CPU RAM, so a run slightly over the limit may still run, slower."))
    if setup.backend == "metal" and setup.attention == "sdpa":
        notes.append(MPS_ATTENTION)  # options.backends: MPS's SDPA runs the math path under grad
    elif attention_impl(setup, spec.family) != setup.attention:  # SDPA asked, transformers runs eager
        notes.append(Text(N_("{family}: transformers cannot run this model with SDPA ({source}), so it falls back "
                             "to eager attention, which keeps s²-sized attention scores per head: estimated as "
                             "eager. flash_attention_2 (on a GPU with flash-attn) avoids them."),
                          family=spec.family, source=NO_SDPA_FAMILIES[spec.family]))  # cached: translated when shown
    elif setup.attention == "eager":
        notes.append(N_("Eager attention stores s²-sized attention scores per head; SDPA/flash does not."))
    notes.extend(tower_notes(spec, setup))
    if setup.method == "qlora" and not traced_qlora:  # Unsloth's QLoRA path is traced
        notes.append(N_("QLoRA cannot be traced on CPU; its storage follows bitsandbytes' NF4 layout."))
    if last_layers_only(spec, setup):
        notes.append(lora_layers_note(setup, spec))
    return notes



class HfRuntime(Runtime):
    """transformers' modules + PEFT (TRL, the HF Trainer, Axolotl, torchtune's and the plain loop's modules)."""

    id = "hf"

    def check_model(self, spec: ModelSpec, setup: TrainingSetup) -> None:
        """What a PyTorch stack cannot do with this model: load an MLX-quantised checkpoint, or adapt more layers
        than it has."""
        if spec.quantization:
            raise ValueError(Text(N_("{model} is an MLX-quantised checkpoint (config.json 'quantization'); only the "
                                     "MLX-LM stack loads it"), model=spec.name))
        check_lora_layers(spec, setup)

    def build(self, spec: ModelSpec, setup: TrainingSetup) -> ModelSpec:
        """The model as the stack builds it (LitGPT: an untied, 4-bit head; memory/hf/build.py)."""
        return stack_spec(spec, setup)

    def experts_16bit(self, spec: ModelSpec, setup: TrainingSetup) -> int:
        """The routed-expert parameters a 4-bit base keeps unquantised as this runtime loads the model
        (memory/hf/states.py unquantised_experts: transformers' bitsandbytes integration)."""
        return unquantised_experts(spec, setup)

    def context(self, spec: ModelSpec, setup: TrainingSetup) -> ActivationContext:
        """Dtypes, adapted linears and the attention and loss code that decide what autograd saves; PEFT's LoRA
        dropout when the stack's scripts use one (Stack.lora_dropout)."""
        ctx = context(spec, setup, self.adapted(spec, setup))
        dropout = bool(setup.stack) and get_stack(setup.stack).lora_dropout > 0 and setup.method != "full"
        return replace(ctx, lora_dropout=True) if dropout else ctx

    def process_context(self, setup: TrainingSetup) -> RuntimeContext:
        """The process's memory outside the tensors (memory/overhead.py runtime_context: the CUDA context, NCCL)."""
        return runtime_context(setup)

    def states(self, spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> States:
        """The weights, gradients and optimizer state per GPU as this runtime's stack shards them (memory/hf/states.py
        model_states; LitGPT's FSDP keeps other gradients)."""
        return model_states(spec, setup, ctx.adapted, self.lora_params(spec, setup, ctx.adapted),
                            self.experts_16bit(spec, setup))

    def step(self, spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, st: States,
             device_capacity: float | None) -> Step:
        """The phases of backward on transformers' modules, and host_ram's keyword terms."""
        casts = weight_casts(spec, setup, st.lora, ctx.head_module)
        sz = activation_sizes(spec, setup, ctx)
        # Liger / Cut Cross-Entropy compute the head's weight gradient in forward: it exists from the loss on.
        g_loss = st.grads.head if sz.loss.impl in ("liger", "cce") else 0.0
        it = activation_items(spec, setup, ctx, sz, casts)
        if not setup.grad_ckpt:
            phases = stored_phases(st, casts, sz, it, g_loss)
        else:
            phases = checkpointed_phases(spec, setup, ctx, st, casts, sz, it, g_loss)
        return Step(phases, st, {"checkpoint_cpu_bytes": sz.offloaded})

    def parts(self, spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> StepParts:
        """The parts of one steady-state SFT step: its phases with the model states, the runtime's context, the
        allocator, the host RAM and the notes (memory/assemble.py adds them up). `device_capacity` (bytes) is read
        only where the runtime decides by the card's memory (Unsloth)."""
        self.check(spec, setup)
        spec = self.build(spec, setup)
        ctx = self.context(spec, setup)
        st = self.states(spec, setup, ctx)
        step = self.step(spec, setup, ctx, st, device_capacity)
        st = step.states  # Unsloth may move the input embedding to CPU RAM
        phases = step.phases + closing_phases(spec, setup, st)
        notes = _notes(spec, setup, st.learns, st.shard_note, step.traced_qlora) + list(step.notes)
        host = host_ram(spec, setup, trainable=st.trainable, weights_bytes=st.weights_full,
                        optimizer_cpu_bytes=st.cpu_bytes, **step.host)
        return StepParts(
            model=spec, setup=setup, phases=tuple(phases), context=self.process_context(setup),
            allocator=step.allocator or stack_allocator(setup.stack), requests=step.requests,
            params_total=spec.params_total, params_trainable=st.trainable, notes=tuple(notes), host=host,
            weights_full_bytes=st.weights_full,
        )
