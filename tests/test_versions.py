"""Versions as an input: reading pip freeze / pip list texts and single pins into the versions a stack is modelled at
(estimator/job/versions.py), the ranges and forks (estimator/options/versions.py), every bad input's one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from estimator.i18n import language, localised_error
from estimator.job.versions import Versions, default_versions, parse_installed, parse_pin, resolve_versions
from estimator.models import gemma, moe
from estimator.models.config import SUPPORTED_FAMILIES
from estimator.options.stacks import STACK_IDS, STACKS
from estimator.options.trainers import TRL_RELEASE
from estimator.options.versions import (
    FORKS,
    PACKAGES,
    STACK_FRAMEWORK,
    STACK_PACKAGES,
    TRANSFORMERS_FAMILIES,
    fork_applies,
    stack_forks,
)

FREEZE = (Path(__file__).parent / "data" / "freeze" / "trl_0.16_cuda.txt").read_text()


def _error(fn, *args, **kw) -> str:
    with pytest.raises(ValueError) as exc:
        fn(*args, **kw)
    return str(exc.value)


# ---- reading the formats --------------------------------------------------------------------------------------------

def test_real_freeze_gives_the_stack_packages_and_ignores_the_rest():
    installed = parse_installed(FREEZE)
    assert installed.format == "freeze"
    assert len(installed.packages) == 99
    assert installed.get("GitPython").version == "3.1.44"  # canonical lookup
    v = resolve_versions("trl", installed)
    assert dict(v) == {"trl": Version("0.16.1"), "transformers": Version("4.51.3"), "peft": Version("0.15.1"),
                       "bitsandbytes": Version("0.45.4"), "torch": Version("2.6.0+cu124")}
    assert v.found == ("trl", "transformers", "peft", "bitsandbytes", "torch")
    assert v.defaulted == ()
    assert "numpy" not in v and "liger-kernel" not in v
    # TRL 0.16.1 is before every TRL fork; transformers 4.51 after the loss copy went (4.49) and before 4.54's AdamW
    older = set(v.older_forks())
    assert {"trl_bf16_default", "trl_gradient_checkpointing_default", "trl_fused_logprob_head",
            "transformers_fused_moe_experts", "transformers_fused_adamw_default"} <= older
    assert "transformers_loss_no_logits_copy" not in older


def test_windows_line_endings_comments_and_pip_noise_read_the_same():
    text = ("# pip freeze, Windows\r\n\r\n" + FREEZE.replace("\n", "\r\n")
            + "WARNING: Ignoring invalid distribution -orch (c:\\python\\lib\\site-packages)\r\n"
            + "[notice] A new release of pip is available: 24.0 -> 25.0\r\n")
    assert dict(resolve_versions("trl", text)) == dict(resolve_versions("trl", FREEZE))


def test_pip_list_table_with_editable_column():
    rows = [line.split("==") for line in FREEZE.splitlines()]
    table = "Package                  Version       Editable project location\n"
    table += "------------------------ ------------- -------------------------\n"
    table += "".join(f"{name:<24} {version:<13}\n" for name, version in rows if name != "trl")
    table += f"{'trl':<24} {'0.16.1':<13} /home/me/src/trl\n"
    installed = parse_installed(table)
    assert installed.format == "list"
    assert dict(resolve_versions("trl", installed)) == dict(resolve_versions("trl", FREEZE))


def test_pip_list_format_freeze_and_json():
    freeze_like = "\n".join(line for line in FREEZE.splitlines() if line.startswith(("t", "p", "b")))
    assert dict(resolve_versions("trl", freeze_like)) == dict(resolve_versions("trl", FREEZE))
    doc = json.dumps([{"name": n, "version": v} for n, v in (line.split("==") for line in FREEZE.splitlines())])
    installed = parse_installed(doc)
    assert installed.format == "json"
    assert dict(resolve_versions("trl", installed)) == dict(resolve_versions("trl", FREEZE))


def test_direct_references_editables_options_and_markers():
    text = "\n".join([
        "--index-url https://download.pytorch.org/whl/cu124",
        "-i https://pypi.org/simple",
        "torch @ https://download.pytorch.org/whl/cu124/torch-2.6.0%2Bcu124-cp311-cp311-linux_x86_64.whl",
        "peft @ file:///tmp/dist/peft-0.14.0.tar.gz",
        "numpy @ file:///home/conda/feedstock_root/build_artifacts/numpy_1707225342954/work",
        "# Editable install with no version control (trl==0.13.0)",
        "-e /home/me/src/trl",
        "-e git+https://github.com/huggingface/transformers@0a1b2c3#egg=transformers",
        "# Editable Git install with no remote (transformers==4.47.1)",
        "bitsandbytes==0.45.0 ; sys_platform == 'linux'  # via -r requirements.in",
    ])
    installed = parse_installed(text)
    assert installed.get("numpy").version is None  # a conda build: no version, ignored (no stack uses numpy)
    v = resolve_versions("trl", installed)
    assert {k: str(x) for k, x in v.items()} == {"trl": "0.13.0", "transformers": "4.47.1", "peft": "0.14.0",
                                                  "bitsandbytes": "0.45.0", "torch": "2.6.0+cu124"}


def test_empty_input_and_defaults_are_the_newest_releases():
    v = resolve_versions("unsloth", "")
    assert v.found == () and v.defaulted == tuple(r.package for r in STACK_PACKAGES["unsloth"])
    assert str(v["transformers"]) == "5.17.0" and str(v["trl"]) == "1.15.0"  # unsloth 2026.10.9's caps
    assert default_versions("axolotl")["transformers"] == Version("5.16.1")  # axolotl 0.19.0 pins it
    assert default_versions("trl").older_forks() == ()  # the defaults are on the new side of every fork
    for stack in STACK_IDS:
        assert default_versions(stack).older_forks() == ()


def test_pins_win_over_the_file_and_unused_pins_are_listed():
    v = resolve_versions("trl", FREEZE, ["transformers==5.0.0", "Trl==1.16.0", "mlx-lm==0.32.2"])
    assert str(v["transformers"]) == "5.0.0" and str(v["trl"]) == "1.16.0"
    assert dict(v.sources)["transformers"] == "pin" and dict(v.sources)["peft"] == "installed"
    assert v.unused_pins == ("mlx-lm",)
    doc = v.as_json()
    assert doc["packages"]["transformers"] == {"version": "5.0.0", "from": "pin"}
    assert doc["ignored_pins"] == ["mlx-lm"]
    assert json.loads(json.dumps(doc)) == doc
    assert resolve_versions("trl", "", ["trl==1.16", "trl==1.16.0"])["trl"] == Version("1.16.0")  # the same pin


def test_versions_is_a_hashable_mapping():
    v = resolve_versions("mlx", "mlx==0.24.2\nmlx-lm==0.24.1\n")
    assert isinstance(v, Versions) and len(v) == 2 and list(v) == ["mlx", "mlx-lm"]
    assert v["MLX_LM"] == Version("0.24.1") and "mlx_lm" in v
    assert hash(v) == hash(resolve_versions("mlx", "mlx==0.24.2\nmlx-lm==0.24.1\n"))
    assert v.older_forks() == ("mlx_no_sdpa_in_grad", "mlx_cuda_cudnn_attention")


# ---- bad input: one line each ---------------------------------------------------------------------------------------

def test_malformed_line_says_which():
    text = FREEZE.replace("numpy==2.2.4", "numpy 2.2.4 is what I have")
    assert _error(parse_installed, text) == (
        "line 44 of the package list is not a pip freeze or pip list line: numpy 2.2.4 is what I have")
    assert _error(parse_installed, "torch>=2.4\n") == (
        "line 1 of the package list is not a pip freeze or pip list line: torch>=2.4")
    assert _error(parse_installed, "Package Version\n------- -------\nlonely\n") == (
        "line 3 of the package list is not a pip freeze or pip list line: lonely")
    long = "x" * 200
    assert _error(parse_installed, long).endswith(": " + "x" * 59 + "…")


def test_version_that_is_not_pep440():
    assert _error(resolve_versions, "trl", "transformers===4.57.1-custom-build\n") == (
        "transformers 4.57.1-custom-build (line 1) is not a PEP 440 version")
    assert _error(resolve_versions, "trl", "", ["peft==zero.21"]) == (
        "peft zero.21 (--installed peft==zero.21) is not a PEP 440 version")
    # a package the stack does not use may have any version: pip writes === for them
    assert str(resolve_versions("trl", "some-tool===2024-rolling\ntrl==1.16.0\n")["trl"]) == "1.16.0"


def test_conflicting_pins():
    assert _error(parse_installed, FREEZE + "peft==0.14.0\n") == (
        "peft is given twice with different versions: 0.15.1 (line 62) and 0.14.0 (line 100)")
    assert _error(resolve_versions, "trl", "", ["trl==1.15.0", "TRL==1.16.0"]) == (
        "trl is given twice with different versions: 1.15.0 (--installed trl==1.15.0) and 1.16.0 "
        "(--installed TRL==1.16.0)")


def test_versions_outside_the_modelled_range_name_it():
    assert _error(resolve_versions, "trl", "transformers==5.25.0\n") == (
        "transformers 5.25.0 (line 1) is outside the releases the TRL stack is modelled for: 4.46.0 to 5.24.0")
    assert _error(resolve_versions, "unsloth", "", ["transformers==5.24.0"]) == (
        "transformers 5.24.0 (--installed transformers==5.24.0) is outside the releases the Unsloth stack is "
        "modelled for: 4.46.0 to 5.17.0")
    assert _error(resolve_versions, "mlx", "mlx==0.20.1\n") == (
        "mlx 0.20.1 (line 1) is outside the releases the MLX-LM stack is modelled for: 0.21.0 to 0.32.4")
    assert resolve_versions("trl", "transformers==4.46.0\n")["transformers"] == Version("4.46.0")  # bounds included
    assert resolve_versions("trl", "transformers==5.24.0rc1\n")["transformers"].release == (5, 24, 0)


def test_package_the_stack_does_not_use_is_ignored_quietly():
    v = resolve_versions("mlx", FREEZE)  # a CUDA freeze on the MLX stack: nothing of it counts
    assert v.found == () and v.unused_pins == ()
    assert resolve_versions("trl", "mlx==0.1.0\nunsloth==2020.1.1\n").found == ()  # out of range, but not used


def test_stack_the_file_implies_but_we_do_not_model():
    text = "xtuner==0.2.0\ntransformers==5.2.0\npeft==0.17.1\ntorch==2.8.0\n"
    assert _error(resolve_versions, "trl", text, stack_given=False) == (
        "the package list names XTuner (xtuner 0.2.0), a stack this estimate does not model, and not "
        "trl (TRL): choose the stack you run")
    assert _error(resolve_versions, "trl", "openrlhf==0.8.0\n", stack_given=False).startswith(
        "the package list names OpenRLHF (openrlhf 0.8.0)")
    chosen = resolve_versions("trainer", text)  # the user chose the Trainer stack: recorded, not refused
    assert chosen.unmodelled == ("XTuner",) and chosen.as_json()["unmodelled_frameworks"] == ["XTuner"]
    assert resolve_versions("trl", text + "trl==0.24.0\n", stack_given=False)["trl"] == Version("0.24.0")


def test_ms_swift_is_a_modelled_stack_with_its_caps():
    """ms-swift 4.6.0 is the swift stack's framework (no longer an unmodelled one); its requirements/framework.txt caps
    transformers below 5.20, PEFT below 0.21 and TRL below 1.0, so those are its newest (and default) releases."""
    text = "ms_swift==4.6.0\ntransformers==5.2.0\npeft==0.17.1\ntorch==2.8.0\n"
    v = resolve_versions("swift", text, stack_given=False)
    assert v.unmodelled == () and v["ms-swift"] == Version("4.6.0") and v["transformers"] == Version("5.2.0")
    assert {k: str(x) for k, x in default_versions("swift").items()} == {
        "ms-swift": "4.6.0", "transformers": "5.19.0", "peft": "0.20.0", "trl": "0.29.1", "bitsandbytes": "0.50.2",
        "torch": "2.13.0"}
    assert _error(resolve_versions, "swift", "ms-swift==3.4.0\n") == (
        "ms-swift 3.4.0 (line 1) is outside the releases the ms-swift stack is modelled for: 4.6.0 to 4.6.0")
    assert _error(resolve_versions, "swift", "transformers==5.24.0\n") == (
        "transformers 5.24.0 (line 1) is outside the releases the ms-swift stack is modelled for: 4.46.0 to 5.19.0")


def test_other_bad_inputs():
    assert _error(resolve_versions, "trl", "trl @ git+https://github.com/huggingface/trl@main\n") == (
        "trl (line 1) is installed without a version number (trl @ git+https://github.com/huggingface/trl@main); "
        "give it as trl==VERSION")
    assert _error(parse_pin, "transformers>=4.57") == "--installed takes PKG==VERSION, got 'transformers>=4.57'"
    assert _error(parse_pin, "==1.0") == "--installed takes PKG==VERSION, got '==1.0'"
    assert _error(parse_installed, b"trl==1.0") == "the package list must be text"
    assert _error(parse_installed, "a==1\n" * 300_000) == (
        "the package list is too long: 1,500,000 characters (at most 1,000,000)")
    assert _error(parse_installed, '[{"name": "trl"}]') == "entry 1 of the JSON package list has no name and version"
    assert _error(resolve_versions, "deepspeed", "") == (
        "unknown stack 'deepspeed'; choose one of: " + ", ".join(STACK_IDS))


def test_errors_are_translated():
    with pytest.raises(ValueError) as exc:
        resolve_versions("trl", "transformers==5.25.0\n")
    with language("es"):
        spanish = localised_error(exc.value)
    assert spanish != str(exc.value) and "5.25.0" in spanish and "4.46.0" in spanish


# ---- the forks -------------------------------------------------------------------------------------------------------

def test_fork_applies_on_its_boundary():
    fork = "transformers_fused_moe_experts"
    assert not fork_applies(fork, {"transformers": "4.57.1"})
    assert not fork_applies(fork, {"transformers": Version("4.57.6")})
    assert fork_applies(fork, {"transformers": "5.0.0"})
    assert fork_applies(fork, {"transformers": "5"})  # 5 is 5.0.0
    assert fork_applies(fork, {"transformers": "5.0.0rc1"})  # a pre-release of 5.0.0 has 5.0.0's code
    assert fork_applies(fork, {})  # a package not given: its newest release
    assert fork_applies(fork, resolve_versions("trl", "transformers==5.0.0\n"))
    assert not fork_applies(fork, resolve_versions("trl", "transformers==4.57.1\n"))
    # the new behaviour needs another package too: transformers 4.54's fused AdamW default needs torch 2.8
    adamw = "transformers_fused_adamw_default"
    assert not fork_applies(adamw, {"transformers": "4.53.3", "torch": "2.8.0"})
    assert not fork_applies(adamw, {"transformers": "4.54.0", "torch": "2.7.1"})
    assert fork_applies(adamw, {"transformers": "4.54.0", "torch": "2.8.0+cu128"})
    # mlx: training attention was fused only on 0.24.x
    fused = [v for v in ("0.23.2", "0.24.0", "0.24.2", "0.25.0")
             if fork_applies("mlx_sdpa_fused_masked", {"mlx": v}) and not fork_applies("mlx_no_sdpa_in_grad",
                                                                                      {"mlx": v})]
    assert fused == ["0.24.0", "0.24.2"]
    with pytest.raises(ValueError):
        fork_applies("no_such_fork", {})


def test_every_fork_is_consistent_with_the_ranges():
    for fork in FORKS.values():
        r = PACKAGES[fork.package]
        assert Version(fork.last_without) < Version(fork.since) <= Version(r.newest), fork.id
        assert fork.stacks and set(fork.stacks) <= set(STACK_IDS), fork.id
        for stack in fork.stacks:
            names = {p.package for p in STACK_PACKAGES[stack]}
            assert fork.package in names and {p for p, _ in fork.requires} <= names, (fork.id, stack)
            assert fork in stack_forks(stack)
        assert fork.source and fork.example and fork.term and fork.settings, fork.id
        assert not fork_applies(fork.id, {fork.package: fork.last_without}), fork.id


def test_ranges_match_the_stacks_sources():
    assert set(STACK_PACKAGES) == set(STACK_IDS) == set(STACK_FRAMEWORK)
    assert PACKAGES["trl"].newest == TRL_RELEASE
    for stack in STACK_IDS:
        ranges = {r.package: r for r in STACK_PACKAGES[stack]}
        assert STACK_FRAMEWORK[stack] in ranges
        for r in ranges.values():
            assert Version(r.oldest) <= Version(r.newest) <= Version(PACKAGES[r.package].newest), (stack, r)
        if stack != "plain":  # "torch 2.x hand-written loop"
            assert ranges[STACK_FRAMEWORK[stack]].newest in STACKS[stack].version, stack


def test_every_family_has_its_first_transformers_release():
    families = set(SUPPORTED_FAMILIES) | set(moe.FAMILIES) | set(gemma.FAMILIES)
    assert families <= set(TRANSFORMERS_FAMILIES)
    for release in TRANSFORMERS_FAMILIES.values():
        assert Version(PACKAGES["transformers"].oldest) <= Version(release) <= Version(PACKAGES["transformers"].newest)


# ---- arbitrary text --------------------------------------------------------------------------------------------------

_LINES = st.one_of(
    st.text(max_size=80),
    st.builds(lambda n, v: f"{n}=={v}", st.sampled_from(["trl", "transformers", "torch", "peft", "mlx", "x"]),
              st.text(max_size=12)),
    st.builds(lambda n, u: f"{n} @ {u}", st.sampled_from(["trl", "torch", "unsloth-zoo"]), st.text(max_size=40)),
    st.sampled_from(["Package Version", "------- -------", "-e .", "# Editable install (trl==x)", "[", "{}", "[{}]"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=12), st.sampled_from(["\n", "\r\n", "\r"]), st.sampled_from(STACK_IDS),
       st.booleans(), st.lists(st.text(max_size=30), max_size=3))
def test_arbitrary_text_raises_only_value_error(lines, newline, stack, stack_given, pins):
    text = newline.join(lines)
    try:
        installed = parse_installed(text)
    except ValueError:
        return
    try:
        v = resolve_versions(stack, installed, pins, stack_given=stack_given)
    except ValueError:
        return
    assert set(v) == {r.package for r in STACK_PACKAGES[stack]}
    json.dumps(v.as_json())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.text(max_size=60))
def test_any_text_or_pin_raises_only_value_error(text, pin):
    for fn, arg in ((parse_installed, text), (parse_pin, pin)):
        try:
            fn(arg)
        except ValueError:
            pass
