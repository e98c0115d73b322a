"""Bad input never shows a traceback.

Every URL parameter is set to garbage, empty, huge, negative, NaN/inf, wrong-type, 10k-character and
HTML/Markdown payloads (and unknown parameter names are added). The app must show no exception element,
a visible note for each invalid known parameter, the default verdict, and never render the payload as
live markup. Uploaded config.json files go through `estimator.parse_config_text` (the function the page
calls; AppTest cannot upload files) and the server's upload cap is checked in `.streamlit/config.toml`.
One browser test (marker e2e) uploads a bad config.json through the real file uploader.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import load_preset, parse_config_text
from ui.live_chart import sent_payload

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGES = ("pages/calculator.py", "pages/compare.py", "pages/fits.py", "pages/sizes.py",
         "pages/scale.py", "pages/how.py")

# The URL parameters the brief promises (ui.inputs binds one widget to each).
URL_PARAMS = ("model", "size", "stack", "method", "precision", "optimizer", "batch", "max_len", "ckpt", "loss",
              "attn", "rank", "targets", "lora_layers", "dora", "quant", "gpus", "sharding", "device", "capacity",
              "kind", "rule", "present", "images", "tower", "offload_params", "host_ram", "accum", "opt_offload",
              "compile", "in_bwd", "dq", "versions")

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
MD_LINK = "[x](javascript:alert(1))"
# Values no parameter accepts (for `targets`, free text, each is an unknown LoRA module name or too long).
PAYLOADS: dict[str, str] = {
    "garbage": "zzz",
    "empty": "",
    "zero": "0",
    "negative": "-1",
    "negative_float": "-3.5e2",
    "huge": "9" * 400,
    "overflow": "1e309",
    "nan": "nan",
    "inf": "inf",
    "neg_inf": "-inf",
    "wrong_type_list": "[1, 2]",
    "wrong_type_obj": '{"a": 1}',
    "long_10k": "x" * 10_000,
    "script": SCRIPT,
    "img": IMG,
    "md_link": MD_LINK,
    "html_entities": "&lt;b&gt;bold&lt;/b&gt; **bold** `code` $x$",
    "control_chars": "a\x00b\x1b[31mc\r\nd",
    "unicode": "💥\u202eevil\u200b",
    "percent": "%00%3Cscript%3E",
}
# Live markup that must never reach a Markdown-rendering element unescaped (a backslash-escaped "\\<script"
# shows literally, and HTML is off anyway).
MARKUP = {m: re.compile(r"(?<!\\)" + re.escape(m), re.IGNORECASE) for m in ("<script", "<img", "](javascript:")}


def _unescape(text: str) -> str:
    """Undo Markdown backslash escapes (ui.inputs.plain) so notes can be searched for parameter names."""
    return re.sub(r"\\(.)", r"\1", text)


def _rendered_texts(at: AppTest) -> list[tuple[str, str, bool]]:
    """(kind, body, allow_html) of every element whose body Streamlit renders as Markdown."""
    out: list[tuple[str, str, bool]] = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "warning", "info", "error", "success",
                 "latex", "toast"):
        for el in getattr(at, kind, []):
            proto = getattr(el, "proto", None)
            allow_html = bool(getattr(proto, "allow_html", False))
            out.append((kind, str(el.value), allow_html))
    # Widget labels and help tooltips are Markdown too.
    for kind in ("selectbox", "slider", "select_slider", "text_input", "number_input", "toggle", "checkbox",
                 "radio", "multiselect", "button_group"):
        for el in getattr(at, kind, []):
            out.append((f"{kind}.label", str(getattr(el, "label", "")), False))
            out.append((f"{kind}.help", str(getattr(el, "help", "") or ""), False))
    return out


def assert_safe(at: AppTest) -> None:
    """No exception element, and no payload rendered as live markup anywhere."""
    assert not at.exception, [e.value for e in at.exception]
    for kind, body, allow_html in _rendered_texts(at):
        for marker, pattern in MARKUP.items():
            assert not pattern.search(body), f"{kind} renders {marker!r} unescaped: {body[:200]!r}"
        if allow_html:
            assert "onerror" not in body and "javascript" not in body, f"{kind} allows HTML: {body[:200]!r}"


def notes_text(at: AppTest) -> str:
    return "\n".join(_unescape(str(w.value)) for w in at.warning)


def verdict_of(at: AppTest) -> tuple[str, str]:
    """The verdict headline (first header/title) and the setup caption under it."""
    heads = [h.value for h in at.title] + [h.value for h in at.header]
    headline = next((h for h in heads if h.startswith(":")), "")
    caption = next((c.value for c in at.caption if " · " in c.value), "")
    return headline, caption


def chart_data(at: AppTest) -> list[object]:
    """Every chart's traces: st.plotly_chart's and the calculator's live chart's (ui/live_chart.py)."""
    return ([json.loads(c.proto.spec)["data"] for c in at.get("plotly_chart")]
            + [sent_payload(c.proto.json)["figure"]["data"] for c in at.get("bidi_component")])


def run(params: dict[str, object] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    return at.run()


@pytest.fixture(scope="module")
def baseline() -> AppTest:
    at = run()
    assert not at.exception
    return at


def test_brief_params_are_the_bound_params():
    from ui.inputs import PARAMS

    assert set(PARAMS) == set(URL_PARAMS)


def test_baseline_shows_a_verdict(baseline):
    headline, caption = verdict_of(baseline)
    assert headline, "no verdict on the default page"
    assert load_preset("llama-3.1-8b").name.split("-")[0] in _unescape(caption)
    assert chart_data(baseline), "no memory chart on the default page"
    assert not baseline.warning, [w.value for w in baseline.warning]


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_every_param_set_to_bad_value(kind, baseline):
    """All 20 parameters at once set to one bad value, plus unknown names: defaults, notes, no markup."""
    payload = PAYLOADS[kind]
    params: dict[str, object] = dict.fromkeys(URL_PARAMS, payload)
    params["nonsense"] = payload
    params[SCRIPT] = "1"
    at = run(params)
    assert_safe(at)
    notes = notes_text(at)
    for key in (k for k in URL_PARAMS if k in params):
        if key == "targets":  # free text: either rejected as a link value or as an unknown LoRA module
            assert "'targets'" in notes or "LoRA targets" in notes, notes
        elif key in ("images", "lora_layers", "host_ram") and payload == "0":
            continue  # 0 image tokens (text only), 0 LoRA layers (the stack's) and 0 GB (RAM not given) are the
            # defaults, not bad values
        else:
            assert f"'{key}'" in notes, f"no note for {key}={payload[:40]!r}: {notes}"
    assert "unknown link parameter" in notes
    assert verdict_of(at) == verdict_of(baseline)
    assert chart_data(at) == chart_data(baseline)


@pytest.mark.parametrize("value", ["inf", "-inf", "1e309", "9" * 400])
@pytest.mark.parametrize("key", ["max_len", "gpus", "capacity", "batch"])
def test_infinite_number_url_value(key, value, baseline):
    """Regression: Streamlit 1.67's integer st.number_input raised OverflowError (int(float('inf'))) on
    ?max_len=inf; ui.inputs now draws those inputs float-typed."""
    at = run({key: value})
    assert_safe(at)
    assert f"'{key}'" in notes_text(at)
    assert verdict_of(at) == verdict_of(baseline)


@pytest.mark.parametrize("key", URL_PARAMS)
def test_one_bad_param_alone(key, baseline):
    """One parameter at a time (garbage, then a script tag): its own note, default verdict."""
    for payload in ("zzz", SCRIPT):
        at = run({key: payload})
        assert_safe(at)
        notes = notes_text(at)
        if key == "targets":
            assert "LoRA targets" in notes
        else:
            assert f"'{key}'" in notes, notes
        assert verdict_of(at) == verdict_of(baseline)


def _summary(at: AppTest) -> str:
    """The setup summary line (estimator.job.stack.setup_summary), unescaped: the sidebar's, under its inputs (the
    calculator keeps its own copy in its details, one click away)."""
    from estimator.options.stacks import STACKS

    heads = tuple(f"{stack.version}: " for stack in STACKS.values())
    found = {_unescape(c.value) for c in [*at.main.caption, *at.sidebar.caption] if _unescape(c.value).startswith(heads)}
    assert len(found) == 1, [c.value for c in [*at.main.caption, *at.sidebar.caption]]
    return found.pop()


@pytest.mark.parametrize("payload", ["zzz", "TRL", "trl ", "", SCRIPT])
def test_unknown_stack_falls_back_to_trl_with_a_note(payload, baseline):
    from estimator.job.stack import resolve_setup, setup_summary

    at = run({"stack": payload})
    assert_safe(at)
    assert "The link's value for 'stack' was not valid; using the default (auto)." in notes_text(at)
    assert at.sidebar.selectbox(key="stack").value == "auto"  # auto on the default device (a CUDA GPU) is TRL
    assert _summary(at) == setup_summary(resolve_setup("trl")) == _summary(baseline)
    assert verdict_of(at) == verdict_of(baseline)
    assert chart_data(at) == chart_data(baseline)


@pytest.mark.parametrize("payload", ["zzz", "liger", "Fused", "", SCRIPT])
def test_unknown_loss_falls_back_to_auto_with_a_note(payload, baseline):
    at = run({"loss": payload})
    assert_safe(at)
    assert "The link's value for 'loss' was not valid; using the default (auto)." in notes_text(at)
    assert at.get_by_key("loss").value == "auto"
    assert _summary(at) == _summary(baseline)
    assert verdict_of(at) == verdict_of(baseline)
    assert chart_data(at) == chart_data(baseline)


def _unavailable_losses() -> list[tuple[str, str]]:
    from estimator.options.stacks import STACKS

    return [(sid, loss) for sid, stack in STACKS.items() for loss in stack.unavailable]


@pytest.mark.parametrize(("stack_id", "loss"), _unavailable_losses(), ids=lambda v: str(v))
def test_a_loss_the_stack_cannot_do_names_the_stack_and_uses_its_loss(stack_id, loss):
    """?stack=torchtune&loss=fused and the like: a valid link value the stack cannot honour. A note naming the
    stack, and the page works on with the stack's own loss."""
    from estimator import estimate, get_device, verdict
    from estimator.job.stack import default_settings, resolve_setup, setup_summary
    from estimator.options.stacks import STACKS

    stack = STACKS[stack_id]
    at = run({"stack": stack_id, "loss": loss})
    assert_safe(at)
    notes = notes_text(at)
    assert f"the {stack.label} stack cannot use the '{loss}' loss" in notes, notes
    assert "Using the stack's own settings for it." in notes
    # the stack's batch, length and rank (job.stack.default_settings, as the CLI), on the page's default device (an
    # RTX 4090: CUDA)
    run_ = default_settings(stack_id)
    setup = resolve_setup(stack_id, batch=run_.batch, seq_len=run_.seq_len, lora_rank=run_.lora_rank, backend="cuda")
    assert _summary(at) == setup_summary(setup)
    est = estimate(load_preset("llama-3.1-8b"), setup)
    expected = verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline
    assert _unescape(verdict_of(at)[0]).endswith(f"[{expected}]")
    assert chart_data(at)


