"""The sidebar's import box through AppTest: each shipped config pasted into the app gives the same verdict and
breakdown as the same settings entered by hand in the sidebar, and as the estimator's own import; the address then
carries the usual parameters; a bad file shows its message and the page keeps working; nothing from a file reaches
the page as Markdown or HTML (a sample of the fuzz corpus); the calculator's exported config reads back to the same
estimate."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import estimate, load_preset
from estimator.job.configs import fit_targets, import_config, model_choice
from estimator.models import hub
from tests.config_corpus import INJECT, nasty

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
DATA = ROOT / "tests" / "data" / "configs"
REAL = sorted(str(p.relative_to(DATA)) for p in (*DATA.rglob("*.y*ml"), *DATA.rglob("*.json")))
MAC = "mac-32gb"  # mlx-lm's configs are pasted on a Mac (Metal), as they run
WIDGET_KINDS = ("selectbox", "slider", "select_slider", "number_input", "toggle", "text_input", "button_group")
SIDEBAR_KEYS = ("model", "stack", "method", "precision", "optimizer", "batch", "max_len", "ckpt", "loss", "attn",
                "rank", "targets", "gpus", "sharding", "accum", "opt_offload", "offload_params", "compile", "in_bwd",
                "dq", "lora_layers", "dora", "quant", "device", "trainer",
                "beta", "precompute_ref", "gens", "prompt_len", "completion_len", "gen", "vllm_util", "vllm_sleep")


@pytest.fixture(autouse=True)
def offline_hub(monkeypatch, tmp_path):
    """No network: the Hub client answers from an empty local cache, as an offline machine does."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub.clear_cache()
    yield
    hub.clear_cache()


def widgets(at: AppTest) -> dict:
    return {w.key: w for kind in WIDGET_KINDS for w in getattr(at, kind)}


def start(device: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if device is not None:
        widgets(at)["device"].set_value(device)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="config_text").set_value(text)
    at.button(key="config_read").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def verdict(at: AppTest) -> tuple[str, float, str]:
    """The headline, the breakdown's total bytes and the estimate line (the breakdown opened: one click away)."""
    if not at.dataframe:
        at.session_state["breakdown_box"] = True
        at.run()
    frame = at.dataframe[0].value
    total = float(frame.loc[frame["component"] == "Total", "bytes"].iloc[0])
    headline = next(h.value for h in at.header if "GB" in h.value)
    line = next(m.value for m in at.markdown if m.value.startswith("Expected peak"))
    return headline, total, line


FIRST = ("device", "model", "stack", "method", "trainer", "gen", "sharding")  # the choices that enable or disable others


def by_hand(values: dict) -> AppTest:
    """A fresh app, the sidebar's widgets set as a person would: the choices that enable the others first, then
    every widget whose value differs (a disabled one keeps its default, as in the browser)."""
    at = start()
    for group in (FIRST, tuple(k for k in values if k not in FIRST)):
        found = widgets(at)
        for key in group:
            if key == "model" and "/" in str(values[key]):  # a Hub id is typed into the Hub box
                found["hub_id"].set_value(values[key])
            elif found[key].value != values[key]:
                found[key].set_value(values[key])
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("rel", REAL)
def test_a_pasted_config_equals_the_same_settings_by_hand(rel):
    text = (DATA / rel).read_text()
    mlx = rel.startswith("mlx_lm/")
    imported = paste(start(MAC if mlx else None), text)
    values = {key: widgets(imported)[key].value for key in SIDEBAR_KEYS}
    assert values["stack"] == import_config(text).stack
    assert (values["device"] == MAC) is mlx
    assert not [w.value for w in imported.warning if "could not be read:" in w.value.replace("\\", "")]
    hand = by_hand(values)
    assert verdict(imported) == verdict(hand)
    # and the estimator's own import (the CLI's path), priced on the model the box chose
    imp = import_config(text)  # pasted: no file name (TRL's docs snippets name themselves in their first line)
    model = model_choice(imp.model, lambda m: hub.fetch_model(m))[0]
    spec = load_preset(model if model and "/" not in model else "llama-3.1-8b")  # offline: the app's default
    setup = imp.setup()
    setup = replace(setup, lora_targets=fit_targets(spec, setup.lora_targets)[0])
    trainer = imp.trainer_setup()
    if trainer.option.generates:
        setup = replace(setup, seq_len=trainer.prompt_length + trainer.completion_length)
    if "seq_len" not in imp.setup_kwargs and not trainer.option.generates:
        setup = replace(setup, seq_len=2048)
    assert verdict(imported)[1] == pytest.approx(estimate(spec, setup, trainer=trainer).total_bytes, abs=1)


