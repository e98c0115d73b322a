"""The calculator page through streamlit.testing (AppTest), from the entrypoint app.py: the verdict, chart,
table, downloads, remedies and share link show the estimator's numbers for the inputs the URL and every
sidebar widget set.

Known trap (Streamlit 1.67, verified below): after `set_value(...).run()` AppTest reruns only the current
page of an st.navigation app, not the entrypoint, so widgets drawn in app.py would vanish. It happens
because the page scripts sit in a folder named `pages/` (the legacy auto-discovery folder); any other
name avoids it. Every page draws the shared inputs itself (ui.inputs.live_page), so either way works."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from estimator import (
    TrainingSetup,
    custom_device,
    estimate,
    generic_spec,
    get_device,
    load_preset,
    max_batch,
    max_seq_len,
    remedies,
    smallest_device,
    to_gb,
    verdict,
)
from estimator.advice.advise import advise
from estimator.advice.condition import longest_length
from estimator.advice.explain import explain
from estimator.advice.fastest import Constraints
from estimator.job.stack import resolve_setup, setup_summary
from estimator.memory.why import json_total, why_not_rule
from estimator.options.compute import custom_compute
from estimator.options.stacks import DEFAULT_STACK
from estimator.report.document import estimate_json
from estimator.speed.price import time_of
from estimator.speed.run import DatasetSize, run_cost, run_time
from ui.inputs import BATCH_MAX, MAX_LEN_MAX
from ui.live_chart import sent_payload
from ui.report import NEGLIGIBLE_BYTES, breakdown_csv, breakdown_frame

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT = 30

LLAMA = load_preset("llama-3.1-8b")
RTX = get_device("rtx-4090")
LAPTOP = get_device("laptop-36gb")
# The app's default view is the default training stack's setup (TRL), not TrainingSetup()'s neutral baseline.
assert DEFAULT_STACK == "trl"
TRL = resolve_setup("trl")


def trl(**settings) -> TrainingSetup:
    """What the sidebar resolves with the TRL stack and these settings."""
    return resolve_setup("trl", **settings)


def mps(stack: str = "trl", **settings) -> TrainingSetup:
    """The same on a Mac (a unified device): the PyTorch stack priced as an MPS run."""
    return resolve_setup(stack, backend="metal", **settings)


def mac_mlx(**settings) -> TrainingSetup:
    """What the sidebar resolves on a Mac with the stack left on auto: MLX-LM on Metal at mlx-lm's own batch (4),
    rank (8) and length (2,048), as the CLI gives it (job.stack.default_settings)."""
    return resolve_setup("mlx", **{"batch": 4, "seq_len": 2048, "lora_rank": 8, "backend": "metal", **settings})


def run(params: dict[str, str] | None = None, timeout: float = TIMEOUT) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def unescape(text: str) -> str:
    """Undo ui.inputs.plain's Markdown escapes."""
    return re.sub(r"\\(.)", r"\1", text)


def open_boxes(at: AppTest, *keys: str) -> AppTest:
    """Open the page's one-click expanders (stateful: their contents run only when open) and run again: the
    breakdown (breakdown_box), the details (calc_details), the config file (config_file), the waterfall (why_rule),
    the measured runs (measured_runs)."""
    for key in keys:
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def headline(at: AppTest) -> str:
    """The verdict ('Fits: …' / 'Too big by …') without its colour markup."""
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    found = [m.group(2) for h in heads if (m := re.fullmatch(r":(green|red)\[(.+)\]", h))]
    assert len(found) == 1, heads
    return found[0]


def live_chart(at: AppTest, key: str = "memory_bar") -> dict:
    """A live chart's payload (ui/live_chart.py) by its key: the figure as plotly.js JSON, its transition…"""
    assert not at.get("plotly_chart")  # the calculator's charts are the in-place ones
    (element,) = [e for e in at.get("bidi_component") if e.proto.id.endswith(f"-{key}")]
    assert element.proto.component_name == "live_plotly"
    return sent_payload(element.proto.json)


def chart(at: AppTest) -> dict:
    """The memory bar's figure: the live chart component's data (ui/live_chart.py), as plotly.js JSON."""
    return live_chart(at)["figure"]


def bar_total_gb(at: AppTest) -> float:
    return sum(t["x"][0] for t in chart(at)["data"] if t["type"] == "bar")


def expected_headline(spec, setup, device, rule=None) -> str:
    est = estimate(spec, setup, rule=rule)
    return verdict(est.total_bytes, device, est.high_bytes).headline


def markdown_text(at: AppTest) -> str:
    return "\n".join(unescape(m.value) for m in at.markdown)


# ---- the default view ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_at() -> AppTest:
    return run()


def test_default_view_shows_the_estimators_verdict(default_at):
    est = estimate(LLAMA, TRL)
    assert headline(default_at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    # 8B LoRA at 2,048 tokens under TRL (checkpointing, chunked loss) ≈ 19 GB: fits the 25.2 GB CUDA gives a 4090.
    assert headline(default_at) == f"Fits: {to_gb(est.total_bytes):,.1f} GB of 25.2 GB usable"
    assert default_at.header[0].proto.body.startswith(":green[")
    captions = [unescape(c.value) for c in default_at.caption]
    assert "Llama-3.1-8B · LoRA · bf16 · detailed estimate" in captions  # batch × length: the condition below
    detail = markdown_text(default_at)
    assert f"{RTX.name}: {to_gb(RTX.usable_bytes):,.1f} GB ({RTX.usable_bytes / 2**30:,.1f} GiB) usable of " \
           f"{to_gb(RTX.capacity_bytes):,.1f} GB ({RTX.capacity_bytes / 2**30:,.1f} GiB)" in detail
    # CUDA's 23.51 GiB of nvidia-smi's 24,564 MiB, and where the usable figure comes from
    assert (f"{RTX.name}: 25.2 GB (23.5 GiB) usable of 25.8 GB (24.0 GiB), the total CUDA gives PyTorch (the driver "
            "keeps the rest)") in detail
    assert f"Expected peak {to_gb(est.total_bytes):,.1f} GB ({est.total_bytes / 2**30:,.1f} GiB)" in detail
    assert f"likely {to_gb(est.low_bytes):,.1f}–{to_gb(est.high_bytes):,.1f} GB" in detail
    assert f"peak during: {est.peak_phase}" in detail
    assert not default_at.warning  # no notes, no close-call warning on the default view


def test_default_chart_and_table_carry_the_same_numbers(default_at):
    est = estimate(LLAMA, TRL)
    assert bar_total_gb(default_at) == pytest.approx(to_gb(est.total_bytes))
    assert bar_total_gb(default_at) != pytest.approx(to_gb(estimate(LLAMA, TrainingSetup()).total_bytes))
    usable_line = next(s for s in chart(default_at)["layout"]["shapes"] if s.get("name") == "usable")
    assert usable_line["x0"] == pytest.approx(to_gb(RTX.usable_bytes))
    assert usable_line["x0"] == pytest.approx(24_078 * 2**20 / 1e9)  # 25.2 GB: CUDA's total, not nvidia-smi's 25.8
    assert not default_at.dataframe and not default_at.download_button  # one click away (below)
    at = open_boxes(run(), "breakdown_box", "config_file")
    table = at.dataframe[0]  # the breakdown
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), breakdown_frame(est))
    assert [b.label for b in at.download_button] == ["Download CSV", "Download JSON",
                                                     "Download sft_config.yaml"]  # ui/config_box.py


