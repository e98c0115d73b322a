"""The exact trace's estimator side (estimator/exact/__init__.py): no torch needed here. What can be traced, what is
refused and why, what is added to the trace, and the answer when the optional install is missing."""

import ast
import sys
from pathlib import Path

import pytest

from estimator import TrainingSetup, estimate, exact, load_preset, spec_from_config
from estimator.memory.precision import NF4_DQ_BYTES

ROOT = Path(__file__).resolve().parents[1]
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2000, "tie_word_embeddings": False}


def test_estimator_never_imports_torch():
    for path in (ROOT / "estimator").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in ("torch", "transformers", "peft", "exact") for n in names), path


def test_tracer_setup_maps_every_field_the_tracer_reads():
    s = TrainingSetup(method="lora", precision="mixed", batch=2, seq_len=512, grad_ckpt=True, loss="chunked",
                      lora_rank=8, lora_targets=("q_proj", "v_proj"), offload_activations=True)
    out, notes = exact.tracer_setup(s)
    assert out == {"method": "lora", "precision": "mixed", "optimizer": "adamw", "batch": 2, "seq_len": 512,
                   "grad_ckpt": True, "attention": "sdpa", "loss": "chunked", "max_grad_norm": 1.0,
                   "lora_rank": 8, "lora_targets": ["q_proj", "v_proj"], "offload_activations": True}
    assert notes == ()
    full, _ = exact.tracer_setup(TrainingSetup(method="full"))
    assert "lora_rank" not in full and full["method"] == "full"
    assert exact.tracer_setup(TrainingSetup())[0]["lora_targets"] == "all-linear"


def test_qlora_fp16_and_other_optimizers_are_traced_as_their_equivalent_and_said():
    out, notes = exact.tracer_setup(TrainingSetup(method="qlora", precision="fp16", optimizer="adamw_8bit"))
    assert (out["method"], out["precision"], out["optimizer"]) == ("lora", "bf16", "adamw")
    text = " ".join(notes)
    assert "QLoRA" in text and "16-bit equivalent" in text and "fp16 is traced as bf16" in text
    assert "adamw_8bit" in text


@pytest.mark.parametrize("kwargs, words", [
    ({"gpus": 2, "sharding": "zero3"}, "one device"),
    ({"grad_accum": 4}, "gradient accumulation"),
    ({"image_tokens": 256}, "image inputs are not traced"),
])
def test_setups_a_one_device_trace_cannot_represent_are_refused_with_the_reason(kwargs, words):
    with pytest.raises(exact.ExactRefused, match=words):
        exact.tracer_setup(TrainingSetup(**kwargs))


def test_ten_thousand_layers_are_refused_before_any_worker_starts():
    with pytest.raises(exact.ExactRefused, match="10,000 layers are more than"):
        exact.check_config({**TINY, "num_hidden_layers": 10_000})
    with pytest.raises(exact.ExactRefused, match="10,000 layers"):  # a multimodal wrapper's text model too
        exact.check_config({"model_type": "gemma3", "text_config": {**TINY, "num_hidden_layers": 10_000}})


@pytest.mark.parametrize("cfg, words", [
    ([1, 2], "JSON object"), ({"hidden_size": 8}, "no model_type"),
    ({**TINY, "hidden_size": 10**9}, "hidden_size"), ({**TINY, "x": "a" * 1_100_000}, "larger than 1 MB"),
])
def test_bad_configs_are_refused_in_one_line(cfg, words):
    with pytest.raises(exact.ExactRefused, match=words) as info:
        exact.check_config(cfg)
    assert "\n" not in str(info.value)


def test_remote_code_is_dropped_and_keys_are_stable():
    clean = exact.check_config({**TINY, "auto_map": {"AutoModelForCausalLM": "evil.Model"}, "trust_remote_code": True,
                                "_name_or_path": "/etc", "quantization_config": {"load_in_4bit": True}})
    assert clean == TINY
    s = TrainingSetup()
    k1 = exact.make_job(TINY, s)[0]
    assert k1 == exact.make_job(dict(reversed(list(TINY.items()))), s)[0]  # key order does not matter
    assert k1 != exact.make_job(TINY, TrainingSetup(seq_len=4096))[0]


def test_preset_config_is_the_shipped_config_json():
    cfg = exact.preset_config("llama-3.2-1b")
    assert cfg["model_type"] == "llama" and cfg["num_hidden_layers"] == 16
    with pytest.raises(exact.ExactRefused):
        exact.preset_config("../../etc/passwd")


