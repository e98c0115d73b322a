"""The sidebar's "Your releases" box (ui/versions_box.py) through AppTest, and its pure parts: a pasted pip freeze
sets one picker per package of the stack and the link's `versions` parameter, the estimate is the estimator's for
the setup resolved with those releases, a picker prices a fork (Mixtral QLoRA on transformers 4.57.6) and the
calculator names it, and every bad input is one line in the box with the rest of the setup kept."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from estimator import estimate, get_device, load_preset, to_gb, verdict
from estimator.job.stack import resolve_setup, setup_summary
from estimator.job.versions import resolve_versions
from estimator.memory.forks import version_notes
from tests.test_calculator_page import bar_total_gb, headline, unescape
from tests.test_calculator_page import run as calculator_run
from ui.versions_box import link_value, read_link_value, read_pasted, releases, resolve_for_stack

LLAMA = load_preset("llama-3.1-8b")
MIXTRAL = load_preset("mixtral-8x7b")
RTX = get_device("rtx-4090")
A100 = get_device("a100-80gb")

# A pip freeze as a TRL 0.21 machine prints it: a local torch build, packages no stack reads, and Unsloth (another
# stack's framework, kept in the link for that stack).
FREEZE = """accelerate==1.10.1
bitsandbytes==0.47.0
numpy==2.2.6
peft==0.17.1
torch==2.8.0+cu128
transformers==4.57.6
trl==0.21.0
unsloth==2025.9.1
"""
FREEZE_LINK = "transformers==4.57.6,trl==0.21.0,peft==0.17.1,bitsandbytes==0.47.0,torch==2.8.0,unsloth==2025.9.1"


def run(params: dict[str, str] | None = None) -> AppTest:
    """The calculator's run (tests/test_calculator_page.py), with more time: a pasted list reruns the page twice."""
    return calculator_run(params, timeout=60)


def pickers(at: AppTest) -> dict[str, str]:
    return {s.key.removeprefix("versions_pick_"): s.value for s in at.selectbox
            if s.key and s.key.startswith("versions_pick_")}


def box_lines(at: AppTest) -> list[str]:
    return [unescape(w.value) for w in at.sidebar.warning] + [unescape(c.value) for c in at.sidebar.caption]


def main_captions(at: AppTest) -> list[str]:
    return [unescape(c.value) for c in at.main.caption]


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="versions_paste").set_value(text)
    at.button(key="versions_read").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def share_query(at: AppTest) -> dict[str, str]:
    (code,) = [c for c in at.code if c.language != "yaml"]
    return dict(parse_qsl(urlsplit(code.value).query))


# ---- the pure parts --------------------------------------------------------------------------------------------

def test_the_link_value_round_trips_in_the_packages_order():
    pins = {"trl": "0.21.0", "unsloth": "2025.9.1", "transformers": "4.57.6"}
    assert link_value(pins) == "transformers==4.57.6,trl==0.21.0,unsloth==2025.9.1"
    assert read_link_value(link_value(pins)) == (pins, ())
    assert link_value({}) == "auto" and read_link_value("auto") == ({}, ())
    assert read_link_value(" Transformers == 5.0 , ")[0] == {"transformers": "5.0"}  # canonical name, PEP 440


def test_a_pickers_releases_are_the_forks_and_the_range_ends():
    """transformers under TRL: the newest (5.24.0) and oldest (4.46.0) modelled, and both sides of each fork that
    moves TRL (MoE experts 5.0.0/4.57.6, the fused AdamW default 4.54.0/4.53.3, the loss copy 4.49.0/4.48.3);
    torch: 2.8.0, the release the fused AdamW default also needs. Unsloth caps transformers at 5.17.0."""
    assert releases("trl", "transformers") == ("5.24.0", "5.0.0", "4.57.6", "4.54.0", "4.53.3", "4.49.0", "4.48.3",
                                               "4.46.0")
    assert releases("trl", "torch") == ("2.13.0", "2.8.0", "2.4.0")
    assert releases("trl", "peft") == ("0.21.2", "0.13.0")  # no fork of PEFT moves TRL's estimate
    assert releases("unsloth", "transformers")[0] == "5.17.0"
    assert releases("mlx", "mlx") == ("0.32.4", "0.30.0", "0.29.4", "0.25.0", "0.24.2", "0.24.0", "0.23.2", "0.21.0")


