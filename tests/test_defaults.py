"""One source of defaults (issue 29 item 5): the CLI and the app give the same run for the same device and stack,
both through estimator.job.stack.default_settings (mlx-lm's own batch of 4 and rank 8 on an Apple device, as
`mlx_lm lora` runs; a GRPO run's batch of 8, TRL's)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import get_device, verdict
from estimator.job.stack import AUTO_STACK, default_settings, resolve_setup, setup_summary
from estimator.options.stacks import STACK_IDS, STACKS
from estimator.options.trainers import TRAINERS
from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
DEVICES = ("laptop-36gb", "rtx-4090")  # a Mac (unified memory) and a GPU


def cli_json(argv: list[str]) -> dict | None:
    """The CLI's JSON for these flags, or None when it refuses them (exit 2)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = main([*argv, "--json"])
        except SystemExit as exc:
            rc = exc.code
    return json.loads(out.getvalue()) if rc == 0 else None


def test_default_settings_is_the_stacks_and_the_trainers():
    laptop, gpu = get_device("laptop-36gb"), get_device("rtx-4090")
    mac = default_settings(None, laptop)
    assert (mac.stack, mac.batch, mac.lora_rank, mac.seq_len, mac.lora_layers) == ("mlx", 4, 8, 2048, 16)
    assert default_settings(AUTO_STACK, gpu).stack == "trl" and default_settings(None, gpu).batch == 1
    assert default_settings(None).stack == "trl"  # no device: TRL, as the CLI without --device
    grpo = default_settings(None, laptop, "grpo")  # mlx-lm has no GRPO: TRL on the Mac, TRL's batch of 8
    assert (grpo.stack, grpo.batch, grpo.batch_from) == ("trl", TRAINERS["grpo"].default_batch, "trainer")
    assert default_settings(None, gpu, "kto").batch == TRAINERS["kto"].min_batch == 2  # TRL refuses KTO at 1
    for stack in STACK_IDS:
        run = default_settings(stack, gpu)
        assert (run.batch, run.lora_rank, run.seq_len) == (STACKS[stack].batch, STACKS[stack].lora_rank,
                                                           STACKS[stack].seq_len)
        setup = resolve_setup(stack)  # resolve_setup fills the run's size from the same function
        assert (setup.batch, setup.lora_rank, setup.seq_len, setup.lora_layers) == (
            run.batch, run.lora_rank, run.seq_len, run.lora_layers)


def _app(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stack", (AUTO_STACK, *STACK_IDS))
def test_the_cli_and_the_app_give_the_same_run(stack, device):
    """Every stack (and auto) on a Mac and on a GPU, nothing else given: the same batch, rank, length, stack
    settings and verdict in both. Where the CLI refuses the pair (Unsloth on a Mac) the app says so and falls back."""
    argv = ["--device", device] + ([] if stack == AUTO_STACK else ["--stack", stack])
    doc = cli_json(argv)
    at = _app({"device": device} | ({} if stack == AUTO_STACK else {"stack": stack}))
    captions = [str(c.value).replace("\\", "") for c in (*at.sidebar.caption, *at.caption)]  # plain() escapes
    if doc is None:
        assert any("cannot run" in c for c in captions + [str(w.value) for w in at.warning]) or \
            any("cannot run" in str(m.value) for m in at.markdown), stack
        return
    s = doc["setup"]
    assert at.sidebar.slider(key="batch").value == s["batch"]
    assert at.sidebar.select_slider(key="rank").value == s["lora_rank"]
    assert at.sidebar.number_input(key="max_len").value == s["seq_len"]
    cli_setup = resolve_setup(s["stack"], batch=s["batch"], seq_len=s["seq_len"], lora_rank=s["lora_rank"],
                              backend=s["backend"])
    assert setup_summary(cli_setup) in captions  # the same stack and its settings
    headline = verdict(doc["total_bytes"], get_device(device), doc["high_bytes"], doc["low_bytes"]).headline
    assert headline in "\n".join(str(h.value) for h in at.header)  # the same verdict


def test_a_device_change_moves_a_batch_left_at_its_default_and_keeps_a_chosen_one():
    at = _app({"device": "rtx-4090"})
    assert at.sidebar.slider(key="batch").value == 1
    at.sidebar.selectbox(key="device").set_value("laptop-36gb").run()
    assert at.sidebar.slider(key="batch").value == 4 and at.sidebar.select_slider(key="rank").value == 8
    at.sidebar.slider(key="batch").set_value(2).run()
    at.sidebar.selectbox(key="device").set_value("rtx-4090").run()
    assert at.sidebar.slider(key="batch").value == 2  # the user's choice stays
    assert at.sidebar.select_slider(key="rank").value == 16  # the rank was still the default: it follows


def test_a_link_without_a_batch_on_a_mac_is_mlx_lms_batch_and_one_with_a_batch_keeps_it():
    assert _app({"device": "laptop-36gb"}).sidebar.slider(key="batch").value == 4
    assert _app({"device": "laptop-36gb", "batch": "1"}).sidebar.slider(key="batch").value == 1


def test_a_method_switch_keeps_a_trainers_default_batch():
    """The remedies and Compare switch the method with job.stack.with_method: GRPO's default batch of 8 stays 8 (it
    was re-resolved to the stack's 1), still marked as the default; a stack's default batch is unchanged."""
    from estimator.job.stack import with_method

    grpo = resolve_setup("trl", trainer="grpo")
    switched = with_method(grpo, "qlora")
    assert switched.batch == 8 and "batch" in switched.from_stack
    assert with_method(resolve_setup("mlx"), "qlora") == resolve_setup("mlx", method="qlora")
    assert with_method(resolve_setup("trl"), "full") == resolve_setup("trl", method="full")
