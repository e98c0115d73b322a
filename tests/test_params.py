"""The one table of link parameters (ui/params.py) against the estimator, so the two cannot drift: every default
is the estimator's own (TrainingSetup's and TrainerSetup's field defaults, the option ids), every limit is exactly
where the estimator starts refusing; and every row is both a link parameter and a widget bound to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import MAX_SIZE_B, MIN_SIZE_B, TrainerSetup, TrainingSetup, custom_device, generic_spec
from estimator.job.setup import MAX_SEQ_LEN
from estimator.job.stack import resolve_setup
from estimator.options.devices import CATALOG
from estimator.options.losses import LOSSES
from estimator.options.methods import ATTENTIONS, METHODS, SHARDINGS
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import PRECISION_IDS
from estimator.options.quantization import QUANT_MODE_IDS
from estimator.options.stacks import DEFAULT_STACK, STACK_IDS
from estimator.options.trainers import GENERATION_IDS, MAX_BETA, TRAINER_IDS
from ui.params import AUTO, PAGE_ONLY_PARAMS, SIDEBAR_PARAMS, TABLE, TRAINER_PARAMS, url_value
from ui.time_view import FIGURE_KEYS, RUN_KEYS  # the calculator's run time and cost box

APP = str(Path(__file__).resolve().parents[1] / "app.py")
# Link parameter → the TrainingSetup field it sets (numbers and choices the setup validates itself).
SETUP_FIELDS = {"method": "method", "precision": "precision", "batch": "batch", "max_len": "seq_len",
                "attn": "attention", "rank": "lora_rank", "gpus": "gpus", "sharding": "sharding",
                "images": "image_tokens"}


def accepted(make, value) -> bool:
    try:
        make(value)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("key", list(SETUP_FIELDS))
def test_setup_params_take_the_estimators_default_and_limits(key):
    p, field = TABLE[key], SETUP_FIELDS[key]
    assert p.default == getattr(TrainingSetup(), field)
    make = lambda v: TrainingSetup(**{field: v})  # noqa: E731
    if p.choices:
        assert all(accepted(make, c) for c in p.choices)
        if p.widget == "select_slider":  # a ladder: its top is the estimator's last accepted power of two
            assert not accepted(make, 2 * max(p.choices))
    else:  # exactly the range TrainingSetup accepts
        low, high = int(p.low), int(p.high)
        assert accepted(make, low) and accepted(make, high)
        assert not accepted(make, low - 1) and not accepted(make, high + 1)


def test_choice_params_are_the_estimators_ids():
    assert TABLE["method"].choices == METHODS
    assert TABLE["precision"].choices == PRECISION_IDS
    assert TABLE["attn"].choices == ATTENTIONS
    assert TABLE["sharding"].choices == SHARDINGS
    assert TABLE["stack"].choices == (AUTO, *STACK_IDS) and TABLE["stack"].default == AUTO  # auto: by the device
    assert TABLE["quant"].choices == (AUTO, *QUANT_MODE_IDS)
    assert TABLE["optimizer"].choices == (AUTO, *OPTIMIZERS) and TABLE["loss"].choices == (AUTO, *LOSSES)
    assert TABLE["device"].choices[:-1] == tuple(d.id for d in CATALOG)
    assert TABLE["trainer"].choices == TRAINER_IDS and TABLE["gen"].choices == GENERATION_IDS


def test_the_defaults_resolve_to_the_default_stacks_setup():
    """'auto' everywhere + the table's defaults = resolve_setup(DEFAULT_STACK) with TrainingSetup's defaults (the
    page gives batch, length and rank itself, so only from_stack differs)."""
    from dataclasses import replace

    given = resolve_setup(DEFAULT_STACK, method=TABLE["method"].default, batch=TABLE["batch"].default,
                          seq_len=TABLE["max_len"].default, lora_rank=TABLE["rank"].default)
    assert replace(given, from_stack=()) == replace(resolve_setup(DEFAULT_STACK), from_stack=())
    assert TABLE["lora_layers"].default == 0 and TABLE["dora"].default is False
    assert TABLE["targets"].default == ",".join(TrainingSetup().lora_targets)
    assert TABLE["opt_offload"].default == TrainingSetup().offload_optimizer


def test_size_and_capacity_limits_are_where_the_estimator_refuses():
    size = TABLE["size"]
    assert (size.low, size.high) == (MIN_SIZE_B, MAX_SIZE_B)
    assert accepted(generic_spec, size.low) and accepted(generic_spec, size.high)
    assert not accepted(generic_spec, size.low * 0.99) and not accepted(generic_spec, size.high * 1.01)
    cap = TABLE["capacity"]
    assert accepted(custom_device, cap.low) and accepted(custom_device, cap.high)
    assert not accepted(custom_device, cap.low * 0.99) and not accepted(custom_device, cap.high * 1.01)
    assert all(accepted(lambda k: custom_device(24.0, k), k) for k in TABLE["kind"].choices)
    assert not accepted(lambda k: custom_device(24.0, k), "other")


def test_trainer_params_take_the_estimators_default_and_limits():
    grpo = TrainerSetup("grpo")
    assert TABLE["trainer"].default == TrainerSetup().trainer
    assert TABLE["precompute_ref"].default == TrainerSetup().precompute_ref
    assert TABLE["gen"].default == grpo.generation_mode
    assert TABLE["gens"].default == grpo.gens
    assert TABLE["prompt_len"].default == grpo.prompt_length
    assert TABLE["completion_len"].default == grpo.completion_length
    assert TABLE["vllm_util"].default == TrainerSetup("grpo", generation="vllm-colocate").vllm_util
    gens = lambda n: TrainerSetup("grpo", num_generations=n)  # noqa: E731
    low, high = int(TABLE["gens"].low), int(TABLE["gens"].high)
    assert accepted(gens, low) and accepted(gens, high) and not accepted(gens, low - 1)
    assert not accepted(gens, high + 1)
    # every prompt and completion length on the ladders, even both at their longest, is a setup GRPO accepts
    longest = max(TABLE["prompt_len"].choices) + max(TABLE["completion_len"].choices)
    assert longest <= MAX_SEQ_LEN
    assert accepted(lambda c: TrainerSetup("grpo", prompt_len=max(TABLE["prompt_len"].choices), completion_len=c),
                    max(TABLE["completion_len"].choices))
    util = lambda u: TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=u)  # noqa: E731
    assert all(accepted(util, u) for u in TABLE["vllm_util"].choices)
    from ui.trainer_inputs import parse_beta

    assert parse_beta(MAX_BETA) is None and not accepted(lambda b: TrainerSetup("dpo", beta=b), MAX_BETA)
    assert parse_beta(str(MAX_BETA / 2)) == MAX_BETA / 2 and accepted(lambda b: TrainerSetup("dpo", beta=b),
                                                                      MAX_BETA / 2)


@pytest.mark.parametrize("key", list(TABLE))
def test_every_default_is_a_value_its_own_row_accepts(key):
    p = TABLE[key]
    defaults = p.default if p.widget in ("multiselect", "list") else (p.default,)
    assert all(p.accepts(url_value(d)) for d in defaults)
    if p.low is not None:
        assert p.low <= p.default <= p.high
    assert not p.accepts("zzz") or p.widget == "text"


def test_the_old_names_read_the_table():
    from ui.inputs import DEFAULTS, PAGE_PARAMS, PARAMS
    from ui.url_state import TRAINER_DEFAULTS

    assert PARAMS == SIDEBAR_PARAMS and DEFAULTS == {k: TABLE[k].default for k in SIDEBAR_PARAMS}
    assert TRAINER_DEFAULTS == {k: TABLE[k].default for k in TRAINER_PARAMS}
    assert PAGE_PARAMS == set(PAGE_ONLY_PARAMS) | set(TRAINER_PARAMS)
    assert set(SIDEBAR_PARAMS) | set(TRAINER_PARAMS) | set(PAGE_ONLY_PARAMS) == set(TABLE)


# --------------------------------------------------------------------------------------------
# Every row is a link parameter and a widget bound to it
# --------------------------------------------------------------------------------------------

WIDGET_KINDS = ("selectbox", "slider", "select_slider", "number_input", "toggle", "text_input", "button_group",
                "multiselect")


def other_value(key: str) -> list[str]:
    """A valid value other than the default, as a link writes it."""
    p = TABLE[key]
    if key == "model":
        return ["gemma-3-4b"]  # a multimodal preset, so the image-tokens input is drawn too
    if p.widget == "toggle":
        return [url_value(not p.default)]
    if p.widget == "multiselect":
        return [url_value(p.choices[-1])]
    if p.widget == "text":
        return {"targets": ["q_proj,v_proj"], "beta": ["0.2"], "versions": ["transformers==4.57.6"]}[key]
    if p.choices:
        return [url_value(next(c for c in reversed(p.choices) if c != p.default))]
    step = p.step or 1
    return [url_value(p.default + step if p.default + step <= p.high else p.default - step)]


def widgets(at: AppTest) -> dict[str, object]:
    return {w.key: w for kind in WIDGET_KINDS for w in getattr(at, kind)}


@pytest.mark.parametrize(("page", "keys"), [
    ("pages/calculator.py", SIDEBAR_PARAMS + TRAINER_PARAMS + RUN_KEYS + FIGURE_KEYS),
    ("pages/compare.py", ("methods", "variants", "tokens", "epochs", "price")),
    ("pages/fits.py", ("models",)),
    ("pages/scale.py", ("maxgpus", "pernode")),
])
def test_every_row_is_a_link_parameter_and_a_widget(page, keys):
    """A link with every row of the page at a non-default value: each row's widget exists, holds the link's
    value, and the page adds no note (nothing was refused)."""
    link = {key: other_value(key) for key in keys}
    if page == "pages/calculator.py":
        link |= {"device": ["custom"], "trainer": ["grpo"], "gen": ["vllm-colocate"], "batch": ["8"]}
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in link.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    found = widgets(at)
    for key in keys:
        assert key in found, f"no widget for the table row {key!r} on {page}"
        value = found[key].value
        shown = [url_value(v) for v in value] if isinstance(value, list) else [url_value(value)]
        assert shown == link[key], (key, value)
    notes = [w.value for w in at.warning if "link's value" in w.value]
    assert not notes, notes


def test_the_readme_lists_every_row_with_its_limits():
    """README's URL parameter list: a row per table row (pages' own controls named in the text), and each
    number's upper limit as the table has it."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("## Shareable links: URL parameters")[1].split("\n## ")[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| `")}
    for key, p in TABLE.items():
        row = next((line for names, line in rows.items() if f"`{key}`" in names), None)
        if p.group == "page":
            assert f"`{key}`" in section, key
            continue
        assert row is not None, f"README has no row for {key}"
        top = p.high if p.low is not None else max(p.choices) if p.widget == "select_slider" else None
        if top is not None:
            assert url_value(float(top)) in row.replace(",", ""), (key, row)


