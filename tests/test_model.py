"""ModelSpec: exact parameter counts from real configs, every supported family, clear errors."""

import json
from pathlib import Path

import pytest

from estimator import TrainingSetup, generic_spec, list_presets, load_preset, parse_config_text, spec_from_config
from estimator.memory.adapters import lora_params
from estimator.models.config import SUPPORTED_FAMILIES
from estimator.models.gemma import FAMILIES as GEMMA_FAMILIES
from estimator.models.moe import FAMILIES as MOE_FAMILIES

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
        if spec.family in MOE_FAMILIES | GEMMA_FAMILIES:  # model-level linears: tests/test_families_gemma.py
            # families_moe lists fused experts with their biases and every router: checked in test_families_moe
            quantizable = spec.params_quantizable
        elif row.get("experts_fused"):
            # transformers 5 stores experts as 3-D tensors and the router as a custom module; our spec lists
            # them as the v4-layout nn.Linear modules (router h→E per MoE layer).
            quantizable += row["params_experts_fused"] + spec.num_experts * spec.hidden_size * spec.moe_layers
        assert spec.params_quantizable == quantizable, preset.id
        lora = lora_params(spec, TrainingSetup(method="lora", lora_rank=16))
        assert lora == row["lora_all_linear_r16"], preset.id  # what PEFT creates on the meta model
        checked += 1
    assert checked >= 26


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
    if family in ("granite", "ministral"):
        return layers * (attn + gated + 2 * h) + 2 * emb + h  # Llama's layout (multipliers have no weights)
    if family in ("smollm3", "ernie4_5"):
        return layers * (attn + gated + 2 * h) + emb + h  # tied by default
    if family in ("olmo2", "olmo3"):
        # post-attention and post-feedforward norms; q_norm over q_dim and k_norm over kv_dim (all heads)
        return layers * (attn + gated + 2 * h + qd + kvd) + 2 * emb + h
    if family == "cohere2":
        return layers * (attn + gated + h) + emb + h  # one weight-only LayerNorm per layer, tied
    if family == "starcoder2":
        biased_attn = attn + qd + 2 * kvd + h
        mlp = 2 * h * inter + inter + h  # c_fc, c_proj with biases
        return layers * (biased_attn + mlp + 4 * h) + emb + 2 * h  # LayerNorms with bias, tied
    if family == "qwen2_moe":
        shared = 3 * h * 512 + h
        return layers * (attn + qd + 2 * kvd + 4 * 3 * h * 256 + 4 * h + shared + 2 * h) + 2 * emb + h
    raise AssertionError(family)


@pytest.mark.parametrize("family", [f for f in SUPPORTED_FAMILIES])
def test_every_family_parses_with_exact_count(family):
    cfg = _cfg(family)
    if family == "gpt_neox":
        cfg.pop("num_key_value_heads")
    if family == "gemma3_text":
        cfg["head_dim"] = 64  # Gemma3TextConfig's own default is 256 (estimator.models.config.FAMILY_DEFAULTS)
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


@pytest.mark.parametrize("size", [0.0, 0.05, 1001, float("nan"), float("inf"), -3])
def test_generic_size_out_of_range(size):
    with pytest.raises(ValueError, match="model size"):
        generic_spec(size)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="llama-3.1-8b"):
        load_preset("gpt-5")


# ---------------------------------------------------------------------------------------------------------
# Unknown model types: a Llama-like estimate with a caveat; multimodal wrappers read from text_config
# ---------------------------------------------------------------------------------------------------------

PRESETS = Path(__file__).resolve().parents[1] / "estimator" / "models" / "presets"


def _preset_cfg(preset_id: str) -> dict:
    return json.loads((PRESETS / f"{preset_id}.json").read_text(encoding="utf-8"))


LLAMA_8B_CFG = _preset_cfg("llama-3.1-8b")


@pytest.mark.parametrize("setup", [
    TrainingSetup(method="lora"),
    TrainingSetup(method="full", precision="mixed", batch=2, seq_len=4096, grad_ckpt=True),
    TrainingSetup(method="qlora", lora_rank=64, lora_targets=("q_proj", "v_proj")),
])
def test_unknown_model_type_with_llama_numbers_is_llama(setup):
    from estimator import estimate

    spec = spec_from_config({**LLAMA_8B_CFG, "model_type": "acme_decoder"}, name="Acme 8B")
    llama = load_preset("llama-3.1-8b")
    assert spec.family == "acme_decoder" and spec.name == "Acme 8B"
    assert spec.params_total == llama.params_total == 8_030_261_248
    assert spec.params_quantizable == llama.params_quantizable and spec.linears == llama.linears
    assert estimate(spec, setup).total_bytes == estimate(llama, setup).total_bytes
    (note,) = spec.notes
    assert note.startswith("model_type 'acme_decoder' is not one of the modelled families: estimated as a "
                           "Llama-like decoder")
    assert note in estimate(spec, setup).notes  # the page and the CLI show the estimate's notes