def test_a_pasted_freeze_gives_the_modelled_packages_only():
    pasted = read_pasted(FREEZE, "trl")
    assert link_value(dict(pasted.pins)) == FREEZE_LINK  # numpy and accelerate left out, torch's local build dropped
    assert (pasted.count, pasted.format) == (8, "freeze")
    assert pasted.other_frameworks == (("unsloth", "unsloth==2025.9.1"),)
    versions, errors = resolve_for_stack("trl", dict(pasted.pins))
    assert errors == () and versions.older_forks() == resolve_versions("trl", FREEZE).older_forks()
    assert dict(versions.sources)["trl"] == "pin" and str(versions["torch"]) == "2.8.0"


@pytest.mark.parametrize(("text", "stack", "given", "message"), [
    ("transformers==4.57.6\nthis is not a package line\n", "trl", True,
     "line 2 of the package list is not a pip freeze or pip list line: this is not a package line"),
    ("trl==0.21.0\ntrl==0.16.1\n", "trl", True,
     "trl is given twice with different versions: 0.21.0 (line 1) and 0.16.1 (line 2)"),
    ("trl==banana\n", "trl", True, "trl banana (line 1) is not a PEP 440 version"),
    ("transformers==6.1.0\n", "trl", True,
     "transformers 6.1.0 (line 1) is outside the releases the TRL stack is modelled for: 4.46.0 to 5.24.0"),
    ("xtuner==0.2.0\ntorch==2.5.1\n", "trl", False,
     "the package list names XTuner (xtuner 0.2.0), a stack this estimate does not model, and not trl (TRL): "
     "choose the stack you run"),
    ("numpy==2.2.6\n", "trl", True,
     "the list names none of the packages the TRL stack reads (trl, transformers, peft, bitsandbytes, torch)"),
])
def test_a_list_it_cannot_use_is_one_line(text, stack, given, message):
    with pytest.raises(ValueError) as err:
        read_pasted(text, stack, given)
    assert str(err.value) == message


def test_the_links_bad_entries_are_left_out_one_line_each():
    pins, errors = read_link_value("trl==banana,zzz,numpy==1.0,transformers==4.57.6,transformers==5.0.0,"
                                   "peft==0.17.1,torch==1.0")
    assert pins == {"peft": "0.17.1", "torch": "1.0"}
    assert [str(e) for e in errors] == [
        "The link's 'versions' gives trl banana, not a PEP 440 version; left out.",
        "The link's 'versions' entry 'zzz' is not PKG==VERSION; left out.",
        "The link's 'versions' names numpy, not a package this estimate models; left out.",
        "The link's 'versions' gives transformers twice (4.57.6 and 5.0.0); it is priced at its newest modelled release.",
    ]
    versions, range_errors = resolve_for_stack("trl", pins)
    assert [str(e) for e in range_errors] == [
        "torch 1.0 is outside the releases the TRL stack is modelled for (2.4.0 to 2.13.0); priced at 2.13.0."]
    assert dict(versions.sources) == {"trl": "default", "transformers": "default", "peft": "pin",
                                      "bitsandbytes": "default", "torch": "default"}


# ---- in the app --------------------------------------------------------------------------------------------------

def test_pasting_a_freeze_sets_the_pickers_the_link_and_the_estimate():
    at = run({"batch": "2"})
    default_headline = headline(at)
    assert pickers(at) == {p: "auto" for p in ("trl", "transformers", "peft", "bitsandbytes", "torch")}
    paste(at, FREEZE)
    assert pickers(at) == {"trl": "0.21.0", "transformers": "4.57.6", "peft": "0.17.1", "bitsandbytes": "0.47.0",
                           "torch": "2.8.0"}
    assert at.query_params["versions"] == [FREEZE_LINK] or at.query_params["versions"] == FREEZE_LINK
    assert share_query(at)["versions"] == FREEZE_LINK and share_query(at)["batch"] == "2"  # never the list itself
    setup = resolve_setup("trl", pins=tuple(FREEZE_LINK.split(",")), batch=2)  # the link's releases, as pins
    est = estimate(LLAMA, setup, device_capacity=RTX.runtime_total_bytes)
    from_list = estimate(LLAMA, resolve_setup("trl", installed=FREEZE, batch=2), device_capacity=RTX.runtime_total_bytes)
    assert from_list.total_bytes == est.total_bytes  # the list itself, as the CLI's --installed-from reads it
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline != default_headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes), abs=1e-6)
    assert setup.grad_ckpt is False  # TRL 0.21's default: checkpointing off (the fork trl_gradient_checkpointing_default)
    lines = box_lines(at)
    assert "8 packages read (freeze); the pickers are set: transformers 4.57.6, trl 0.21.0, peft 0.17.1, " \
           "bitsandbytes 0.47.0, torch 2.8.0." in lines
    assert "Kept in the link for the stacks that read them: unsloth 2025.9.1." in lines
    assert "The list names unsloth==2025.9.1: choose the Unsloth stack (Training stack) to price its releases." in lines
    captions = main_captions(at)
    assert setup_summary(setup) not in captions  # the stack's settings line: in the details, one click away
    at.session_state["calc_details"] = True
    captions = main_captions(at.run())
    assert setup_summary(setup) in captions
    assert "Priced for the releases given: trl 0.21.0, transformers 4.57.6, peft 0.17.1, bitsandbytes 0.47.0, torch " \
           "2.8.0; this stack's other packages at their newest modelled release." in captions

    # the link, opened in a fresh session, gives the same view
    again = run(share_query(at))
    assert pickers(again) == pickers(at) and headline(again) == headline(at)

    # "Newest releases" puts every picker back on auto and the estimate back to the default's
    again.button(key="versions_clear").click().run()
    assert set(pickers(again).values()) == {"auto"} and "versions" not in share_query(again)
    assert headline(again) == default_headline


