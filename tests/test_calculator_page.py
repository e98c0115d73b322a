"""The calculator page through streamlit.testing (AppTest), from the entrypoint app.py: the verdict, chart,
table, downloads, remedies and share link show the estimator's numbers for the inputs the URL and every
sidebar widget set.

Known trap (Streamlit 1.67, verified below): after `set_value(...).run()` AppTest reruns only the current
page of an st.navigation app, not the entrypoint, so widgets drawn in app.py would vanish. It happens
because the page scripts sit in a folder named `pages/` (the legacy auto-discovery folder); any other
name avoids it. Every page draws the shared inputs itself (ui.inputs.render_inputs), so either way works."""

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
from estimator.cli import estimate_json
from ui.inputs import BATCH_MAX, MAX_LEN_MAX
from ui.report import NEGLIGIBLE_BYTES, breakdown_csv, breakdown_frame

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT = 30

LLAMA = load_preset("llama-3.1-8b")
RTX = get_device("rtx-4090")
LAPTOP = get_device("laptop-36gb")


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
    (element,) = at.get("plotly_chart")
    return json.loads(element.proto.spec)


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
    est = estimate(LLAMA, TrainingSetup())
    assert headline(default_at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert headline(default_at).startswith("Too big by ")  # 8B LoRA at 2,048 tokens needs > 24 GB
    assert default_at.header[0].proto.body.startswith(":red[")
    captions = [unescape(c.value) for c in default_at.caption]
    assert "Llama-3.1-8B · LoRA · bf16 · batch 1 × 2,048 tokens · detailed estimate" in captions
    assert f"{RTX.name}: 24.0 GB (22.4 GiB) usable of 24.0 GB (22.4 GiB)" in captions
    detail = markdown_text(default_at)
    assert f"Expected peak {to_gb(est.total_bytes):,.1f} GB ({est.total_bytes / 2**30:,.1f} GiB)" in detail
    assert f"likely {to_gb(est.low_bytes):,.1f}–{to_gb(est.high_bytes):,.1f} GB" in detail
    assert f"peak during: {est.peak_phase}" in detail
    assert not default_at.warning  # no notes, no close-call warning on the default view


def test_default_chart_and_table_carry_the_same_numbers(default_at):
    est = estimate(LLAMA, TrainingSetup())
    assert bar_total_gb(default_at) == pytest.approx(to_gb(est.total_bytes))
    usable_line = next(s for s in chart(default_at)["layout"]["shapes"] if s.get("name") == "usable")
    assert usable_line["x0"] == pytest.approx(24.0)
    (table,) = default_at.dataframe
    pd.testing.assert_frame_equal(table.value.reset_index(drop=True), breakdown_frame(est))
    assert [b.label for b in default_at.download_button] == ["Download CSV", "Download JSON"]


def test_inputs_survive_a_rerun_because_the_page_draws_them(default_at):
    """AppTest reruns only the page after set_value(): the sidebar is still complete and still applied."""
    at = run({"device": "laptop-36gb"})
    before = {kind: len(getattr(at.sidebar, kind)) for kind in ("selectbox", "slider", "select_slider", "toggle",
                                                               "number_input", "text_input")}
    assert before["selectbox"] == 6 and before["toggle"] == 3  # rule, ckpt, present
    at.sidebar.slider(key="batch").set_value(2).run()
    after = {kind: len(getattr(at.sidebar, kind)) for kind in before}
    assert after == before
    assert at.sidebar.selectbox(key="device").value == "laptop-36gb"
    assert headline(at) == expected_headline(LLAMA, TrainingSetup(batch=2), LAPTOP)


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
    # (URL parameters, the verdict headline) — ../shared/seed-notes.md, 36 GB laptop and 16 GB GPU
    ({"size": "1.5", "method": "lora", "device": "laptop-36gb"}, "Fits: 6.0 GB of 27.0 GB usable"),
    ({"size": "7", "method": "lora", "device": "laptop-36gb"}, "Fits: 17.0 GB of 27.0 GB usable"),
    ({"size": "14", "method": "lora", "device": "laptop-36gb"}, "Too big by 4.0 GB"),
    ({"size": "1.5", "method": "full", "device": "laptop-36gb"}, "Fits: 22.0 GB of 27.0 GB usable"),
    ({"size": "3", "method": "full", "device": "laptop-36gb"}, "Too big by 13.0 GB"),
    ({"size": "8", "method": "lora", "device": "gpu-16gb"}, "Too big by 3.0 GB"),
    ({"size": "8", "method": "qlora", "device": "gpu-16gb"}, "Fits: 9.3 GB of 16.0 GB usable"),
]


