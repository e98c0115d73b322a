"""The estimate's result types: components, details with stable keys, phases and the low/expected/high band."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..i18n import N_, _
from .allocator import stack_allocator
from .overhead import ALLOCATOR_SLACK

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from ..options.devices import Device


COMPONENT_KEYS = ("weights", "gradients", "optimizer", "activations", "overhead")
COMPONENT_LABELS = {
    "weights": N_("Weights"),
    "gradients": N_("Gradients"),
    "optimizer": N_("Optimizer state"),
    "activations": N_("Activations"),
    "overhead": N_("Overhead (CUDA + allocator)"),
    "reference": N_("Reference model"),  # preference/RL trainers only (estimator/memory/trainers.py)
    "generation": N_("Generation (KV cache / vLLM)"),  # GRPO only (estimator/memory/trainers.py)
}
CONTEXT_LABEL = N_("CUDA context and workspaces")  # the overhead's runtime item, named per device by context_label
CONTEXT_KEY = "overhead.cuda_context"  # that item's DetailItem.key


def component_label(key: str, device: Device | None = None) -> str:
    """A component's name on a chart or table: the overhead names the device's runtime (a Mac has no CUDA
    context: Metal's sits there; AMD's is ROCm's)."""
    if key == "overhead" and device is not None:
        return _("Overhead ({runtime} + allocator)").format(runtime=device.runtime)
    return _(COMPONENT_LABELS[key])


def context_label(device: Device | None = None) -> str:
    """The runtime context item's name for this device ('Metal runtime and workspaces' on a Mac)."""
    if device is None or device.runtime == "CUDA":
        return _(CONTEXT_LABEL)
    if device.runtime == "Metal":
        return _("{runtime} runtime and workspaces").format(runtime=device.runtime)
    return _("{runtime} context and workspaces").format(runtime=device.runtime)


# Every component an estimate can have, in the stacked bar's order; SFT estimates hold COMPONENT_KEYS only,
# preference/RL ones add "reference" and "generation" when they are non-zero (estimator/memory/trainers.py).
ALL_COMPONENT_KEYS = ("weights", "reference", "gradients", "optimizer", "activations", "generation", "overhead")


def component_keys(est: Estimate) -> tuple[str, ...]:
    """The components this estimate holds, in ALL_COMPONENT_KEYS order."""
    return tuple(k for k in ALL_COMPONENT_KEYS if k in est.components_bytes)


class DetailItem(NamedTuple):
    """One named term inside a component, in bytes at the peak phase (a NamedTuple: built ~20 times per
    estimate, ~3× cheaper than a frozen dataclass). Code finds an item by its `key` ("weights.base",
    "activations.loss", "overhead.cuda_context", …: the component, a dot, the term); the label is only shown."""

    key: str  # stable id: "<component>.<term>"
    component: str  # one of COMPONENT_KEYS (the key's prefix)
    label: str
    bytes: float
    formula: str  # the term as a formula, for hovers and the How-it-works page


def detail(key: str, label: str, value: float, formula: str) -> DetailItem:
    """A DetailItem whose component is its key's prefix ("activations.loss" → "activations")."""
    return DetailItem(key, key.partition(".")[0], label, float(value), formula)


def detail_bytes(items: Iterable[DetailItem], key: str) -> float:
    """The bytes of the items with this key (0 when there is none)."""
    return float(sum(x.bytes for x in items if x.key == key))


@dataclass(frozen=True)
class Phase:
    """Memory at one moment of the step (bytes, per GPU), before overhead. `key` is the phase's stable id
    ("backward.first_layer", "optimizer_step", …); `name` is its label, only shown. A preference/RL trainer's phases
    (memory/trainers.py) also hold its reference model and its generation (KV cache or vLLM's pool); 0 otherwise."""

    key: str
    name: str
    weights: float
    gradients: float
    optimizer: float
    activations: float
    details: tuple[DetailItem, ...] = ()
    reference: float = 0.0
    generation: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.reference + self.generation


@dataclass(frozen=True)
class Estimate:
    """Peak memory per GPU of one training step, in bytes. Built in one place only, memory/assemble.py, from the
    parts of a step a runtime returns (memory/parts.py)."""

    model: ModelSpec
    setup: TrainingSetup
    mode: str  # "detailed" or "seed"
    params_total: int
    params_trainable: int
    components_bytes: dict[str, float]  # COMPONENT_KEYS (+ 'reference', 'generation'); sums to total_bytes
    details: tuple[DetailItem, ...]
    total_bytes: float
    low_bytes: float
    high_bytes: float
    peak_phase: str  # the peak phase's label (Phase.name)
    phases: tuple[Phase, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the host RAM the setup needs: a memory/host.py HostRam (host imports this module, so not named here);
    # None for the rule of thumb
    host: Any = None
    # every weight as loaded, before any sharding (ZeRO-3 gathers this whole model for GRPO's generate)
    weights_full_bytes: float = 0.0
    # a preference/RL trainer's step (memory/trainers.py): its TrainerSetup and the SFT-equivalent setup of its
    # training forward (2 × batch sequences for DPO, GRPO's prompt + completion, the trainer's loss); None for SFT
    trainer: Any = None
    policy_setup: Any = None

    @property
    def cpu_offload_bytes(self) -> float:
        """What the setup keeps in CPU RAM while it trains, all processes together (offloaded optimizer state with
        ZeRO-Offload's master weights and gradients, offloaded checkpoints, ZeRO-3's parameters, Unsloth's embedding,
        the pinned rounding): the host RAM's own terms (memory/host.py HostRam.offloaded_bytes), counted once; 0 for
        the rule of thumb, which has no host side."""
        return self.host.offloaded_bytes if self.host is not None else 0.0

    @property
    def tensor_bytes(self) -> float:
        """What torch.cuda.max_memory_allocated would show: the total without CUDA context and slack."""
        return self.total_bytes - self.components_bytes["overhead"]

    @property
    def floor_bytes(self) -> float:
        """A lower bound of this setup's total at any batch and max length (a solver's shortcut): the largest
        phase that holds no activations (the optimizer step), with the overhead the total adds (context and
        allocator slack). 0 when the estimate has no such phase."""
        quiet = [p.total for p in self.phases if p.activations == 0]
        if not quiet:
            return 0.0
        if stack_allocator(self.setup.stack).expandable:  # a slack of its own requests: the quiet phase's is less
            slack = detail_bytes(self.details, "overhead.allocator_slack")
            return max(quiet) + self.components_bytes["overhead"] - slack
        context = self.components_bytes["overhead"] - ALLOCATOR_SLACK * self.tensor_bytes
        return max(quiet) * (1 + ALLOCATOR_SLACK) + context
