"""Why not the rule of thumb: the seed's rule for this model and method (memory/rule.py) reconciled with the estimate
in named steps that add up exactly (issue 29 item 2): rule_bytes + Σ step bytes == the estimate's total, in the
integers the JSON document writes.

The steps come from the estimate itself. What the setup spreads or moves off the device (optimizer state or parameters
in CPU RAM, sharding over several GPUs) and eager attention on a PyTorch stack are each priced as a change: the
estimate with and without it (the same estimator, so the difference is exact); what is left, one GPU with everything
on it, is split by its detail items (DetailItem keys) into the rule's own parts: the trained weights' precision recipe
against the rule's bytes per weight, the frozen base's storage, the activations at this batch × length against the
rule's fixed margin, the stack's attention, the logits and loss, a trainer's reference model and generation, the
runtime's context and the allocator's slack. A component whose items do not add up to it leaves its difference with
its own step, so the sum is exact whatever the runtime lists."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text, short_number
from ..job.stack import attention_impl, loss_impl_id
from ..options.backends import BACKENDS
from ..options.losses import LOSS_IMPLS
from ..options.methods import SHARDING_LABELS
from ..options.optimizers import OPTIMIZERS
from ..options.precisions import PRECISIONS
from ..options.quantization import QUANT_MODES
from ..options.stacks import get_stack
from ..units import GB
from .precision import NF4_BYTES, NF4_DQ_BYTES, optimizer_state_bytes, trainable_bytes, weight_bytes
from .price import estimate as price
from .rule import FULL_GB_PER_B, FULL_MASTER_GB_PER_B, LORA_GB_PER_B, seed_estimate

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from .result import Estimate

# The steps, in the order the reconciliation lists them (stable ids: the page keys its waterfall's bars by them).
STEP_KEYS = ("precision", "adapters", "base", "load", "activations", "attention", "loss", "reference", "generation",
             "runtime", "eager_attention", "sharding", "offload")

# A detail item's key → its step (the component's default step below takes every other key of the component).
_ITEM_STEPS = {
    "weights.load_16bit": "load",
    "weights.gathered_for_generation": "generation",
    "activations.attention_scores": "attention",
    "activations.loss": "loss", "activations.loss_backward": "loss", "activations.logits": "loss",
    "activations.logits_backward": "loss", "activations.scoring_forward": "loss",
    "activations.reference_forward": "reference",
    "activations.generation": "generation",
}
_COMPONENT_STEPS = {"gradients": "states", "optimizer": "states", "activations": "activations",
                    "reference": "reference", "generation": "generation", "overhead": "runtime"}
_STATE_ITEMS = ("weights.trainable", "weights.autocast_copies")  # the trained weights: with their gradients and state


@dataclass(frozen=True)
class WhyStep:
    """One step from the rule's number to the estimate's: what moves it (a stable key, a label marked for
    translation) and by how much (signed whole bytes)."""

    key: str
    label: Text
    bytes: int


@dataclass(frozen=True)
class Why:
    """The rule of thumb's number for this model and method, and the steps from it to the estimate's total:
    rule_bytes + Σ steps' bytes == total_bytes exactly (whole bytes, as the JSON document writes them). The rule of
    thumb's own estimate has no steps."""

    rule_bytes: int
    rule_label: Text
    steps: tuple[WhyStep, ...]
    total_bytes: int

    def as_json(self) -> dict[str, object]:
        return {"rule_bytes": self.rule_bytes, "rule_label": str(self.rule_label),
                "steps": [{"key": s.key, "label": str(s.label), "bytes": s.bytes} for s in self.steps],
                "total_bytes": self.total_bytes}


def json_total(est: Estimate) -> int:
    """The total as the JSON document writes it: the sum of the rounded components (report/document.py)."""
    return sum(int(round(v)) for v in est.components_bytes.values())


def _gb(value: float) -> tuple[float, int]:
    return (value / GB, 1)


def _per(value: float) -> str | tuple[float, int, bool]:
    return short_number(round(value, 3))


def _rule_label(spec: ModelSpec, setup: TrainingSetup) -> Text:
    size = (spec.params_total / 1e9, 2)
    if setup.method == "full":
        per_b = FULL_MASTER_GB_PER_B if setup.precision == "mixed" else FULL_GB_PER_B
        return Text(N_("The rule of thumb: full fine-tuning ≈ {per_b} GB per billion parameters × {size} B + the "
                       "margin"), per_b=_per(per_b), size=size)
    if setup.method == "qlora":
        return Text(N_("The rule of thumb: QLoRA ≈ a third of LoRA's {per_b} GB per billion × {size} B + the margin"),
                    per_b=_per(LORA_GB_PER_B), size=size)
    return Text(N_("The rule of thumb: LoRA ≈ {per_b} GB per billion parameters × {size} B + the margin"),
                per_b=_per(LORA_GB_PER_B), size=size)