@pytest.mark.parametrize(("params", "expected"), SEED_EXAMPLES, ids=lambda p: "-".join(p.values())
                         if isinstance(p, dict) else None)
def test_seed_examples_in_rule_mode(params, expected):
    at = run({"model": "by-size", "rule": "true", **params})
    assert headline(at) == expected
    assert "seed rule of thumb" in unescape(at.caption[0].value)


def test_rule_mode_shows_the_seed_number_and_the_gap_to_the_detailed_estimate():
    at = run({"model": "by-size", "size": "7", "rule": "true", "device": "laptop-36gb"})
    detailed = estimate(generic_spec(7), TrainingSetup())
    (info,) = at.info
    text = unescape(info.value)
    diff = detailed.total_bytes - 17e9
    assert f"Seed rule 17.0 GB (15.8 GiB) · detailed estimate {to_gb(detailed.total_bytes):,.1f} GB" in text
    assert f"is {to_gb(diff):,.1f} GB ({diff / 2**30:,.1f} GiB, {100 * diff / 17e9:,.0f} %) above the rule" in text
    detailed_verdict = verdict(detailed.total_bytes, LAPTOP, detailed.high_bytes).headline
    assert f"Detailed verdict on this device: {detailed_verdict}." in text
    assert bar_total_gb(at) == pytest.approx(17.0)  # the chart shows the mode's own number
    # Off again: no comparison box, the detailed verdict is the headline.
    at.sidebar.toggle(key="rule").set_value(False).run()
    assert not at.info
    assert headline(at) == detailed_verdict


# ---- every widget drives the estimate --------------------------------------------------------------------

BASE = {"model": "by-size", "size": "7", "device": "laptop-36gb"}
SEVEN = generic_spec(7)
# (widget kind, key, new value, extra URL parameters, expected (spec, setup, device) after the change)
WIDGETS = [
    ("selectbox", "model", "qwen2.5-7b", {}, (load_preset("qwen2.5-7b"), TrainingSetup(), LAPTOP)),
    ("select_slider", "size", 14, {}, (generic_spec(14), TrainingSetup(), LAPTOP)),
    ("segmented_control", "method", "qlora", {}, (SEVEN, TrainingSetup(method="qlora"), LAPTOP)),
    ("selectbox", "precision", "mixed", {}, (SEVEN, TrainingSetup(precision="mixed"), LAPTOP)),
    ("slider", "batch", 4, {}, (SEVEN, TrainingSetup(batch=4), LAPTOP)),
    ("select_slider", "max_len_pow2", 512, {}, (SEVEN, TrainingSetup(seq_len=512), LAPTOP)),
    ("number_input", "max_len", 3000, {}, (SEVEN, TrainingSetup(seq_len=3000), LAPTOP)),
    ("toggle", "ckpt", True, {}, (SEVEN, TrainingSetup(grad_ckpt=True), LAPTOP)),
    ("selectbox", "optimizer", "adamw_8bit", {"method": "full"},
     (SEVEN, TrainingSetup(method="full", optimizer="adamw_8bit"), LAPTOP)),
    ("selectbox", "attn", "eager", {}, (SEVEN, TrainingSetup(attention="eager"), LAPTOP)),
    ("select_slider", "rank", 256, {}, (SEVEN, TrainingSetup(lora_rank=256), LAPTOP)),
    ("text_input", "targets", "q_proj,v_proj", {}, (SEVEN, TrainingSetup(lora_targets=("q_proj", "v_proj")), LAPTOP)),
    ("number_input", "gpus", 4, {}, (SEVEN, TrainingSetup(gpus=4), LAPTOP)),
    ("selectbox", "sharding", "zero3", {"gpus": "8", "method": "full"},
     (SEVEN, TrainingSetup(method="full", gpus=8, sharding="zero3"), LAPTOP)),
    ("selectbox", "device", "h100-80gb", {}, (SEVEN, TrainingSetup(), get_device("h100-80gb"))),
    ("number_input", "capacity", 48.0, {"device": "custom"}, (SEVEN, TrainingSetup(), custom_device(48, "discrete"))),
    ("segmented_control", "kind", "unified", {"device": "custom"},
     (SEVEN, TrainingSetup(), custom_device(24, "unified"))),
]


@pytest.mark.parametrize(("kind", "key", "value", "extra", "expected"), WIDGETS, ids=[w[1] for w in WIDGETS])
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


