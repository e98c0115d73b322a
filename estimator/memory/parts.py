"""The parts of one training step, as a runtime prices them (estimator/memory/runtimes/): its phases, the runtime's
memory outside the tensors, the allocator it runs under, the band of its measured error, the host RAM beside the GPU
and its notes. A trainer adds phases to them (memory/trainers.py); memory/assemble.py turns them into the Estimate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .overhead import MODEL_ERROR_HIGH, MODEL_ERROR_LOW, RuntimeContext
from .result import CONTEXT_KEY, CONTEXT_LABEL

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from .allocator import Allocations, AllocatorConfig
    from .result import Phase


@dataclass(frozen=True)
class StepParts:
    """What a runtime knows about one step (bytes, per GPU); memory/assemble.py adds them up."""

    model: ModelSpec  # the model as the estimate reports it (the stack's build of it: LitGPT's untied head)
    setup: TrainingSetup
    phases: tuple[Phase, ...]  # every moment where the high-water mark can occur; the largest is the peak
    context: RuntimeContext  # the runtime's memory outside the tensors (memory/overhead.py runtime_context)
    # the caching allocator whose slack comes on top of the tensors (memory/allocator.py); None: the runtime's
    # peak is its allocator's own count (MLX's mx.get_peak_memory), no slack is added
    allocator: AllocatorConfig | None
    params_total: int
    params_trainable: int
    # the requests alive at a phase, for the expandable-segment allocator's per-request rounding (None: not known)
    requests: Callable[[Phase], Allocations] | None = None
    error: tuple[float, float] = (MODEL_ERROR_LOW, MODEL_ERROR_HIGH)  # the tensors' measured error band, low/high
    notes: tuple[str, ...] = ()
    host: Any = None  # memory/host.py HostRam; None for the rule of thumb
    weights_full_bytes: float = 0.0  # every weight as loaded, before any sharding
    mode: str = "detailed"  # "detailed" or "seed" (the rule of thumb)
    trainer: Any = None  # a preference/RL trainer's TrainerSetup (memory/trainers.py)
    policy_setup: TrainingSetup | None = None  # its training forward's SFT-equivalent setup
    # vLLM colocate mode: the peak's generation component is vLLM's pool, counted as it is (no slack, no error)
    fixed_generation: bool = False
    # the context's item in the breakdown (the rule of thumb names its fixed margin there)
    context_key: str = CONTEXT_KEY
    context_label: str = CONTEXT_LABEL
    # the rule of thumb has no phases to show (its one phase is the rule's split): Estimate.phases stays empty
    report_phases: bool = True