@pytest.mark.parametrize("page_path", PAGES[1:])
def test_a_loss_the_stack_cannot_do_on_every_page(page_path):
    at = run({"stack": "torchtune", "loss": "fused"})
    at.switch_page(page_path)
    for key, value in {"stack": "torchtune", "loss": "fused"}.items():
        at.query_params[key] = value
    at.run()
    assert_safe(at)
    assert "the torchtune stack cannot use the 'fused' loss" in notes_text(at)
    assert at.title and not at.error


def test_repeated_and_mixed_values(baseline):
    """Repeated keys (?size=7&size=zzz) and a valid value next to invalid ones."""
    at = run({"size": ["7", "zzz"], "batch": ["1", "-5"], "model": ["by-size", MD_LINK], "method": "full"})
    assert_safe(at)
    assert "Full fine" in _unescape(verdict_of(at)[1]) or "full" in verdict_of(at)[1].lower()


def test_unknown_params_only(baseline):
    at = run({"x" * 10_000: "1", IMG: SCRIPT, "": "", "embed_options": "dark_theme"})
    assert_safe(at)
    assert "unknown link parameter" in notes_text(at)
    assert verdict_of(at) == verdict_of(baseline)


def test_valid_extremes_still_render():
    """The largest values the widgets accept: no exception (may not fit, must still answer)."""
    at = run({"model": "by-size", "size": "400", "method": "full", "precision": "fp32", "batch": "256",
              "max_len": str(1 << 21), "rank": "1024", "gpus": "1024", "sharding": "zero3", "attn": "eager",
              "device": "custom", "capacity": "100000", "kind": "unified", "targets": "q_proj, v_proj;lm_head"})
    assert_safe(at)
    assert verdict_of(at)[0]
    at = run({"model": "by-size", "size": "0.1", "capacity": "0.5", "device": "custom", "max_len": "1"})
    assert_safe(at)
    assert verdict_of(at)[0]