def test_inputs_survive_a_rerun_because_the_page_draws_them(default_at):
    """AppTest reruns only the page after set_value(): the sidebar is still complete and still applied."""
    at = run({"device": "laptop-36gb"})
    before = {kind: len(getattr(at.sidebar, kind)) for kind in ("selectbox", "slider", "select_slider", "toggle",
                                                               "number_input", "text_input", "button_group")}
    # model, stack, precision, optimizer, loss, attn, quant, sharding, device (the link's, hidden) and device_pick
    # (the names a visitor sees); toggles rule, dora, present;
    # segmented controls method, ckpt, kind; the trainer box adds a selectbox (trainer), two toggles
    # (precompute_ref, vllm_sleep) and a segmented control (gen) (ui/trainer_inputs.py); the language switch is
    # one more segmented control (ui/lang.py); the setup adds toggles offload_params, opt_offload, compile,
    # in_bwd and the segmented control dq (ui/params.py); the releases box a picker per package of the stack
    # (MLX-LM: mlx, mlx-lm; ui/versions_box.py)
    assert before["selectbox"] == 13 and before["toggle"] == 9 and before["button_group"] == 6
    at.sidebar.slider(key="batch").set_value(2).run()
    after = {kind: len(getattr(at.sidebar, kind)) for kind in before}
    assert after == before
    assert at.sidebar.selectbox(key="device").value == "laptop-36gb"
    assert headline(at) == expected_headline(LLAMA, mac_mlx(batch=2), LAPTOP)  # a Mac's default stack: MLX-LM


@pytest.mark.parametrize(("folder", "vanishes"), [("pages", True), ("views", False)])
def test_entrypoint_widgets_vanish_on_rerun_next_to_a_pages_folder(tmp_path, folder, vanishes):
    """The trap itself, on a small app shaped like ours: with the page scripts in a folder named `pages/`
    (Streamlit's legacy auto-discovery folder), the rerun after set_value() runs only the page, and a
    widget drawn in the entrypoint is gone; any other folder name keeps it."""
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "one.py").write_text("import streamlit as st\nst.text('one')\n", encoding="utf-8")
    (tmp_path / folder / "two.py").write_text("import streamlit as st\nst.text('two')\n", encoding="utf-8")
    (tmp_path / "entry.py").write_text(
        "import streamlit as st\n"
        "x = st.sidebar.slider('x', 0, 10, 1, key='x', bind='query-params')\n"
        f"st.navigation([st.Page('{folder}/one.py', default=True), st.Page('{folder}/two.py', url_path='two')],"
        " position='top').run()\n", encoding="utf-8")
    at = AppTest.from_file(str(tmp_path / "entry.py"), default_timeout=TIMEOUT).run()
    assert len(at.sidebar.slider) == 1
    at.sidebar.slider(key="x").set_value(5).run()
    assert [t.value for t in at.text] == ["one"]
    assert len(at.sidebar.slider) == (0 if vanishes else 1)


# ---- the seed's worked examples (rule mode) --------------------------------------------------------------

SEED_EXAMPLES = [
    # (URL parameters, the verdict headline) — the product page's 36 GB laptop and 16 GB GPU, at the sizes
    # the machines report: the laptop's 27 GiB usable is 29.0 GB, the 16 GB card's 16,376 MiB is 17.2 GB.
    ({"size": "1.5", "method": "lora", "device": "laptop-36gb"}, "Fits: 6.0 GB of 29.0 GB usable"),
    ({"size": "7", "method": "lora", "device": "laptop-36gb"}, "Fits: 17.0 GB of 29.0 GB usable"),
    ({"size": "14", "method": "lora", "device": "laptop-36gb"}, "Too big by 2.0 GB"),
    ({"size": "1.5", "method": "full", "device": "laptop-36gb"}, "Fits: 22.0 GB of 29.0 GB usable"),
    ({"size": "3", "method": "full", "device": "laptop-36gb"}, "Too big by 11.0 GB"),
    ({"size": "8", "method": "lora", "device": "gpu-16gb"}, "Too big by 2.4 GB"),  # 16.6 GB by CUDA (17.2 by nvidia-smi)
    ({"size": "8", "method": "qlora", "device": "gpu-16gb"}, "Fits: 9.3 GB of 16.6 GB usable"),
]


@pytest.mark.parametrize(("params", "expected"), SEED_EXAMPLES, ids=lambda p: "-".join(p.values())
                         if isinstance(p, dict) else None)
def test_seed_examples_in_rule_mode(params, expected):
    at = run({"model": "by-size", "rule": "true", **params})
    assert headline(at) == expected
    assert "rule of thumb" in unescape(at.caption[0].value)


def test_rule_mode_under_trl_matches_the_seed_number():
    """TRL's 7B LoRA estimate on a CUDA GPU lands within 0.05 GB of the seed's 17 GB: the comparison box says they
    match."""
    at = run({"model": "by-size", "size": "7", "rule": "true", "device": "rtx-4090"})
    detailed = estimate(generic_spec(7), TRL)
    assert abs(detailed.total_bytes - 17e9) < 0.05e9
    (info,) = at.info
    text = unescape(info.value)
    assert f"The detailed estimate ({to_gb(detailed.total_bytes):,.1f} GB (" in text
    assert "matches the rule of thumb" in text
    assert bar_total_gb(at) == pytest.approx(17.0)