RAW = {"ok": True, "peak_bytes": 10_000_000_000, "seconds": 12.5, "peak_phase": "backward",
       "peak_region": "head", "peak_module": "m", "peak_op": "aten.x",
       "peak_by_category": {"parameters": 6_000_000_000, "optimizer_states": 1_000_000_000},
       "quantizable_params": 2_000_000_000, "quantizable_bytes": 4_000_000_000, "params_total": 1, "params_trainable": 1,
       "versions": {"torch": "2.13.0+cpu", "transformers": "5.24.0", "peft": "0.21.2"},
       "depth": {"traced": [2, 4], "extrapolated_to": 16,
                 "how": "traced at 2 and 4 layers, extrapolated to 16: exact for identical layers"}}


def test_combine_adds_what_the_trace_cannot_see_and_names_it():
    setup = TrainingSetup(method="lora")
    est = estimate(load_preset("llama-3.2-1b"), setup)
    res = exact.combine(RAW, setup, est)
    labels = [a.label for a in res.added]
    assert labels == ["CUDA context and workspaces", "Allocator slack"]
    assert res.added[1].bytes == round(0.05 * 10_000_000_000)
    assert res.total_bytes == 10_000_000_000 + 500_000_000 + 500_000_000
    assert res.versions_label == "traced with torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2"
    doc = res.as_json(fast_total=11_500_000_000)
    assert doc["fast_minus_exact_bytes"] == 500_000_000 and doc["peak_bytes"] == 10_000_000_000


def test_the_workers_notes_come_first_in_the_result():
    note = "Gemma2ForCausalLM cannot run SDPA in transformers (...): traced with eager attention"
    setup = TrainingSetup()
    res = exact.combine({**RAW, "attention": "eager", "worker_notes": [note]}, setup, None)
    assert res.notes[0] == note and res.as_json()["notes"][0] == note
    assert exact.combine(RAW, setup, None).notes[0].startswith("Not counted")


def test_combine_qlora_swaps_16_bit_linears_for_nf4_and_adds_the_dequant_buffer():
    setup = TrainingSetup(method="qlora", optimizer="adamw_8bit")
    spec = load_preset("llama-3.2-1b")
    est = estimate(spec, setup)
    res = exact.combine(RAW, setup, est)
    by = {a.label: a.bytes for a in res.added}
    assert by["16-bit linear weights bitsandbytes stores in 4-bit (traced, removed)"] == -4_000_000_000
    assert by["NF4 storage of those weights"] == round(2_000_000_000 * NF4_DQ_BYTES)
    assert by["QLoRA dequantisation buffer (CUDA kernel)"] == spec.largest_linear_params * 2
    assert by["AdamW state at the peak (traced, replaced by adamw_8bit)"] == -1_000_000_000
    assert by["adamw_8bit state"] > 0


def test_without_the_optional_install_the_answer_says_what_to_install(monkeypatch):
    monkeypatch.setenv(exact.PYTHON_ENV, sys.executable)  # the test venv has no torch
    ok, why = exact.available()
    if ok:
        pytest.skip("this Python has torch")
    assert not ok and "pip install -r requirements-exact.txt" in why and "\n" not in why
    monkeypatch.setenv(exact.PYTHON_ENV, "/nonexistent/python")
    ok, why = exact.available()
    assert not ok and "cannot be run" in why


def test_the_fast_estimate_of_the_tiny_config_exists():  # the reliability tests trace this config
    assert estimate(spec_from_config(TINY), TrainingSetup()).total_bytes > 0


