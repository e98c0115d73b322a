"""A multimodal model's vision/audio tower in the step: its adapters, its activations when it sees images, and the
notes the estimate carries about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.setup import ALL_LINEAR
from ..options.trainers import TRL_SERIES
from .precision import compute_bytes

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec


def tower_learns(setup: TrainingSetup) -> bool:
    """Does the trained tower get gradients and optimizer state? Only when images run through it: with text-only
    batches (image tokens 0) the wrapper never calls the tower (no pixel_values), so no gradient reaches its
    parameters (their .grad stays None) and AdamW allocates no state for a parameter whose grad is None
    (torch/optim/adamw.py _init_group skips p.grad is None). Its weights (and LoRA adapters) are still stored: the
    step is the frozen tower's, plus the adapters' weights."""
    return setup.train_tower and setup.image_tokens > 0


def tower_lora_params(spec: ModelSpec, rank: int) -> int:
    """LoRA parameters PEFT adds on the tower's and projector's nn.Linear modules: r × (in + out) each (LoRA paper
    §4). PEFT 0.21.2's all-linear (tuners_utils.py _maybe_include_all_linear_layers) takes every nn.Linear but the
    output head, so these are also what a plain target_modules="all-linear" adds (docs/formulas.md §3.7)."""
    return sum(rank * (i + o) * n for i, o, n in spec.tower_linears)


def tower_activation_bytes(spec: ModelSpec, setup: TrainingSetup) -> tuple[float, str]:
    """Saved-for-backward tensors of a trained ViT tower over the images in one micro-batch (docs/formulas.md §3.7;
    SigLIP traced at real width for full fine-tuning, 2 layers: −1.1 %). Patches = image tokens × patches per
    token. Per patch and layer, SigLIP/Qwen3.5 (LayerNorm, SDPA, fc1-GELU-fc2): c·(9h + 2I) + 16; Pixtral
    (fp32 RMSNorms, SDPA, gated SiLU MLP): c·(7h + 4I) + 8h + 8.
    Gradient checkpointing (the encoder layers are GradientCheckpointingLayer) keeps each layer's input, c·h."""
    if not (setup.train_tower and setup.image_tokens and spec.tower_encoder):
        return 0.0, ""
    h, inter, layers = spec.tower_encoder
    c = compute_bytes(setup)
    patches = setup.batch * setup.image_tokens * spec.tower_patches_per_token
    if setup.grad_ckpt:
        per = c * h * layers  # each encoder layer's input
        formula = f"{patches:,} patches × {layers} layers × c·h (checkpointed layer inputs)"
    elif spec.tower_gated_mlp:
        per = layers * (c * (7 * h + 4 * inter) + 8 * h + 8)  # Pixtral: fp32 RMSNorm inputs, gate/up/SiLU/product
        formula = f"{patches:,} patches × {layers} layers × (c·(7h + 4I) + 8h + 8)"
    else:
        per = layers * (c * (9 * h + 2 * inter) + 16)  # LN in/out ×2, q/k/v, SDPA out + copy, GELU in/out
        formula = f"{patches:,} patches × {layers} layers × (c·(9h + 2I) + 16)"
    return float(patches * per), formula


def tower_notes(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """What the frameworks do with a multimodal wrapper's tower by default, where this estimate differs."""
    if not spec.params_tower:
        return []
    if setup.train_tower:
        if setup.image_tokens and not spec.tower_encoder:
            return [N_("Training the tower: its activations on images are not modelled for this wrapper.")]
        if not setup.image_tokens:
            return [N_("Training the tower without image tokens: no image runs through it, so no gradient reaches it "
                       "and the optimizer keeps no state for it (torch's AdamW skips parameters without a gradient): "
                       "it is counted as frozen weights, with its LoRA adapters stored but not trained. Set image "
                       "tokens per example to price its training.")]
        return [N_("Training the tower on images: its activations follow a per-layer ViT formula from the modelling "
                   "code (SigLIP traced within 2 %; Pixtral, Qwen3.5 and LoRA on the tower untraced).")]
    if setup.method == "full":
        return [Text(N_("The vision tower is estimated frozen. {trl}'s SFTTrainer does not freeze it: a plain full "
                        "fine-tune trains it too unless you set requires_grad=False on it (or turn on 'train the "
                        "tower')."), trl=TRL_SERIES)]
    if ALL_LINEAR in setup.lora_targets and spec.tower_linears:
        return [Text(N_("LoRA is estimated on the language model only. PEFT 0.21.2's target_modules='all-linear' "
                        "also wraps the tower's and projector's linears ({extra} more adapter parameters at rank "
                        "{rank}) unless exclude_modules leaves them out; 'train the tower' counts them."),
                     extra=tower_lora_params(spec, setup.lora_rank), rank=setup.lora_rank)]
    if ALL_LINEAR in setup.lora_targets:
        return [N_("LoRA is estimated on the language model only. PEFT 0.21.2's target_modules='all-linear' also "
                   "wraps the tower's linears unless exclude_modules leaves them out (their adapters are not "
                   "counted for this wrapper).")]
    return []
