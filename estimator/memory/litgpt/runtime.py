"""LitGPT's runtime (Stack.model_code "litgpt"): its own GPT, Block and LoRA layers (memory/litgpt/model.py,
activations.py) on the families of Stack.families; transformers' modules on the others. Either way the model is the
stack's build of it (an untied output head, a 4-bit head under --quantize: memory/hf/build.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ..hf.runtime import HfRuntime
from .fsdp import fsdp1, fsdp1_states
from .model import closed_form_applies, fused_targets, litgpt_lora, litgpt_lora_params

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..hf.activations.common import ActivationContext
    from ..hf.states import States


class LitgptRuntime(HfRuntime):
    """LitGPT 0.5.13's finetune scripts: lora_query/key/value/projection/mlp/head switches on its fused QKV."""

    id = "litgpt"
    fused_qkv_names = True

    def own_model_code(self, spec: ModelSpec, setup: TrainingSetup) -> bool:
        return closed_form_applies(spec, setup)

    def adapted(self, spec: ModelSpec, setup: TrainingSetup) -> frozenset[str]:
        """LitGPT has lora_query/key/value switches on every model (one fused qkv linear): the transformers names
        select the fused module where the config fuses q, k, v."""
        if setup.method != "full" and setup.lora_targets != (ALL_LINEAR,):
            setup = fused_targets(spec, setup)
        return super().adapted(spec, setup)

    def lora_params(self, spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str] | None = None) -> int:
        """LitGPT's LoRAQKVLinear and LoRALinear shapes where its model runs; PEFT's elsewhere."""
        every_layer = not (setup.lora_layers and setup.lora_layers < spec.num_layers)
        if setup.method != "full" and every_layer and closed_form_applies(spec, setup):
            return litgpt_lora_params(spec, litgpt_lora(spec, setup), setup.lora_rank)
        return super().lora_params(spec, setup, adapted if adapted is not None else self.adapted(spec, setup))

    def context(self, spec: ModelSpec, setup: TrainingSetup) -> ActivationContext:
        ctx = super().context(spec, setup)
        return replace(ctx, litgpt=litgpt_lora(spec, setup)) if closed_form_applies(spec, setup) else ctx

    def states(self, spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> States:
        """On several GPUs LitGPT's FSDPStrategy (torch FSDP1) gives whole flat parameters a gradient and keeps them
        unsharded while gradients accumulate (memory/litgpt/fsdp.py)."""
        st = super().states(spec, setup, ctx)
        return fsdp1_states(spec, setup, st) if fsdp1(setup) else st