@pytest.mark.parametrize("page_path", PAGES[1:])
def test_bad_params_on_every_page(page_path):
    """Switch to each page with every parameter set to a markup payload: no exception, no live markup."""
    params: dict[str, object] = dict.fromkeys(URL_PARAMS, SCRIPT) | {"foo": IMG}
    at = run(params)
    at.switch_page(page_path)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert_safe(at)
    for key in ("batch", "model", "device"):
        at.query_params[key] = MD_LINK
    at.run()
    assert_safe(at)


# ---------------------------------------------------------------------------------------------------------
# Uploaded config.json: the function the page calls, and the server's upload cap
# ---------------------------------------------------------------------------------------------------------

LLAMA = json.loads((ROOT / "estimator" / "models" / "presets" / "llama-3.1-8b.json").read_text(encoding="utf-8"))


def _cfg(**changes: object) -> bytes:
    cfg = {**LLAMA, **changes}
    return json.dumps({k: v for k, v in cfg.items() if v is not ...}).encode()


BAD_CONFIGS: dict[str, tuple[bytes, str]] = {
    # name: (file bytes, a phrase the message must contain)
    "not_json": (b"hello, world", "not valid JSON"),
    "empty": (b"", "not valid JSON"),
    "truncated": (_cfg()[:-10], "not valid JSON"),
    "json_array": (b"[1, 2, 3]", "JSON object"),
    "json_string": (b'"llama"', "JSON object"),
    "json_null": (b"null", "JSON object"),
    "missing_model_type": (_cfg(model_type=...), "model_type"),
    "missing_hidden_size": (_cfg(hidden_size=...), "hidden_size"),
    "missing_layers": (_cfg(num_hidden_layers=...), "num_hidden_layers"),
    "missing_vocab": (_cfg(vocab_size=...), "vocab_size"),
    "unknown_model_type": (_cfg(model_type="bert"), "not supported"),
    "model_type_is_list": (_cfg(model_type=["llama"]), "model_type"),
    "layers_is_string": (_cfg(num_hidden_layers="32"), "num_hidden_layers"),
    "hidden_is_float": (_cfg(hidden_size=4096.5), "hidden_size"),
    "hidden_is_bool": (_cfg(hidden_size=True), "hidden_size"),
    "hidden_negative": (_cfg(hidden_size=-4096), "hidden_size"),
    "hidden_zero": (_cfg(hidden_size=0), "hidden_size"),
    "hidden_nan": (_cfg()[:-1] + b', "hidden_size": NaN}', "hidden_size"),
    "hidden_inf": (_cfg()[:-1] + b', "hidden_size": Infinity}', "hidden_size"),
    "layers_1e12": (_cfg(num_hidden_layers=1e12), "num_hidden_layers"),
    "layers_1e12_int": (_cfg(num_hidden_layers=10**12), "num_hidden_layers"),
    "vocab_absurd": (_cfg(vocab_size=10**9), "vocab_size"),
    "too_many_params": (_cfg(hidden_size=1 << 20, intermediate_size=1 << 20, num_hidden_layers=1000,
                             num_attention_heads=8192, num_key_value_heads=8192), "parameters"),
    "heads_not_multiple": (_cfg(num_key_value_heads=7), "multiple"),
    "tie_is_string": (_cfg(tie_word_embeddings="yes"), "tie_word_embeddings"),
    "moe_k_above_experts": (_cfg(model_type="mixtral", num_local_experts=8, num_experts_per_tok=9),
                            "num_experts_per_tok"),
    "moe_sparse_step_zero": (_cfg(model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2,
                                  moe_intermediate_size=768, decoder_sparse_step=0), "decoder_sparse_step"),
    "multimodal": (_cfg(model_type=..., text_config={"hidden_size": 1}), "multimodal"),
    "binary": (bytes(range(256)) * 64, "UTF-8"),
    "utf16": (json.dumps(LLAMA).encode("utf-16"), "UTF-8"),
    "deep_nesting": (b"[" * 100_000 + b"]" * 100_000, "JSON"),
    "deep_object": (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "JSON"),
    "over_1mb": (b" " * 1_100_000 + _cfg(), "1 MB"),
}


