"""ModelSpec: exact parameter counts from real configs, every supported family, clear errors."""

import json
from pathlib import Path

import pytest

from estimator import TrainingSetup, generic_spec, list_presets, load_preset, parse_config_text, spec_from_config
from estimator.activations import lora_params
from estimator.model import SUPPORTED_FAMILIES

DATA = Path(__file__).parent / "data"

# Counts of what transformers builds (docs/formulas.md §1 table, verified there on the meta device).
KNOWN_COUNTS = [
    ("llama-3.1-8b", 8_030_261_248),
    ("llama-3.2-1b", 1_235_814_400),
    ("llama-3.2-3b", 3_212_749_824),
    ("qwen2.5-0.5b", 494_032_768),
    ("qwen2.5-1.5b", 1_543_714_304),
    ("qwen2.5-3b", 3_085_938_688),
    ("qwen2.5-7b", 7_615_616_512),
    ("qwen2.5-14b", 14_770_033_664),
    ("mistral-7b-v0.3", 7_248_023_552),
    ("gemma-2-2b", 2_614_341_888),
    ("gemma-2-9b", 9_241_705_984),
    ("phi-3-mini", 3_821_079_552),
    ("qwen3-8b", 8_190_735_360),
    ("qwen3-30b-a3b", 30_532_122_624),
    ("mixtral-8x7b", 46_702_792_704),
]


@pytest.mark.parametrize(("preset", "count"), KNOWN_COUNTS)
def test_preset_counts_match_transformers(preset, count):
    assert load_preset(preset).params_total == count


def test_every_preset_matches_the_meta_device_count():
    """tests/data/preset_param_counts.json is written by calibration/count_params.py with transformers."""
    counts = json.loads((DATA / "preset_param_counts.json").read_text())
    checked = 0
    for preset in list_presets():
        row = counts[preset.id]
        spec = load_preset(preset.id)
        assert spec.params_total == row["params_total"], preset.id
        quantizable = row["linear_params_in_layers"]
        if row.get("experts_fused"):
            # transformers 5 stores experts as 3-D tensors and the router as a custom module; our spec lists
            # them as the v4-layout nn.Linear modules (router h→E per MoE layer).
            quantizable += row["params_experts_fused"] + spec.num_experts * spec.hidden_size * spec.moe_layers
        assert spec.params_quantizable == quantizable, preset.id
        lora = lora_params(spec, TrainingSetup(method="lora", lora_rank=16))
        assert lora == row["lora_all_linear_r16"], preset.id  # what PEFT creates on the meta model
        checked += 1
    assert checked >= 17


def test_required_presets_are_shipped():
    ids = {p.id for p in list_presets()}
    for needed in ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
                   "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.3",
                   "gemma-2-2b", "gemma-2-9b", "phi-3-mini", "mixtral-8x7b", "qwen3-8b", "qwen3-30b-a3b"]:
        assert needed in ids


def test_moe_active_parameters():
    # Qwen3-30B-A3B: 3.35B active of 30.5B (docs/formulas.md §1); Mixtral: 2 of 8 experts per token.
    assert load_preset("qwen3-30b-a3b").params_active == 3_353_032_704
    mixtral = load_preset("mixtral-8x7b")
    assert 12.8e9 < mixtral.params_active < 13.0e9


BASE = {"hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "intermediate_size": 1024, "vocab_size": 1000}


def _cfg(family, **extra):
    cfg = dict(BASE, model_type=family)
    if family in ("mixtral",):
        cfg.update(num_local_experts=4, num_experts_per_tok=2)
    if family in ("qwen2_moe", "qwen3_moe"):
        cfg.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256)
    if family == "qwen2_moe":
        cfg.update(shared_expert_intermediate_size=512)
    cfg.update(extra)
    return cfg