def _ckpt_text(setup: TrainingSetup) -> Text:
    if setup.offload_activations:
        return Text(N_("checkpointing on, layer inputs in CPU RAM"))
    return Text(N_("checkpointing on")) if setup.grad_ckpt else Text(N_("checkpointing off"))


def _labels(spec: ModelSpec, base: Estimate, margin: float) -> dict[str, Text]:
    """Each step's label for this estimate (the one GPU, every state on it, it was split from)."""
    setup = base.setup
    ps = base.policy_setup or setup  # a trainer's training forward (DPO: 2 × batch sequences)
    opt = OPTIMIZERS[setup.optimizer]
    master = setup.precision == "mixed"
    w, g = weight_bytes(setup), trainable_bytes(setup)
    o = optimizer_state_bytes(setup.optimizer, g)
    rule_states = "2 + 2 + 12" if master else "2 + 2 + 8"
    labels: dict[str, Text] = {
        "precision": Text(N_("The {n} trained weights, their gradients and {optimizer} state in {precision}: {w} + "
                             "{g} + {o} B per weight, against the rule's {rule} B for every weight"),
                          n=base.params_trainable, optimizer=Text(opt.label),
                          precision=Text(PRECISIONS[setup.precision].label), w=_per(w), g=_per(g), o=_per(o),
                          rule=rule_states),
        "adapters": Text(N_("The adapters ({n} parameters, {dtype}), their gradients and {optimizer} state, which the "
                            "rule counts in its margin"),
                         n=base.params_trainable, dtype="fp32" if g == 4 else "16-bit", optimizer=Text(opt.label)),
        "load": Text(N_("The 16-bit checkpoint on the device before it is quantised (the peak is the model load)")),
        "attention": Text(N_("MLX's unfused attention: batch × heads × length² probabilities kept per trained "
                             "block")),
        "loss": Text(N_("The logits and the loss ({loss})"), loss=Text(LOSS_IMPLS[loss_impl_id(ps)].label)),
        "reference": Text(N_("The {trainer} trainer's reference model and its forward"),
                          trainer=base.trainer.option.label if base.trainer is not None else ""),
        "generation": Text(N_("The {trainer} trainer's generation (KV cache or vLLM's share)"),
                           trainer=base.trainer.option.label if base.trainer is not None else ""),
        "runtime": Text(N_("The {runtime} runtime's context and the allocator's slack"),
                        runtime=BACKENDS[setup.backend].runtime),
    }
    if setup.method == "full":
        labels["base"] = Text(N_("The weights that do not train (frozen blocks or tower), which the rule does not "
                                 "have"))
    elif setup.method == "qlora":
        mode = QUANT_MODES[setup.quant_mode]
        if mode.framework == "bitsandbytes":
            store = Text(N_("NF4 with double quantisation, {b} B per weight"), b=_per(NF4_DQ_BYTES)) \
                if setup.nf4_double_quant else Text(N_("NF4, {b} B per weight"), b=_per(NF4_BYTES))
        else:
            store = Text(N_("{mode} {bits}-bit, group {group}"), mode=Text(mode.label), bits=setup.quant_bits,
                         group=setup.quant_group)
        labels["base"] = Text(N_("The 4-bit base ({store}) and its 16-bit embeddings and head, against the rule's 0.5 B "
                                 "per weight"), store=store)
    else:
        labels["base"] = Text(N_("The frozen base in {precision}: {w} B per weight, against the rule's 2 B"),
                              precision=Text(PRECISIONS[setup.precision].label), w=_per(w))
    sequences = (Text(N_("batch {batch} × {length} tokens"), batch=ps.batch, length=ps.seq_len) if ps.batch ==
                 setup.batch else Text(N_("{n} sequences × {length} tokens"), n=ps.batch, length=ps.seq_len))
    if base.components_bytes.get("activations", 0.0) > 0:
        labels["activations"] = Text(N_("The activations at {sequences} ({ckpt}), against the rule's {margin} GB "
                                        "margin"), sequences=sequences, ckpt=_ckpt_text(ps), margin=_gb(margin))
    else:
        labels["activations"] = Text(N_("No activations at the peak ({phase}), against the rule's {margin} GB margin"),
                                     phase=Text(base.peak_phase), margin=_gb(margin))
    return labels


def _chain_label(key: str, setup: TrainingSetup) -> Text:
    if key == "eager_attention":
        return Text(N_("Eager attention: the batch × heads × length² scores materialised per layer (SDPA keeps "
                       "none)"))
    if key == "sharding":
        return Text(N_("Spread over {gpus} GPUs: {sharding}"), gpus=setup.gpus, sharding=Text(SHARDING_LABELS[
            setup.sharding]))
    moved = [Text(N_("optimizer state"))] if setup.offload_optimizer else []
    if setup.offload_params:
        moved.append(Text(N_("parameters (ZeRO-3 offload)")))
    return Text(N_("Moved to CPU RAM: {what}"), what=" + ".join(str(m) for m in moved))


