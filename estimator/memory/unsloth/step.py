"""Unsloth's step priced (docs/formulas.md §3.8): the moments of its own model (memory/unsloth/model.py) with the
model states and the gradients alive, the two decisions Unsloth takes from the card's free memory (the input
embedding in CPU RAM, double buffering), the host RAM it uses and its notes. memory/unsloth/runtime.py dispatches here
when Unsloth's kernels run (model.kernels_apply)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_
from ..allocator import step_slack
from ..assemble import assemble
from ..hf.activations.common import context
from ..hf.build import stack_spec
from ..hf.phases import closing_phases, phase
from ..hf.states import States, model_states
from ..host import host_ram
from ..overhead import CUDA_CONTEXT_BYTES, unsloth_context
from ..parts import StepParts
from ..result import Estimate, Phase
from ..result import detail as d
from .kernels import DOUBLE_BUFFER_HEADROOM, UnslothPath
from .model import (
    allocator_for,
    embedding_offloaded,
    host_terms,
    phase_requests,
    published_line,
    unsloth_moments,
    unsloth_path,
    without_double_buffer,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


class UnslothStep(NamedTuple):
    """Unsloth's step as estimate() needs it."""

    phases: list[Phase]
    states: States  # the model states with the input embedding where Unsloth puts it
    host: dict[str, float | int]  # host_ram's keyword terms
    notes: list[str]
    path: UnslothPath


def _embedding_placed(spec: ModelSpec, setup: TrainingSetup, st: States, capacity: float | None
                      ) -> tuple[States, float]:
    """The model states with the frozen input embedding where offload_embedding='auto' puts it on this card, and the
    bytes it moved to CPU RAM (0 when it stays on the GPU). Unsloth reads the room left from torch.cuda.mem_get_info
    (unsloth/models/_utils.py:10252-10265 usable_cuda_bytes, 2026.10.9): `capacity` is CUDA's total, not nvidia-smi's."""
    if capacity is None:
        return st, 0.0
    usable_after_load = capacity - CUDA_CONTEXT_BYTES - st.weights
    if not embedding_offloaded(spec, setup, usable_after_load, st.trainable):
        return st, 0.0
    embed = float(2 * spec.vocab_size * spec.hidden_size)  # the frozen bf16 input embedding
    base = [x for x in st.weight_items if x.key == "weights.base"][0]
    items = tuple(d(x.key, x.label, x.bytes - embed, x.formula + " − the input embedding (in CPU RAM)")
                  if x.key == "weights.base" else x for x in st.weight_items)
    assert base.bytes >= embed
    return st._replace(weights=st.weights - embed, weight_items=items), embed


def _double_buffer_kept(spec: ModelSpec, setup: TrainingSetup, st: States, capacity: float, path: UnslothPath,
                        phases: list[Phase]) -> tuple[UnslothPath, list[Phase]]:
    """Double buffering starts after step 1 only when more than 512 MiB is free (unsloth_zoo
    gradient_checkpointing.py:1425-1446): free ≈ the card less the context and the step's reserved peak (the
    expandable segment keeps step 1's pages mapped until an allocation fails, release_cached_blocks). The path and
    its phases, with or without the second staging buffer."""
    single = without_double_buffer(path)
    quiet = priced_moments(spec, setup, st, single)
    peak = max(quiet, key=lambda p: p.total)
    slack = step_slack(allocator_for(single), peak.total, phase_requests(spec, setup, single)(peak),
                       peak.gradients)
    if capacity - CUDA_CONTEXT_BYTES - peak.total - slack.expected <= DOUBLE_BUFFER_HEADROOM:
        return single, quiet
    return path, phases


def unsloth_step(spec: ModelSpec, setup: TrainingSetup, st: States, capacity: float | None) -> UnslothStep:
    """Unsloth's own step (estimator/memory/unsloth/model.py, docs/formulas.md §3.8): its moments priced with the
    model states, the two decisions Unsloth takes from the card's free memory, and the host RAM it uses."""
    notes: list[str] = []
    # offload_embedding="auto" on the Llama fast path is 2026.10.1's (fork unsloth_offload_embedding_auto: before it the
    # optimized path dropped the request and kept the embedding on the GPU; the 2024.12 line had none either)
    keeps_embedding = published_line(setup) or setup.older("unsloth_offload_embedding_auto")
    st, embed_host = _embedding_placed(spec, setup, st, None if keeps_embedding else capacity)
    if embed_host:
        notes.append(N_("Unsloth's offload_embedding='auto' moves the frozen input embedding to CPU RAM on this card "
                        "(its own step reserve exceeds the memory left after loading)."))
    path = unsloth_path(spec, setup, capacity, embedding_on_gpu=not embed_host)
    phases = priced_moments(spec, setup, st, path)
    if capacity is not None and path.double_buffer:
        path, phases = _double_buffer_kept(spec, setup, st, capacity, path, phases)
    host = {**host_terms(spec, setup, path), "embedding_cpu_bytes": embed_host}
    if path.offloaded:
        notes.append(N_("Unsloth copies each layer's input to pinned CPU RAM (offloaded checkpointing): the "
                        "host RAM figure counts it."))
    notes.append(N_("Unsloth's attention is counted as its default install runs it on an Ampere or newer GPU: "
                    "padding-free rows through PyTorch's flash kernel (xformers on older GPUs saves expanded K/V)."))
    return UnslothStep(phases, st, host, notes, path)


def priced_moments(spec: ModelSpec, setup: TrainingSetup, st: States, path: UnslothPath) -> list[Phase]:
    """Unsloth's moments (unsloth_model.unsloth_moments) with the model states and the gradients alive."""
    g = st.grads
    # At the first layer's MLP backward its own LoRA gradients are not made yet (the fused kernels return them at
    # their end, fast_lora.py:584-604): every other layer's are.
    share = (spec.num_layers - 1) / spec.num_layers
    grads = {"persist": g.persist, "all_but_first": max(g.persist, g.first * share)}
    labels = {"persist": N_("Gradients (accumulated)"), "all_but_first": N_("Gradients")}
    keys = {"persist": "gradients.accumulated", "all_but_first": "gradients.all"}
    return [phase(st, m.key, m.label, 0.0, grads[m.grads], keys[m.grads], labels[m.grads], list(m.acts))
            for m in unsloth_moments(spec, setup, path)]


def estimate_for_path(spec: ModelSpec, setup: TrainingSetup, path: UnslothPath) -> Estimate:
    """Unsloth's step on a given path (activations.unsloth.UnslothPath) instead of the one estimate() resolves: the
    tracer fixtures fix the attention backend, double buffering and the loss pass, and the published tables' code
    (unsloth_model.published_tables_path) is checked through the same phases (validation/unsloth.py)."""
    spec = stack_spec(spec, setup)
    st = model_states(spec, setup, context(spec, setup).adapted)
    phases = priced_moments(spec, setup, st, path) + closing_phases(spec, setup, st)
    return assemble(StepParts(
        model=spec, setup=setup, phases=tuple(phases), context=unsloth_context(setup), allocator=allocator_for(path),
        requests=phase_requests(spec, setup, path), params_total=spec.params_total, params_trainable=st.trainable,
        host=host_ram(spec, setup, trainable=st.trainable, weights_bytes=st.weights_full,
                      optimizer_cpu_bytes=st.cpu_bytes, **host_terms(spec, setup, path))))