def test_presentation_mode_is_bigger_and_sparer():
    at = run({**BASE, "present": "true"})
    assert headline(at).startswith("Too big by ")
    assert len(at.title) == 1 and not [h for h in at.header if h.value.startswith(":")]
    assert at.subheader[0].value.startswith("Expected peak")  # the estimate line, one size up
    assert not at.dataframe and not at.download_button
    assert chart(at)["layout"]["font"]["size"] == 18
    at.sidebar.toggle(key="present").set_value(False).run()
    assert not at.title and at.dataframe and len(at.download_button) == 2


# ---- what to change ----------------------------------------------------------------------------------------


def test_remedies_in_the_seeds_order_with_their_savings():
    at = run(BASE)
    text = markdown_text(at)
    setup = TrainingSetup()
    usable = LAPTOP.usable_bytes
    positions = []
    for r in remedies(SEVEN, setup):
        start = text.index(f"{r.order}. **{r.title}**")
        positions.append(start)
        line = text[start:].splitlines()[0].rstrip()
        if r.applicable:
            assert f"({r.change})" in line
            if r.saves_bytes >= NEGLIGIBLE_BYTES:
                assert f"saves {to_gb(r.saves_bytes):,.1f} GB" in line
                assert f"→ {to_gb(r.new_total_bytes):,.1f} GB" in line
                assert line.endswith("fits" if r.new_total_bytes <= usable else "still too big")
        else:
            assert "not available here" in line
    assert positions == sorted(positions) and len(positions) == 5
    assert "Lower the max length** (max length 2,048 → 1,024): saves" in text


def test_largest_batch_longest_length_and_smallest_device():
    at = run({**BASE, "size": "1.5", "device": "rtx-4090"})
    spec, setup = generic_spec(1.5), TrainingSetup()
    text = markdown_text(at)
    batch = max_batch(spec, setup, RTX.usable_bytes, limit=BATCH_MAX)
    length = max_seq_len(spec, setup, RTX.usable_bytes, limit=MAX_LEN_MAX)
    smallest = smallest_device(spec, setup)
    assert batch and 1 < batch < BATCH_MAX and length and 2048 < length < MAX_LEN_MAX
    assert f"Largest batch that fits on this device (at max length 2,048): **{batch:,}**" in text
    assert f"Longest max length that fits (at batch 1): **{length:,}** tokens" in text
    assert f"Smallest catalog device that fits: **{smallest.name}**" in text


def test_nothing_fits_says_so():
    at = run({"model": "llama-3.1-70b", "method": "full", "device": "mac-16gb"})
    text = markdown_text(at)
    assert "Largest batch that fits on this device (at max length 2,048): **none fits (not even 1 example)**" in text
    assert "Smallest catalog device that fits: **none in the catalog**" in text


# ---- notes, downloads, share --------------------------------------------------------------------------------


def test_invalid_url_values_show_a_note_and_fall_back(default_at):
    at = run({"size": "999", "method": "FULL", "device": "laptop-99gb", "batch": "-3"})
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
    setup = TrainingSetup(batch=2)
    est = estimate(SEVEN, setup)
    document = json.loads(_RecordingStorage.files["will-it-fit.json"])
    assert document == json.loads(json.dumps(estimate_json(est, LAPTOP)))
    assert document["device"]["fits"] is False and document["setup"]["batch"] == 2
    assert document["total_bytes"] == sum(document["components_bytes"].values())
    csv = _RecordingStorage.files["will-it-fit.csv"].decode()
    assert csv == breakdown_csv(est)
    table = pd.read_csv(io.StringIO(csv))
    on_screen = at.dataframe[0].value.reset_index(drop=True)
    assert table["bytes"].tolist() == [int(b) for b in on_screen["bytes"]]


def test_share_link_reproduces_the_inputs():
    params = {"model": "by-size", "size": "7", "method": "full", "device": "laptop-36gb", "rule": "true"}
    at = run(params)
    (code,) = at.code
    link = urlsplit(code.value)
    assert link.path == "/"  # AppTest has no browser URL; the page prefixes st.context.url when it has one
    # Every parameter except size=7, the default, which Streamlit keeps out of the address bar.
    assert dict(parse_qsl(link.query)) == {k: v for k, v in params.items() if k != "size"}
    # The link, opened again, shows the same verdict.
    again = run(dict(parse_qsl(link.query)))
    assert headline(again) == headline(at) == "Too big by 61.0 GB"  # 12 × 7 + 4 = 88 GB vs 27 usable


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
