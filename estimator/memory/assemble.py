"""The one place an Estimate is built: a step's parts (memory/parts.py) added up (docs/formulas.md §0, §5).

peak = the largest phase's tensors; total = peak + the runtime's context + the allocator's slack;
low / high = the tensors' measured error band around the peak, the context's range, the slack's own high bound."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_
from .allocator import step_slack
from .overhead import ALLOCATOR_SLACK
from .result import ALL_COMPONENT_KEYS, Estimate
from .result import detail as d

if TYPE_CHECKING:
    from .parts import StepParts


def assemble(parts: StepParts) -> Estimate:
    """The Estimate of a step's parts: its peak phase with the runtime's context and the allocator's slack, the band,
    the host RAM and the notes, as the runtime (and a trainer) priced them."""
    phases = parts.phases
    peak = max(phases, key=lambda p: p.total)
    fixed = peak.generation if parts.fixed_generation else 0.0  # vLLM's pool: no allocator slack, no model error
    tensor_peak = peak.total - fixed
    rc = parts.context
    err_low, err_high = parts.error
    details = tuple(x for x in peak.details if x.bytes > 0) + (
        d(parts.context_key, parts.context_label, rc.expected, rc.formula),)
    components = {"weights": peak.weights, "reference": peak.reference, "gradients": peak.gradients,
                  "optimizer": peak.optimizer, "activations": peak.activations, "generation": peak.generation}
    # a trainer's components appear when it has them (result.ALL_COMPONENT_KEYS); the SFT ones always
    components = {k: v for k, v in components.items() if v or k not in ("reference", "generation")}
    low = tensor_peak * (1 - err_low) + rc.low + rc.nccl + fixed
    if parts.allocator is None:  # the runtime's own allocator count (MLX): nothing on top of the tensors
        overhead = rc.expected + 0.0
        high = tensor_peak * (1 + err_high) + rc.high + rc.nccl + fixed
    else:
        # the high band's stranded blocks are bounded by one backward's gradients, whenever the peak comes
        gradients = max(p.gradients for p in phases)
        slack = step_slack(parts.allocator, tensor_peak, parts.requests(peak) if parts.requests else (), gradients)
        overhead = rc.expected + slack.expected
        details += (d("overhead.allocator_slack", N_("Allocator slack"), slack.expected, slack.formula),)
        if parts.allocator.expandable:  # the slack's own high bound, on the tensors' high
            high = (tensor_peak + slack.high) * (1 + err_high) + rc.high + rc.nccl + fixed
        else:
            high = tensor_peak * (1 + err_high) * (1 + ALLOCATOR_SLACK) + rc.high + rc.nccl + fixed
    components["overhead"] = overhead
    assert tuple(components) == tuple(k for k in ALL_COMPONENT_KEYS if k in components)
    return Estimate(
        model=parts.model, setup=parts.setup, mode=parts.mode, params_total=parts.params_total,
        params_trainable=parts.params_trainable, components_bytes=components, details=details,
        total_bytes=peak.total + overhead, low_bytes=low, high_bytes=high, peak_phase=peak.name,
        phases=tuple(phases) if parts.report_phases else (),
        notes=tuple(parts.notes), host=parts.host, weights_full_bytes=parts.weights_full_bytes,
        trainer=parts.trainer, policy_setup=parts.policy_setup,
    )
