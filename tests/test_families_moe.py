"""MoE / MLA / hybrid / attention-sink families (estimator/models/moe.py) against transformers 5.24.0 and PEFT
0.21.2 on the meta device (tests/data/families_moe_counts.json and preset_param_counts.json, written by
calibration/count_families_moe.py and calibration/count_params.py)."""

import json
from pathlib import Path

import pytest

from estimator import TrainingSetup, estimate, load_preset, spec_from_config
from estimator.memory.adapters import adapted_modules, lora_params

DATA = Path(__file__).parent / "data"
VARIANTS = {k: v for k, v in json.loads((DATA / "families_moe_counts.json").read_text()).items()
            if not k.startswith("_")}
PRESETS = json.loads((DATA / "preset_param_counts.json").read_text())
LORA16 = TrainingSetup(method="lora", lora_rank=16)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_counts_equal_the_meta_device(variant):
    row = VARIANTS[variant]
    spec = spec_from_config(row["config"])
    assert spec.params_total == row["params_total"]
    assert lora_params(spec, LORA16) == row["lora_all_linear_r16"]  # what get_peft_model creates


@pytest.mark.parametrize(("preset", "published"), [
    ("gpt-oss-20b", 20.91e9), ("gpt-oss-120b", 116.83e9),  # OpenAI model card: 20.91 B / 116.83 B
    ("deepseek-v3", 671.0e9), ("glm-4.5-air", 106.0e9), ("qwen3-next-80b-a3b", 80.0e9),
    ("ernie-4.5-21b-a3b", 21.8e9), ("qwen3.5-27b", 27.0e9), ("qwen3.5-35b-a3b", 35.0e9),
    ("llama-4-scout", 109.0e9),  # 109 B with the vision tower; the text model is 107.8 B
])
def test_presets_match_transformers_and_the_published_size(preset, published):
    spec = load_preset(preset)
    row = PRESETS[preset]
    assert spec.params_total == row["params_total"]
    assert lora_params(spec, LORA16) == row["lora_all_linear_r16"]
    if "params_active" in row:
        assert spec.params_active == row["params_active"]
    assert abs(spec.params_total - published) / published < 0.02


def test_layer_patterns_follow_the_configs():
    assert load_preset("gpt-oss-20b").layer_pattern[:2] == ("sliding:moe", "full:moe")
    ds = load_preset("deepseek-v3")
    assert ds.layer_pattern[:4] == ("full:dense",) * 3 + ("full:moe",) and ds.moe_layers == 58
    assert (ds.mla_q_rank, ds.mla_kv_rank, ds.mla_rope_dim) == (1536, 512, 64)
    nxt = load_preset("qwen3-next-80b-a3b")
    assert nxt.layer_pattern[:4] == ("linear:moe",) * 3 + ("full:moe",)
    assert load_preset("qwen3.5-27b").layer_pattern[3] == "full:dense"
    assert load_preset("glm-4.5-air").layer_pattern[:2] == ("full:dense", "full:moe")
    scout = load_preset("llama-4-scout")
    assert scout.layer_pattern[:4] == ("chunked:moe",) * 3 + ("full:moe",) and scout.attention_chunk == 8192


def test_all_linear_is_what_peft_wraps():
    # deepseek_v3 goes through PEFT's v4->v5 MoE conversion: fused experts and the router get adapters, the dense
    # MLPs and the shared experts (nn.Linear named gate_proj/up_proj/down_proj) get none.
    ds = adapted_modules(load_preset("deepseek-v3"), LORA16)
    assert {"experts.gate_proj", "gate", "q_a_proj", "kv_b_proj"} <= ds
    assert not ds & {"gate_proj", "shared_experts.gate_proj", "shared_experts.down_proj"}
    # gpt-oss: no conversion, the experts are 3-D parameters and the router a plain parameter: attention only
    assert adapted_modules(load_preset("gpt-oss-20b"), LORA16) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    # Llama 4's router subclasses nn.Linear but returns a tuple, which PEFT's LoRA wrapper cannot take: left out
    # (as a user must exclude it); the shared expert is wrapped, the fused experts are not
    scout = load_preset("llama-4-scout")
    adapted = adapted_modules(scout, LORA16)
    assert "router" not in adapted and "shared_expert.down_proj" in adapted and "experts.down_proj" not in adapted
    assert any('exclude_modules=["router"]' in n for n in scout.notes)


def test_notes_say_what_happens_to_mxfp4_and_the_kernels():
    assert any("MXFP4" in n and "bf16" in n for n in load_preset("gpt-oss-120b").notes)
    assert any("torch fallback" in n for n in load_preset("qwen3.5-27b").notes)


def test_deepseek_v3_fits_no_single_device():
    est = estimate(load_preset("deepseek-v3"), TrainingSetup(method="qlora", lora_rank=16, seq_len=1024))
    assert est.total_bytes > 300e9  # 671 B parameters in 4 bits alone are ≈ 350 GB


def test_qlora_leaves_fused_routed_experts_in_16_bit():
    """transformers 5.24 stores routed experts as fused 3-D parameters; bitsandbytes 4-bit quantises only
    nn.Linear weights, so QLoRA keeps the experts in bf16 (LitGPT's plugin, with per-expert nn.Linear, quantises them)."""
    from estimator import estimate, load_preset
    from estimator.job.stack import resolve_setup
    from estimator.memory.precision import NF4_BYTES

    spec = load_preset("qwen3-30b-a3b")
    experts = spec.params_routed_experts
    assert 0.9 * spec.params_total < experts < spec.params_total
    trl = estimate(spec, resolve_setup("trl", method="qlora"))
    four_bit = spec.params_quantizable - experts
    other = spec.params_total - four_bit
    frozen = next(i for i in trl.details if i.key == "weights.base").bytes
    assert frozen == four_bit * NF4_BYTES + other * 2  # TRL: no double quantisation (use_bnb_nested_quant=False)
    dense = load_preset("qwen2.5-7b")
    assert dense.params_routed_experts == 0
