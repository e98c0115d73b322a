"""Training a multimodal wrapper's vision tower (TrainingSetup.train_tower; docs/formulas.md §3.7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import TrainingSetup, estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup, setup_json
from estimator.memory.towers import tower_activation_bytes, tower_lora_params
from estimator.models.config import is_frozen_tower_note
from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]
GEMMA3_TOWER = 419_816_304  # SigLIP-400M at 896 px + Gemma 3 projector (calibration count, gemma-3-4b)


def _phase(est, key):
    return next(p for p in est.phases if p.key == key)


def test_full_fine_tuning_trains_exactly_the_tower_more():
    spec = load_preset("gemma-3-4b")
    assert spec.params_tower == GEMMA3_TOWER
    frozen = estimate(spec, TrainingSetup(method="full", precision="bf16", image_tokens=256))
    trained = estimate(spec, TrainingSetup(method="full", precision="bf16", image_tokens=256, train_tower=True))
    assert frozen.params_trainable == 4_300_079_472 - GEMMA3_TOWER == 3_880_263_168
    assert trained.params_trainable == 4_300_079_472  # everything trains
    # bf16 gradients (2 B) and AdamW's two bf16 moments (2 × 2 B) per tower parameter, at the optimizer step
    # (the default optimizer is fused: no step temporaries)
    step_f, step_t = _phase(frozen, "optimizer_step"), _phase(trained, "optimizer_step")
    assert step_t.gradients - step_f.gradients == 2 * GEMMA3_TOWER
    assert step_t.optimizer - step_f.optimizer == 4 * GEMMA3_TOWER
    assert step_t.weights == step_f.weights  # same bytes, now all trainable


@pytest.mark.parametrize("method", ["full", "lora"])
def test_training_the_tower_without_images_is_the_frozen_tower(method):
    """Text-only batches (image tokens 0): the wrapper never calls the tower, so no gradient reaches it and AdamW
    allocates no state for a parameter whose grad is None (torch/optim/adamw.py _init_group skips p.grad is None);
    a traced step equals the frozen tower's. Full fine-tuning: the same bytes as frozen (its weights are stored in
    the training dtype either way). LoRA: the tower's adapters are stored (fp32, 4 B each), with no gradient or state.
    (Until this was modelled, --train-tower on text added the tower's gradients and optimizer state: +5–11 %.)"""
    spec = load_preset("gemma-3-4b")
    frozen = estimate(spec, TrainingSetup(method=method, precision="bf16"))
    text_only = estimate(spec, TrainingSetup(method=method, precision="bf16", train_tower=True))
    assert text_only.params_trainable == frozen.params_trainable
    stored = 0 if method == "full" else 4 * tower_lora_params(spec, 16)  # 4 B × 8,695,296 tower adapters
    for p_f, p_t in zip(frozen.phases, text_only.phases, strict=True):
        assert (p_t.key, p_t.gradients, p_t.optimizer, p_t.activations) == (p_f.key, p_f.gradients, p_f.optimizer,
                                                                          p_f.activations)
        assert p_t.weights - p_f.weights == stored
    assert any(is_frozen_tower_note(n) for n in text_only.notes)  # the wrapper's note holds
    assert any("no gradient reaches it" in n for n in text_only.notes)
    with_images = estimate(spec, TrainingSetup(method=method, precision="bf16", train_tower=True, image_tokens=256))
    assert with_images.params_trainable > frozen.params_trainable


def test_mixed_precision_tower_gets_an_fp32_master_copy():
    spec = load_preset("gemma-3-4b")
    frozen = estimate(spec, TrainingSetup(method="full", precision="mixed", image_tokens=256))
    trained = estimate(spec, TrainingSetup(method="full", precision="mixed", image_tokens=256, train_tower=True))
    step_f, step_t = _phase(frozen, "optimizer_step"), _phase(trained, "optimizer_step")
    assert step_t.weights == step_f.weights  # fp32 either way (mixed keeps fp32 weights)
    assert step_t.gradients - step_f.gradients == 4 * GEMMA3_TOWER
    assert step_t.optimizer - step_f.optimizer == 2 * 4 * GEMMA3_TOWER  # two fp32 moments


def test_lora_adapters_on_the_towers_linears():
    spec = load_preset("gemma-3-4b")
    # SigLIP: 27 layers × (4 × (1152 + 1152) + (1152 + 4304) + (4304 + 1152)) × r = 16
    assert tower_lora_params(spec, 16) == 16 * 27 * (4 * 2304 + 2 * 5456) == 8_695_296
    base = estimate(spec, TrainingSetup(method="lora", image_tokens=256))
    trained = estimate(spec, TrainingSetup(method="lora", image_tokens=256, train_tower=True))
    assert trained.params_trainable - base.params_trainable == 8_695_296
    mistral = load_preset("mistral-small-3.1-24b")
    # Pixtral 24 layers: 4 h→h, gate/up h→I, down I→h (h 1024, I 4096); projector 4096→1024, 1024→5120, 5120→5120
    pixtral = 24 * (4 * 2048 + 2 * 5120 + 5120) + (4096 + 1024) + (1024 + 5120) + 2 * 5120
    assert tower_lora_params(mistral, 8) == 8 * pixtral


def test_the_default_lora_note_names_peft_all_linear_wrapping_the_tower():
    spec = load_preset("gemma-3-4b")
    notes = " ".join(estimate(spec, TrainingSetup(method="lora")).notes)
    assert "all-linear" in notes and "8,695,296 more adapter parameters" in notes
    full = " ".join(estimate(spec, TrainingSetup(method="full")).notes)
    assert "SFTTrainer does not freeze it" in full
    text = " ".join(estimate(load_preset("qwen3-0.6b"), TrainingSetup(method="lora")).notes)
    assert "all-linear' also wraps" not in text


def test_tower_activations_on_images():
    spec = load_preset("gemma-3-4b")
    assert spec.tower_encoder == (1152, 4304, 27) and spec.tower_patches_per_token == 16  # 64² patches / 256
    setup = TrainingSetup(method="lora", precision="bf16", image_tokens=256, train_tower=True)
    # 4096 patches × 27 layers × (2·(9·1152 + 2·4304) + 16)
    assert tower_activation_bytes(spec, setup)[0] == 4096 * 27 * 37_968 == 4_198_957_056
    ckpt = TrainingSetup(method="lora", precision="bf16", image_tokens=256, train_tower=True, grad_ckpt=True)
    assert tower_activation_bytes(spec, ckpt)[0] == 4096 * 27 * 2 * 1152
    frozen = TrainingSetup(method="lora", precision="bf16", image_tokens=256)
    assert tower_activation_bytes(spec, frozen)[0] == 0  # a frozen tower saves nothing for backward
    with_tower = estimate(spec, setup)
    without = estimate(spec, TrainingSetup(method="lora", precision="bf16", image_tokens=256))
    first = "backward.first_layer"
    grow = _phase(with_tower, first).activations - _phase(without, first).activations
    assert grow == 4_198_957_056
    # Pixtral: each image token merges 2 × 2 patches; gated MLP
    mistral = load_preset("mistral-small-3.1-24b")
    got = tower_activation_bytes(mistral, TrainingSetup(method="lora", image_tokens=100, train_tower=True))[0]
    assert got == 400 * 24 * (2 * (7 * 1024 + 4 * 4096) + 8 * 1024 + 8)


def test_bad_tower_requests_are_refused_precisely():
    with pytest.raises(ValueError, match="train_tower must be true or false"):
        TrainingSetup(train_tower="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Qwen3-0.6B has no vision tower"):
        estimate(load_preset("qwen3-0.6b"), TrainingSetup(train_tower=True))
    gemma4 = load_preset("gemma-4-e2b")
    with pytest.raises(ValueError, match="linear shapes .* are not modelled"):
        estimate(gemma4, TrainingSetup(method="lora", train_tower=True))
    full = estimate(gemma4, TrainingSetup(method="full", train_tower=True, image_tokens=256))
    assert full.params_trainable == gemma4.params_total - gemma4.params_frozen


def test_cli_flag_json_echo_and_exit_2(capsys):
    assert main(["--model", "gemma-3-4b", "--method", "full", "--train-tower", "--json"]) == 0
    assert '"train_tower": true' in capsys.readouterr().out
    assert setup_json(resolve_setup("trl", train_tower=True))["train_tower"] is True
    with pytest.raises(SystemExit) as exc:
        main(["--model", "qwen3-0.6b", "--train-tower"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no vision tower" in err


from tests.test_families import _page  # noqa: E402 - the app opened from a link, no exception


def test_page_tower_toggle_from_the_link():
    at = _page({"model": "gemma-3-4b", "method": "full", "tower": "true"})
    assert at.sidebar.toggle(key="tower").value is True
    est = estimate(load_preset("gemma-3-4b"), resolve_setup("trl", method="full", train_tower=True))
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    expected = verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline
    assert any(expected in h for h in heads), heads
    at.sidebar.toggle(key="tower").set_value(False).run()
    frozen = estimate(load_preset("gemma-3-4b"), resolve_setup("trl", method="full"))
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    assert any(verdict(frozen.total_bytes, get_device("rtx-4090"), frozen.high_bytes).headline in h for h in heads)


def test_page_tower_on_a_text_model_or_unsupported_lora_gets_a_note():
    at = _page({"model": "qwen3-8b", "tower": "true"})
    assert "tower" not in [w.key for w in at.sidebar.toggle]
    notes = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "the link's 'tower' value is not used" in notes
    at = _page({"model": "gemma-4-e2b", "method": "lora", "tower": "true"})
    notes = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "Using a frozen tower" in notes


def test_traced_tower_training_within_1_percent():
    """Gemma 3 4B at real width (2 text layers, 2 SigLIP layers at 896 px, one image = 256 tokens on 768 text tokens),
    full bf16 AdamW with the tower frozen and trained, traced by calibration/trace.py (FakeTensor + MemTracker,
    transformers 5.24.0; validation/data/tower_traces.json, rerun with `python -m calibration.trace
    validation/data/tower_traces.json`): exact trainable counts, tensor peak within 1 %, and the saved tower
    activations (forward-phase activation growth) within 2 % of the ViT formula."""
    import json

    from estimator import spec_from_config

    cases = json.loads((ROOT / "validation" / "data" / "tower_traces.json").read_text())
    by_tower = {c["setup"]["train_tower"]: c for c in cases}
    assert set(by_tower) == {False, True}
    for train, case in by_tower.items():
        spec = spec_from_config(case["config"])
        setup = TrainingSetup(method="full", precision="bf16", optimizer="adamw", seq_len=768, image_tokens=256,
                              train_tower=train)
        est, measured = estimate(spec, setup), case["measured"]
        assert est.params_trainable == measured["params_trainable"]
        assert abs(est.tensor_bytes / measured["peak_bytes"] - 1) < 0.01, (est.tensor_bytes, measured["peak_bytes"])
    traced = (by_tower[True]["measured"]["phase_peak_by_category"]["forward"]["activations"]
              - by_tower[False]["measured"]["phase_peak_by_category"]["forward"]["activations"])
    spec = spec_from_config(by_tower[True]["config"])
    formula = tower_activation_bytes(spec, TrainingSetup(method="full", image_tokens=256, train_tower=True))[0]
    assert formula == 4096 * 2 * 37_968  # 4096 patches × 2 layers
    assert abs(formula / traced - 1) < 0.02, (formula, traced)


@pytest.mark.parametrize("page", ["pages/compare.py", "pages/fits.py", "pages/sizes.py"])
def test_pages_pricing_other_models_or_methods_drop_what_they_cannot_take(page):
    """Gemma 4 with its tower trained fully on images: LoRA/QLoRA bars (no tower linear shapes) and the generic
    decoders of the size tables (no tower) are priced without it instead of raising."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for key, value in {"model": "gemma-4-e2b", "method": "full", "tower": "true", "images": "256"}.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]


def test_setup_for_model():
    from estimator.job.tower import setup_for_model

    setup = TrainingSetup(method="lora", image_tokens=256, train_tower=True)
    text = setup_for_model(load_preset("qwen3-0.6b"), setup)
    assert (text.image_tokens, text.train_tower) == (0, False)
    assert setup_for_model(load_preset("gemma-4-e2b"), setup).train_tower is False  # LoRA shapes not modelled
    assert setup_for_model(load_preset("gemma-3-4b"), setup) is setup


def test_a_trained_tower_replaces_the_frozen_tower_note():
    """The wrapper's note says the tower is frozen; with --train-tower on images the estimate says it trains instead
    (on text only it is frozen in fact: test_training_the_tower_without_images_is_the_frozen_tower)."""
    from estimator import estimate, load_preset
    from estimator.job.stack import resolve_setup

    gemma = load_preset("gemma-3-4b")
    frozen = estimate(gemma, resolve_setup("trl", method="full"))
    trained = estimate(gemma, resolve_setup("trl", method="full", train_tower=True, image_tokens=256))
    assert any(is_frozen_tower_note(n) for n in frozen.notes)
    assert not any(is_frozen_tower_note(n) for n in trained.notes)
    assert any("Training the tower on images" in n for n in trained.notes), trained.notes