# --------------------------------------------------------------------------------------------
# The link checks say exactly what the widgets do (Streamlit drops a refused value silently)
# --------------------------------------------------------------------------------------------

def open_link(page: str, link: dict[str, str]) -> AppTest:
    """The link opened as a browser would: the calculator on its first run (its notes come with it); another
    page after a switch (AppTest applies bound values on the run after it)."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in link.items():
        at.query_params[key] = value
    at.run()
    if page != "pages/calculator.py":
        at.switch_page(page).run()
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def link_notes(at: AppTest) -> str:
    return "\n".join(w.value.replace("\\", "") for w in at.warning if "link's value" in w.value)


def test_a_ladder_value_written_differently_gets_a_note():
    """A select slider takes its option as written (prompt_len=512, vllm_util=0.3): '512.0' and '0.30' are
    dropped by Streamlit, so the page says so and shows the defaults (it used to accept them without a word)."""
    at = open_link("pages/calculator.py", {"trainer": "grpo", "gen": "vllm-colocate", "batch": "8",
                                           "prompt_len": "1024.0", "vllm_util": "0.40", "rank": "32.0"})
    notes = link_notes(at)
    assert "The link's value for 'prompt_len' was not valid; using the default (512)." in notes
    assert "The link's value for 'vllm_util' was not valid; using the default (0.3)." in notes
    assert "The link's value for 'rank' was not valid; using the default (16)." in notes
    found = widgets(at)
    assert found["prompt_len"].value == 512 and found["vllm_util"].value == 0.3 and found["rank"].value == 16


def test_a_toggle_takes_any_case_on_every_page():
    """Streamlit reads TRUE/False for a toggle; the scale page's old offload switch used to get a 'not valid' note
    for it while the sidebar's toggles did not (an old link's offload=TRUE now sets the sidebar's opt_offload)."""
    at = open_link("pages/scale.py", {"opt_offload": "TRUE", "rule": "False"})
    assert not link_notes(at)
    assert widgets(at)["opt_offload"].value is True
    at = open_link("pages/scale.py", {"offload": "TRUE"})
    assert not link_notes(at)
    assert widgets(at)["opt_offload"].value is True