def test_rule_mode_shows_the_seed_number_and_the_gap_to_the_detailed_estimate():
    # The plain loop (no checkpointing, full fp32 logits) is far above the rule: the box gives the gap.
    at = run({"model": "by-size", "size": "7", "rule": "true", "device": "rtx-4090", "stack": "plain"})
    detailed = estimate(generic_spec(7), resolve_setup("plain"))
    (info,) = at.info
    text = unescape(info.value)
    diff = detailed.total_bytes - 17e9
    assert f"Rule of thumb 17.0 GB (15.8 GiB) · detailed estimate {to_gb(detailed.total_bytes):,.1f} GB" in text
    assert f"is {to_gb(diff):,.1f} GB ({diff / 2**30:,.1f} GiB, {100 * diff / 17e9:,.0f} %) above the rule" in text
    detailed_verdict = verdict(detailed.total_bytes, RTX, detailed.high_bytes).headline
    assert f"Detailed verdict on this device: {detailed_verdict}." in text
    assert bar_total_gb(at) == pytest.approx(17.0)  # the chart shows the mode's own number
    # Off again: no comparison box, the detailed verdict is the headline.
    at.sidebar.toggle(key="rule").set_value(False).run()
    assert not at.info
    assert headline(at) == detailed_verdict


# ---- every widget drives the estimate --------------------------------------------------------------------

BASE = {"model": "by-size", "size": "7", "device": "laptop-36gb", "stack": "trl"}  # TRL on a Mac: an MPS run
SEVEN = generic_spec(7)
MPS = mps()
# (widget kind, key, new value, extra URL parameters, expected (spec, setup, device) after the change)
WIDGETS = [
    ("selectbox", "model", "qwen2.5-7b", {}, (load_preset("qwen2.5-7b"), MPS, LAPTOP)),
    ("select_slider", "size_step", 14, {}, (generic_spec(14), MPS, LAPTOP)),
    ("number_input", "size", 13.0, {}, (generic_spec(13), MPS, LAPTOP)),  # any size, not only the ladder's
    ("segmented_control", "method", "qlora", {}, (SEVEN, mps(method="qlora"), LAPTOP)),
    ("selectbox", "stack", "plain", {}, (SEVEN, mps("plain"), LAPTOP)),
    ("selectbox", "precision", "mixed", {}, (SEVEN, mps(precision="mixed"), LAPTOP)),
    ("slider", "batch", 4, {}, (SEVEN, mps(batch=4), LAPTOP)),
    ("select_slider", "max_len_pow2", 512, {}, (SEVEN, mps(seq_len=512), LAPTOP)),
    ("number_input", "max_len", 3000, {}, (SEVEN, mps(seq_len=3000), LAPTOP)),
    # TRL checkpoints by default: "false" turns it off, "offload" moves the layer inputs to CPU RAM.
    ("segmented_control", "ckpt", "false", {}, (SEVEN, mps(grad_ckpt=False, offload_activations=False), LAPTOP)),
    ("segmented_control", "ckpt", "offload", {}, (SEVEN, mps(grad_ckpt=True, offload_activations=True), LAPTOP)),
    ("selectbox", "optimizer", "adamw_8bit", {"method": "full", "device": "rtx-4090"},
     (SEVEN, trl(method="full", optimizer="adamw_8bit"), RTX)),
    ("selectbox", "loss", "standard", {}, (SEVEN, mps(loss="standard"), LAPTOP)),
    ("selectbox", "attn", "eager", {"device": "rtx-4090"}, (SEVEN, trl(attention="eager"), RTX)),  # MPS: eager anyway
    ("select_slider", "rank", 256, {}, (SEVEN, mps(lora_rank=256), LAPTOP)),
    ("text_input", "targets", "q_proj,v_proj", {}, (SEVEN, mps(lora_targets=("q_proj", "v_proj")), LAPTOP)),
    ("number_input", "lora_layers", 8, {"ckpt": "false"},
     (SEVEN, mps(lora_layers=8, grad_ckpt=False, offload_activations=False), LAPTOP)),
    ("number_input", "gpus", 4, {"device": "rtx-4090"}, (SEVEN, trl(gpus=4), RTX)),
    ("selectbox", "sharding", "zero3", {"gpus": "8", "method": "full"},
     (SEVEN, mps(method="full", gpus=8, sharding="zero3"), LAPTOP)),
    ("selectbox", "device", "h100-80gb", {}, (SEVEN, TRL, get_device("h100-80gb"))),
    ("number_input", "capacity", 48.0, {"device": "custom"}, (SEVEN, TRL, custom_device(48, "discrete"))),
    ("segmented_control", "kind", "unified", {"device": "custom"},
     (SEVEN, MPS, custom_device(24, "unified"))),
]


@pytest.mark.parametrize(("kind", "key", "value", "extra", "expected"), WIDGETS,
                         ids=[f"{w[1]}={w[2]}" for w in WIDGETS])
def test_every_widget_changes_the_verdict_and_chart(kind, key, value, extra, expected):
    at = run({**BASE, **extra})
    before = (headline(at), bar_total_gb(at))
    getattr(at.sidebar, kind)(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    spec, setup, device = expected
    est = estimate(spec, setup)
    assert headline(at) == verdict(est.total_bytes, device, est.high_bytes).headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes))
    assert (headline(at), bar_total_gb(at)) != before, "the widget changed nothing"
    # No input notes: at most the verdict's own caution when the likely range straddles the limit.
    assert all(re.match(r"(Close call|Borderline)", unescape(w.value)) for w in at.warning), at.warning


# ---- training stacks -----------------------------------------------------------------------------------------


def main_captions(at: AppTest) -> list[str]:
    return [unescape(c.value) for c in at.main.caption]


def details_captions(at: AppTest) -> list[str]:
    """The captions with the details open (the stack's settings line and the estimate's notes are in there)."""
    return main_captions(open_boxes(at, "calc_details"))