@pytest.mark.parametrize("name", list(BAD_CONFIGS))
def test_bad_config_is_a_clear_value_error(name):
    data, phrase = BAD_CONFIGS[name]
    with pytest.raises(ValueError) as info:
        parse_config_text(data, name="upload.json")
    message = str(info.value)
    assert phrase.lower() in message.lower(), message
    assert len(message) < 400, message  # one readable line, not a dump
    assert "Traceback" not in message


def test_good_config_parses_as_text_and_bytes():
    assert parse_config_text(_cfg()).params_total == load_preset("llama-3.1-8b").params_total
    assert parse_config_text(_cfg().decode()).params_total == load_preset("llama-3.1-8b").params_total


@pytest.mark.parametrize("data", [b" " * (100 * 2**20), b"\xff" * (100 * 2**20), b"{" * (100 * 2**20)],
                         ids=["100MB_spaces", "100MB_binary", "100MB_braces"])
def test_100mb_payload_is_rejected_fast(data):
    """A 100 MB upload never reaches the page (server cap, below), and the parser refuses it quickly too."""
    start = time.perf_counter()
    with pytest.raises(ValueError):
        parse_config_text(data)
    assert time.perf_counter() - start < 2.0  # generous for a 2-core CI box; typically ~50 ms


def test_100mb_payload_message_names_the_size():
    with pytest.raises(ValueError, match="1 MB"):
        parse_config_text(b" " * (100 * 2**20))


