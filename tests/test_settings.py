"""The settings table (estimator/job/settings.py) against the dataclasses, the link parameters and the CLI's flags, so
that a setting has one name in code and its other names are written once; and the one merge of an imported config
with the user's settings (estimator.job.configs.merge), which the CLI and the app's config box both use."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import fields
from pathlib import Path

import pytest

from estimator import TrainerSetup, TrainingSetup
from estimator.job.configs import import_config, merge
from estimator.job.settings import (
    AUTO,
    BY_KEY,
    BY_NAME,
    CKPT_CHOICES,
    SETTINGS,
    from_flag,
    from_widget,
    from_widgets,
    widget_value,
)
from estimator.report.cli import main
from estimator.report.cli_flags import build_parser
from ui.params import PAGE_ONLY_PARAMS, SIDEBAR_PARAMS, TABLE, TRAINER_PARAMS

DATA = Path(__file__).resolve().parent / "data" / "configs"
AXOLOTL_LORA = DATA / "axolotl" / "llama-3" / "lora-1b.yml"  # gradient_checkpointing: true


def test_every_field_has_one_row_and_every_row_is_a_field():
    setup = {f.name for f in fields(TrainingSetup)} - {"from_stack"}
    trainer = {f.name for f in fields(TrainerSetup)}
    assert {s.name for s in SETTINGS if s.owner == "setup"} == setup
    assert {s.name for s in SETTINGS if s.owner == "trainer"} == trainer
    assert len(BY_NAME) == len(SETTINGS)


def test_every_key_is_a_link_parameter_and_every_settings_parameter_has_a_row():
    assert set(BY_KEY) <= set(SIDEBAR_PARAMS) | set(TRAINER_PARAMS)
    assert set(TRAINER_PARAMS) <= set(BY_KEY)  # every trainer control is a TrainerSetup setting
    # the sidebar's parameters that are not settings: the model, the device and the view; and the releases
    # installed, which the releases box (ui/versions_box.py) resolves into the setting `versions` itself
    assert set(SIDEBAR_PARAMS) - set(BY_KEY) == {"model", "size", "device", "capacity", "kind", "host_ram", "rule",
                                                 "present", "versions"}
    assert BY_NAME["versions"].key is None
    # Scale out's old own control: now the sidebar's opt_offload (an old link's offload= is rewritten, ui/url_state.py)
    assert "offload" not in PAGE_ONLY_PARAMS and "offload" not in BY_KEY
    assert BY_KEY["ckpt"] == (BY_NAME["grad_ckpt"], BY_NAME["offload_activations"])
    assert BY_KEY["max_len"] == (BY_NAME["seq_len"],)


def test_every_flag_is_declared_under_its_settings_name():
    actions = {a.dest: a for a in build_parser()._actions}
    for s in SETTINGS:
        if s.flag is None:
            assert s.name not in actions, s.name
            continue
        assert s.flag in actions[s.name].option_strings, s.name
        assert actions[s.name].default is None, s.name  # a flag given is told from one left out
    flagged = {a.dest for a in actions.values() if a.dest in {f.name for f in fields(TrainingSetup)}}
    assert flagged == {s.name for s in SETTINGS if s.flag is not None and s.owner == "setup"}


@pytest.mark.parametrize("key", sorted(BY_KEY))
def test_a_widgets_value_goes_to_the_settings_and_back(key):
    p = TABLE[key]
    values = p.choices or (p.default,)
    for value in values:
        settings = {k: v for k, v in from_widget(key, value).items() if v is not None}
        assert widget_value(key, settings, p.default) == value, (key, value, settings)


def test_the_conversions():
    assert from_widget("max_len", 4096) == {"seq_len": 4096}
    assert [from_widget("ckpt", c) for c in CKPT_CHOICES] == [
        {"grad_ckpt": None, "offload_activations": None}, {"grad_ckpt": True, "offload_activations": False},
        {"grad_ckpt": False, "offload_activations": False}, {"grad_ckpt": True, "offload_activations": True}]
    assert widget_value("ckpt", {"offload_activations": True}, AUTO) == "offload"
    assert from_widgets({"optimizer": AUTO, "quant": "nf4", "dq": "false", "lora_layers": 0, "beta": " auto "}) == {
        "optimizer": None, "quant_mode": "nf4", "nf4_double_quant": False, "lora_layers": None, "beta": None}
    assert from_widget("targets", "q_proj, v_proj") == {"lora_targets": ("q_proj", "v_proj")}
    assert widget_value("targets", {"lora_targets": ("q_proj", "v_proj")}, "all-linear") == "q_proj,v_proj"
    assert widget_value("beta", {"beta": 0.1}, AUTO) == "0.1" and widget_value("beta", {}, AUTO) == AUTO
    assert widget_value("rank", {}, 16) == 16  # left open: the control's default
    assert from_flag("lora_targets", "q_proj,v_proj") == ("q_proj", "v_proj") and from_flag("batch", 3) == 3
    with pytest.raises(ValueError):
        from_flag("lora_targets", ",")


# ---- the one merge -------------------------------------------------------------------------------------------

def test_flags_win_over_the_config_even_when_they_say_no():
    imported = import_config(AXOLOTL_LORA.read_text(), name=AXOLOTL_LORA.name)
    config = imported.setup_kwargs
    assert config["grad_ckpt"] is True and config["lora_rank"] == 16
    m = merge(imported, {"grad_ckpt": False, "lora_rank": 4, "batch": None})
    assert m.setup["grad_ckpt"] is False and m.setup["lora_rank"] == 4 and m.setup["batch"] == config["batch"]
    assert m.stack == imported.stack == "axolotl" and merge(imported, {"stack": "trl"}).stack == "trl"
    assert merge(None, {"batch": 2}) == merge(None, {"batch": 2, "seq_len": None})
    assert merge(None, {"batch": 2}).setup == {"batch": 2} and merge(None).stack is None


def test_what_the_config_leaves_out_and_another_trainer():
    text = ("base_model: meta-llama/Llama-3.2-1B\nadapter: lora\nlora_r: 8\nsequence_len: 4096\nrl: dpo\nrl_beta: 0.2\n"
            "gradient_checkpointing: true\n")
    imported = import_config(text)
    assert imported.trainer_kwargs == {"trainer": "dpo", "beta": 0.2}
    full = merge(imported, {"method": "full"})
    assert full.unused == {"lora_rank": 8, "lora_targets": imported.setup_kwargs["lora_targets"]}
    assert "lora_rank" not in full.setup and full.setup["method"] == "full"
    grpo = merge(imported, {"trainer": "grpo"})
    assert grpo.trainer == {"trainer": "grpo"}  # another trainer: the config's beta is DPO's
    assert grpo.unused == {"seq_len": 4096} and "seq_len" not in grpo.setup
    assert merge(imported, {"trainer": "dpo", "beta": 0.0}).trainer == {"trainer": "dpo", "beta": 0.0}
    assert merge(imported).trainer == {"trainer": "dpo", "beta": 0.2} and merge(imported).unused == {}
    with pytest.raises(KeyError):
        merge(imported, {"max_len": 4096})  # settings by their names, not their link keys


def test_checkpointing_off_drops_the_configs_offload():
    text = "base_model: meta-llama/Llama-3.2-1B\ngradient_checkpointing: true\nactivation_offloading: true\n"
    imported = import_config(text)
    assert imported.setup_kwargs["offload_activations"] is True
    m = merge(imported, {"grad_ckpt": False})
    assert m.unused == {"offload_activations": True} and imported.setup(grad_ckpt=False).offload_activations is False


def _cli(*argv: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def test_the_cli_prices_the_merge():
    """--no-grad-ckpt beside a config that turns checkpointing on: the flag wins (before the merge moved into the
    estimator, the config's true overrode an explicit false)."""
    doc = _cli("--from-config", str(AXOLOTL_LORA), "--no-grad-ckpt")
    assert doc["setup"]["grad_ckpt"] is False
    imported = import_config(AXOLOTL_LORA.read_text(), name=AXOLOTL_LORA.name)
    setup = imported.setup(grad_ckpt=False)
    assert {k: doc["setup"][k] for k in ("stack", "batch", "seq_len", "lora_rank", "grad_ckpt", "optimizer")} == {
        "stack": setup.stack, "batch": setup.batch, "seq_len": setup.seq_len, "lora_rank": setup.lora_rank,
        "grad_ckpt": False, "optimizer": setup.optimizer}
    assert _cli("--from-config", str(AXOLOTL_LORA))["setup"]["grad_ckpt"] is True