def test_default_view_is_the_trl_stack(default_at):
    """The number a user sees first is TRL's (checkpointing on, chunked LM-head loss), and the page says so."""
    assert default_at.sidebar.selectbox(key="stack").value == "auto"  # TRL on the default device (a CUDA GPU)
    summary = setup_summary(TRL)
    assert summary == ("TRL 1.16.0 (transformers 5.24, PEFT 0.21): checkpointing on (TRL default) · "
                       "loss: TRL fused chunked LM head (TRL default) · optimizer: AdamW (fused) (TRL default) · "
                       "fp32 adapters (TRL default)")
    assert summary not in main_captions(default_at)  # in the details, one click away (and in the sidebar)
    assert summary in details_captions(run())
    assert summary in [unescape(c.value) for c in default_at.sidebar.caption]
    est = estimate(LLAMA, TRL)
    assert headline(default_at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert bar_total_gb(default_at) == pytest.approx(to_gb(est.total_bytes))
    assert f"Expected peak {to_gb(est.total_bytes):,.1f} GB" in markdown_text(default_at)


def test_switching_the_stack_to_plain_changes_verdict_chart_and_summary(default_at):
    at = run()
    at.sidebar.selectbox(key="stack").set_value("plain").run()
    assert not at.exception, [e.value for e in at.exception]
    plain_setup = resolve_setup("plain")
    est = estimate(LLAMA, plain_setup)
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert headline(at).startswith("Too big by ")  # no checkpointing, full fp32 logits: ≈ 36 GB
    assert headline(at) != headline(default_at)
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes))
    assert at.header[0].proto.body.startswith(":red[")
    summary = setup_summary(plain_setup)
    assert summary.startswith("torch 2.x hand-written loop: checkpointing off (Plain PyTorch loop default)")
    (code,) = [c for c in at.code if c.language != "yaml"]  # the share link (not the config file)
    assert summary in details_captions(at) and setup_summary(TRL) not in main_captions(at)
    assert dict(parse_qsl(urlsplit(code.value).query)) == {"stack": "plain"}  # the share link carries it


def test_a_setting_given_beats_the_stack_and_the_summary_says_whose_it_is():
    at = run({"stack": "trainer", "ckpt": "true"})
    setup = resolve_setup("trainer", grad_ckpt=True, offload_activations=False)  # what ckpt=true sets
    summary = setup_summary(setup)
    assert "checkpointing on (your choice)" in summary
    assert "loss: HF ForCausalLMLoss (HF Trainer default)" in summary
    assert summary in details_captions(at)
    est = estimate(LLAMA, setup)
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes))
    # The Trainer alone does not checkpoint: the explicit choice is what changed the number.
    assert bar_total_gb(at) < to_gb(estimate(LLAMA, resolve_setup("trainer")).total_bytes) - 1
    assert not at.warning, [w.value for w in at.warning]


def test_a_loss_the_stack_cannot_do_gives_a_note_and_the_stacks_loss():
    at = run({"stack": "torchtune", "loss": "fused"})
    notes = [unescape(w.value) for w in at.warning]
    assert any("torchtune stack cannot use the 'fused' loss" in n and "Using the stack's own settings for it" in n
               for n in notes), notes
    setup = resolve_setup("torchtune")
    assert setup.loss == "chunked"
    summary = setup_summary(setup)
    assert "loss: torchtune CEWithChunkedOutputLoss (torchtune default)" in summary
    assert summary in details_captions(open_boxes(at, "breakdown_box"))
    est = estimate(LLAMA, setup)
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes))
    table = at.dataframe[0]  # the breakdown (the host RAM table of the details follows it)
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), breakdown_frame(est))


def test_presentation_mode_is_bigger_and_sparer():
    at = run({**BASE, "present": "true"})
    assert headline(at) == expected_headline(SEVEN, MPS, LAPTOP)
    assert headline(at).startswith("Fits: ")  # 7B LoRA under TRL on MPS ≈ 18 GB of the laptop's 29 GB
    assert len(at.title) == 1 and not [h for h in at.header if h.value.startswith(":")]
    assert at.subheader[0].value.startswith("Expected peak")  # the estimate line, one size up
    assert not at.dataframe and not at.download_button
    assert chart(at)["layout"]["font"]["size"] == 18
    # the verdict, the chart, why (open: the waterfall drawn as big) and what to change; no chips, no measured runs,
    # no breakdown, details or config file
    assert live_chart(at, "why_waterfall")["figure"]["layout"]["font"]["size"] == 18
    assert [e.label for e in at.main.expander] == ["Why not the rule of thumb?"]
    assert not at.main.get("button_group")  # no chips (st.pills)
    assert at.subheader[1].value == "What to change"
    at.sidebar.toggle(key="present").set_value(False).run()
    assert not at.title and not at.dataframe  # the breakdown: one click away
    assert [e.label for e in at.main.expander] == [
        "Why not the rule of thumb?", "What people measured", "Breakdown at the peak, with CSV and JSON downloads",
        "Details: the stack's settings, notes, host RAM and the exact trace", "Config file for this estimate "
        "(sft_config.yaml)"]
    open_boxes(at, "breakdown_box", "config_file")
    assert at.dataframe and len(at.download_button) == 3  # CSV, JSON and the config file


# ---- what to change ----------------------------------------------------------------------------------------


def time_words(factor: float) -> str:
    """A time factor as the page says it (the same tokens take ~N % longer, or N % more tokens per second)."""
    if abs(factor - 1) < 0.005:
        return "about as fast"
    return f"~{100 * (factor - 1):.0f} % slower" if factor > 1 else f"~{100 * (1 / factor - 1):.0f} % faster"


def test_remedies_in_the_order_to_try_them_with_their_savings_and_time():
    """The changes that help take consecutive numbers in advise()'s order (the ones that fit first, cheapest in time:
    estimator/advice/timing.py), each with what it saves and its time factor on this device; the ones that do not
    apply (batch already 1, checkpointing already on) take no numbered slot and are named in one line underneath."""
    at = run(BASE)
    text = markdown_text(at)
    usable = LAPTOP.usable_bytes
    advice = advise(SEVEN, MPS, LAPTOP, batch_limit=BATCH_MAX, length_limit=MAX_LEN_MAX, fastest=Constraints())
    helping = [r for r in advice.remedies if r.applicable and abs(r.saves_bytes) >= NEGLIGIBLE_BYTES]
    assert {r.key for r in helping} == {r.key for r in remedies(SEVEN, MPS)
                                        if r.applicable and abs(r.saves_bytes) >= NEGLIGIBLE_BYTES}
    positions = []
    for slot, r in enumerate(helping, 1):
        start = text.index(f"{slot}. **{r.title}**")
        positions.append(start)
        line = text[start:].splitlines()[0].rstrip()
        assert f"({r.change})" in line
        assert f"saves {to_gb(r.saves_bytes):,.1f} GB" in line
        assert f"→ {to_gb(r.new_total_bytes):,.1f} GB" in line
        fits = "fits" if r.new_total_bytes <= usable else "still too big"
        assert r.time_factor is not None  # the laptop's chip has compute figures
        assert line.endswith(f"{fits} · {time_words(r.time_factor)}"), line
    assert positions == sorted(positions) and len(helping) == 3
    assert "1. **Lower the max length** (max length 2,048 → 1,024): saves" in text
    assert ("Not available or no help here: Lower the batch size (the batch is already 1); "
            "Use gradient checkpointing (already on).") in text
    assert f"{len(helping) + 1}. **" not in text