def test_huge_integer_field_is_a_value_error():
    with pytest.raises(ValueError, match="hidden_size"):
        parse_config_text(_cfg(hidden_size=10**400))


def test_error_message_is_valid_utf8():
    with pytest.raises(ValueError) as info:
        parse_config_text(b'{"model_type": "\\ud800"}')
    str(info.value).encode("utf-8")


def test_accepted_config_fields_are_valid_utf8():
    spec = parse_config_text(_cfg(hidden_act="gelu\ud800"))
    spec.hidden_act.encode("utf-8")


def test_oversized_binary_names_the_size():
    with pytest.raises(ValueError, match="1 MB"):
        parse_config_text(b"\xff" * 2_000_000)


def test_config_with_byte_order_mark_is_accepted():
    assert parse_config_text(b"\xef\xbb\xbf" + _cfg()).params_total == load_preset("llama-3.1-8b").params_total


def test_very_long_number_has_a_clear_message():
    with pytest.raises(ValueError) as info:
        parse_config_text(b'{"model_type": "llama", "hidden_size": ' + b"9" * 5000 + b"}")
    assert "set_int_max_str_digits" not in str(info.value)


def test_server_caps_upload_size():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    cap = config["server"]["maxUploadSize"]
    assert isinstance(cap, int) and 1 <= cap <= 5, cap  # MB; a config.json is a few kB
    assert config["client"]["showErrorDetails"] in ("none", False, "type"), "users must never see a traceback"


def test_uploader_only_accepts_json():
    """The page's uploader restricts the type (the parser still checks the content)."""
    source = (ROOT / "ui" / "model_box.py").read_text(encoding="utf-8")
    assert re.search(r"file_uploader\([^)]*type=\[\"json\"\]", source)


# ---------------------------------------------------------------------------------------------------------
# Compare's pinned setups: every bad pin is left out with its own note, the good one stays
# ---------------------------------------------------------------------------------------------------------

GOOD_PIN = "model.llama-3.2-1b~device.t4~stack.trl~method.lora~batch.1~max_len.512"


def test_bad_pins_are_left_out_with_a_note_each():
    """Every payload as a whole pin and as one pin's value (model, batch, targets), the dataset size and price too:
    no exception, no live markup, one note per pin left out (at most four are read), the good pin still priced."""
    bad = [v for v in PAYLOADS.values() if v]  # (an empty value is no pin)
    inside = [GOOD_PIN.replace("llama-3.2-1b", v) for v in (SCRIPT, IMG, MD_LINK)] + [
        GOOD_PIN + "~targets." + v for v in (SCRIPT, "x" * 10_000)] + [GOOD_PIN.replace("batch.1", "batch.nan")]
    for pins in ([GOOD_PIN, *bad[:3]], [GOOD_PIN, *bad[3:6]], *([GOOD_PIN, *bad[i:i + 3]] for i in range(6, len(bad), 3)),
                 [GOOD_PIN, *inside[:3]], [GOOD_PIN, *inside[3:]]):
        at = run()
        at.switch_page("pages/compare.py")
        at.query_params["pins"] = pins
        at.query_params["tokens"] = "-1"
        at.query_params["price"] = "nan"
        at.run()
        assert_safe(at)
        notes = notes_text(at)
        assert notes.count("could not be read") + notes.count("could not be priced") == len(pins) - 1, notes
        assert "The link's value for 'tokens' was not valid" in notes and "The link's value for 'price'" in notes
        assert any(d.value["Setup"].tolist() == ["Llama-3.2-1B · LoRA"] for d in at.dataframe
                   if "Setup" in d.value.columns)


