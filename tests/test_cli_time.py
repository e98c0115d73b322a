"""The CLI's time and cost (issue 30 item 5): with a device the JSON's `time` (tokens_per_second, step_seconds and the
breakdown), with a dataset size the run, with a price the cost, with --advice each remedy's time_factor and
advice.fastest_fit; the text report prints the same; every bad input is one line and exit 2 (or a note where the
memory answer stands)."""

from __future__ import annotations

import json

import pytest

from estimator.job.stack import resolve_setup
from estimator.models.presets import load_preset
from estimator.options.devices import get_device
from estimator.speed import CATEGORIES, DatasetSize, run_cost, run_time, step_time
from tests.test_cli import run_cli

LLAMA = load_preset("llama-3.1-8b")
RTX = get_device("rtx-4090")
BASE = ["--model", "llama-3.1-8b"]



def run_json(capsys, *args):
    rc, out, err = run_cli(capsys, *BASE, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_time_is_in_the_json_with_a_device_and_absent_without(capsys):
    doc = run_json(capsys, "--device", "rtx-4090")
    want = step_time(LLAMA, resolve_setup("trl", backend="cuda"), RTX)  # the estimate's own setup, timed
    t = doc["time"]
    assert t["tokens_per_second"] == round(want.tokens_per_second, 1) == 1801.2
    assert t["step_seconds"] == round(want.step_seconds, 6) == 1.137021
    assert t["tokens_per_step"] == 2048 and t["gpus"] == 1 and t["dtype"] == "bf16" and t["figures"] == "catalog"
    assert set(t["seconds_by_category"]) == set(CATEGORIES)
    assert sum(x["seconds"] for x in t["terms"]) == pytest.approx(t["step_seconds"], abs=1e-5)
    assert t["seconds_by_category"]["compute"] == pytest.approx(1.012763)
    assert "run_seconds" not in t and "cost" not in doc
    assert "time" not in run_json(capsys)  # no device: no time
    advice = run_json(capsys, "--device", "rtx-4090")
    assert "advice" not in advice


def test_a_run_and_its_cost(capsys):
    doc = run_json(capsys, "--device", "rtx-4090", "--tokens", "50000000", "--epochs", "2",
                   "--price-per-gpu-hour", "0.7")
    t, cost = doc["time"], doc["cost"]
    run = run_time(LLAMA, resolve_setup("trl", backend="cuda"), RTX, DatasetSize(tokens=50_000_000, epochs=2))
    assert t["run_seconds"] == round(run.seconds, 1) == 55518.6  # 100 M tokens at 1,801.2 tokens/s: 15.4 h
    assert t["run_tokens"] == 100_000_000 and t["run_steps"] == 48_829
    assert t["dataset"] == {"tokens": 50_000_000, "examples": None, "typical_len": None, "epochs": 2.0}
    assert cost["total"] == round(run_cost(run, 0.7).total, 2) == 10.8  # 15.42 h × 1 GPU × 0.7
    assert cost["price_per_gpu_hour"] == 0.7 and "currency" in cost["unit"]
    # examples × typical length × epochs, on 2 GPUs: cost = run hours × GPUs × price
    doc = run_json(capsys, "--device", "rtx-4090", "--gpus", "2", "--sharding", "zero3", "--examples", "10000",
                   "--typical-len", "700", "--price-per-gpu-hour", "2")
    t, cost = doc["time"], doc["cost"]
    assert t["run_steps"] == 5000 and t["run_tokens"] == 7_000_000  # 10,000 rows of 700 tokens, 2 per step
    assert t["run_step"]["step_seconds"] == pytest.approx(t["run_seconds"] / 5000, rel=1e-4)
    assert cost["total"] == pytest.approx(t["run_hours"] * 2 * 2, abs=0.01) and cost["gpu_hours"] == t["gpu_hours"]


def test_the_text_report_prints_the_time_the_run_and_the_cost(capsys):
    rc, out, _ = run_cli(capsys, *BASE, "--device", "rtx-4090", "--tokens", "50000000", "--price-per-gpu-hour", "0.7")
    assert rc == 0
    assert ("  time: 1,801 tokens/s, 1.14 s per optimizer step (2,048 tokens × 1 GPU; bf16 at 165.2 TFLOPS × 57% "
            "efficiency)\n    compute 1.01 s · memory-bound 2.3 ms · launch overhead 0.12 s\n") in out
    assert "  run: 50,000,000 tokens × 1 epoch → 7.7 h (24,415 optimizer steps)\n" in out
    assert "  cost: 7.71 GPU-hours × 0.7 per GPU-hour = 5.40 (in the price's currency)\n" in out


def test_advice_carries_time_factors_and_the_fastest_fit(capsys):
    doc = run_json(capsys, "--method", "full", "--device", "a100-80gb", "--advice")
    remedies = {r["key"]: r for r in doc["advice"]["remedies"]}
    assert all("time_factor" in r for r in doc["advice"]["remedies"])
    assert remedies["checkpointing"]["time_factor"] is None  # already on
    assert remedies["lora"]["time_factor"] == pytest.approx(0.7035, abs=1e-4)
    assert remedies["offload_optimizer"]["time_factor"] == pytest.approx(3.985, abs=1e-3)  # the CPU's Adam
    fit = doc["advice"]["fastest_fit"]
    assert fit["changes"] == [{"key": "grad_ckpt", "before": True, "after": False}]
    assert fit["setup"]["grad_ckpt"] is False and fit["setup"]["batch"] == 1 and fit["effective_batch"] == 1
    assert fit["tokens_per_second"] == 2804.7 and fit["speedup"] == pytest.approx(1.2835, abs=1e-4)
    assert fit["allowed"] == {"method": False, "max_gpus": None}
    assert fit["total_bytes"] < doc["device"]["usable_bytes"]
    rc, out, _ = run_cli(capsys, *BASE, "--method", "full", "--device", "a100-80gb", "--advice")
    assert ("  fastest setup that fits (changing batch and accumulation, checkpointing, optimizer): checkpointing on "
            "→ off\n    → 2,805 tokens/s (1.28 × this setup's), 68.5 GB of 85.0 GB usable\n") in out
    assert "(full → lora): saves 48.8 GB (45.4 GiB) → 19.2 GB, fits · ~42 % faster\n" in out


def test_the_fastest_fit_may_change_the_method_or_the_gpus_when_allowed(capsys):
    doc = run_json(capsys, "--method", "full", "--batch", "4", "--device", "rtx-4090", "--advice")
    assert doc["advice"]["fastest_fit"] is None
    assert doc["advice"]["fastest_fit_none"].startswith("No setup fits this device by changing the batch")
    doc = run_json(capsys, "--method", "full", "--batch", "4", "--device", "rtx-4090", "--advice",
                   "--allow-method-change")
    assert doc["advice"]["fastest_fit"]["setup"]["method"] == "qlora"
    doc = run_json(capsys, "--method", "full", "--batch", "4", "--device", "rtx-4090", "--advice",
                   "--allow-more-gpus", "8")
    fit = doc["advice"]["fastest_fit"]
    assert (fit["setup"]["gpus"], fit["setup"]["sharding"], fit["effective_batch"]) == (4, "zero3", 4)
    assert fit["allowed"] == {"method": False, "max_gpus": 8}


def test_a_custom_device_has_no_time_unless_its_figures_are_given(capsys):
    doc = run_json(capsys, "--device", "custom", "--capacity", "24", "--advice")
    assert "time" not in doc
    assert ("time unknown: Custom 24 GB (GPU) has no compute figures (a custom device): give its TFLOPS and memory "
            "bandwidth, or the time stays unknown (give --device-tflops and --device-bandwidth)") in doc["notes"]
    assert all("time_factor" not in r for r in doc["advice"]["remedies"])
    assert doc["advice"]["fastest_fit"] is None and "no compute figures" in doc["advice"]["time_unknown"]
    doc = run_json(capsys, "--device", "custom", "--capacity", "24", "--device-tflops", "165.2",
                   "--device-bandwidth", "1008")
    assert doc["time"]["figures"] == "given"
    assert doc["time"]["tokens_per_second"] == pytest.approx(1799, abs=5)  # a 4090's figures, typed (PCIe 4.0 assumed)


def test_a_precision_the_card_lacks_is_a_note(capsys):
    doc = run_json(capsys, "--method", "qlora", "--device", "t4")
    assert "time" not in doc and doc["device"]["fits"]  # the memory answer stands
    assert ("time unknown: NVIDIA Tesla T4 (15,360 MiB) has no published bf16 throughput (bf16 precision); choose "
            "another precision") in doc["notes"]
    assert run_json(capsys, "--method", "qlora", "--precision", "fp16", "--device", "t4")["time"]["dtype"] == "fp16"


@pytest.mark.parametrize(("args", "message"), [
    (["--device", "rtx-4090", "--tokens", "0"], "--tokens must be a whole number above 0, got '0'"),
    (["--device", "rtx-4090", "--tokens", "-5"], "--tokens must be a whole number above 0, got '-5'"),
    (["--device", "rtx-4090", "--tokens", "nan"], "--tokens must be a whole number above 0, got 'nan'"),
    (["--device", "rtx-4090", "--tokens", "inf"], "--tokens must be a whole number above 0, got 'inf'"),
    (["--device", "rtx-4090", "--tokens", "2.5"], "--tokens must be a whole number above 0, got '2.5'"),
    (["--device", "rtx-4090", "--tokens", "1e16"], "--tokens must be at most 1e+15, got 1e+16"),
    (["--device", "rtx-4090", "--examples", "0"], "--examples must be a whole number above 0, got '0'"),
    (["--device", "rtx-4090", "--examples", "100", "--typical-len", "-3"],
     "--typical-len must be a whole number above 0, got '-3'"),
    (["--device", "rtx-4090", "--tokens", "1000", "--epochs", "0"], "--epochs must be a number above 0, got '0'"),
    (["--device", "rtx-4090", "--tokens", "1000", "--epochs", "nan"], "--epochs must be a number above 0, got 'nan'"),
    (["--device", "rtx-4090", "--tokens", "1000", "--price-per-gpu-hour", "0"],
     "--price-per-gpu-hour must be a number above 0, got '0'"),
    (["--device", "rtx-4090", "--tokens", "1000", "--price-per-gpu-hour", "-1.5"],
     "--price-per-gpu-hour must be a number above 0, got '-1.5'"),
    (["--device", "rtx-4090", "--tokens", "1000", "--price-per-gpu-hour", "inf"],
     "--price-per-gpu-hour must be a number above 0, got 'inf'"),
    (["--device", "rtx-4090", "--tokens", "abc"], "argument --tokens: invalid float value: 'abc'"),
    (["--tokens", "1000"], "--tokens and --examples need --device: the run time is priced on a device's compute "
                           "figures (see --list-devices)"),
    (["--device", "rtx-4090", "--price-per-gpu-hour", "2"],
     "--price-per-gpu-hour needs a dataset size (--tokens or --examples): the cost is the run's GPU-hours × the "
     "price"),
    (["--device", "rtx-4090", "--tokens", "10", "--examples", "10"],
     "give the dataset size as --tokens or as --examples, not both"),
    (["--device", "rtx-4090", "--typical-len", "500"],
     "--typical-len is the length of a typical example: it needs --examples"),
    (["--device", "rtx-4090", "--epochs", "2"], "--epochs needs a dataset size: --tokens or --examples"),
    (["--device", "custom", "--capacity", "24", "--tokens", "1000000"],
     "--tokens asks for the run time, which is unknown here: Custom 24 GB (GPU) has no compute figures (a custom "
     "device): give its TFLOPS and memory bandwidth, or the time stays unknown (give --device-tflops and "
     "--device-bandwidth)"),
    (["--method", "qlora", "--device", "t4", "--examples", "1000"],
     "--examples asks for the run time, which is unknown here: NVIDIA Tesla T4 (15,360 MiB) has no published bf16 "
     "throughput (bf16 precision); choose another precision"),
    (["--device", "custom", "--capacity", "24", "--device-tflops", "100"],
     "--device-tflops and --device-bandwidth go together: a custom device's dense 16-bit TFLOPS and its memory "
     "bandwidth in GB/s"),
    (["--device", "rtx-4090", "--device-tflops", "100", "--device-bandwidth", "500"],
     "--device-tflops and --device-bandwidth describe a custom device; rtx-4090 has its own figures (use them with "
     "--device custom --capacity GB)"),
    (["--device", "custom", "--capacity", "24", "--device-tflops", "nan", "--device-bandwidth", "500"],
     "--device-tflops must be a number above 0, got 'nan'"),
    (["--device", "custom", "--capacity", "24", "--device-tflops", "100", "--device-bandwidth", "0"],
     "--device-bandwidth must be a number above 0, got '0'"),
    (["--device", "custom", "--capacity", "24", "--device-tflops", "1e9", "--device-bandwidth", "500"],
     "--device-tflops must be at most 100000, got 1e+09"),
    (["--model", "llama-3.1-70b", "--method", "qlora", "--device", "rtx-3060", "--tokens", "1e14"],
     "this run would take 96,804.8 years on 1 GPU(s): check the dataset size and the device"),
    (["--device", "rtx-4090", "--allow-method-change"],
     "--allow-method-change and --allow-more-gpus set what the fastest fit may change: add --advice"),
    (["--device", "rtx-4090", "--advice", "--allow-more-gpus", "0"], "--allow-more-gpus must be between 1 and 4,096, "
                                                                    "got 0"),
])
def test_bad_time_input_is_one_line_and_exit_2(capsys, args, message):
    rc, out, err = run_cli(capsys, *BASE, *args)
    assert rc == 2 and out == ""
    assert err == f"estimator: error: {message}\n"