def _by_hand(family):
    """Independent hand counts for the small config above (h=512, 8 heads × 64, 2 kv heads, I=1024, V=1000)."""
    h, qd, kvd, inter, vocab, layers = 512, 512, 128, 1024, 1000, 2
    attn = h * qd + 2 * h * kvd + qd * h
    gated = 3 * h * inter
    emb = vocab * h
    if family in ("llama", "mistral"):
        return layers * (attn + gated + 2 * h) + 2 * emb + h
    if family == "qwen2":
        return layers * (attn + qd + 2 * kvd + gated + 2 * h) + 2 * emb + h  # q,k,v biases
    if family == "qwen3":
        return layers * (attn + gated + 2 * h + 2 * 64) + 2 * emb + h  # q_norm, k_norm over head_dim
    if family in ("gemma",):
        return layers * (attn + gated + 2 * h) + emb + h  # tied by default
    if family == "gemma2":
        return layers * (attn + gated + 4 * h) + emb + h
    if family == "gemma3_text":
        return layers * (attn + gated + 4 * h + 2 * 64) + emb + h
    if family == "phi3":
        return layers * (h * (qd + 2 * kvd) + qd * h + h * 2 * inter + inter * h + 2 * h) + 2 * emb + h
    if family == "phi":
        attn_b = attn + qd + 2 * kvd + h
        mlp = 2 * h * inter + inter + h
        return layers * (attn_b + mlp + 2 * h) + 2 * emb + vocab + 2 * h
    if family == "gpt_neox":
        # MHA fused qkv (num_key_value_heads ignored: 3·qd) with biases; two LayerNorms (w + b)
        qkv = h * 3 * qd + 3 * qd + qd * h + h
        mlp = 2 * h * inter + inter + h
        return layers * (qkv + mlp + 4 * h) + 2 * emb + 2 * h
    if family == "mixtral":
        return layers * (attn + 4 * gated + 4 * h + 2 * h) + 2 * emb + h
    if family == "qwen3_moe":
        return layers * (attn + 4 * 3 * h * 256 + 4 * h + 2 * h + 2 * 64) + 2 * emb + h
    if family == "qwen2_moe":
        shared = 3 * h * 512 + h
        return layers * (attn + qd + 2 * kvd + 4 * 3 * h * 256 + 4 * h + shared + 2 * h) + 2 * emb + h
    raise AssertionError(family)


@pytest.mark.parametrize("family", [f for f in SUPPORTED_FAMILIES])
def test_every_family_parses_with_exact_count(family):
    cfg = _cfg(family)
    if family == "gpt_neox":
        cfg.pop("num_key_value_heads")
    spec = spec_from_config(cfg)
    assert spec.family == family
    assert spec.params_total == _by_hand(family)


def test_tied_embeddings_counted_once():
    untied = spec_from_config(_cfg("llama", tie_word_embeddings=False))
    tied = spec_from_config(_cfg("llama", tie_word_embeddings=True))
    assert untied.params_total - tied.params_total == 1000 * 512


def test_moe_sparse_step_and_dense_layers():
    spec = spec_from_config(_cfg("qwen3_moe", num_hidden_layers=4, decoder_sparse_step=2, mlp_only_layers=[]))
    assert spec.moe_layers == 2  # layers 1 and 3


@pytest.mark.parametrize(("cfg", "message"), [
    ({}, "model_type"),
    ({"model_type": "falcon"}, "not supported"),
    ({k: v for k, v in _cfg("llama").items() if k != "hidden_size"}, "'hidden_size'"),
    ({k: v for k, v in _cfg("llama").items() if k != "vocab_size"}, "'vocab_size'"),
    (_cfg("llama", num_hidden_layers=10**12), "num_hidden_layers"),
    (_cfg("llama", hidden_size="big"), "hidden_size"),
    (_cfg("llama", hidden_size=-4), "hidden_size"),
    (_cfg("llama", hidden_size=1.5), "hidden_size"),
    (_cfg("llama", num_key_value_heads=3), "multiple"),
    (_cfg("llama", tie_word_embeddings="yes"), "tie_word_embeddings"),
    ({k: v for k, v in _cfg("mixtral").items() if k != "num_local_experts"}, "num_local_experts"),
    (_cfg("llama", hidden_size=10**7), "beyond"),
])
def test_bad_configs_name_the_field(cfg, message):
    with pytest.raises(ValueError, match=message):
        spec_from_config(cfg)


@pytest.mark.parametrize(("payload", "message"), [
    (b"\xff\xfe\x00binary", "UTF-8"),
    ("not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ("{" * 5000 + "}" * 5000, "JSON"),
    ("x" * 1_000_001, "larger than 1 MB"),
])
def test_uploaded_garbage_is_a_clear_error(payload, message):
    with pytest.raises(ValueError, match=message):
        parse_config_text(payload)


def test_generic_size_is_exact_and_shapes_grow():
    prev = None
    for size in [0.1, 0.5, 1, 1.5, 3, 7, 14, 32, 70, 400]:
        spec = generic_spec(size)
        assert spec.params_total == round(size * 1e9)
        if prev is not None:
            assert spec.hidden_size >= prev.hidden_size
            assert spec.num_layers >= prev.num_layers
        prev = spec
    seven = generic_spec(7)
    assert 3584 <= seven.hidden_size <= 4096 and 28 <= seven.num_layers <= 32


@pytest.mark.parametrize("size", [0.0, 0.05, 401, float("nan"), float("inf"), -3])
def test_generic_size_out_of_range(size):
    with pytest.raises(ValueError, match="model size"):
        generic_spec(size)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="llama-3.1-8b"):
        load_preset("gpt-5")