def test_transformers_4_57_on_mixtral_qlora_gives_the_number_and_names_the_fork():
    """transformers 5 keeps Mixtral's fused experts 16-bit under bitsandbytes (103.5 GB on TRL); picking 4.57.6
    quantises them (34.5 GB) and the calculator names the fork with the other side's number, both ways."""
    at = run({"model": "mixtral-8x7b", "method": "qlora", "device": "a100-80gb"})
    default = estimate(MIXTRAL, resolve_setup("trl", method="qlora"), device_capacity=A100.runtime_total_bytes)
    assert to_gb(default.total_bytes) == pytest.approx(103.5, abs=0.05)
    fork_note = ("transformers 5 stores a mixture-of-experts layer's routed experts as fused 3-D parameters, which "
                 "bitsandbytes does not quantise: on a 4-bit base they stay 16-bit (fp32 after PEFT's k-bit "
                 "preparation). On transformers 4 each expert is an nn.Linear, quantised to 4 bits.")
    # at the newest releases the note already says what 4.57 would give (the decision: whenever a fork matters)
    assert f"{fork_note} Before transformers 5.0.0 (e.g. 4.57.6), this estimate would be 34.5 GB." in main_captions(at)

    at.selectbox(key="versions_pick_transformers").select("4.57.6").run()
    assert not at.exception
    assert share_query(at)["versions"] == "transformers==4.57.6"
    setup = resolve_setup("trl", pins=("transformers==4.57.6",), method="qlora")
    est = estimate(MIXTRAL, setup, device_capacity=A100.runtime_total_bytes)
    assert to_gb(est.total_bytes) == pytest.approx(34.5, abs=0.05)
    assert headline(at) == verdict(est.total_bytes, A100, est.high_bytes).headline
    assert bar_total_gb(at) == pytest.approx(to_gb(est.total_bytes), abs=1e-6)
    captions = main_captions(at)
    assert f"{fork_note} From transformers 5.0.0 on, this estimate would be 103.5 GB." in captions
    assert "Priced for the releases given: transformers 4.57.6; this stack's other packages at their newest " \
           "modelled release." in captions
    shown = [c for c in captions if c.startswith(("Priced for", fork_note, "TRL 0.22", "TRL 1.7"))]
    assert shown == [str(n) for n in version_notes(MIXTRAL, setup, est, None, A100.runtime_total_bytes)]
    # the picker's auto names the release it stands for
    box = at.selectbox(key="versions_pick_transformers")
    assert box.options[0] == "auto (5.24.0)" and box.value == "4.57.6"


@pytest.mark.parametrize(("text", "line"), [
    ("transformers==4.57.6\n<script>alert(1)</script>\n",
     "The package list could not be read: line 2 of the package list is not a pip freeze or pip list line: "
     "<script>alert(1)</script>. The releases are unchanged."),
    ("trl==0.21.0\ntrl==0.16.1\n", "The package list could not be read: trl is given twice with different versions: "
     "0.21.0 (line 1) and 0.16.1 (line 2). The releases are unchanged."),
    ("trl==1.x\n", "The package list could not be read: trl 1.x (line 1) is not a PEP 440 version. The releases are "
     "unchanged."),
    ("torch==2.3.1\n", "The package list could not be read: torch 2.3.1 (line 1) is outside the releases the TRL "
     "stack is modelled for: 2.4.0 to 2.13.0. The releases are unchanged."),
    ("xtuner==0.2.0\ntorch==2.5.1\n", "The package list could not be read: the package list names XTuner (xtuner "
     "0.2.0), a stack this estimate does not model, and not trl (TRL): choose the stack you run. The releases are "
     "unchanged."),
])
def test_a_bad_list_is_one_line_and_nothing_else_changes(text, line):
    at = run({"versions": "peft==0.17.1", "batch": "2", "method": "qlora"})
    before = (headline(at), pickers(at), share_query(at))
    paste(at, text)
    assert [unescape(w.value) for w in at.sidebar.warning] == [line]
    assert (headline(at), pickers(at), share_query(at)) == before
    assert not any("alert" in m.value for m in at.markdown)  # shown as text, never as HTML


