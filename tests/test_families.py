"""Issue 11's dense families and multimodal wrappers: counts from transformers' meta-device build, the frozen
towers, and image tokens per example in the estimate, the CLI and the page's link."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import TrainingSetup, estimate, get_device, load_preset, spec_from_config, verdict
from estimator.job.stack import resolve_setup
from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]
COUNTS = json.loads((ROOT / "tests" / "data" / "preset_param_counts.json").read_text())
WRAPPERS = ("gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "mistral-small-3.1-24b")
NEW_DENSE = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-14b", "qwen3-32b", "mistral-small-24b", "phi-4",
             "smollm3-3b", "olmo-2-7b", "olmo-2-13b", "granite-3.3-8b", "command-r7b", "starcoder2-3b",
             "ernie-4.5-0.3b", "r1-distill-qwen-1.5b", "r1-distill-qwen-7b", "r1-distill-qwen-14b",
             "r1-distill-qwen-32b", "r1-distill-llama-8b", "r1-distill-llama-70b")


@pytest.mark.parametrize("preset", NEW_DENSE + WRAPPERS)
def test_new_presets_equal_the_meta_device_count(preset):
    spec = load_preset(preset)
    assert spec.params_total == COUNTS[preset]["params_total"]
    assert spec.params_embedding == COUNTS[preset]["params_embedding"]


@pytest.mark.parametrize(("preset", "billions"), [
    # the model cards' sizes (the safetensors totals the Hub shows; Qwen3-1.7B and -4B tie their embeddings)
    ("gemma-3-4b", 4.30), ("gemma-3-12b", 12.19), ("gemma-3-27b", 27.43), ("mistral-small-3.1-24b", 24.01),
    ("mistral-small-24b", 23.57), ("phi-4", 14.66), ("smollm3-3b", 3.08), ("olmo-2-7b", 7.30),
    ("olmo-2-13b", 13.72), ("granite-3.3-8b", 8.17), ("command-r7b", 8.03), ("qwen3-32b", 32.76),
    ("r1-distill-qwen-1.5b", 1.78), ("r1-distill-llama-70b", 70.55),
])
def test_new_presets_have_the_published_size(preset, billions):
    assert round(load_preset(preset).params_total / 1e9, 2) == billions


@pytest.mark.parametrize("preset", WRAPPERS)
def test_towers_and_projectors_equal_the_meta_device_count(preset):
    spec = load_preset(preset)
    assert spec.params_tower == COUNTS[preset]["params_tower"] > 4e8
    assert spec.tower_kind == "vision"
    assert any("frozen weights" in note for note in spec.notes)


def test_full_fine_tuning_keeps_the_tower_frozen():
    spec = load_preset("gemma-3-4b")
    setup = TrainingSetup(method="full", precision="bf16", batch=1, seq_len=1024)
    est = estimate(spec, setup)
    assert est.params_trainable == spec.params_total - spec.params_tower == 3_880_263_168
    text_only = replace(spec, params_tower=0, params_total=spec.params_total - spec.params_tower)
    plain = estimate(text_only, setup)
    # the tower adds its 16-bit weights and nothing else (no gradients, no optimizer state)
    assert est.components_bytes["weights"] - plain.components_bytes["weights"] == 2 * spec.params_tower
    assert est.components_bytes["optimizer"] == plain.components_bytes["optimizer"]


def test_lora_on_a_wrapper_adapts_the_language_model_only():
    spec = load_preset("gemma-3-4b")
    est = estimate(spec, TrainingSetup(method="lora", lora_rank=16))
    assert est.params_trainable == COUNTS["gemma-3-4b"]["lora_all_linear_r16"] == 29_802_496


@pytest.mark.parametrize("method", ["full", "lora"])
def test_image_tokens_lengthen_the_language_models_sequence(method):
    spec = load_preset("gemma-3-4b")
    text = TrainingSetup(method=method, batch=2, seq_len=1024 + 256)
    images = TrainingSetup(method=method, batch=2, seq_len=1024, image_tokens=256)
    assert images.tokens == text.tokens == 2 * 1280
    # the standard loss computes logits on every position, images included: the same memory as a longer text
    assert estimate(spec, images).total_bytes == estimate(spec, text).total_bytes
    assert estimate(spec, images).total_bytes > estimate(spec, TrainingSetup(method=method, batch=2,
                                                                             seq_len=1024)).total_bytes


def test_trl_scores_only_the_labelled_positions():
    from estimator.memory.hf.activations.common import context
    from estimator.memory.hf.activations.loss import loss_memory

    spec = load_preset("gemma-3-4b")
    text = resolve_setup("trl", batch=2, seq_len=1280)
    images = resolve_setup("trl", batch=2, seq_len=1024, image_tokens=256)
    kept = [loss_memory(spec, s, context(spec, s)).kept for s in (text, images)]
    # TRL's fused head gathers the labelled positions only: 2 × (1280 − 1) of text, 2 × (1024 − 1) with images
    assert kept[0] / kept[1] == pytest.approx((1280 - 1) / (1024 - 1))


def test_image_tokens_need_a_multimodal_model():
    with pytest.raises(ValueError, match="need a multimodal model; Qwen3-8B has no vision tower"):
        estimate(load_preset("qwen3-8b"), TrainingSetup(image_tokens=256))
    with pytest.raises(ValueError, match="image_tokens must be between 0"):
        TrainingSetup(image_tokens=-1)


def test_cli_image_tokens(capsys):
    assert main(["--model", "gemma-3-4b", "--image-tokens", "256", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["setup"]["image_tokens"] == 256
    assert main(["--model", "gemma-3-4b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_bytes"] < doc["total_bytes"]
    with pytest.raises(SystemExit) as exc:
        main(["--model", "qwen3-8b", "--image-tokens", "256"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["estimator: error: image tokens per example need a multimodal model; Qwen3-8B has no vision "
                   "tower"]


def test_hub_style_gemma3_config_gets_the_text_defaults():
    # google/gemma-3-4b's config.json names few text fields; Gemma3TextConfig's defaults fill the rest
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
           "image_token_index": 262144,
           "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                           "num_hidden_layers": 34, "sliding_window": 1024,
                           "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
           "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                             "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                             "patch_size": 14, "vision_use_head": False}}
    assert spec_from_config(cfg).params_total == load_preset("gemma-3-4b").params_total == 4_300_079_472


def _page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_image_tokens_from_the_link():
    at = _page({"model": "gemma-3-4b", "images": "256", "method": "full"})
    box = at.sidebar.number_input(key="images")
    assert box.value == 256
    spec = load_preset("gemma-3-4b")
    est = estimate(spec, resolve_setup("trl", method="full", image_tokens=256))
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    expected = verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline
    assert any(expected in h for h in heads), heads


def test_page_hides_image_tokens_for_text_models():
    at = _page({"model": "qwen3-8b", "images": "256"})
    assert "images" not in [w.key for w in at.sidebar.number_input]
    notes = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "Image tokens apply to multimodal models only; Qwen3-8B is a text model" in notes
