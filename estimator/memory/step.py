"""Peak memory of one training step: phases, the peak phase, overhead and the low/expected/high band.

peak = max over phases of (weights + gradients + optimizer state + live activations) + overhead
(docs/formulas.md §0). Phases are the moments where the high-water mark can occur in a steady-state step
(step ≥ 2, so optimizer state exists; zero_grad(set_to_none=True), the Trainer default).

The stages, each in its own module: the model states per GPU (states.py), the activations of a PyTorch step
(step_activations.py, with lora_layers.py for adapters on the last N layers), the phases and the peak with its band
(phases.py); a stack that runs its own model code is dispatched by its model_code: MLX-LM (mlx_step.py) and
Unsloth's kernels (unsloth_step.py). The host RAM beside the GPU is host.py's."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.stack import attention_impl
from ..job.tower import check_tower
from ..models.config import is_frozen_tower_note
from ..options.backends import MPS_ATTENTION
from ..options.optimizers import OPTIMIZERS
from ..options.stacks import NO_SDPA_FAMILIES
from .activations.common import ActivationContext, context
from .allocator import stack_allocator
from .assemble import assemble
from .host import host_ram
from .litgpt_model import stack_spec
from .lora_layers import check_lora_layers, last_layers_only, lora_layers_note
from .mlx_model import check_mlx_model, uses_mlx_model
from .mlx_step import mlx_parts
from .overhead import runtime_context
from .parts import StepParts
from .phases import checkpointed_phases, closing_phases, stored_phases
from .result import Estimate, Phase
from .states import States, model_states
from .step_activations import activation_items, activation_sizes, weight_casts
from .towers import tower_notes
from .unsloth_model import allocator_for, not_modelled_note, phase_requests, uses_unsloth_model
from .unsloth_step import unsloth_step

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec


def _notes(spec: ModelSpec, setup: TrainingSetup, learns: bool, shard_note: str) -> list[str]:
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
    if setup.method == "qlora" and not uses_unsloth_model(spec, setup):  # Unsloth's QLoRA path is traced
        notes.append(N_("QLoRA cannot be traced on CPU; its storage follows bitsandbytes' NF4 layout."))
    if last_layers_only(spec, setup):
        notes.append(lora_layers_note(setup, spec))
    return notes



def _check_torch_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """What a PyTorch stack cannot do with this model: load an MLX-quantised checkpoint, or adapt more layers
    than it has."""
    if spec.quantization:
        raise ValueError(Text(N_("{model} is an MLX-quantised checkpoint (config.json 'quantization'); only the MLX-LM "
                                 "stack loads it"), model=spec.name))
    check_lora_layers(spec, setup)


def check_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """ValueError with the reason when this stack cannot train this model this way (the checks that need the
    model: MLX-LM's supported families, an MLX-quantised checkpoint on a PyTorch stack, more LoRA layers than the
    model has). estimate() raises the same."""
    if uses_mlx_model(setup):
        check_mlx_model(spec, setup)
    else:
        _check_torch_model(spec, setup)


# Estimates are pure functions of two frozen (hashable) dataclasses, and one calculator rerun asks for the same
# ones again (the page, its remedies and its solvers; the next rerun mostly the same probes): keep the latest
# few thousand (a few kB each). estimate.cache_info().misses counts the estimates actually computed.
ESTIMATE_CACHE_SIZE = 4096


def _sft_phases(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, st: States
                ) -> tuple[list[Phase], dict[str, float]]:
    """The phases of backward on transformers' (or LitGPT's) modules, and host_ram's keyword terms."""
    casts = weight_casts(spec, setup, st.lora, ctx.head_module)
    sz = activation_sizes(spec, setup, ctx)
    # Liger / Cut Cross-Entropy compute the head's weight gradient in forward: it exists from the loss on.
    g_loss = st.grads.head if sz.loss.impl in ("liger", "cce") else 0.0
    it = activation_items(spec, setup, ctx, sz, casts)
    if not setup.grad_ckpt:
        phases = stored_phases(st, casts, sz, it, g_loss)
    else:
        phases = checkpointed_phases(spec, setup, ctx, st, casts, sz, it, g_loss)
    return phases, {"checkpoint_cpu_bytes": sz.offloaded}


def sft_parts(spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> StepParts:
    """The parts of one steady-state SFT step on the setup's stack: its phases with the model states, the runtime's
    context, the allocator, the host RAM and the notes (memory/assemble.py adds them up). `device_capacity` (bytes)
    is read only where the stack decides by the card's memory (Unsloth)."""
    if setup.image_tokens and not spec.tower_kind:
        raise ValueError(Text(N_("image tokens per example need a multimodal model; {model} has no vision tower"),
                              model=spec.name))
    check_tower(spec, setup)
    if uses_mlx_model(setup):  # the MLX-LM stack: mlx-lm's own step (memory/mlx_step.py)
        return mlx_parts(spec, setup)
    _check_torch_model(spec, setup)
    spec = stack_spec(spec, setup)  # the model as the stack builds it (LitGPT: untied, 4-bit head)
    ctx = context(spec, setup)
    st = model_states(spec, setup, ctx.adapted)
    extra_notes: list[str] = []
    requests, allocator = None, None  # the stack's allocator; per-request rounding where the model knows the requests
    if uses_unsloth_model(spec, setup):  # Unsloth's own kernels (memory/unsloth_step.py)
        step = unsloth_step(spec, setup, st, device_capacity)
        phases, st, host_kw, extra_notes = step.phases, step.states, step.host, step.notes
        requests, allocator = phase_requests(spec, setup, step.path), allocator_for(step.path)
    else:
        phases, host_kw = _sft_phases(spec, setup, ctx, st)
        note = not_modelled_note(spec, setup)
        extra_notes = [note] if note else []
    phases += closing_phases(spec, setup, st)

    notes = _notes(spec, setup, st.learns, st.shard_note) + extra_notes
    host = host_ram(spec, setup, trainable=st.trainable, weights_bytes=st.weights_full,
                    optimizer_cpu_bytes=st.cpu_bytes, **host_kw)
    return StepParts(
        model=spec, setup=setup, phases=tuple(phases), context=runtime_context(setup),
        allocator=allocator or stack_allocator(setup.stack), requests=requests, params_total=spec.params_total,
        params_trainable=st.trainable, notes=tuple(notes),
        host=host, weights_full_bytes=st.weights_full,
    )


@lru_cache(maxsize=ESTIMATE_CACHE_SIZE)
def estimate(spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> Estimate:
    """Peak per-GPU memory of one steady-state training step, broken into components at the peak phase.
    `device_capacity` (bytes) is read only where the stack decides by the card's memory (Unsloth; callers pass it
    when unsloth_model.needs_capacity says so)."""
    return assemble(sft_parts(spec, setup, device_capacity))
