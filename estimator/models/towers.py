"""Vision towers of multimodal wrappers (SigLIP, Pixtral and others): their parameter counts and shapes from the
config, counted as frozen weights unless trained."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import gemma as _families_gemma
from ._fields import _flag, _positive_int
from .spec import MAX_LAYERS

if TYPE_CHECKING:
    from typing import Any


def _sub(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    return value if isinstance(value, Mapping) else {}


def _siglip_vision_params(v: Mapping[str, Any]) -> int:
    """SiglipVisionModel (transformers 5.24.0 models/siglip/modeling_siglip.py): a Conv2d patch embedding with bias,
    a learned position table, encoder layers of q/k/v/out_proj and fc1/fc2 with biases and two LayerNorms, a
    post_layernorm, and the attention-pooling head when vision_use_head (Gemma 3 sets it false)."""
    h = _positive_int(v, "hidden_size", default=768)
    inter = _positive_int(v, "intermediate_size", default=3072)
    layers = _positive_int(v, "num_hidden_layers", default=12, limit=MAX_LAYERS)
    patch = _positive_int(v, "patch_size", default=16, limit=4096)
    image = _positive_int(v, "image_size", default=224, limit=1 << 16)
    channels = _positive_int(v, "num_channels", default=3, limit=64)
    embed = channels * patch * patch * h + h + (image // patch) ** 2 * h  # patch_embedding + position_embedding
    mlp = h * inter + inter + inter * h + h  # fc1, fc2 with biases
    layer = 4 * (h * h + h) + mlp + 2 * 2 * h  # q,k,v,out_proj + MLP + layer_norm1/2 (weight and bias)
    head = 0
    if _flag(v, "vision_use_head", True):
        # SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention (in_proj 3h·h + 3h, out_proj), LayerNorm, MLP
        head = h + 3 * h * h + 3 * h + h * h + h + 2 * h + mlp
    return embed + layers * layer + 2 * h + head


def _pixtral_vision_params(v: Mapping[str, Any]) -> int:
    """PixtralVisionModel (transformers 5.24.0 models/pixtral/modeling_pixtral.py): a bias-free Conv2d patch_conv,
    ln_pre (RMSNorm), layers of bias-free q/k/v/o and gate/up/down with attention_norm and ffn_norm (RMSNorm);
    the 2-D rotary embedding has no weights."""
    h = _positive_int(v, "hidden_size", default=1024)
    inter = _positive_int(v, "intermediate_size", default=4096)
    layers = _positive_int(v, "num_hidden_layers", default=24, limit=MAX_LAYERS)
    patch = _positive_int(v, "patch_size", default=16, limit=4096)
    channels = _positive_int(v, "num_channels", default=3, limit=64)
    return channels * patch * patch * h + h + layers * (4 * h * h + 3 * h * inter + 2 * h)


def _tower_params(cfg: Mapping[str, Any], text_hidden: int) -> int | None:
    """Weights outside the language model of the wrappers modelled here (towers + projectors), or None."""
    top = cfg.get("model_type")
    vision = _sub(cfg, "vision_config")
    if top == "gemma3" and vision:
        # Gemma3MultiModalProjector (modeling_gemma3.py): mm_input_projection_weight [vision h, text h] and
        # mm_soft_emb_norm (Gemma3RMSNorm over the vision width); the vision tower is a SiglipVisionModel.
        vh = _positive_int(vision, "hidden_size", default=768)
        return _siglip_vision_params(vision) + vh * text_hidden + vh
    if top in ("qwen3_5", "qwen3_5_moe") and vision:
        # Qwen3_5VisionModel (transformers 5.24.0 modeling_qwen3_5.py; qwen3_5_moe's is the same): a Conv3d patch_embed
        # with bias (channels·temporal·p·p → h), a learned pos_embed table, blocks of qkv/proj and linear_fc1/fc2 with
        # biases and two LayerNorms, and the patch merger (LayerNorm over h, fc1 on h·m² and fc2 to out_hidden_size).
        vh = _positive_int(vision, "hidden_size", default=1152)
        vi = _positive_int(vision, "intermediate_size", default=4304)
        depth = _positive_int(vision, "depth", default=27, limit=MAX_LAYERS)
        patch = _positive_int(vision, "patch_size", default=16, limit=4096)
        temporal = _positive_int(vision, "temporal_patch_size", default=2, limit=64)
        channels = _positive_int(vision, "in_channels", default=3, limit=64)
        merge = _positive_int(vision, "spatial_merge_size", default=2, limit=64)
        out = _positive_int(vision, "out_hidden_size", default=text_hidden)
        positions = _positive_int(vision, "num_position_embeddings", default=2304)
        block = 2 * 2 * vh + 3 * vh * vh + 3 * vh + vh * vh + vh + vh * vi + vi + vi * vh + vh
        merged = vh * merge * merge
        merger = 2 * vh + merged * merged + merged + merged * out + out
        return channels * temporal * patch * patch * vh + vh + positions * vh + depth * block + merger
    if top == "llama4" and vision:
        # Llama4VisionModel (transformers 5.24.0 modeling_llama4.py): a bias-free unfold patch linear, class and
        # positional embeddings, pre/post LayerNorms, encoder layers of q/k/v/o and fc1/fc2 with biases and two
        # LayerNorms, the pixel-shuffle adapter (fc1 intermediate → projector_input_dim, fc2 projector_output_dim²,
        # no biases); Llama4MultiModalProjector.linear_1 (vision_output_dim → text h, no bias).
        vh = _positive_int(vision, "hidden_size", default=768)
        vi = _positive_int(vision, "intermediate_size", default=5632)
        layers = _positive_int(vision, "num_hidden_layers", default=34, limit=MAX_LAYERS)
        patch = _positive_int(vision, "patch_size", default=14, limit=4096)
        image = _positive_int(vision, "image_size", default=448, limit=1 << 16)
        channels = _positive_int(vision, "num_channels", default=3, limit=64)
        p_in = _positive_int(vision, "projector_input_dim", default=4096)
        p_out = _positive_int(vision, "projector_output_dim", default=4096)
        v_out = _positive_int(vision, "vision_output_dim", default=7680)
        layer = 4 * (vh * vh + vh) + vh * vi + vi + vi * vh + vh + 2 * 2 * vh
        embed = channels * patch * patch * vh + vh + ((image // patch) ** 2 + 1) * vh + 2 * 2 * vh
        return embed + layers * layer + vi * p_in + p_out * p_out + v_out * text_hidden
    if top == "gemma4":
        return _families_gemma.gemma4_tower_params(cfg, text_hidden)
    if top == "gemma3n":
        return _families_gemma.gemma3n_tower_params(cfg, text_hidden)
    if top == "mistral3" and vision:
        # Mistral3MultiModalProjector (modeling_mistral3.py): norm (RMSNorm, vision h), patch_merger.merging_layer
        # (vision h·m² → vision h, no bias), linear_1 (vision h · feature layers → text h), linear_2 (text h → text h),
        # biases when multimodal_projector_bias.
        vh = _positive_int(vision, "hidden_size", default=1024)
        merge = _positive_int(cfg, "spatial_merge_size", default=2, limit=64)
        feature = cfg.get("vision_feature_layer", -1)
        n_feature = len(feature) if isinstance(feature, list) and feature else 1
        bias = _flag(cfg, "multimodal_projector_bias", False)
        projector = (vh + vh * merge * merge * vh + vh * n_feature * text_hidden + text_hidden * text_hidden
                     + (2 * text_hidden if bias else 0))
        return _pixtral_vision_params(vision) + projector
    return None


def _tower_shapes(cfg: Mapping[str, Any], text_hidden: int) -> dict[str, Any]:
    """The tower's nn.Linear shapes and ViT encoder shape (TrainingSetup.train_tower), or {} where not modelled.
    Only the wrappers whose modelling code was read for this: gemma3 (SiglipVisionModel, transformers 5.24.0
    modeling_siglip.py: q/k/v/out_proj h→h, fc1 h→I, fc2 I→h; patch embedding is a Conv2d; the projector's
    mm_input_projection_weight is an nn.Parameter, not an nn.Linear), mistral3 (PixtralVisionModel,
    modeling_pixtral.py: q/k/v/o h→h, gate/up h→I, down I→h; Mistral3MultiModalProjector: merging_layer h·m²→h,
    linear_1 h·feature layers→text h, linear_2 text h→text h) and qwen3_5 (Qwen3_5VisionModel, modeling_qwen3_5.py:
    qkv h→3h, proj h→h, linear_fc1 h→I, linear_fc2 I→h; the merger's fc1 h·m²→h·m² and fc2 h·m²→out)."""
    top = cfg.get("model_type")
    v = _sub(cfg, "vision_config")
    if not v:
        return {}
    h = _positive_int(v, "hidden_size", default=768)
    inter = _positive_int(v, "intermediate_size", default=3072)
    if top == "gemma3":
        layers = _positive_int(v, "num_hidden_layers", default=12, limit=MAX_LAYERS)
        side = _positive_int(v, "image_size", default=224, limit=1 << 16) // _positive_int(v, "patch_size", default=16,
                                                                                              limit=4096)
        per_image = _positive_int(cfg, "mm_tokens_per_image", default=256, limit=1 << 20)
        # patches per image / placeholder tokens per image: 896 px / 14 = 64² = 4096 patches → 256 tokens (avg-pooled)
        return {"tower_linears": ((h, h, 4 * layers), (h, inter, layers), (inter, h, layers)),
                "tower_encoder": (h, inter, layers), "tower_gated_mlp": False,
                "tower_patches_per_token": max(1, side * side // per_image)}
    if top == "mistral3":
        layers = _positive_int(v, "num_hidden_layers", default=24, limit=MAX_LAYERS)
        merge = _positive_int(cfg, "spatial_merge_size", default=2, limit=64)
        feature = cfg.get("vision_feature_layer", -1)
        n_feature = len(feature) if isinstance(feature, list) and feature else 1
        return {"tower_linears": ((h, h, 4 * layers), (h, inter, 2 * layers), (inter, h, layers),
                                  (h * merge * merge, h, 1), (h * n_feature, text_hidden, 1),
                                  (text_hidden, text_hidden, 1)),
                "tower_encoder": (h, inter, layers), "tower_gated_mlp": True,
                # each image token merges m × m patches (the [IMG_BREAK]/[IMG_END] tokens have no patch: a slight
                # overestimate)
                "tower_patches_per_token": merge * merge}
    if top in ("qwen3_5", "qwen3_5_moe"):
        layers = _positive_int(v, "depth", default=27, limit=MAX_LAYERS)
        merge = _positive_int(v, "spatial_merge_size", default=2, limit=64)
        out = _positive_int(v, "out_hidden_size", default=text_hidden)
        merged = h * merge * merge
        return {"tower_linears": ((h, 3 * h, layers), (h, h, layers), (h, inter, layers), (inter, h, layers),
                                  (merged, merged, 1), (merged, out, 1)),
                "tower_encoder": (h, inter, layers), "tower_gated_mlp": False,
                "tower_patches_per_token": merge * merge}  # one image token per m × m merged patches
    return {}