# ---- CLI --exact (the trace itself is replaced by a stand-in here; the slow suite runs the real one) ----------
def _cli(argv, capsys):
    from estimator.report.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_exact_without_the_install_exits_2_with_one_line(monkeypatch, capsys):
    monkeypatch.setenv(exact.PYTHON_ENV, "/nonexistent/python")
    rc, out, err = _cli(["--model", "llama-3.2-1b", "--exact"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "pip install -r requirements-exact.txt" in err


@pytest.fixture
def fake_trace(monkeypatch):
    """exact.available() → yes, and the pool answers RAW at once (no worker, no torch)."""
    monkeypatch.setattr(exact, "available", lambda: (True, "torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2"))
    seen = {}

    class _Pool:
        def shutdown(self):
            seen["shutdown"] = True

    def fake(cfg, setup, est=None, pool=None):
        seen["cfg"], seen["setup"] = cfg, setup
        _, _, notes = exact.make_job(cfg, setup)
        return exact.combine(RAW, setup, est, notes)

    monkeypatch.setattr(exact, "get_pool", lambda: _Pool())
    monkeypatch.setattr(exact, "trace_exact", fake)
    return seen


def test_cli_exact_json_has_the_exact_object_next_to_the_estimate(fake_trace, capsys):
    import json

    rc, out, _ = _cli(["--model", "llama-3.2-1b", "--exact", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and fake_trace["cfg"]["num_hidden_layers"] == 16 and fake_trace["shutdown"]
    ex = doc["exact"]
    assert ex["peak_bytes"] == 10_000_000_000 and ex["peak_phase"] == "backward" and ex["seconds"] == 12.5
    assert ex["versions"]["torch"] == "2.13.0+cpu" and ex["peak_by_category"]["parameters"] == 6_000_000_000
    assert ex["fast_minus_exact_bytes"] == doc["total_bytes"] - ex["total_bytes"]
    assert ex["depth"] == {"traced": [2, 4], "extrapolated_to": 16,
                           "note": "traced at 2 and 4 layers, extrapolated to 16: exact for identical layers"}


def test_cli_exact_text_prints_the_difference(fake_trace, capsys):
    rc, out, _ = _cli(["--model", "llama-3.2-1b", "--exact"], capsys)
    assert rc == 0
    assert "  exact        11.0 GB (10.2 GiB)" in out and "fast − exact =" in out
    assert "traced with torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2" in out
    assert "depth: traced at 2 and 4 layers, extrapolated to 16: exact for identical layers" in out


def test_cli_exact_traces_a_config_the_fast_estimator_refuses(fake_trace, capsys, tmp_path):
    import json

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "t5", "d_model": 512, "vocab_size": 32128, "num_layers": 6}))
    rc, out, _ = _cli(["--config", str(cfg), "--exact", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["fast_estimate_error"] and doc["exact"]["peak_bytes"] == 10_000_000_000
    rc, out, err = _cli(["--config", str(cfg)], capsys)  # without --exact: the usual refusal, exit 2
    assert rc == 2


def test_cli_exact_needs_an_architecture(fake_trace, capsys):
    rc, _, err = _cli(["--size", "7", "--exact"], capsys)
    assert rc == 2 and "--exact needs a real architecture" in err


# ---- the calculator's section (ui/exact.py) ----------------------------------------------------------------------
def test_calculator_without_the_install_explains_how_to_enable_the_trace(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(exact.PYTHON_ENV, "/nonexistent/python")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.session_state["calc_details"] = True  # the calculator's exact trace: in its details, one click away
    at.run()
    assert not at.exception
    # a visitor cannot install it: no button, one line where it would be
    assert not [b for b in at.button if b.key == "exact_button"]
    assert ["The exact trace (PyTorch's own count of this step) is not installed on this server "
            "(`requirements-exact.txt`)."] == [c.value for c in at.caption if "exact trace" in c.value]


def test_calculator_with_a_cached_trace_shows_it_next_to_the_fast_estimate(monkeypatch):
    """The pool already holds this (config, setup): the result shows at once, with the difference and versions."""
    from streamlit.testing.v1 import AppTest

    from estimator.job.stack import resolve_setup

    interp = exact.Interpreter("/x/python", (("peft", "0.21.2"), ("torch", "2.13.0+cpu"),
                                             ("transformers", "5.24.0")), ())
    monkeypatch.setattr(exact, "find_interpreter", lambda: interp)
    pool = exact.ExactPool(interp)
    monkeypatch.setattr(exact, "get_pool", lambda: pool)
    key, _, _ = exact.make_job(exact.preset_config("llama-3.1-8b"), resolve_setup("trl"))
    pool._cache[key] = RAW
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.session_state["calc_details"] = True  # the calculator's exact trace: in its details, one click away
    at.run()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "Exact: 11.00 GB (10.24 GiB); the fast estimate" in text
    assert any("traced with torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2" in c.value for c in at.caption)
    assert any("Depth: traced at 2 and 4 layers, extrapolated to 16" in c.value for c in at.caption)


def test_compare_page_traces_the_chosen_bar_and_shows_its_cached_result(monkeypatch):
    """The Compare page's section: a select box over its bars; the chosen bar's (config, setup) is the job, and its
    cached trace shows next to that bar's detailed estimate."""
    from streamlit.testing.v1 import AppTest

    from estimator.job.stack import resolve_setup, with_method
    from ui.exact import difference_line

    interp = exact.Interpreter("/x/python", (("peft", "0.21.2"), ("torch", "2.13.0+cpu"),
                                             ("transformers", "5.24.0")), ())
    monkeypatch.setattr(exact, "find_interpreter", lambda: interp)
    pool = exact.ExactPool(interp)
    monkeypatch.setattr(exact, "get_pool", lambda: pool)
    qlora = with_method(resolve_setup("trl"), "qlora")
    key, _, _ = exact.make_job(exact.preset_config("llama-3.1-8b"), qlora)
    pool._cache[key] = {**RAW, "quantizable_params": 6_000_000_000, "quantizable_bytes": 12_000_000_000}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["model"] = "llama-3.1-8b"
    at.run()
    at.switch_page("pages/compare.py").run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    pick = at.selectbox(key="exact_pick")
    assert pick.options == ["Full fine-tuning", "LoRA", "QLoRA"] and pick.value == "Full fine-tuning"
    assert not any(m.value.startswith("Exact:") for m in at.markdown)  # full FT: not traced yet, a button
    assert next(b for b in at.button if b.key == "exact_button").label == "Trace exactly"
    pick.set_value("QLoRA").run()
    assert not at.exception
    line = next(m.value for m in at.markdown if m.value.startswith("Exact:"))
    fast = estimate(load_preset("llama-3.1-8b"), qlora)
    res = exact.combine(pool._cache[key], qlora, fast)
    assert line == difference_line(fast, res)
    assert any("QLoRA's 4\\-bit kernels need CUDA" in c.value for c in at.caption)  # plain() escapes markdown


def test_exact_bar_draws_the_trace_the_additions_and_the_fast_estimate():
    from ui.exact import difference_line, exact_bar

    setup = TrainingSetup()
    est = estimate(load_preset("llama-3.2-1b"), setup)
    res = exact.combine(RAW, setup, est)
    fig = exact_bar(est, res, None)
    by_name = {t.name: t.x[0] for t in fig.data}
    assert by_name["Traced by PyTorch"] == pytest.approx(10.0)
    assert by_name["Added (CUDA context, slack, …)"] == pytest.approx(1.0)
    assert by_name["Fast estimate"] == pytest.approx(est.total_bytes / 1e9)
    assert "missing" in difference_line(None, res)
    assert f"({100 * (est.total_bytes - res.total_bytes) / res.total_bytes:+.1f} %)" in difference_line(est, res)


def test_exact_source_per_model_choice():
    from ui.exact import exact_source

    assert exact_source("llama-3.2-1b", "llama-3.2-1b").config["num_hidden_layers"] == 16
    assert exact_source("by-size", "generic").config is None
    assert "Upload" in exact_source("upload", "llama-3.1-8b").reason

    class _Up:
        def __init__(self, data):
            self.data = data

        def getvalue(self):
            return self.data

    refused = exact_source("upload", "llama-3.1-8b", _Up(b'{"model_type": "t5", "d_model": 512}'))
    assert refused.config["model_type"] == "t5" and refused.fast_missing  # the fast estimator refused it
    assert exact_source("upload", "config.json", _Up(b"not json")).config is None


# --- depth: two shallow traces, extrapolated (exact/worker.py imports no torch at module level) ---------------
def test_layer_patterns_and_the_two_shallow_depths():
    from exact import worker

    assert worker._pattern(["d"] * 24) == (0, 1) and worker.plan_depths(0, 1, 24) == (2, 4)
    sw = ["s", "f"] * 13  # sliding/full alternation: whole periods, and n − a a whole number of periods
    assert worker._pattern(sw) == (0, 2) and worker.plan_depths(0, 2, 26) == (2, 4)
    gemma3 = (["s"] * 5 + ["f"]) * 4 + ["s", "s"]  # 26 layers, 5 local + 1 global
    k, p = worker._pattern(gemma3)
    assert (k, p) == (0, 6) and worker.plan_depths(k, p, 26) == (8, 14)  # 26 − 8 and 14 − 8: whole periods
    dense_first = ["dense"] * 3 + ["moe"] * 58  # first_k_dense_replace = 3
    assert worker._pattern(dense_first) == (3, 1) and worker.plan_depths(3, 1, 61) == (4, 6)
    assert worker.plan_depths(0, 1, 4) is None and worker.plan_depths(0, 6, 12) is None  # not shallower: full depth


def test_with_depth_cuts_per_layer_lists_and_layer_indices():
    from exact import worker

    cfg = {"model_type": "qwen2_moe", "num_hidden_layers": 6, "layer_types": ["full_attention"] * 6,
           "mlp_only_layers": [0, 5], "architectures": ["X"]}
    cut = worker.with_depth(cfg, 4, 6)
    assert cut["num_hidden_layers"] == 4 and cut["layer_types"] == ["full_attention"] * 4
    assert cut["mlp_only_layers"] == [0] and cut["architectures"] == ["X"] and cfg["num_hidden_layers"] == 6
    vlm = {"model_type": "gemma3", "text_config": {"num_hidden_layers": 26}, "vision_config": {"num_hidden_layers": 27}}
    assert worker.with_depth(vlm, 8, 26)["text_config"]["num_hidden_layers"] == 8
    assert worker.with_depth(vlm, 8, 26)["vision_config"]["num_hidden_layers"] == 27  # the tower keeps its depth


def test_extrapolation_is_linear_in_depth_and_refuses_uneven_increments():
    from exact import worker

    def m(peak, act):
        return {"peak_bytes": peak, "first_step_peak_bytes": peak + 1, "params_total": 10 * peak,
                "params_trainable": 5, "optimizer_state_bytes": 0, "peak_by_category": {"activations": act}}

    out = worker.extrapolate(m(1000, 300), m(1600, 500), 2, 4, 24)
    assert out["peak_bytes"] == 1000 + 300 * 22 and out["peak_by_category"] == {"activations": 300 + 100 * 22}
    assert out["params_total"] == 10000 + 3000 * 22 and out["first_step_peak_bytes"] == 1001 + 300 * 22
    with pytest.raises(ValueError, match="uneven"):
        worker.extrapolate(m(1000, 300), m(1601, 500), 2, 4, 23)
    a = {"peak_phase": "backward", "peak_region": "layers", "peak_op": "aten.mm", "peak_module": "model.layers.1.mlp"}
    assert worker._moment(a) == worker._moment({**a, "peak_module": "model.layers.3.mlp"})
    assert worker._moment(a) != worker._moment({**a, "peak_op": "aten.bmm"})


def test_a_peak_that_another_region_overtakes_at_full_depth_is_not_extrapolated():
    from exact import worker

    def m(head, fwd_head):  # measured at 2 and 4 layers of a 12-layer llama full FT (no checkpointing)
        return {"peak_phase": "backward", "peak_region": "head", "phase_peaks": {"backward": head},
                "region_peaks": {"backward:head": head, "forward:head": fwd_head}}

    ma, mb = m(189907292, 187916652), m(299221412, 298279348)
    assert worker.peak_moves(ma, mb, 2, 4, 4) is None  # at 4 layers the backward head is still the peak
    # by 12 layers the forward head (stored activations + loss) has overtaken it: 739,730,132 vs 736,477,892 B,
    # the full-depth trace's own region peaks
    assert worker.peak_moves(ma, mb, 2, 4, 12) == ("the peak moves from backward:head (at 2 and 4 layers) to "
                                                   "forward:head by 12 layers")
    # a peak in the checkpointed layer's recompute (no regions there) is compared with the phases' peaks
    rc = {"peak_phase": "backward_recompute", "peak_region": "layers", "region_peaks": {"forward:head": 5}}
    assert worker.peak_moves({**rc, "phase_peaks": {"backward_recompute": 10, "forward": 5}},
                             {**rc, "phase_peaks": {"backward_recompute": 20, "forward": 5}}, 2, 4, 24) is None
    assert "to forward:head by 24" in worker.peak_moves(
        {**rc, "phase_peaks": {"backward_recompute": 10}, "region_peaks": {"forward:head": 9}},
        {**rc, "phase_peaks": {"backward_recompute": 11}, "region_peaks": {"forward:head": 11}}, 2, 4, 24)


def test_the_install_hint_is_said_once(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr(exact, "available", lambda: (False, exact.INSTALL_HINT))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.session_state["calc_details"] = True
    at.run()
    assert not at.exception
    text = " ".join(c.value for c in at.caption)
    assert text.count("requirements-exact.txt") == 1
