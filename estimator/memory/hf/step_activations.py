"""The activations of one PyTorch training step (transformers' modules, LitGPT's; Unsloth's own step is in
memory/unsloth/model.py): the autocast weight copies, the saved and transient activation sizes per GPU, and the
detail items the phases of memory/hf/phases.py list (docs/formulas.md §3, §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_
from ..precision import FP32, INT64, compute_bytes, trainable_bytes
from ..result import DetailItem
from ..result import detail as d
from ..towers import tower_activation_bytes
from .activations.depth import (
    backward_extra_per_token,
    checkpoint_alias_per_token,
    checkpoint_per_token,
    final_per_token,
    layer_sizes,
    layers_per_token,
    max_layer_per_token,
    rope_per_token,
)
from .activations.layers import moe_lora_delta_bytes, moe_lora_delta_grad_bytes
from .activations.loss import LossMemory, loss_memory
from .lora_layers import frozen_prefix_bytes, last_layers_only
from .states import quantizes_every_linear

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from .activations.common import ActivationContext


def autocast_copies(spec: ModelSpec, setup: TrainingSetup, lora: int, head_module: bool = True) -> tuple[float, float, float]:
    """bf16 copies of fp32 weights that autocast makes and autograd keeps until each layer's backward:
    (all layers + head, one layer, the head alone). Mixed precision casts every linear weight (§3.3 M: + 2 B × P); fp32
    LoRA adapters under autocast are cast too (§3.3 R: + 2 B × LoRA params)."""
    if not setup.autocast:
        return 0.0, 0.0, 0.0
    per_layer = 0.0
    head = 0.0
    if setup.precision == "mixed" and setup.method != "qlora":
        per_layer += 2 * spec.layer_linear_params  # every decoder linear weight
        if head_module:  # fused/chunked heads cast one vocabulary slice at a time (counted with the loss)
            head += 2 * spec.vocab_size * spec.hidden_size  # lm_head (or the tied embedding used as head)
    if trainable_bytes(setup) == FP32 and setup.method != "full":
        per_layer += 2 * lora / spec.num_layers  # fp32 adapters → bf16 under autocast
    return per_layer * spec.num_layers + head, per_layer, head


class Casts(NamedTuple):
    """Autocast weight copies alive at each moment, and the trained tower's activations."""

    all: float  # every layer's copy (kept from forward to backward)
    layer: float  # one layer's copy
    head: float  # the head's copy
    tower_acts: float
    tower_formula: str


def weight_casts(spec: ModelSpec, setup: TrainingSetup, lora: int, head_module: bool) -> Casts:
    """The autocast weight copies (one unit at a time under ZeRO-3) and the trained tower's activations."""
    casts_all, casts_layer, head_casts = autocast_copies(spec, setup, lora, head_module)
    if setup.sharding == "zero3" and (setup.gpus > 1 or setup.offload_params):
        casts_all = casts_layer  # FSDP/ZeRO-3 gathers and casts one unit at a time, then frees it
    tower_acts, tower_formula = tower_activation_bytes(spec, setup)
    if tower_acts and setup.precision == "mixed" and setup.method == "full" and not setup.grad_ckpt:
        # the trained tower's fp32 linear weights are cast to bf16 in its forward and kept until its backward,
        # which runs last (§3.3 M: + 2 B × P, for the tower's linears)
        tower_casts = 2.0 * sum(i * o * n for i, o, n in spec.tower_linears)
        casts_all += tower_casts
        casts_layer += tower_casts
    return Casts(casts_all, casts_layer, head_casts, tower_acts, tower_formula)


class Sizes(NamedTuple):
    """The activation sizes of one step, bytes per GPU."""

    layers: float  # every layer's saved tensors
    ckpt: float  # checkpointed layer inputs on the device
    offloaded: float  # checkpointed layer inputs in CPU RAM
    final: float
    one_layer: float
    loss: LossMemory
    bwd_temp: float
    dequant: float


