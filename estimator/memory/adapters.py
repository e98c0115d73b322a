"""LoRA adapters as PEFT builds them: which modules a target list wraps and how many adapter parameters that makes (a
runtime with its own LoRA layers overrides both: memory/litgpt/runtime.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.setup import ALL_LINEAR, TrainingSetup
from ..models.spec import LM_HEAD
from ..options.versions import MOE_UNFUSED_IN_4

if TYPE_CHECKING:
    from ..models.spec import ModelSpec


def adapted_modules(spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
    """Names PEFT would wrap. 'all-linear' = every nn.Linear of the decoder layers (PEFT excludes the
    output head). Named targets must exist in this architecture, or PEFT raises; so do we."""
    names = set(spec.linear_names())
    if setup.lora_targets == (ALL_LINEAR,):
        if per_expert_linears(spec, setup):  # transformers 4: every expert, router and shared MLP is an nn.Linear
            return frozenset(names)
        if spec.all_linear_targets:  # families_moe: what PEFT 0.21.2 really wraps (meta-device check)
            return frozenset(spec.all_linear_targets)
        if spec.family == "qwen2_moe":
            # PEFT does not map qwen2_moe's fused experts and router back to linears: all-linear skips them
            return frozenset(n for n in names if not n.startswith(("experts.", "router.")))
        return frozenset(names)
    names.add(LM_HEAD)  # PEFT can adapt the output head when named explicitly
    unknown = [t for t in setup.lora_targets if t not in names]
    if unknown:
        raise ValueError(Text(N_("LoRA target {target} is not a linear module of {family}; its modules are: {names}"),
                              target=repr(unknown[0]), family=spec.family, names=", ".join(sorted(names))))
    return frozenset(setup.lora_targets)


def per_expert_linears(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """Are the routed experts nn.Linear modules, one per expert (transformers 4's ModuleList of expert MLPs in the
    families of MOE_UNFUSED_IN_4: the old side of the version fork transformers_fused_moe_experts), rather than
    transformers 5's fused 3-D parameters?"""
    return spec.family in MOE_UNFUSED_IN_4 and setup.older("transformers_fused_moe_experts")


def lora_targets(spec: ModelSpec, text: str) -> tuple[str, ...]:
    """The LoRA targets a user typed ('all-linear', or module names separated by commas or spaces), checked
    against this architecture as PEFT would check them. Raises ValueError with the reason."""
    from ..job.setup import parse_targets

    targets = parse_targets(str(text))
    adapted_modules(spec, TrainingSetup(method="lora", lora_targets=targets))
    return targets


def lora_params(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str] | None = None) -> int:
    """LoRA parameters: r × (in + out) per adapted module (A: r×in, B: out×r, no bias; LoRA paper §4). With
    setup.lora_layers = N, only the last N decoder layers carry them (PEFT layers_to_transform; a module present on
    some layers only is counted for its share of them)."""
    if setup.method == "full":
        return 0
    if setup.lora_layers and setup.lora_layers < spec.num_layers:
        from dataclasses import replace

        every = lora_params(spec, replace(setup, lora_layers=0), adapted)
        head = setup.lora_rank * (spec.hidden_size + spec.vocab_size) if LM_HEAD in (
            adapted if adapted is not None else adapted_modules(spec, setup)) else 0
        return head + round((every - head) * setup.lora_layers / spec.num_layers)
    targets = adapted if adapted is not None else adapted_modules(spec, setup)
    r = setup.lora_rank
    head = r * (spec.hidden_size + spec.vocab_size) if LM_HEAD in targets else 0
    total = head
    fused_experts = not per_expert_linears(spec, setup)  # transformers 4: one LoRA pair per expert nn.Linear
    for m in spec.linears:
        if m.name not in targets:
            continue
        per = r * (m.in_features + m.out_features)
        if m.role == "expert_in" and fused_experts:
            # transformers 5 fuses gate and up into one 3-D gate_up_proj; PEFT wraps it with rank 2r and a
            # dense B (r·E rows per expert tensor): 2r·E·(h + 2I) for the pair instead of 2r·E·(h + I).
            per += r * m.out_features
        total += per * m.count * (m.layers or spec.num_layers)
    return total
