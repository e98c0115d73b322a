"""Gemma 4 / Gemma 3n (estimator/models/gemma.py) and the Qwen3.5 / Llama 4 vision towers against transformers
5.24.0 and PEFT 0.21.2 on the meta device (tests/data/preset_param_counts.json, written by
calibration/count_params.py)."""

import json
from pathlib import Path

import pytest

from estimator import TrainingSetup, estimate, load_preset, spec_from_config
from estimator.memory.adapters import adapted_modules, lora_params

DATA = Path(__file__).parent / "data"
PRESETS = json.loads((DATA / "preset_param_counts.json").read_text())
LORA16 = TrainingSetup(method="lora", lora_rank=16)
GEMMA = ["gemma-4-e2b", "gemma-4-e4b", "gemma-4-26b-a4b", "gemma-4-31b", "gemma-3n-e2b", "gemma-3n-e4b"]
WRAPPED = ["qwen3.5-27b", "qwen3.5-35b-a3b", "llama-4-scout"]


def _model_level_linears(spec) -> int:
    """nn.Linear modules outside the decoder layers (listed once, role "model")."""
    return sum(m.params_per_copy * m.count for m in spec.linears if m.role == "model")


@pytest.mark.parametrize("preset", GEMMA + WRAPPED)
def test_counts_equal_the_meta_device(preset):
    spec, row = load_preset(preset), PRESETS[preset]
    assert spec.params_total == row["params_total"]
    assert spec.params_tower == row["params_tower"] > 4e8  # towers + projectors/embedders, frozen
    assert lora_params(spec, LORA16) == row["lora_all_linear_r16"]  # what get_peft_model creates
    assert spec.params_active == row.get("params_active", spec.params_total)


@pytest.mark.parametrize("preset", GEMMA)
def test_gemma_linears_and_embeddings_follow_the_modules(preset):
    spec, row = load_preset(preset), PRESETS[preset]
    in_layers = spec.params_quantizable - _model_level_linears(spec) - row.get("params_experts_fused", 0)
    assert in_layers == row["linear_params_in_layers"]
    # the per-layer input table (PLE) is an embedding: counted with embed_tokens (tied head)
    assert spec.params_embedding == row["params_embedding"] + spec.params_extra_embedding
    assert spec.params_extra_embedding == (262_144 * spec.num_layers * 256 if preset != "gemma-4-26b-a4b"
                                           and preset != "gemma-4-31b" else 0)


def test_gemma4_kv_sharing_head_sizes_and_double_wide_mlp():
    e2b = load_preset("gemma-4-e2b")
    by = {(m.name, m.out_features): m.layers for m in e2b.linears}
    # 35 layers, 4:1 sliding/full; the last 20 reuse K/V: k_proj only on the first 15 (12 sliding, 3 full)
    assert by[("k_proj", 256)] == 12 and by[("k_proj", 512)] == 3
    assert by[("q_proj", 8 * 256)] == 28 and by[("q_proj", 8 * 512)] == 7  # full layers: global_head_dim 512
    assert by[("gate_proj", 6144)] == 15 and by[("gate_proj", 12288)] == 20  # double-wide on the shared layers
    assert e2b.layer_pattern[:5] == ("sliding:dense",) * 4 + ("full:dense",)
    assert e2b.layer_pattern[-1] == "full_shared:dense12288" and e2b.sliding_layers == 28
    big = load_preset("gemma-4-31b")
    full = [m for m in big.linears if m.kinds and all(k.startswith("full") for k in m.kinds)]
    # attention_k_eq_v: full layers have 4 global KV heads of 512 and no v_proj
    assert {m.name: m.out_features for m in full if m.role == "attn_in"} == {"q_proj": 32 * 512, "k_proj": 4 * 512}


def test_gemma4_moe_runs_dense_mlp_and_experts_and_peft_skips_the_fused_experts():
    moe = load_preset("gemma-4-26b-a4b")
    assert (moe.num_experts, moe.experts_per_token, moe.moe_layers) == (128, 8, 30)
    assert all(kind.endswith(":moe") for kind in moe.layer_pattern)
    adapted = adapted_modules(moe, LORA16)
    assert "router.proj" in adapted and "gate_proj" in adapted and not any(n.startswith("experts.") for n in adapted)
    assert moe.params_active < moe.params_total / 5