# ---------------------------------------------------------------------------------------------------------
# Page-specific link parameters are not "unknown"
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("page_path", "params"), [
    ("pages/fits.py", {"models": ["7B", "70B"], "methods": "lora"}),
    ("pages/compare.py", {"methods": ["lora", "full"], "pins": [GOOD_PIN], "tokens": "1000000", "price": "2"}),
    ("pages/scale.py", {"offload": "true"}),
])
def test_page_parameters_are_not_unknown(page_path, params):
    at = run()
    at.switch_page(page_path)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert_safe(at)
    assert "unknown link parameter" not in notes_text(at)


# ---------------------------------------------------------------------------------------------------------
# Browser: a bad config.json through the real file uploader
# ---------------------------------------------------------------------------------------------------------

try:  # the browser suite's fixtures (a real server, system Chromium); absent → the test below is skipped
    from tests.e2e.conftest import app_url, browser_type_launch_args, system_chromium  # noqa: F401
except ImportError:  # pragma: no cover
    system_chromium = None


@pytest.mark.e2e
@pytest.mark.skipif(system_chromium is None, reason="browser suite fixtures (tests/e2e/conftest.py) not available")
def test_upload_bad_config_in_browser(page, app_url, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    from tests.e2e.helpers import open_app, wait_for_app_run

    open_app(page, app_url + "/?model=upload")
    uploader = page.locator(".st-key-upload input[type='file']")
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**LLAMA, "model_type": "<script>alert(1)</script>"}), encoding="utf-8")
    uploader.set_input_files(str(bad))
    wait_for_app_run(page)
    note = page.get_by_test_id("stAlert").filter(has_text="could not be used")
    expect(note).to_be_visible()
    expect(note).to_contain_text("<script>alert(1)</script>")  # shown as text, not run as markup
    assert page.evaluate("() => document.querySelectorAll('[data-testid=stMain] script').length") == 0
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.locator(".st-key-memory_bar .js-plotly-plot")).to_be_visible()  # a working page: the default
    expect(page.locator("h1, h2").filter(has_text=re.compile(r"Fits|Too big")).first).to_be_visible()

    junk = tmp_path / "junk.json"
    junk.write_bytes(bytes(range(256)) * 4)
    uploader.set_input_files(str(junk))
    wait_for_app_run(page)
    expect(page.get_by_test_id("stAlert").filter(has_text="not UTF-8")).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)

    big = tmp_path / "big.json"  # over the server's 1 MB cap: the uploader refuses it before it is sent
    big.write_bytes(b" " * (2 * 1024 * 1024))
    uploader.set_input_files(str(big))
    expect(page.get_by_text(re.compile(r"(must be|exceeds).*(1\.0 ?MB|1 ?MB)", re.IGNORECASE)).first).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.locator(".st-key-memory_bar .js-plotly-plot")).to_be_visible()


# ---------------------------------------------------------------------------------------------------------
# The performance tools' flags: a clear one-line message and exit status 2
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["bench/load_test.py", "--sessions", "0"],
    ["bench/load_test.py", "--sessions", "many"],
    ["bench/load_test.py", "--duration", "nan"],
    ["bench/load_test.py", "--duration", "-5"],
    ["bench/load_test.py", "--max-changes", "1e9"],
    ["bench/load_test.py", "--url", "http://example.com"],
    ["bench/load_test.py", "--url", "file:///etc/passwd"],
    ["bench/load_test.py", "--client", "curl"],
    ["bench/load_test.py", "--bogus"],
    ["bench/run.py", "--only", "everything"],
    ["bench/run.py", "--bogus"],
    ["bench/slider_trace.py", "--pages", "nope"],
    ["bench/slider_trace.py", "--pages", ","],
    ["bench/slider_trace.py", "--changes", "0"],
    ["bench/slider_trace.py", "--changes", "lots"],
])
def test_tool_flags_are_validated(argv):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
