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
from estimator.job.stack import resolve_setup, setup_summary
from estimator.options.stacks import DEFAULT_STACK
from estimator.report.document import estimate_json
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


def run(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def unescape(text: str) -> str:
    """Undo ui.inputs.plain's Markdown escapes."""
    return re.sub(r"\\(.)", r"\1", text)


def headline(at: AppTest) -> str:
    """The verdict ('Fits: …' / 'Too big by …') without its colour markup."""
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    found = [m.group(2) for h in heads if (m := re.fullmatch(r":(green|red)\[(.+)\]", h))]
    assert len(found) == 1, heads
    return found[0]


def chart(at: AppTest) -> dict:
    """The memory bar's figure: the live chart component's data (ui/live_chart.py), as plotly.js JSON."""
    assert not at.get("plotly_chart")  # the calculator's one chart is the in-place one
    (element,) = at.get("bidi_component")
    assert element.proto.component_name == "live_plotly" and element.proto.id.endswith("-memory_bar")
    return sent_payload(element.proto.json)["figure"]


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
    assert "Llama-3.1-8B · LoRA · bf16 · batch 1 × 2,048 tokens · detailed estimate" in captions
    assert f"{RTX.name}: {to_gb(RTX.usable_bytes):,.1f} GB ({RTX.usable_bytes / 2**30:,.1f} GiB) usable of " \
           f"{to_gb(RTX.capacity_bytes):,.1f} GB ({RTX.capacity_bytes / 2**30:,.1f} GiB)" in " ".join(captions)
    # CUDA's 23.51 GiB of nvidia-smi's 24,564 MiB, and where the usable figure comes from
    assert (f"{RTX.name}: 25.2 GB (23.5 GiB) usable of 25.8 GB (24.0 GiB), the total CUDA gives PyTorch (the driver "
            "keeps the rest)") in captions
    detail = markdown_text(default_at)
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
    table = default_at.dataframe[0]  # the breakdown (the host RAM table follows it)
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), breakdown_frame(est))
    assert [b.label for b in default_at.download_button] == ["Download CSV", "Download JSON",
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


def test_default_view_is_the_trl_stack(default_at):
    """The number a user sees first is TRL's (checkpointing on, chunked LM-head loss), and the page says so."""
    assert default_at.sidebar.selectbox(key="stack").value == "auto"  # TRL on the default device (a CUDA GPU)
    summary = setup_summary(TRL)
    assert summary == ("TRL 1.16.0 (transformers 5.24, PEFT 0.21): checkpointing on (TRL default) · "
                       "loss: TRL fused chunked LM head (TRL default) · optimizer: AdamW (fused) (TRL default) · "
                       "fp32 adapters (TRL default)")
    assert summary in main_captions(default_at)
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
    assert summary in main_captions(at) and setup_summary(TRL) not in main_captions(at)
    (code,) = [c for c in at.code if c.language != "yaml"]  # the share link (not the config file)
    assert dict(parse_qsl(urlsplit(code.value).query)) == {"stack": "plain"}  # the share link carries it


def test_a_setting_given_beats_the_stack_and_the_summary_says_whose_it_is():
    at = run({"stack": "trainer", "ckpt": "true"})
    setup = resolve_setup("trainer", grad_ckpt=True, offload_activations=False)  # what ckpt=true sets
    summary = setup_summary(setup)
    assert "checkpointing on (your choice)" in summary
    assert "loss: HF ForCausalLMLoss (HF Trainer default)" in summary
    assert summary in main_captions(at)
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
    assert summary in main_captions(at)
    est = estimate(LLAMA, setup)
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes))
    table = at.dataframe[0]  # the breakdown (the host RAM table follows it)
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), breakdown_frame(est))


def test_presentation_mode_is_bigger_and_sparer():
    at = run({**BASE, "present": "true"})
    assert headline(at) == expected_headline(SEVEN, MPS, LAPTOP)
    assert headline(at).startswith("Fits: ")  # 7B LoRA under TRL on MPS ≈ 18 GB of the laptop's 29 GB
    assert len(at.title) == 1 and not [h for h in at.header if h.value.startswith(":")]
    assert at.subheader[0].value.startswith("Expected peak")  # the estimate line, one size up
    assert not at.dataframe and not at.download_button
    assert chart(at)["layout"]["font"]["size"] == 18
    at.sidebar.toggle(key="present").set_value(False).run()
    assert not at.title and at.dataframe and len(at.download_button) == 3  # CSV, JSON and the config file


# ---- what to change ----------------------------------------------------------------------------------------


def test_remedies_in_the_seeds_order_with_their_savings():
    """The changes that help take consecutive numbers in the seed's order; the ones that do not apply (batch
    already 1, checkpointing already on) take no numbered slot and are named in one line underneath."""
    at = run(BASE)
    text = markdown_text(at)
    setup = MPS
    usable = LAPTOP.usable_bytes
    options = remedies(SEVEN, setup)
    helping = [r for r in options if r.applicable and abs(r.saves_bytes) >= NEGLIGIBLE_BYTES]
    positions = []
    for slot, r in enumerate(helping, 1):
        start = text.index(f"{slot}. **{r.title}**")
        positions.append(start)
        line = text[start:].splitlines()[0].rstrip()
        assert f"({r.change})" in line
        assert f"saves {to_gb(r.saves_bytes):,.1f} GB" in line
        assert f"→ {to_gb(r.new_total_bytes):,.1f} GB" in line
        assert line.endswith("fits" if r.new_total_bytes <= usable else "still too big")
    assert positions == sorted(positions) and len(helping) == 3
    assert "1. **Lower the max length** (max length 2,048 → 1,024): saves" in text
    aside = next(unescape(c.value) for c in at.caption if c.value.startswith("Not available"))
    assert aside == ("Not available or no help here: Lower the batch size (the batch is already 1); "
                     "Use gradient checkpointing (already on).")
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
    assert "Lower the max length (the rule of thumb does not count it)" in unescape(
        next(c.value for c in at.caption if c.value.startswith("Not available")))
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
    setup = mps(batch=2, seq_len=2048, lora_rank=16)  # the sidebar gives length and rank itself
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