def activation_sizes(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> Sizes:
    """The saved and transient activation sizes (docs/formulas.md §3, §4)."""
    tokens = ctx.tokens
    moe_delta = moe_lora_delta_bytes(spec, ctx)  # per MoE layer
    sizes = layer_sizes(spec, ctx)  # each layer kind computed once
    per_token = layers_per_token(spec, ctx, sizes)
    if last_layers_only(spec, setup):
        per_token = frozen_prefix_bytes(spec, setup, ctx, per_token)
    layers = tokens * per_token + moe_delta * spec.moe_layers
    ckpt = tokens * checkpoint_per_token(spec, ctx)
    offloaded = 0.0
    if setup.offload_activations:
        # Offloaded checkpointing (transformers activation_checkpointing_enable(offload=True): save_on_cpu;
        # Unsloth's 'unsloth' mode): every layer input is copied to pinned CPU RAM in forward and one layer's
        # input at a time comes back for its recompute in backward.
        # Two layer inputs stay on the device: the one being recomputed and the next one brought back
        # (real-width traces with offload: +1 × T·h over the one-layer count).
        offloaded = ckpt
        ckpt = min(2, spec.num_layers) * tokens * ctx.resid * spec.hidden_size
    final = tokens * (final_per_token(spec, ctx) + rope_per_token(spec, ctx))
    one_layer = tokens * max_layer_per_token(spec, ctx, sizes) + moe_delta + moe_lora_delta_grad_bytes(spec, ctx)
    loss = loss_memory(spec, setup, ctx)
    # Backward temporaries of the layer being differentiated, net of what it has freed (activations.py).
    bwd_temp = tokens * backward_extra_per_token(spec, ctx, sizes)
    # QLoRA: each 4-bit matmul dequantises its whole weight to the compute dtype (bnb _dequant_linear_fallback).
    c = compute_bytes(setup)
    dequant = float(spec.largest_dense_linear_params * c) if setup.method == "qlora" else 0.0
    if setup.method == "qlora" and quantizes_every_linear(setup):
        dequant = float(max(spec.largest_linear_params, spec.vocab_size * spec.hidden_size) * c)  # the 4-bit head
    return Sizes(layers, ckpt, offloaded, final, one_layer, loss, bwd_temp, dequant)


class Items(NamedTuple):
    """The activation detail items both phase lists pick from."""

    final: DetailItem
    ids: DetailItem
    loss_kept: DetailItem
    loss_tr: DetailItem
    temp: DetailItem
    one: DetailItem
    deq_tower: tuple[DetailItem, DetailItem]


def activation_items(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, sz: Sizes, casts: Casts) -> Items:
    """The activation detail items shared by the stored and the checkpointed step."""
    tokens = ctx.tokens
    act_final = d("activations.final", N_("Final norm, head input, token ids"), sz.final, "T × (norm + head input + ids)")
    # Once backward reaches the decoder layers the final norm's and the head's saved tensors are freed: only the
    # token ids and RoPE cos/sin remain (tracer inventories at the last layer's backward).
    ids_rope = tokens * (2 * INT64 + rope_per_token(spec, ctx))
    act_ids = d("activations.ids_rope", N_("Token ids, RoPE cos/sin"), ids_rope, "T × (16 + 2·c·d)")
    if ctx.litgpt is not None:
        act_ids = act_final  # LitGPT's own model: calibrated with the final tensors counted (§3.6)
    loss = sz.loss
    act_loss_kept = d("activations.loss", N_("Logits and loss (saved)"), loss.kept, loss.kept_formula)
    act_loss_tr = d("activations.loss_backward", N_("Loss backward buffers"), loss.transient, loss.transient_formula)
    act_temp = d("activations.backward_temporaries", N_("Backward temporaries"), sz.bwd_temp, "c × T × (2I + 2h), or eager: T × (8 − c) × a × s")
    act_one = d("activations.recomputed_layer", N_("Recomputed layer"), sz.one_layer - tokens * checkpoint_alias_per_token(spec, ctx),
                "T × one layer's saved tensors (less its own checkpointed input)")
    act_deq = d("activations.qlora_dequant", N_("QLoRA dequantisation buffer"), sz.dequant, "largest 4-bit matrix in 16-bit")
    # a trained tower's saved tensors: made first in forward, freed after the language model's backward
    act_tower = d("activations.tower", N_("Vision tower activations (trained)"), casts.tower_acts, casts.tower_formula)
    return Items(act_final, act_ids, act_loss_kept, act_loss_tr, act_temp, act_one, (act_deq, act_tower))