def test_rule_mode_advice_uses_the_rules_numbers_and_sharding_is_offered_on_a_gpu():
    """Rule mode prices the changes with the rule (QLoRA → the rule's 9.4 GB for Llama-3.1-8B, not the detailed
    25 GB); detailed mode on a GPU adds sharding over more GPUs."""
    at = run({"rule": "true", "method": "full"})
    text = markdown_text(at)
    spec = load_preset("llama-3.1-8b")
    qlora = estimate(spec, TRL, rule="seed")  # the rule ignores the stack's settings; QLoRA via with_method
    rule_qlora = (2 * spec.params_total / 1e9 + 3) / 3 + 3
    assert "**Switch to QLoRA** (full → qlora (4-bit base)): saves" in text
    assert f"→ {rule_qlora:,.1f} GB, fits" in text and qlora.total_bytes > 0
    assert "Lower the max length (the rule of thumb does not count it)" in text
    at = run({"model": "llama-3.1-70b", "method": "full", "device": "h100-80gb"})
    assert "**Shard over more GPUs** (1 → 8 GPUs, ZeRO-3 / FSDP full shard): saves" in markdown_text(at)


def test_largest_batch_longest_length_and_smallest_device():
    at = run({**BASE, "size": "1.5", "device": "rtx-4090"})
    spec, setup = generic_spec(1.5), TRL
    text = markdown_text(at)
    batch = max_batch(spec, setup, RTX.usable_bytes, limit=BATCH_MAX)
    length = max_seq_len(spec, setup, RTX.usable_bytes, limit=MAX_LEN_MAX)
    smallest = smallest_device(spec, setup)
    assert batch and 1 < batch < BATCH_MAX and length and 2048 < length < MAX_LEN_MAX
    assert f"Largest batch that fits on this device (at max length 2,048): **{batch:,}**" in text
    assert f"Longest max length that fits (at batch 1): **{length:,}** tokens" in text
    assert f"Smallest catalog device that fits: **{smallest.name}**" in text


def test_nothing_fits_says_so():
    at = run({"model": "llama-3.1-70b", "method": "full", "device": "mac-16gb", "stack": "trl"})
    text = markdown_text(at)
    assert "Largest batch that fits on this device (at max length 2,048): **none fits (not even 1 example)**" in text
    assert "Smallest catalog device that fits: **none in the catalog**" in text


# ---- notes, downloads, share --------------------------------------------------------------------------------


def test_invalid_url_values_show_a_note_and_fall_back(default_at):
    at = run({"size": "1500", "method": "FULL", "device": "laptop-99gb", "batch": "-3"})
    notes = [unescape(w.value) for w in at.warning]
    for key, default in (("size", "7"), ("method", "lora"), ("device", "rtx-4090"), ("batch", "1")):
        assert f"The link's value for '{key}' was not valid; using the default ({default})." in notes
    assert headline(at) == headline(default_at)
    assert bar_total_gb(at) == pytest.approx(bar_total_gb(default_at))


def test_upload_without_a_file_says_so(default_at):
    at = run({"model": "upload"})
    assert any("No config.json uploaded yet; showing Llama-3.1-8B." in unescape(w.value) for w in at.warning)
    assert headline(at) == headline(default_at)


class _RecordingStorage(MemoryMediaFileStorage):
    """AppTest's in-memory media storage, remembering each download's bytes by file name."""

    files: dict[str, bytes] = {}

    def load_and_get_id(self, path_or_data, mimetype, kind, filename=None):  # type: ignore[override]
        if filename and isinstance(path_or_data, bytes):
            _RecordingStorage.files[filename] = path_or_data
        return super().load_and_get_id(path_or_data, mimetype, kind, filename)


def test_downloads_hold_the_numbers_on_screen(monkeypatch):
    monkeypatch.setattr("streamlit.testing.v1.app_test.MemoryMediaFileStorage", _RecordingStorage)
    _RecordingStorage.files.clear()
    at = run({**BASE, "batch": "2"})
    assert "will-it-fit.json" not in _RecordingStorage.files  # one click away: built only when asked for
    open_boxes(at, "breakdown_box")
    setup = mps(batch=2)  # length and rank at the stack's own values: the stack's (from_stack), as in the CLI
    est = estimate(SEVEN, setup)
    document = json.loads(_RecordingStorage.files["will-it-fit.json"])
    assert document == json.loads(json.dumps(estimate_json(est, LAPTOP)))
    assert document["device"]["fits"] is (est.total_bytes <= LAPTOP.usable_bytes) is True  # ≈ 18 of 29 GB
    assert document["setup"]["batch"] == 2 and document["setup"]["stack"] == "trl"
    assert document["setup"]["grad_ckpt"] is True and "grad_ckpt" in document["setup"]["from_stack"]
    assert document["total_bytes"] == sum(document["components_bytes"].values())
    csv = _RecordingStorage.files["will-it-fit.csv"].decode()
    assert csv == breakdown_csv(est, LAPTOP)
    assert "Overhead (Metal + allocator)" in csv and "CUDA" not in csv  # a Mac has no CUDA context
    table = pd.read_csv(io.StringIO(csv))
    on_screen = at.dataframe[0].value.reset_index(drop=True)
    assert table["bytes"].tolist() == [int(b) for b in on_screen["bytes"]]


def test_share_link_reproduces_the_inputs():
    params = {"model": "by-size", "size": "7", "method": "full", "device": "laptop-36gb", "rule": "true"}
    at = run(params)
    (code,) = [c for c in at.code if c.language != "yaml"]  # the share link (not the config file)
    link = urlsplit(code.value)
    assert link.path == "/"  # AppTest has no browser URL; the page prefixes st.context.url when it has one
    # Every parameter except size=7, the default, which Streamlit keeps out of the address bar.
    assert dict(parse_qsl(link.query)) == {k: v for k, v in params.items() if k != "size"}
    # The link, opened again, shows the same verdict.
    again = run(dict(parse_qsl(link.query)))
    assert headline(again) == headline(at) == "Too big by 59.0 GB"  # 12 × 7 + 4 = 88 GB vs 27 GiB (29.0 GB) usable