def test_the_address_carries_the_imported_settings():
    at = paste(start(), (DATA / "torchtune/llama3_1/8B_lora_single_device.yaml").read_text())
    params = dict(at.query_params)
    assert params["stack"] == ["torchtune"] or params["stack"] == "torchtune"
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in params.items()}
    assert {"stack": "torchtune", "rank": "8", "accum": "8", "batch": "2"}.items() <= flat.items()
    assert flat["targets"] == "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def test_the_three_lists_are_plain_text():
    at = paste(start(), (DATA / "axolotl/llama-3/lora-1b.yml").read_text())
    lists = at.sidebar.button_group(key="config_list")  # Read / Ignored / Not honoured, one shown at a time
    labels = [o.content for o in lists.proto.options]
    assert labels[0].startswith("Read (") and labels[1].startswith("Ignored (") and labels[2] == "Not honoured (1)"
    assert any("lora_r: 16 → LoRA rank = 16" in t.value for t in at.text)
    lists.set_value("ignored").run()
    assert any("learning_rate: 0.0002 → a training hyper-parameter" in t.value for t in at.text)
    at.sidebar.button_group(key="config_list").set_value("not_honoured").run()
    assert any("lora_dropout: 0.05 → LoRA dropout" in t.value for t in at.text)


def test_a_bad_config_shows_its_message_and_the_page_keeps_its_settings():
    at = paste(start(), (DATA / "axolotl/llama-3/qlora-1b.yml").read_text())
    before = verdict(at)
    at = paste(at, "base_model: x\nlora_target_modules: [q_proj\n")
    notes = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "could not be read: not valid YAML" in notes
    assert verdict(at) == before and widgets(at)["method"].value == "qlora"


def test_an_exported_config_reads_back_in_the_app():
    at = paste(start(), (DATA / "litgpt/llama-3.2-1B/qlora.yaml").read_text())
    before = verdict(at)
    at.session_state["config_file"] = True  # the config file: one click away
    at.run()
    exported = next(c.value for c in at.code if c.value.startswith("# will-it-fit: stack=litgpt"))
    fresh = paste(start(), exported)
    assert verdict(fresh) == before


MARKUP_KINDS = ("markdown", "caption", "warning", "error", "info", "success", "header", "subheader", "title")
SAMPLE = [case for case in nasty() if case[0].startswith(("inject-", "trl-bad", "torchtune-bad", "litgpt-bad",
                                                          "bad-marker", "python-object", "binary-png"))]


@pytest.mark.parametrize(("name", "data"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_nothing_from_a_file_reaches_the_page_as_markup(name, data):
    at = start()
    at.text_area(key="config_text").set_value(data.decode("utf-8", "replace"))
    at.button(key="config_read").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("GB" in h.value for h in at.header)  # the page still answers
    for kind in MARKUP_KINDS:
        for element in getattr(at, kind):
            for injected in INJECT:
                assert injected not in element.value, (name, kind, element.value[:200])
    assert not at.get("html") or all(all(i not in str(h.proto) for i in INJECT) for h in at.get("html"))


def test_an_mlx_config_sets_its_own_controls_and_says_where_it_runs():
    """mlx-lm's every-block num_layers (-1) is the model's depth in the sidebar (0 there means the stack's 16), DoRA
    and the quantised base set their controls; on a discrete GPU the note says MLX runs there on CUDA only. A later
    config of another format puts those controls back."""
    at = paste(start(), "model: mlx-community/Qwen2.5-0.5B-Instruct-8bit\nfine_tune_type: dora\nnum_layers: -1\n")
    w = widgets(at)
    assert (w["stack"].value, w["method"].value, w["dora"].value, w["lora_layers"].value, w["quant"].value) == (
        "mlx", "qlora", True, 24, "affine")
    notes = " ".join(x.value.replace("\\", "") for x in at.warning)
    assert "MLX's CUDA backend" in notes and "8-bit, group 64" in notes  # the sidebar's affine is 4-bit
    at = paste(at, (DATA / "axolotl/llama-3/lora-1b.yml").read_text())
    w = widgets(at)
    assert (w["stack"].value, w["dora"].value, w["lora_layers"].value, w["quant"].value) == ("axolotl", False, 0,
                                                                                             "auto")


def test_a_llamafactory_config_that_trains_the_tower_sets_the_toggle():
    """LLaMA-Factory's freeze_vision_tower and freeze_multi_modal_projector false train the tower and projector:
    the sidebar's tower toggle on a multimodal model, priced as by hand."""
    text = ("model_name_or_path: google/gemma-3-4b-pt\nstage: sft\nfinetuning_type: lora\nbf16: true\n"
            "freeze_vision_tower: false\nfreeze_multi_modal_projector: false\n")
    imported = paste(start(), text)
    w = widgets(imported)
    assert (w["stack"].value, w["model"].value, w["tower"].value) == ("llamafactory", "gemma-3-4b", True)
    values = {key: widgets(imported)[key].value for key in (*SIDEBAR_KEYS, "tower")}
    assert verdict(imported) == verdict(by_hand(values))
