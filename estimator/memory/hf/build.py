"""The model as the setup's stack builds it: what a stack's own loading changes in the transformers config's model
(Stack.untied_head, Stack.quantize_head)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...options.stacks import get_stack

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def stack_spec(spec: ModelSpec, setup: TrainingSetup) -> ModelSpec:
    """The model as the setup's stack builds it. LitGPT (Stack.untied_head) trains a separate output head even
    where the transformers config ties it (+V·h parameters); with --quantize its bnb precision plugin replaces
    every nn.Linear, the head included, by a 4-bit one (Stack.quantize_head)."""
    if setup.stack is None:
        return spec
    stack = get_stack(setup.stack)
    head = spec.vocab_size * spec.hidden_size
    if stack.untied_head and spec.tie_embeddings:
        spec = replace(spec, tie_embeddings=False, params_total=spec.params_total + head,
                       params_embedding=spec.params_embedding + head, params_active=spec.params_active + head,
                       notes=(*spec.notes, f"{stack.label} trains an untied output head: +{head:,} parameters"))
    if stack.quantize_head and setup.method == "qlora":
        spec = replace(spec, params_quantizable=spec.params_quantizable + head)
    return spec