@pytest.mark.parametrize("raw", ["inf", "-inf", "1e309", "9" * 400])
def test_links_streamlit_cannot_convert_fall_back_with_a_note(raw, default_at):
    """Streamlit 1.67 raises OverflowError seeding an int number input from ?max_len=inf: the inputs drop
    such values before any widget binds them and rerun, keeping the first run's notes."""
    at = run({"max_len": raw, "gpus": raw, "size": "zzz"})
    notes = [unescape(w.value) for w in at.warning]
    for key, default in (("max_len", "2048"), ("gpus", "1"), ("size", "7")):
        assert f"The link's value for '{key}' was not valid; using the default ({default})." in notes
    assert headline(at) == headline(default_at)
    assert at.sidebar.number_input(key="max_len").value == 2048
    at.sidebar.slider(key="batch").set_value(2).run()  # the notes were for the link, not for every rerun
    assert not at.warning


def test_the_memory_chart_is_drawn_in_place_by_the_live_component(default_at):
    """ui/live_chart.py: one keyed component (its identity survives reruns), the figure as plotly.js JSON, the
    transition it animates with, and plotly.js from the app's own server."""
    (element,) = default_at.get("bidi_component")
    data = sent_payload(element.proto.json)
    assert data["transition_ms"] == 400 and data["config"] == {"displayModeBar": False}
    assert data["src"] == "/component/ui.live_chart.plotly_js/plotly.min.js"
    assert "uniformtext" not in data["figure"]["layout"]  # it would turn Plotly's bar transition off
    assert data["alt"].startswith("Stacked bar of peak memory:")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    first = at.get("bidi_component")[0].proto.id
    at.slider(key="batch").set_value(2).run()
    assert at.get("bidi_component")[0].proto.id == first  # same element: updated, not remounted
    assert bar_total_gb(at) != bar_total_gb(default_at)
    # Only numbers moved: the same structure, so the browser glides the bars (Plotly.animate)...
    assert sent_payload(at.get("bidi_component")[0].proto.json)["key"] == data["key"]
    at.button_group(key="method").set_value("full").run()  # ...full fine-tuning's segments: drawn anew
    assert sent_payload(at.get("bidi_component")[0].proto.json)["key"] != data["key"]


# ---- why this number (issue 29): the condition, the chips, the waterfall, what people measured ------------------


def test_the_verdict_carries_its_condition_and_the_longest_length_that_fits(default_at):
    """Beside the verdict: what it holds at (batch × length, every example padded to the max length, and that most
    stacks pad a batch to its longest example) and the way out, the longest length per example that fits at this
    batch (estimator.advice.condition.longest_length: the solvers' search)."""
    longest = longest_length(LLAMA, TRL, RTX)
    assert longest.status == "fits_up_to" and 2048 < longest.tokens < MAX_LEN_MAX
    text = markdown_text(default_at)
    assert (f"**Fits up to {longest.tokens:,} tokens per example at batch 1.** :gray[Holds at batch 1 × 2,048 tokens "
            "per example, every example padded to the max length; mlx-lm and most stacks pad a batch to its longest "
            "example, so shorter examples use less.]") in text
    # The seed's question on a Mac (MLX-LM, its batch of 4): too big, and the way out at that batch
    at = run({"model": "by-size", "size": "7", "device": "laptop-36gb"})
    setup = mac_mlx()
    way_out = longest_length(SEVEN, setup, LAPTOP)
    assert headline(at).startswith("Too big by ") and way_out.status == "fits_up_to" and way_out.tokens < 2048
    assert f"**Fits up to {way_out.tokens:,} tokens per example at batch 4.** :gray[Holds at batch 4 × 2,048" \
        in markdown_text(at)


def test_the_waterfall_opens_from_the_verdict_and_its_bars_are_explains_steps():
    """'Why not the rule of thumb?', one click under the verdict: a waterfall from the rule's number to ours whose
    bars are explain()'s steps (whole bytes in customdata, adding up exactly), named on the axis, listed in words."""
    at = run()
    assert "why_waterfall" not in " ".join(e.proto.id for e in at.get("bidi_component"))  # closed: not built
    at = open_boxes(at, "why_rule")
    est = estimate(LLAMA, TRL)
    why = explain(LLAMA, est, RTX).why
    payload = live_chart(at, "why_waterfall")
    (trace,) = payload["figure"]["data"]
    steps = [s for s in why.steps if s.bytes]
    assert trace["type"] == "waterfall" and payload["transition_ms"] == 0
    assert trace["measure"] == ["absolute", *["relative"] * len(steps), "total"]
    assert trace["customdata"] == [why.rule_bytes, *(s.bytes for s in steps), why.total_bytes]
    assert why.rule_bytes + sum(s.bytes for s in steps) == why.total_bytes == json_total(est)
    assert trace["x"][:-1] == pytest.approx([why.rule_bytes / 1e9, *(s.bytes / 1e9 for s in steps)])
    assert trace["meta"] == ["rule", *(s.key for s in steps), "total"]
    assert [t.replace("<br>", " ") for t in payload["figure"]["layout"]["yaxis"]["ticktext"]] == [
        "Rule of thumb", "Adapters", "Activations", "Runtime and allocator", "This estimate"]
    # 8B LoRA: the rule's 2 GB per billion + 3 GB, the adapters and their state, activations under the rule's margin
    assert why.rule_bytes == pytest.approx(2 * LLAMA.params_total + 3e9, abs=1)
    text = markdown_text(at)
    assert f"- **Rule of thumb** {why.rule_bytes / 1e9:,.1f} GB: The rule of thumb: LoRA ≈ 2 GB per billion " \
           "parameters × 8.03 B + the margin" in text
    for s in steps:
        sign = "+" if s.bytes >= 0 else "−"
        assert f"{sign}{abs(s.bytes) / 1e9:,.1f} GB: {s.label}" in text
    assert payload["alt"].startswith(f"Waterfall from the rule of thumb's {why.rule_bytes / 1e9:,.1f} GB to this "
                                     f"estimate's {why.total_bytes / 1e9:,.1f} GB: Adapters +")


