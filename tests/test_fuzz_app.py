"""Fuzz the whole app through AppTest: random query parameters (valid and invalid values for every bound
parameter, repeated keys, unknown names), a random page, then a random widget change. No run may show an
exception element or render link text as live markup.

Default suite: 25 cases (derandomized, so every run checks the same cases). `-m slow`: 500 cases.
Hypothesis shrinks a failure to a minimal link; the failing params are printed with the case.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator import CATALOG
from estimator.options.methods import ATTENTIONS, METHODS, SHARDINGS
from estimator.options.precisions import PRECISION_IDS as PRECISIONS
from estimator.options.stacks import STACK_IDS
from tests.test_bad_input import APP, IMG, MD_LINK, PAGES, SCRIPT, URL_PARAMS, assert_safe
from ui.inputs import (
    CKPT_CHOICES,
    LOSS_CHOICES,
    OPTIMIZER_CHOICES,
    POW2_LENGTHS,
    RANKS,
    SIZE_STEPS,
    model_options,
)

# Valid values per parameter, as a link would carry them.
VALID: dict[str, list[str]] = {
    "model": model_options(),
    "size": [f"{s:g}" for s in SIZE_STEPS],
    "stack": ["auto", *STACK_IDS],
    "method": list(METHODS),
    "precision": list(PRECISIONS),
    "optimizer": list(OPTIMIZER_CHOICES),  # "auto" (the stack's) and every optimizer
    "batch": ["1", "2", "4", "8", "16", "64", "256"],
    "max_len": [str(n) for n in POW2_LENGTHS] + ["1", "100", "3000", "2097152"],
    "ckpt": list(CKPT_CHOICES),  # auto, true, false, offload
    "loss": list(LOSS_CHOICES),  # auto and every loss kind; some stacks cannot do some (a note, not a crash)
    "attn": list(ATTENTIONS),
    "rank": [str(r) for r in RANKS],
    "targets": ["all-linear", "q_proj,v_proj", "q_proj; k_proj; v_proj; o_proj", "lm_head", "w1,w2,w3",
                "query_key_value", "gate_up_proj"],
    "lora_layers": ["0", "1", "4", "16", "32", "1000"],  # above the model's depth: refused with a note
    "dora": ["true", "false"],
    "quant": ["auto", "nf4", "affine", "mxfp4", "nvfp4", "mxfp8"],
    "gpus": ["1", "2", "8", "64", "1024"],
    "sharding": list(SHARDINGS),
    "device": [d.id for d in CATALOG] + ["custom"],
    "capacity": ["0.5", "8", "24", "80", "192.5", "100000"],
    "kind": ["discrete", "unified"],
    "rule": ["true", "false"],
    "present": ["true", "false"],
    "images": ["0", "256", "512", "4096"],  # image tokens per example (shown for multimodal models only)
    "tower": ["true", "false"],  # train the vision tower (shown for multimodal models only)
    "offload_params": ["true", "false"],  # ZeRO-3 parameter offload (noted and off unless sharding is zero3)
    "host_ram": ["0", "8", "16", "64", "512", "100000"],  # the machine's RAM (GB) for the host verdict
    "accum": ["1", "2", "8", "65536"],  # gradient accumulation steps
    "opt_offload": ["true", "false"],  # optimizer state in CPU RAM (several GPUs: needs sharding, else a note)
    "compile": ["true", "false"],  # torchtune only (another stack: disabled, not applied)
    "in_bwd": ["true", "false"],  # torchtune full fine-tuning, accumulation 1 (else a note)
    "dq": ["auto", "true", "false"],  # QLoRA NF4 double quantisation
    # the releases installed (ui/versions_box.py): any stack's packages, some outside one stack's range (a line)
    "versions": ["auto", "transformers==4.57.6", "trl==0.16.1,transformers==4.46.0", "unsloth==2024.12.4",
                 "mlx==0.24.2,mlx-lm==0.22.0", "transformers==5.20.0,peft==0.13.0,torch==2.5.1"],
}
assert set(VALID) == set(URL_PARAMS)

NASTY = ["", " ", "zzz", "0", "-1", "-0", "1.5", "1e309", "-1e309", "nan", "NaN", "inf", "-inf", "9" * 400,
         "0x10", "1_000", "１２", "true ", "[1, 2]", '{"a": 1}', "null", "None", "x" * 10_000, SCRIPT, IMG,
         MD_LINK, "a\x00b", "💥\u202e", "%3Cscript%3E", "../../etc/passwd", "' OR 1=1 --", "by-size ", "LORA"]

finite_numbers = st.one_of(
    st.integers(-(10**6), 10**7).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(-1e6, 1e7).map(lambda x: f"{x:g}"),
)


def value_for(key: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(VALID[key]),  # valid: exercises real combinations
        st.sampled_from(VALID[key]),
        st.sampled_from(NASTY),
        finite_numbers,
        st.text(max_size=40),
    )


def param_value(key: str) -> st.SearchStrategy[str | list[str]]:
    one = value_for(key)
    return st.one_of(one, one, one, st.lists(one, min_size=2, max_size=3))  # sometimes a repeated key


links = st.fixed_dictionaries({}, optional={key: param_value(key) for key in URL_PARAMS})
unknown = st.dictionaries(st.text(min_size=1, max_size=20).filter(lambda k: k not in URL_PARAMS),
                          st.text(max_size=20), max_size=2)

# A widget change after the page loaded: (kind, key, value), valid values only (the UI constrains them).
actions = st.one_of(
    st.none(),
    st.tuples(st.just("slider"), st.just("batch"), st.integers(1, 256)),
    st.tuples(st.just("selectbox"), st.just("model"), st.sampled_from(model_options())),
    st.tuples(st.just("selectbox"), st.just("device"), st.sampled_from(VALID["device"])),
    st.tuples(st.just("selectbox"), st.just("optimizer"), st.sampled_from(VALID["optimizer"])),
    st.tuples(st.just("selectbox"), st.just("stack"), st.sampled_from(VALID["stack"])),
    st.tuples(st.just("selectbox"), st.just("loss"), st.sampled_from(VALID["loss"])),
    st.tuples(st.just("button_group"), st.just("ckpt"), st.sampled_from(VALID["ckpt"])),
    st.tuples(st.just("toggle"), st.sampled_from(["rule", "present"]), st.booleans()),
    st.tuples(st.just("number_input"), st.just("max_len"), st.integers(1, 1 << 21)),
    st.tuples(st.just("number_input"), st.just("gpus"), st.integers(1, 1024)),
    st.tuples(st.just("select_slider"), st.just("size"), st.sampled_from(list(SIZE_STEPS))),
    st.tuples(st.just("button_group"), st.just("method"), st.sampled_from(list(METHODS))),
    st.tuples(st.just("text_input"), st.just("targets"), st.sampled_from(VALID["targets"] + [SCRIPT, "zzz", ""])),
)


def _widget(at, kind: str, key: str):
    for el in getattr(at, kind):
        if getattr(el, "key", None) == key:
            return el
    return None


def run_case(params: dict[str, object], page_path: str, action: tuple | None) -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert_safe(at)
    if page_path != PAGES[0]:
        at.switch_page(page_path).run()
        assert_safe(at)
    if action is not None:
        kind, key, value = action
        widget = _widget(at, kind, key)
        if widget is not None and not getattr(widget, "disabled", False):
            if kind == "number_input" and isinstance(widget.value, float) and not math.isnan(widget.value):
                value = float(value)
            widget.set_value(value).run()
            assert_safe(at)


def _check(params, extra, page_path, action):
    run_case({**extra, **params}, page_path, action)


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
              print_blob=True)


@settings(max_examples=25, derandomize=True, **COMMON)
@given(params=links, extra=unknown, page_path=st.sampled_from(PAGES), action=actions)
def test_fuzz_app_quick(params, extra, page_path, action):
    _check(params, extra, page_path, action)


@pytest.mark.slow
@settings(max_examples=500, **COMMON)
@given(params=links, extra=unknown, page_path=st.sampled_from(PAGES), action=actions)
def test_fuzz_app_long(params, extra, page_path, action):
    _check(params, extra, page_path, action)


@pytest.mark.parametrize("page_path", PAGES)
def test_every_page_with_all_nasty_values(page_path):
    """Deterministic corner: every parameter at once with each nasty value, on each page (one run each)."""
    for value in (SCRIPT, "nan", "", "x" * 10_000):
        run_case(dict.fromkeys(URL_PARAMS, value), page_path, None)


@pytest.mark.parametrize("stack", STACK_IDS)  # auto: TRL on the default device (a CUDA GPU)
def test_every_stack_with_every_loss_and_checkpointing_choice(stack):
    """Deterministic corner: each stack under each loss and checkpointing choice, QLoRA included (its adapter
    dtype and preparation come from the stack). No exception; a loss the stack cannot do gives its note."""
    from streamlit.testing.v1 import AppTest

    from estimator.options.stacks import STACKS
    from tests.test_bad_input import notes_text, verdict_of

    for loss in VALID["loss"]:
        for ckpt in VALID["ckpt"]:
            at = AppTest.from_file(APP, default_timeout=30)
            for key, value in {"stack": stack, "loss": loss, "ckpt": ckpt, "method": "qlora"}.items():
                at.query_params[key] = value
            at.run()
            assert_safe(at)
            assert verdict_of(at)[0], (stack, loss, ckpt)
            cannot = loss in STACKS[stack].unavailable
            assert ("cannot use the" in notes_text(at)) is cannot, (stack, loss, ckpt, notes_text(at))
