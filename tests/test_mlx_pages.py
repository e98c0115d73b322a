"""The MLX-LM stack in the app (AppTest, from app.py): on a Mac the default stack is MLX-LM, the verdict and the s²
note come from the MLX model, picking the stack moves batch and rank to mlx-lm's, a stack that cannot run on the
device falls back with a note, the How page draws the s² figure, and the chart builder is a pure function."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import estimate, generic_spec, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.memory.result import detail_bytes
from ui.live_chart import sent_payload
from ui.page_charts import attention_share_chart

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
LLAMA = load_preset("llama-3.1-8b")
LAPTOP = get_device("laptop-36gb")


def run(params: dict[str, str], page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [w.value for w in at.warning]
    parts += [i.value for i in at.info] + [t.value for t in at.title] + [h.value for h in at.header]
    return "\n".join(str(p) for p in parts).replace("\\", "")


def sidebar_setup(**kw):
    """What the sidebar resolves on the laptop with its default widgets: mlx-lm's run (batch 4, rank 8, 2,048
    tokens), as the CLI gives it (job.stack.default_settings)."""
    return resolve_setup("mlx", method="lora", precision="bf16", batch=4, seq_len=2048, lora_rank=8,
                         attention="sdpa", gpus=1, sharding="none", backend="metal", **kw)


def test_the_laptop_defaults_to_mlx_lm_and_shows_its_verdict_and_the_s2_note():
    at = run({"device": "laptop-36gb"})
    est = estimate(LLAMA, sidebar_setup())
    v = verdict(est.total_bytes, LAPTOP, est.high_bytes, est.low_bytes)
    page = texts(at)
    assert v.headline in page
    assert "MLX trains attention unfused" not in page  # the estimate's notes: in the details, one click away
    # why not the rule of thumb (one click under the verdict) names the s² term; the details hold the note
    at.session_state["why_rule"] = True
    at.session_state["calc_details"] = True
    at.run()
    page = texts(at)
    assert "MLX's unfused attention: batch × heads × length² probabilities kept per trained block" in page
    assert "MLX trains attention unfused" in page
    assert "mlx 0.32.4, mlx-lm 0.32.2" in page  # the setup line names the stack's version


def test_picking_mlx_in_the_stack_box_brings_its_batch_and_rank():
    at = run({"device": "rtx-4090"})
    at.sidebar.selectbox(key="stack").set_value("mlx").run()
    assert not at.exception
    assert at.sidebar.slider(key="batch").value == 4
    assert at.sidebar.select_slider(key="rank").value == 8


def test_mlx_on_an_amd_card_is_refused_with_a_note_and_falls_back():
    at = run({"device": "mi300x", "stack": "mlx"})
    page = texts(at)
    assert "no ROCm backend" in page
    assert "TRL" in page  # priced with the device's default stack instead


def test_the_how_page_draws_the_s2_figure():
    at = run({"device": "laptop-36gb", "stack": "mlx"}, page="pages/how.py")
    assert "MLX-LM on a Mac" in texts(at)
    figures = {c.proto.id.rsplit("-", 1)[-1]: sent_payload(c.proto.json)["figure"]
               for c in at.get("bidi_component")}  # drawn by the live chart (ui/live_chart.py)
    figure = figures["mlx_attention_chart"]
    assert [t["name"] for t in figure["data"]] == ["Weights and optimizer state", "Attention probabilities (B·H·L²)",
                                                   "Other activations and the loss"]
    assert figure["layout"]["shapes"]  # the laptop's usable line


def test_attention_share_chart_splits_resident_probabilities_and_the_rest():
    setup = resolve_setup("mlx", backend="metal")
    rows = [(n, estimate(LLAMA, replace(setup, seq_len=n))) for n in (1025, 2049)]  # 1,024 and 2,048 positions
    fig = attention_share_chart(rows, LAPTOP)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 3
    for i, (_n, est) in enumerate(rows):
        assert sum(b.y[i] for b in bars) == pytest.approx(est.total_bytes / 1e9)
        assert bars[1].y[i] == pytest.approx(detail_bytes(est.details, "activations.attention_scores") / 1e9)
    assert bars[1].y[1] == pytest.approx(4 * bars[1].y[0])  # B·H·L²: twice the length, four times the memory
    assert list(bars[0].x) == ["1,025", "2,049"]


def test_a_model_the_stack_cannot_train_falls_back_with_a_note():
    """Found by test_fuzz_app_long: MLX-LM on a mixture-of-experts model, or --lora-layers past the model's depth,
    raised inside the page. The page now says why and prices what can run: TRL for the MoE model, all layers."""
    at = run({"device": "laptop-36gb", "stack": "mlx", "model": "qwen3-30b-a3b"})
    page = texts(at)
    assert not at.exception
    assert "mixture-of-experts" in page and "Using the TRL stack" in page
    at = run({"lora_layers": "1000"})
    assert not at.exception
    assert "training all of them" in texts(at)
    assert "could not be priced" not in texts(at)  # the smaller-model remedy clamps too (setup_for_model)


def test_fewer_lora_layers_than_asked_on_another_model():
    from estimator.job.tower import setup_for_model

    setup = resolve_setup("trl", lora_layers=30)
    small = generic_spec(0.5)
    assert setup_for_model(small, setup).lora_layers == min(30, small.num_layers)
    mlx = resolve_setup("mlx", backend="metal")  # the stack's default 16: the MLX model notes it, no clamp here
    assert setup_for_model(small, mlx).lora_layers == 16


def test_largest_fitting_size_with_more_lora_layers_than_small_models_have():
    """Found by test_fuzz_app_long (fits page, lora_layers=16): the size search prices generic decoders down to
    0.1B (14 layers); each is priced with all its layers rather than raising."""
    from estimator.advice.solvers import max_fitting_size_b

    size = max_fitting_size_b(resolve_setup("trl", lora_layers=16), get_device("rtx-4090"))
    assert size is not None and size > 1


def test_an_lm_head_only_target_on_a_mac_falls_back_with_a_note():
    at = run({"device": "laptop-36gb", "model": "llama-3.2-1b", "targets": "lm_head"})
    assert not at.exception
    assert "nothing would train" in texts(at)