def _priced(spec: ModelSpec, est: Estimate, setup: TrainingSetup, device_capacity: float | None) -> Estimate | None:
    """The estimate of a changed setup (a chain link's other side), or None when the estimator refuses it."""
    try:
        return price(spec, setup, trainer=est.trainer, device_capacity=device_capacity, strict=False)
    except ValueError:
        return None


def _chain(spec: ModelSpec, est: Estimate, device_capacity: float | None) -> tuple[Estimate, list[tuple[str, float]]]:
    """The changes priced as changes (offload, sharding, eager attention), from the estimate back to one device
    holding everything with SDPA: (that estimate, [(step key, bytes)]) in the order they were undone."""
    cur, setup, links = est, est.setup, []
    if setup.offload_optimizer or setup.offload_params:
        alt = _priced(spec, est, replace(setup, offload_optimizer=False, offload_params=False), device_capacity)
        if alt is not None:
            links.append(("offload", cur.total_bytes - alt.total_bytes))
            cur = alt
    if cur.setup.gpus > 1 or cur.setup.sharding != "none":
        alt = _priced(spec, est, replace(cur.setup, gpus=1, sharding="none"), device_capacity)
        if alt is not None:
            links.append(("sharding", cur.total_bytes - alt.total_bytes))
            cur = alt
    s = cur.setup
    torch_stack = s.stack is None or get_stack(s.stack).framework == "torch"
    if torch_stack and attention_impl(s, spec.family) == "eager":
        sdpa = replace(s, attention="sdpa")
        if attention_impl(sdpa, spec.family) == "sdpa":  # a family or backend that runs SDPA at all
            alt = _priced(spec, est, sdpa, device_capacity)
            if alt is not None:
                links.append(("eager_attention", cur.total_bytes - alt.total_bytes))
                cur = alt
    return cur, links


def _split(base: Estimate, rule: Estimate) -> dict[str, float]:
    """The one-device estimate's bytes by step, less the rule's own parts (floats; they add up to base − rule)."""
    full = base.setup.method == "full"
    weights_default = "states" if full else "base"
    by_step: dict[str, float] = {}
    listed: dict[str, float] = {}
    for x in base.details:
        step = _ITEM_STEPS.get(x.key)
        if step is None:
            if x.key in _STATE_ITEMS:
                step = "states"
            elif x.component == "weights":
                step = "base"
            else:
                step = _COMPONENT_STEPS.get(x.component, "runtime")
        by_step[step] = by_step.get(step, 0.0) + x.bytes
        listed[x.component] = listed.get(x.component, 0.0) + x.bytes
    for component, value in base.components_bytes.items():  # what a component holds beyond its listed items
        rest = value - listed.get(component, 0.0)
        if rest:
            step = weights_default if component == "weights" else _COMPONENT_STEPS.get(component, "runtime")
            by_step[step] = by_step.get(step, 0.0) + rest
    rc = rule.components_bytes
    # the rule's parts: its weights are the trained ones (full) or the frozen base; gradients and Adam's state per
    # weight (full); its fixed margin (adapter, activations at moderate length, framework) against our activations
    by_step[weights_default] = by_step.get(weights_default, 0.0) - rc["weights"]
    by_step["states"] = by_step.get("states", 0.0) - rc["gradients"] - rc["optimizer"]
    by_step["activations"] = by_step.get("activations", 0.0) - rc["overhead"]
    by_step["precision" if full else "adapters"] = by_step.pop("states")
    return by_step


def why_not_rule(spec: ModelSpec, est: Estimate, device_capacity: float | None = None) -> Why:
    """The rule of thumb for this model and method (precision 'mixed': with the fp32 master copy) reconciled with
    the estimate `est` of `spec` in named steps that add up to its total exactly. `device_capacity` is the one the
    estimate was priced with (Unsloth and vLLM read it). The rule's own estimate has no steps."""
    total = json_total(est)
    rule = est if est.mode == "seed" else seed_estimate(spec, est.setup)
    rule_bytes = json_total(rule)
    rule_label = _rule_label(spec, est.setup)
    if est.mode == "seed":
        return Why(rule_bytes, rule_label, (), total)
    base, links = _chain(spec, est, device_capacity)
    floats = _split(base, rule)
    for key, value in links:
        floats[key] = floats.get(key, 0.0) + value
    labels = _labels(spec, base, rule.components_bytes["overhead"])
    # the rule's own parts always show (full: the precision recipe; LoRA/QLoRA: the base), the rest when they move it
    kept = ("precision",) if est.setup.method == "full" else ("base",)
    ordered = [(k, floats.get(k, 0.0)) for k in STEP_KEYS if k in kept or abs(floats.get(k, 0.0)) >= 0.5]
    steps, reached = [], float(rule_bytes)
    shown = rule_bytes
    for i, (key, value) in enumerate(ordered):
        reached += value
        nxt = total if i == len(ordered) - 1 else int(round(reached))  # the last step closes the sum exactly
        steps.append(WhyStep(key, labels[key] if key in labels else _chain_label(key, est.setup), nxt - shown))
        shown = nxt
    return Why(rule_bytes, rule_label, tuple(steps), total)