def test_in_rule_mode_the_waterfall_reconciles_the_rule_with_the_detailed_estimate():
    at = open_boxes(run({"rule": "true", "method": "full"}), "why_rule")
    detailed = estimate(LLAMA, trl(method="full"))
    why = why_not_rule(LLAMA, detailed, RTX.capacity_bytes)
    trace = live_chart(at, "why_waterfall")["figure"]["data"][0]
    assert trace["customdata"][0] == why.rule_bytes == pytest.approx(bar_total_gb(at) * 1e9, abs=1)  # the verdict's
    assert trace["customdata"][-1] == why.total_bytes == json_total(detailed)
    assert "precision" in trace["meta"]  # full fine-tuning in pure bf16 against the rule's 16 B per weight


def test_a_chip_changes_the_setting_the_verdict_and_the_link():
    """The assumptions that move the number most, as chips: each names the setting, where it came from, what it
    changes to and by how much (explain()'s assumptions); a click sets the sidebar's control, so the verdict, the
    address and the share link follow, and the chip does not stay selected."""
    at = run()
    x = explain(LLAMA, estimate(LLAMA, TRL), RTX)
    (chips,) = at.main.get("button_group")
    labels = [o.content for o in chips.proto.options]
    assert labels == [f"{a.label} → {a.change_label}: {'+' if a.delta_bytes >= 0 else '−'}"
                      f"{abs(a.delta_bytes) / 1e9:,.1f} GB" for a in x.assumptions]
    assert "checkpointing on · TRL default → checkpointing off: +14.0 GB" in labels
    chips.set_value("grad_ckpt").run()
    assert not at.exception
    assert at.sidebar.button_group(key="ckpt").value == "false"
    off = trl(grad_ckpt=False, offload_activations=False)
    assert headline(at) == expected_headline(LLAMA, off, RTX) and headline(at).startswith("Too big by ")
    assert bar_total_gb(at) == pytest.approx(to_gb(estimate(LLAMA, off).total_bytes))
    assert at.query_params["ckpt"] == "false"
    (code,) = [c for c in at.code if c.language != "yaml"]
    assert dict(parse_qsl(urlsplit(code.value).query)) == {"ckpt": "false"}
    assert at.main.get("button_group")[0].value is None  # an action, not a selection
    # the method chip: LoRA → QLoRA
    at = run()
    at.main.get("button_group")[0].set_value("method").run()
    assert at.sidebar.button_group(key="method").value == "qlora" and at.query_params["method"] == "qlora"


def test_a_chip_says_the_stacks_default_where_the_value_is_the_stacks():
    """The seed's question on a Mac: batch 4 and 2,048 tokens are MLX-LM's own (the sidebar leaves a value at the
    stack's to the stack, as the CLI does), so the chips say so, as issue 29 asks ('batch 4 · mlx-lm default')."""
    at = run({"model": "by-size", "size": "7", "device": "laptop-36gb"})
    labels = [o.content for o in at.main.get("button_group")[0].proto.options]
    assert any(label.startswith("batch 4 · MLX-LM default → batch 2: −") for label in labels), labels
    assert any(label.startswith("examples 2,048 tokens · MLX-LM default → examples 1,024 tokens: −") for label in
               labels), labels
    at.sidebar.slider(key="batch").set_value(2).run()
    labels = [o.content for o in at.main.get("button_group")[0].proto.options]
    assert any(label.startswith("batch 2 · your choice → batch 1: −") for label in labels), labels


def test_every_chip_makes_the_change_it_names():
    """On a Mac (MLX-LM's batch of 4, its 16 trained blocks) every chip's click gives the setup explain() priced
    for it: the sidebar's controls express each change (its 0 layers = the stack's 16, so 'every block' is the
    model's depth)."""
    from estimator.advice.assumptions import apply_change

    link = {"model": "qwen2.5-1.5b", "device": "laptop-36gb"}
    at = run(link)
    spec = load_preset("qwen2.5-1.5b")
    setup = mac_mlx()
    x = explain(spec, estimate(spec, setup), LAPTOP)
    assert {a.key for a in x.assumptions} >= {"seq_len", "batch"}
    for a in x.assumptions:
        at = run(link)
        at.main.get("button_group")[0].set_value(a.key).run()
        assert not at.exception and not at.warning, (a.key, [w.value for w in at.warning])
        want = estimate(spec, apply_change(setup, a.change))
        assert bar_total_gb(at) == pytest.approx(to_gb(want.total_bytes)), a.key
        assert bar_total_gb(at) == pytest.approx(to_gb(estimate(spec, setup).total_bytes + a.delta_bytes)), a.key


def test_what_people_measured_lists_the_closest_runs_with_their_source():
    at = run()
    assert "measured" not in markdown_text(at)  # closed: not built
    at = open_boxes(at, "measured_runs")
    runs = explain(LLAMA, estimate(LLAMA, TRL), RTX).measured
    assert len(runs) == 3
    text = markdown_text(at)
    for c in runs:
        assert str(c.sentence()) in text
        assert c.run.source in text
    assert "torch.cuda.max_memory_allocated: the tensors' peak" in text  # what a figure measures, in words


# ---- a calmer page (issue 29 item 6) --------------------------------------------------------------------------


def test_the_details_hold_the_technical_lines_and_the_exact_trace_note(monkeypatch):
    """The stack's settings line, the estimate's notes and the host RAM are one click away; without the exact
    trace's environment a visitor gets one line where its button would be."""
    monkeypatch.setattr("estimator.exact.available", lambda: (False, "not installed"))
    at = run({"device": "laptop-36gb", "stack": "mlx"})
    setup = mac_mlx()
    est = estimate(LLAMA, setup)
    assert not [c for c in main_captions(at) if c in est.notes]
    at = open_boxes(at, "calc_details")
    captions = main_captions(at)
    assert setup_summary(setup) in captions and all(n in captions for n in est.notes) and est.notes
    assert ("The exact trace (PyTorch's own count of this step) is not installed on this server "
            "(`requirements-exact.txt`).") in captions
    assert not [b for b in at.button if b.label == "Trace exactly"]
    assert any(c.startswith("Host RAM at its peak") for c in captions)


# ---- how long and what it costs (issue 30) -------------------------------------------------------------------