def test_gemma3n_altup_laurel_and_the_timm_vision_encoder():
    spec = load_preset("gemma-3n-e4b")
    names = set(spec.linear_names())
    assert {"laurel.linear_left", "altup.modality_router", "per_layer_input_gate", "altup_projections"} <= names
    assert any("AltUp" in note for note in spec.notes)
    # the MobileNetV5 tower (timm mobilenetv5_300m_enc) is in the count: 294,126,912 parameters from the table
    assert any("mobilenetv5_300m_enc (MobileNetV5, 294 M parameters" in note for note in spec.notes)
    cfg = json.loads((Path(__file__).parent.parent / "estimator" / "models" / "presets" / "gemma-3n-e4b.json").read_text())
    for vision in ({"architecture": "mobilenetv5_base"}, {"architecture": "mobilenetv5_300m_enc",
                                                          "model_args": {"depth": 3}}):
        cfg["vision_config"] = {**cfg["vision_config"], **vision}
        other = spec_from_config(cfg)  # an encoder the table does not hold: left out, and the note says so
        assert other.params_total == spec.params_total - 294_126_912
        assert other.params_tower == spec.params_tower - 294_126_912
        assert any("vision encoder (timm 'mobilenetv5_" in note and "is not counted" in note for note in other.notes)
    del cfg["vision_config"]["architecture"], cfg["vision_config"]["model_args"]  # Gemma3nVisionConfig's default
    assert spec_from_config(cfg).params_total == spec.params_total
    cfg["vision_config"]["architecture"] = 300
    with pytest.raises(ValueError, match="vision_config field 'architecture' must name a timm model"):
        spec_from_config(cfg)


def test_a_text_only_gemma4_config_and_bad_fields():
    text = spec_from_config({"model_type": "gemma4_text"})  # Gemma4TextConfig defaults
    assert text.params_tower == 0 and text.params_extra_embedding == 262_144 * 30 * 256
    with pytest.raises(ValueError, match="layer_types"):
        spec_from_config({"model_type": "gemma4_text", "layer_types": ["sliding_attention"]})
    with pytest.raises(ValueError, match="share K/V"):
        spec_from_config({"model_type": "gemma3n_text", "num_hidden_layers": 4, "num_kv_shared_layers": 2,
                          "layer_types": ["full_attention"] * 2 + ["sliding_attention"] * 2})
    with pytest.raises(ValueError, match="no earlier layer"):
        spec_from_config({"model_type": "gemma3n_text", "num_hidden_layers": 4, "num_kv_shared_layers": 4})
    everything_shared = spec_from_config({"model_type": "gemma4_text", "num_hidden_layers": 6,
                                          "num_kv_shared_layers": 6})  # Gemma 4 allows it: no k/v projections
    assert "k_proj" not in everything_shared.linear_names()
    with pytest.raises(ValueError, match="intermediate_size"):
        spec_from_config({"model_type": "gemma3n_text", "num_hidden_layers": 4, "num_kv_shared_layers": 0,
                          "intermediate_size": [8, 8]})


@pytest.mark.parametrize("preset", GEMMA + WRAPPED)
def test_towers_stay_frozen_and_image_tokens_lengthen_the_sequence(preset):
    spec = load_preset(preset)
    base = estimate(spec, TrainingSetup(method="full", batch=1, seq_len=1024))
    assert base.params_trainable == spec.params_total - spec.params_tower
    with_images = estimate(spec, TrainingSetup(method="lora", batch=1, seq_len=1024, image_tokens=256))
    text_only = estimate(spec, TrainingSetup(method="lora", batch=1, seq_len=1024))
    assert with_images.components_bytes["activations"] > text_only.components_bytes["activations"]


def test_per_layer_config_as_save_pretrained_writes_it():
    """transformers 5 writes Gemma 4's full-layer overrides as per_layer_config instead of global_head_dim /
    num_global_key_value_heads: both forms give the same model."""
    raw = json.loads((Path(__file__).parent.parent / "estimator" / "models" / "presets" / "gemma-4-31b.json").read_text())
    text = dict(raw["text_config"])
    full = [i for i, t in enumerate(text["layer_types"]) if t == "full_attention"]
    text.pop("global_head_dim")
    text.pop("num_global_key_value_heads")
    text["per_layer_config"] = {str(i): {"head_dim": 512, "num_key_value_heads": 4} for i in full}
    saved = spec_from_config({**raw, "text_config": text})
    assert saved.params_total == load_preset("gemma-4-31b").params_total == PRESETS["gemma-4-31b"]["params_total"]
    with pytest.raises(ValueError, match="per_layer_config"):
        spec_from_config({**text, "per_layer_config": {"999": {"head_dim": 512}}})
    with pytest.raises(ValueError, match="per_layer_config"):
        spec_from_config({**text, "per_layer_config": {"1": {"head_dim": "wide"}}})
