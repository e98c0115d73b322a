"""LitGPT's model as the estimate sees it: its fused QKV linear, which linears its `lora_*` switches adapt and how
many parameters they make, and which models its closed form covers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl
from ...models.spec import LM_HEAD
from ...options.stacks import get_stack
from .activations import litgpt_final_per_token, litgpt_first_layer_unsaved, litgpt_layer

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..hf.activations.common import ActivationContext, LayerActivations




@dataclass(frozen=True)
class LitgptLora:
    """LitGPT's LoRA switches (litgpt/lora.py Config: lora_query/key/value/projection/mlp/head), its dropout and
    the micro-batch (per-layer constants are spread over the tokens)."""

    query: bool
    key: bool
    value: bool
    projection: bool
    mlp: bool
    head: bool
    dropout: float
    batch: int

    @property
    def qkv(self) -> int:
        return self.query + self.key + self.value

    # What LitGPT's own model saves, where the transformers-module estimate asks (memory/hf/activations/depth.py
    # reads these through the activation context, ActivationContext.litgpt; docs/formulas.md §3.6).
    def layer(self, spec: ModelSpec, ctx: ActivationContext) -> LayerActivations:
        return litgpt_layer(spec, ctx)

    def first_layer_unsaved(self, spec: ModelSpec, ctx: ActivationContext) -> float:
        return litgpt_first_layer_unsaved(spec, ctx)

    def final_per_token(self, spec: ModelSpec, ctx: ActivationContext) -> float:
        return litgpt_final_per_token(spec, ctx)


def closed_form_applies(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """LitGPT's closed form applies: a dense decoder of a family whose LitGPT block was traced or is the same block
    (its stack's Stack.families), SDPA. Everything else (MoE, Gemma-2/3 post-norms and soft-capping, qk-norms, eager
    attention) keeps the transformers-module estimate."""
    families = get_stack(setup.stack).families or {} if setup.stack else {}
    return (spec.family in families and not spec.moe_layers and not spec.qk_norm
            and attention_impl(setup, spec.family) == "sdpa")


def fused_targets(spec: ModelSpec, setup: TrainingSetup) -> TrainingSetup:
    """LitGPT has lora_query/key/value switches on every model (one fused qkv linear): on a model whose
    transformers config fuses q, k, v (GPT-NeoX query_key_value, Phi-3 qkv_proj) the names q_proj/k_proj/v_proj
    select that module."""
    from dataclasses import replace

    fused = [m.name for m in spec.by_role.get("attn_in", ()) if m.out_features == spec.q_dim + 2 * spec.kv_dim]
    names = set(spec.linear_names())
    if not fused or "q_proj" in names:
        return setup
    mapped = tuple(dict.fromkeys(fused[0] if t in ("q_proj", "k_proj", "v_proj") else t for t in setup.lora_targets))
    return replace(setup, lora_targets=mapped)


def litgpt_lora(spec: ModelSpec, setup: TrainingSetup) -> LitgptLora:
    """The LitGPT switches a setup's LoRA targets turn on. Transformers names map to LitGPT's modules as
    litgpt/scripts/convert_hf_checkpoint.py maps the weights: q/k/v (or a fused qkv) → attn.qkv, the attention
    output → attn.proj, any MLP linear → lora_mlp (LitGPT adapts fc_1, fc_2 and proj together), lm_head →
    lora_head. 'all-linear' = every switch but the head."""
    stack = get_stack(setup.stack) if setup.stack else None
    dropout = stack.lora_dropout if stack else 0.0
    if setup.method == "full":
        return LitgptLora(False, False, False, False, False, False, dropout, setup.batch)
    roles = {m.name: m.role for m in spec.linears}
    all_linear = setup.lora_targets == (ALL_LINEAR,)
    names = set(spec.linear_names()) if all_linear else set(setup.lora_targets)
    fused = any(roles.get(n) == "attn_in" and n not in ("q_proj", "k_proj", "v_proj") for n in names)
    q, k, v = ("q_proj" in names or fused), ("k_proj" in names or fused), ("v_proj" in names or fused)
    proj = any(roles.get(n) == "attn_out" for n in names)
    mlp = any(roles.get(n) in ("mlp_in", "mlp_out") for n in names)
    return LitgptLora(q, k, v, proj, mlp, LM_HEAD in names and not all_linear, dropout, setup.batch)


def litgpt_lora_params(spec: ModelSpec, lit: LitgptLora, r: int) -> int:
    """LoRA parameters of LitGPT's modules (litgpt/lora.py 0.5.13): LoRAQKVLinear lora_A (r·n_en, h) and lora_B
    (enabled q/k/v widths, r); LoRALinear r·(in + out) for proj, each MLP linear (fc_1, fc_2, proj) and the head."""
    h, inter = spec.hidden_size, spec.intermediate_size
    per_layer = 0
    if lit.qkv:
        per_layer += r * lit.qkv * h + r * (spec.q_dim * lit.query + spec.kv_dim * (lit.key + lit.value))
    if lit.projection:
        per_layer += r * (spec.q_dim + h)
    if lit.mlp:
        per_layer += (3 if spec.gated_mlp else 2) * r * (h + inter)  # LLaMAMLP fc_1, fc_2, proj; GptNeoxMLP fc, proj
    head = r * (h + spec.vocab_size) if lit.head else 0
    return per_layer * spec.num_layers + head
