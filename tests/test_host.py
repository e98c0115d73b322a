"""Host RAM (estimator/memory/host.py, docs/formulas.md §10): each term against its formula for real setups, the load
per stack, ZeRO-Offload's CPU state, ZeRO-3 parameter offload on both sides, the pinned allocator's rounding, the
verdict on a PC and on one pool of unified memory, and the CLI and the calculator page."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from estimator.job.stack import resolve_setup
from estimator.memory.host import (
    CUDA_INIT_HOST_BYTES,
    HOST_IMPORT_BYTES,
    host_verdict,
    pinned_size,
)
from estimator.memory.price import detailed_estimate as estimate
from estimator.models.presets import load_preset
from estimator.options.devices import get_device
from estimator.report.cli import main
from tests.test_bad_input import APP, notes_text

LLAMA = load_preset("llama-3.1-8b")
P = LLAMA.params_total  # 8,030,261,248
RTX = get_device("rtx-4090")
MAC = get_device("mac-64gb")


def host(stack: str = "trl", **settings):
    est = estimate(LLAMA, resolve_setup(stack, **settings))
    return est, {x.key: x.bytes for x in est.host.details}


def test_the_measured_baseline_and_the_cuda_runtime():
    assert HOST_IMPORT_BYTES == 452_788_224  # calibration/host_baseline.json
    _est, terms = host(gpus=4, sharding="zero2")
    assert terms["host.process_baseline"] == 4 * HOST_IMPORT_BYTES
    assert terms["host.cuda_runtime"] == 4 * CUDA_INIT_HOST_BYTES == 4 * round(1203.5 * 2**20)


def test_load_per_stack():
    est, terms = host("trl", method="lora")  # from_pretrained without device_map: the whole model on the CPU
    assert terms["host.model_load"] == 2 * P + 4 * est.params_trainable  # bf16 base + fp32 adapters
    _est, terms = host("trl", method="full", gpus=4, sharding="zero2")
    assert terms["host.model_load"] == 4 * 2 * P  # one copy per process
    _est, terms = host("trl", method="full", gpus=4, sharding="zero3")
    assert terms["host.model_load"] == 2 * P  # ZeRO-3: rank 0 reads the checkpoint
    _est, terms = host("torchtune", method="full")
    assert terms["host.model_load"] == 2 * P  # the bf16 checkpoint in a CPU state dict
    largest = max(LLAMA.largest_linear_params, LLAMA.vocab_size * LLAMA.hidden_size) * 2
    for stack, method in (("unsloth", "lora"), ("axolotl", "full"), ("trl", "qlora")):
        _est, terms = host(stack, method=method)
        assert terms["host.model_load"] == largest == 128_256 * 4096 * 2  # one tensor at a time: the embedding


def test_the_peak_is_the_load_or_the_steps_never_both():
    est, _terms = host("trl", method="lora")
    h = est.host
    assert h.peak_phase == "load" and h.total_bytes == h.load_bytes == h.base_bytes + 2 * P + 4 * est.params_trainable
    assert h.train_bytes == h.base_bytes  # nothing offloaded while training


def test_zero_offload_keeps_fp32_state_master_and_gradients_on_the_cpu():
    est, terms = host("trl", method="full", offload_optimizer=True)
    t = est.params_trainable
    assert terms["host.optimizer_offload"] == 8 * t  # AdamW: two fp32 states
    assert terms["host.master_weights"] == 4 * t and terms["host.offload_gradients"] == 4 * t
    assert terms["host.offload_staging"] == 2 * t
    assert terms["host.pinned_rounding"] == 2**35 - 4 * t  # 32.1 GB master partition pinned → 32 GiB
    assert est.components_bytes["optimizer"] == 0  # the GPU side has no optimizer state


def test_parameter_offload_moves_the_weights_off_the_gpu():
    base = estimate(LLAMA, resolve_setup("trl", method="full", sharding="zero3", offload_optimizer=True))
    est, terms = host("trl", method="full", sharding="zero3", offload_optimizer=True, offload_params=True)
    gathered = (max(LLAMA.layer_linear_params, LLAMA.vocab_size * LLAMA.hidden_size) + LLAMA.layer_linear_params) * 2
    assert est.components_bytes["weights"] == gathered  # two units gathered, no partition kept
    assert base.components_bytes["weights"] == 2 * P  # one GPU: ZeRO-3 alone keeps every weight
    assert terms["host.param_offload"] == 2 * P
    with pytest.raises(ValueError, match="parameter offload needs ZeRO-3"):
        resolve_setup("trl", method="full", offload_params=True)


def test_offloaded_checkpoints_and_the_pinned_rounding():
    est, terms = host("trl", method="lora", seq_len=3000, offload_activations=True)  # save_on_cpu: every layer
    per_layer = 3000 * 4096 * 2  # T × h × bf16
    assert terms["host.checkpoint_offload"] == 32 * per_layer
    assert terms["host.pinned_rounding"] == 32 * (2**25 - per_layer)  # 24.6 MB → 32 MiB each
    # Unsloth's own checkpointer keeps the last layer's input on the GPU and makes 200 pinned 256 KiB slots up front
    est, terms = host("unsloth", method="lora", seq_len=3000)
    assert terms["host.checkpoint_offload"] == 31 * per_layer + 200 * 2**18
    assert terms["host.pinned_rounding"] == 31 * (2**25 - per_layer)
    assert pinned_size(1) == 1 and pinned_size(2**24) == 2**24 and pinned_size(2**24 + 1) == 2**25


def test_the_verdict_against_the_machines_ram():
    est, _terms = host("trl", method="lora")
    v = host_verdict(est.host, RTX, 16e9)
    assert not v.fits and v.needs_bytes == est.host.total_bytes and v.headline.startswith("Host RAM too big by")
    assert host_verdict(est.host, RTX, 64e9).fits
    assert not host_verdict(est.host, RTX, None).known


def test_unified_memory_is_one_pool():
    est, _terms = host("trl", method="lora")
    v = host_verdict(est.host, MAC, 999e9, est.total_bytes)  # the RAM given is not used: the device's is the RAM
    assert v.unified and v.ram_bytes == MAC.usable_bytes
    assert "host.cuda_runtime" not in {x.key for x in v.host.details}
    assert v.needs_bytes == max(v.host.load_bytes, v.host.train_bytes + est.total_bytes)
    # offloading the optimizer on one pool moves bytes within it: together they need no less
    off = estimate(LLAMA, resolve_setup("trl", method="full", offload_optimizer=True))
    on = estimate(LLAMA, resolve_setup("trl", method="full"))
    assert host_verdict(off.host, MAC, None, off.total_bytes).needs_bytes >= \
        host_verdict(on.host, MAC, None, on.total_bytes).needs_bytes


def test_a_paged_optimizer_spills_what_the_gpu_lacks():
    est = estimate(LLAMA, resolve_setup("trl", method="full", optimizer="paged_adamw"))
    v = host_verdict(est.host, RTX, 64e9, est.total_bytes, est.setup, est.components_bytes["optimizer"])
    spill = next(x.bytes for x in v.host.details if x.key == "host.paged_optimizer")
    assert spill == min(est.components_bytes["optimizer"], est.total_bytes - RTX.usable_bytes)


def cli_json(args: list[str], capsys) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_host_object(capsys):
    doc = cli_json(["--model", "llama-3.1-8b", "--device", "rtx-4090", "--host-ram", "32"], capsys)
    h = doc["host"]
    assert h["pool"] == "separate" and h["ram_bytes"] == 32_000_000_000 and h["fits"] is True
    assert h["peak"] == "load" and h["processes"] == 1
    assert [d["key"] for d in h["details"]] == ["host.process_baseline", "host.cuda_runtime", "host.model_load"]
    assert h["needs_bytes"] == sum(d["bytes"] for d in h["details"]) == h["load_bytes"]
    mac = cli_json(["--model", "llama-3.1-8b", "--device", "mac-64gb", "--host-ram", "32"], capsys)
    assert mac["host"]["pool"] == "unified" and mac["host"]["ram_bytes"] == MAC.usable_bytes
    assert any("--host-ram 32 is not used" in n for n in mac["notes"])
    rule = cli_json(["--model", "llama-3.1-8b", "--rule", "seed"], capsys)  # the detailed estimate's host side
    assert rule["host"]["needs_bytes"] > 0 and "ram_bytes" not in rule["host"]


def test_cli_host_text(capsys):
    assert main(["--model", "llama-3.1-8b", "--method", "full", "--offload-optimizer", "--host-ram", "64"]) == 0
    out = capsys.readouterr().out
    assert "host.optimizer_offload" in out and "host with 64.0 GB RAM: Host RAM too big by" in out


def test_calculator_shows_the_host_verdict():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["host_ram"] = "16"
    at.run()
    assert not at.exception
    lines = [m.value for m in at.markdown]
    assert any("Host RAM too big by" in line for line in lines), lines  # 16 GB < the 17.9 GB model load
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["device"] = "mac-64gb"
    at.query_params["batch"] = "1"  # mlx-lm's default batch of 4 does not fit the 8B model here
    at.run()
    assert not any("GPU and host together fit" in m.value for m in at.markdown)  # it holds: said in the details
    at.session_state["calc_details"] = True
    at.run()
    assert any("GPU and host together fit" in m.value for m in at.markdown)
    assert at.sidebar.number_input(key="host_ram").disabled


def test_a_bad_host_ram_link_value_falls_back_with_a_note():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["host_ram"] = "-5"
    at.run()
    assert not at.exception
    assert "The link's value for 'host_ram' was not valid; using the default (0)." in notes_text(at)
    at.session_state["calc_details"] = True  # the host RAM: in the calculator's details
    at.run()
    assert any("Host RAM needed" in m.value for m in at.markdown)  # the default: not given, no verdict


def test_the_snippets_write_parameter_offload():
    from estimator.report.snippets import training_snippet

    setup = resolve_setup("trl", method="full", sharding="zero3", offload_params=True)
    text = training_snippet(LLAMA, setup)
    text = text if isinstance(text, str) else text[0]
    assert '"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}' in text
    axolotl = training_snippet(LLAMA, resolve_setup("axolotl", method="full", sharding="zero3", offload_params=True))
    axolotl = axolotl if isinstance(axolotl, str) else axolotl[0]
    assert '"offload_param": {"device": "cpu"}' in axolotl