def test_the_time_line_is_time_ofs(default_at):
    step = time_of(LLAMA, TRL, RTX)
    assert 1 <= step.step_seconds < 10
    assert (f"~{round(step.tokens_per_second):,} tokens/s · {step.step_seconds:.2f} s per optimizer step (2,048 "
            "tokens × 1 GPU)") in markdown_text(default_at)


def test_run_hours_and_cost_for_a_dataset_and_a_price():
    at = run({"tokens": "100000000", "epochs": "2", "price": "2.5"})
    rt = run_time(LLAMA, TRL, RTX, DatasetSize(tokens=100_000_000, epochs=2.0))
    cost = run_cost(rt, 2.5)
    assert 2 < rt.hours < 72 and cost.total == pytest.approx(rt.hours * 2.5)
    text = markdown_text(at)
    assert (f"Run: 100,000,000 tokens × 2 epochs → {rt.hours:,.1f} h ({rt.steps:,} optimizer steps) · cost "
            f"{cost.total:,.2f} ({cost.gpu_hours:,.2f} GPU-hours × 2.5 per GPU-hour)") in text
    assert at.sidebar.number_input(key="tokens").value == 100_000_000  # the box holds the link's values
    # examples of a typical length: each step holds batch examples, priced at that length
    at = run({"examples": "50000", "typical_len": "600"})
    rt = run_time(LLAMA, TRL, RTX, DatasetSize(examples=50_000, typical_len=600))
    assert f"Run: 50,000 examples of ~600 tokens × 1 epoch → {rt.hours:,.1f} h ({rt.steps:,} optimizer steps)" \
        in markdown_text(at)
    assert "cost" not in markdown_text(at).split("Run: ")[1].split("\n")[0]  # no price, no cost


@pytest.mark.parametrize(("link", "message"), [
    ({"tokens": "-5"}, "The link's value for 'tokens' was not valid (-5); this page uses its default for it."),
    ({"epochs": "0"}, "The link's value for 'epochs' was not valid (0); this page uses its default for it."),
    ({"price": "abc"}, "The link's value for 'price' was not valid (abc); this page uses its default for it."),
    ({"tokens": "1000", "examples": "1000"}, "Run time: give the dataset size as tokens or as examples, not both."),
    ({"typical_len": "600"}, "Run time: give the dataset size: a number of tokens, or a number of examples."),
    ({"tokens": "1000", "typical_len": "600"}, "Run time: a typical example length needs a number of examples."),
    ({"price": "3"}, "The cost is the run's GPU-hours × the price: give the dataset size too."),
    ({"tokens": str(10**15)}, "Run time: this run would take"),
    ({"device": "custom", "tflops": "100"}, "A custom device's time needs both figures: its TFLOPS and its memory "
                                            "bandwidth."),
])
def test_bad_run_inputs_get_one_clear_line_and_no_number(link, message):
    at = run(link)
    shown = [unescape(w.value) for w in at.warning] + [markdown_text(at)]
    assert any(message in s for s in shown), shown
    assert "Run: " not in markdown_text(at) and "· cost " not in markdown_text(at)
    assert headline(at)  # the memory answer stands


def test_a_custom_device_asks_for_its_figures_then_has_a_time():
    at = run({"device": "custom", "capacity": "48"})
    assert (":material/schedule: :gray[Time unknown: a custom device has no compute figures. Give its TFLOPS and "
            "memory bandwidth in the sidebar's 'Run time and cost' box.]") in markdown_text(at)
    at = run({"device": "custom", "capacity": "48", "tflops": "150", "bandwidth": "900"})
    step = time_of(LLAMA, TRL, custom_device(48, "discrete"), compute=custom_compute(150, 900))
    assert f"~{round(step.tokens_per_second):,} tokens/s · " in markdown_text(at)
    assert "with the figures you gave" in markdown_text(at)
    assert not at.sidebar.number_input(key="tflops").disabled
    assert "tflops" not in {w.key for w in run().sidebar.number_input}  # a catalog device has its own figures


def test_the_fastest_setup_that_fits_applies_with_one_click():
    """advise(..., fastest=Constraints()): 8B LoRA at batch 1 × accumulation 4 runs fastest as batch 4 × 1 (the
    effective batch kept), which fits the 4090; the button sets both controls."""
    at = run({"accum": "4"})
    setup = trl(grad_accum=4)
    fit = advise(LLAMA, setup, RTX, batch_limit=BATCH_MAX, length_limit=MAX_LEN_MAX, fastest=Constraints()).fastest_fit
    assert [(c.key, c.before, c.after) for c in fit.changes] == [("batch", (1, 4), (4, 1))]
    text = markdown_text(at)
    assert ("**Fastest setup that fits** (changing the batch and accumulation, checkpointing and the optimizer): "
            "batch × accumulation 1 × 4 → 4 × 1") in text
    assert f"~{round(fit.tokens_per_second):,} tokens/s ({fit.speedup:.2f} × this setup's speed)" in text
    (button,) = [b for b in at.button if b.key == "apply_fastest"]
    button.click().run()
    assert not at.exception
    assert at.sidebar.slider(key="batch").value == 4 and at.sidebar.number_input(key="accum").value == 1
    assert headline(at) == expected_headline(LLAMA, trl(batch=4), RTX)
    assert "**Fastest setup that fits:** this one" in markdown_text(at)
    assert not [b for b in at.button if b.key == "apply_fastest"]


def test_the_new_pieces_in_spanish():
    """lang=es: the condition, the time line, the chips and the waterfall's bars in Spanish."""
    at = open_boxes(run({"lang": "es"}), "why_rule")
    text = markdown_text(at)
    tokens = f"{longest_length(LLAMA, TRL, RTX).tokens:,}".replace(",", ".")
    assert f"**Cabe hasta {tokens} tokens por ejemplo con lote 1.**" in text
    assert " por paso del optimizador (2048 tokens × 1 GPU)" in text
    labels = [o.content for o in at.main.get("button_group")[0].proto.options]
    assert "checkpointing activado · por defecto en TRL → checkpointing desactivado: +14,0 GB" in labels
    assert [t.replace("<br>", " ") for t in live_chart(at, "why_waterfall")["figure"]["layout"]["yaxis"]["ticktext"]] == [
        "Regla práctica", "Adaptadores", "Activaciones", "Runtime y asignador", "Esta estimación"]
    assert [e.label for e in at.main.expander][:2] == ["¿Por qué no la regla práctica?", "Lo que se ha medido"]