def test_a_repeated_parameter_keeps_its_last_value_and_says_so():
    """?batch=2&batch=3: Streamlit fell back to the default batch without a word (a slider reads two values as a
    range); a repeated selectbox or number took its last one silently. Now the last value is used, with a note,
    and the address keeps only it; a multiselect's repeated values are its choices, not a repetition."""
    at = open_link("pages/calculator.py", {"batch": ["2", "3"], "method": ["full", "qlora"], "device": ["t4", "h200"]})
    notes = "\n".join(w.value.replace("\\", "") for w in at.warning)
    assert "The link gives 'batch' 2 times (2, 3); using the last, 3." in notes
    assert "The link gives 'method' 2 times (full, qlora); using the last, qlora." in notes
    assert "The link gives 'device' 2 times (t4, h200); using the last, h200." in notes
    found = widgets(at)
    assert (found["batch"].value, found["method"].value, found["device"].value) == (3, "qlora", "h200")
    assert at.query_params["batch"] == "3"
    fits = open_link("pages/fits.py", {"models": ["7B", "14B"]})
    assert "times" not in "\n".join(w.value for w in fits.warning)
    assert list(widgets(fits)["models"].value) == ["7B", "14B"]


def test_notes_write_defaults_as_the_address_does():
    """Every 'using the default (…)' says the value as a link would carry it: false, 24, 0.3 (not False, 24.0)."""
    at = open_link("pages/calculator.py", {"precompute_ref": "maybe", "rule": "maybe", "capacity": "-1",
                                           "device": "custom"})
    notes = link_notes(at)
    for key, text in (("precompute_ref", "false"), ("rule", "false"), ("capacity", "24")):
        assert f"The link's value for '{key}' was not valid; using the default ({text})." in notes


def test_a_page_parameter_comes_back_as_its_widget_holds_it():
    """After a page switch the page's own controls are restored from the address, typed by their table row."""
    from ui.url_state import _page_param_value

    assert _page_param_value("maxgpus", ["16"]) == 16 and _page_param_value("pernode", ["8"]) == 8
    assert _page_param_value("methods", ["full", "lora"]) == ["full", "lora"]
    assert _page_param_value("models", ["7B"]) == ["7B"]