def test_unknown_model_type_caveat_reaches_the_cli_json(tmp_path, capsys):
    from estimator.report.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_8B_CFG, "model_type": "exaone"}), encoding="utf-8")
    assert main(["--config", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["family"] == "exaone" and doc["params_total"] == 8_030_261_248
    assert any("Llama-like" in note for note in doc["notes"])


def test_unknown_model_type_reads_the_optional_fields():
    base = {k: v for k, v in LLAMA_8B_CFG.items() if k != "tie_word_embeddings"}
    untied = spec_from_config({**base, "model_type": "exaone"})
    assert any("tie_word_embeddings is not set" in n for n in untied.notes)
    assert untied.params_total == 8_030_261_248  # untied, as Llama
    tied = spec_from_config({**base, "model_type": "exaone", "tie_word_embeddings": True})
    assert untied.params_total - tied.params_total == 128256 * 4096
    # No num_key_value_heads: multi-head attention, head_dim = hidden_size / heads.
    h, layers = 512, 2
    no_gqa = {k: v for k, v in _cfg("llama").items() if k != "num_key_value_heads"}
    spec = spec_from_config({**no_gqa, "model_type": "newfam", "tie_word_embeddings": False})
    assert spec.num_kv_heads == 8 and spec.head_dim == 64
    assert spec.params_total == layers * (4 * h * h + 3 * h * 1024 + 2 * h) + 2 * 1000 * h + h
    # attention_bias is read as Llama reads it: q, k, v and o biases.
    biased = spec_from_config({**_cfg("llama"), "model_type": "newfam", "attention_bias": True})
    assert biased.params_total == _by_hand("llama") + layers * (512 + 2 * 128 + 512)


@pytest.mark.parametrize(("cfg", "message"), [
    ({"model_type": "falcon", "hidden_size": 4096}, "lacks the usual decoder fields"),
    ({**{k: v for k, v in LLAMA_8B_CFG.items() if k != "intermediate_size"}, "model_type": "newfam"},
     "missing 'intermediate_size'"),
    ({**LLAMA_8B_CFG, "model_type": "bert"}, "encoder"),
    ({**LLAMA_8B_CFG, "model_type": "newfam", "is_encoder_decoder": True}, "encoder"),
    ({**LLAMA_8B_CFG, "model_type": "dots1", "n_routed_experts": 256}, "mixture of experts"),
    ({**LLAMA_8B_CFG, "model_type": "bailing_moe", "num_experts_per_tok": 8}, "mixture of experts"),
    ({**LLAMA_8B_CFG, "model_type": "<b>x</b>"}, "not the name of a transformers model type"),
])
def test_unknown_model_types_that_cannot_be_estimated_say_why(cfg, message):
    with pytest.raises(ValueError, match="is not supported") as info:
        spec_from_config(cfg)
    assert message in str(info.value)


def test_hybrid_linear_attention_layers_are_flagged():
    layer_types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    spec = spec_from_config({**LLAMA_8B_CFG, "model_type": "qwen3_next_dense", "layer_types": layer_types})
    assert any("linear-attention layers" in n for n in spec.notes)


@pytest.mark.parametrize(("wrapper", "preset", "towers"), [
    ("llava_like", "gemma-3-1b", {"vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152}}),
    ("idefics_like", "mistral-7b-v0.3", {"vision_config": {"model_type": "pixtral", "hidden_size": 1024}}),
    ("qwen2_5_omni_like", "qwen2.5-0.5b", {"vision_config": {}, "audio_config": {}}),
])
def test_multimodal_wrapper_uses_its_text_config(wrapper, preset, towers):
    text = _preset_cfg(preset)
    spec = spec_from_config({"model_type": wrapper, "text_config": text, **towers}, name="mm")
    expected = load_preset(preset)
    assert spec.family == expected.family and spec.params_total == expected.params_total
    assert spec.linears == expected.linears
    note = spec.notes[-1]
    assert note.startswith(f"multimodal model ({wrapper}): the language model ({expected.family}, from text_config)")
    tower = "vision and audio tower" if "audio_config" in towers else "vision tower"
    assert f"the {tower}'s weights are not counted yet" in note


def test_multimodal_wrapper_with_an_unknown_text_model_gets_both_caveats():
    # Qwen3.5's layout under names this calculator does not model: a wrapper, a text model with hybrid layers, a
    # vision tower (qwen3_5 itself is modelled: estimator/models/moe.py).
    text = {**LLAMA_8B_CFG, "model_type": "qwen9_text",
            "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8}
    spec = spec_from_config({"model_type": "qwen9", "text_config": text, "vision_config": {"depth": 27}})
    assert spec.family == "qwen9_text" and spec.params_total == 8_030_261_248
    joined = " | ".join(spec.notes)
    assert "Llama-like" in joined and "linear-attention" in joined and "vision tower" in joined


def test_multimodal_wrapper_fields_at_the_top_level_and_missing_fields():
    # tie_word_embeddings and vocab_size kept at the wrapper's top level are used for the text model.
    text = {k: v for k, v in _preset_cfg("qwen2.5-0.5b").items() if k not in ("vocab_size", "tie_word_embeddings")}
    spec = spec_from_config({"model_type": "llava_like", "text_config": text, "vocab_size": 151936,
                             "tie_word_embeddings": True})
    assert spec.params_total == load_preset("qwen2.5-0.5b").params_total
    # A text_config without the decoder fields is a clear error naming the wrapper and the field.
    with pytest.raises(ValueError, match=r"multimodal config \(llava\), in its text_config: .*'num_attention_heads'"):
        spec_from_config({"model_type": "llava", "text_config": {"model_type": "llama", "hidden_size": 2560,
                                                                 "num_hidden_layers": 34, "vocab_size": 262208,
                                                                 "intermediate_size": 10240}})