def test_a_framework_no_stack_models_is_recorded_when_the_stack_was_chosen():
    at = run({"stack": "trl"})
    paste(at, "xtuner==0.2.0\ntorch==2.5.1\n")
    assert pickers(at)["torch"] == "2.5.1"
    assert "The list also names XTuner, which this estimate does not model." in box_lines(at)


def test_bad_link_entries_are_lines_in_the_box_and_the_rest_is_priced():
    at = run({"versions": "trl==banana,zzz,transformers==4.57.6,transformers==5.0.0,peft==0.17.1,torch==1.0",
              "batch": "2", "method": "qlora"})
    warnings = [unescape(w.value) for w in at.sidebar.warning]
    assert warnings == [
        "The link's 'versions' gives trl banana, not a PEP 440 version; left out.",
        "The link's 'versions' entry 'zzz' is not PKG==VERSION; left out.",
        "The link's 'versions' gives transformers twice (4.57.6 and 5.0.0); it is priced at its newest modelled release.",
        "torch 1.0 is outside the releases the TRL stack is modelled for (2.4.0 to 2.13.0); priced at 2.13.0.",
    ]
    assert pickers(at) == {"trl": "auto", "transformers": "auto", "peft": "0.17.1", "bitsandbytes": "auto",
                           "torch": "auto"}
    setup = resolve_setup("trl", pins=("peft==0.17.1",), batch=2, method="qlora")
    est = estimate(LLAMA, setup, device_capacity=RTX.runtime_total_bytes)
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    assert not [w for w in at.warning if "link's value" in w.value]  # the text widget took it: the box says why


def test_a_release_another_stack_caps_is_one_line_there():
    """transformers 5.20 is TRL's, not Unsloth's (2026.10.9 caps it at 5.17.0): on Unsloth the box says so and
    prices the newest it models; the link keeps it for TRL."""
    at = run({"stack": "unsloth", "versions": "transformers==5.20.0", "method": "qlora"})
    assert [unescape(w.value) for w in at.sidebar.warning] == [
        "transformers 5.20.0 is outside the releases the Unsloth stack is modelled for (4.46.0 to 5.17.0); priced at "
        "5.17.0."]
    assert pickers(at)["transformers"] == "auto" and share_query(at)["versions"] == "transformers==5.20.0"


def test_the_box_in_spanish():
    at = run({"lang": "es", "versions": "torch==1.0"})
    assert [unescape(w.value) for w in at.sidebar.warning] == [
        "torch 1.0 está fuera de las versiones para las que está modelado el stack TRL (de 2.4.0 a 2.13.0); se "
        "calcula con 2.13.0."]
    assert "Tus versiones (las más recientes)" in [e.label for e in at.sidebar.expander]  # torch 1.0 is not used
    at = run({"lang": "es", "versions": "trl==0.21.0"})
    assert "Tus versiones (1 indicada)" in [e.label for e in at.sidebar.expander]


def test_the_setup_line_names_the_releases_priced():
    """The setup line named the stack's newest releases ('TRL 1.16.0 (transformers 5.24, PEFT 0.21)') whatever the
    releases given; with releases given it names each package of the stack at the release priced."""
    setup = resolve_setup("trl", pins=("trl==0.21.0", "transformers==4.57.6"))
    assert setup_summary(setup).startswith("TRL (trl 0.21.0, transformers 4.57.6, peft 0.21.2, bitsandbytes 0.50.2, "
                                           "torch 2.13.0): checkpointing off (TRL default)")
    unsloth = resolve_setup("unsloth", pins=("unsloth==2024.12.4",))  # its companions: the 2024.12 line's
    assert setup_summary(unsloth).startswith("Unsloth (unsloth 2024.12.4, unsloth-zoo 2024.12.1, transformers 4.46.3, ")
    assert setup_summary(resolve_setup("trl")).startswith("TRL 1.16.0 (transformers 5.24, PEFT 0.21): ")  # as before


def test_the_releases_stay_in_the_address_across_a_page_switch():
    """Like every sidebar input, the releases go with the visitor to another page (ui/url_state.py carries PARAMS)
    and the pickers there show them."""
    at = run({"versions": "transformers==4.57.6"})
    at.switch_page("pages/compare.py").run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["versions"] in ("transformers==4.57.6", ["transformers==4.57.6"])
    assert pickers(at)["transformers"] == "4.57.6"
