"""`python -m estimator`: stable flags, JSON schema, exit 2 with one clear line on bad flags."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run_json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_schema_and_sum(capsys):
    doc = run_json(capsys, "--model", "qwen2.5-7b", "--method", "lora", "--batch", "4", "--seq-len", "2048",
                   "--device", "rtx-4090")
    assert doc["params_total"] == 7_615_616_512
    assert set(doc["components_bytes"]) == {"weights", "gradients", "optimizer", "activations", "overhead"}
    assert sum(doc["components_bytes"].values()) == doc["total_bytes"]
    assert doc["low_bytes"] < doc["total_bytes"] < doc["high_bytes"]
    assert doc["peak_phase"]
    device = doc["device"]
    assert device["capacity_bytes"] == 24_564 * 2**20  # nvidia-smi
    assert device["usable_bytes"] == 24_078 * 2**20  # CUDA's total, the 23.514 GiB torch reports
    assert "23.514 GB" in device["usable_source"]
    assert device["fits"] is (doc["total_bytes"] <= 24_078 * 2**20)


def test_seed_rule_mode(capsys):
    assert run_json(capsys, "--size", "7", "--method", "lora", "--rule", "seed")["total_bytes"] == 17_000_000_000
    assert run_json(capsys, "--size", "14", "--method", "full", "--rule", "seed")["total_bytes"] == 172_000_000_000
    master = run_json(capsys, "--size", "7", "--method", "full", "--rule", "seed", "--precision", "mixed")
    assert master["total_bytes"] == 116_000_000_000


def test_config_path(capsys, tmp_path):
    cfg = json.loads((ROOT / "estimator/models/presets/llama-3.1-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert run_json(capsys, "--config", str(path))["params_total"] == 8_030_261_248


def test_lists(capsys):
    presets = run_json(capsys, "--list-presets")
    assert {"id", "name", "family", "params_total"} <= set(presets[0])
    devices = run_json(capsys, "--list-devices")
    laptop = next(d for d in devices if d["id"] == "laptop-36gb")
    assert laptop == {"id": "laptop-36gb", "name": laptop["name"], "kind": "unified",
                      "capacity_bytes": 36 * 2**30, "usable_bytes": 27 * 2**30,
                      "usable_source": laptop["usable_source"]}
    assert "three quarters" in laptop["usable_source"]  # no published working set for 36 GB
    mac32 = next(d for d in devices if d["id"] == "mac-32gb")
    assert "21845.34" in mac32["usable_source"] and "ollama/ollama/issues/434" in mac32["usable_source"]


def test_advice(capsys):
    doc = run_json(capsys, "--model", "llama-3.1-8b", "--method", "lora", "--batch", "8", "--seq-len", "4096",
                   "--device", "rtx-4090", "--advice")
    assert not doc["device"]["fits"] and doc["device"]["band"] == "too big"
    # the page's list (estimator.advise): the three changes that fit, cheapest in time first (QLoRA about as fast
    # at 8 × 4,096 tokens; ZeRO-3 over 9 GPUs, more hardware; a smaller model last), then the rest in the seed's
    # order (its number in `order`), an 8-bit optimizer and optimizer offload beside checkpointing
    assert [r["key"] for r in doc["advice"]["remedies"]] == ["qlora", "sharding", "smaller_model", "shorter_length",
                                                            "smaller_batch", "checkpointing", "optimizer_8bit",
                                                            "offload_optimizer"]
    assert [r["order"] for r in doc["advice"]["remedies"]] == [3, 8, 5, 1, 2, 4, 4, 4]
    factors = {r["key"]: r["time_factor"] for r in doc["advice"]["remedies"]}
    assert factors["checkpointing"] is None  # already on: nothing to price
    assert factors["qlora"] == pytest.approx(1.004, abs=0.002) and factors["smaller_model"] < 0.5
    sharding = doc["advice"]["remedies"][1]
    assert sharding["gpus"] == 9 and sharding["time_factor"] * 9 == pytest.approx(sharding["gpu_hours_factor"], abs=1e-3)
    halved = doc["advice"]["remedies"][4]  # the effective batch kept: 8 × 1 = 4 × 2 examples per optimizer step
    assert halved["change"] == "batch 8 → 4, gradient accumulation 1 → 2" and halved["applicable"]
    assert doc["advice"]["max_batch"] is None or doc["advice"]["max_batch"] < 8
    assert doc["advice"]["smallest_device"] == "a100-40gb"


@pytest.mark.parametrize("args", [
    ["--batch", "0"], ["--batch", "x"], ["--method", "dpo"], ["--seq-len", "-1"], ["--model", "gpt-9"],
    ["--size", "nan"], ["--size", "1e9"], ["--lora-targets", "query"], ["--device", "tpu"],
    ["--config", "/nonexistent/config.json"], ["--gpus", "0"], ["--device", "custom"], ["--lora-targets", ","],
    ["--compile"], ["--stack", "torchtune", "--optimizer-in-bwd"], ["--grad-accum", "0"],
])
def test_bad_flags_exit_2_with_one_line(args):
    proc = subprocess.run([sys.executable, "-m", "estimator", *args, "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("estimator: error:")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_torchtune_switches_and_accumulation(capsys):
    base = ["--model", "llama-3.2-3b", "--stack", "torchtune", "--method", "full", "--batch", "2", "--seq-len", "4096"]
    plain = run_json(capsys, *base)
    fast = run_json(capsys, *base, "--compile", "--optimizer-in-bwd")
    assert fast["setup"]["compile"] is True and fast["setup"]["optimizer_in_bwd"] is True
    assert plain["setup"]["compile"] is False
    assert fast["total_bytes"] < plain["total_bytes"] - 4e9  # 16-bit logits kept, no gradient set
    accum = run_json(capsys, *base, "--grad-accum", "4")
    assert accum["setup"]["grad_accum"] == 4 and accum["total_bytes"] > plain["total_bytes"]


def run_cli(capsys, *args):
    try:
        rc = main(list(args))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_dpo_advice_uses_the_calculator_s_door(capsys):
    from estimator import TrainerSetup, advise, get_device, load_preset
    from estimator.job.stack import resolve_setup

    doc = run_json(capsys, "--model", "qwen2.5-0.5b", "--trainer", "dpo", "--device", "h200", "--seq-len", "8",
                   "--advice")  # was a traceback: the CLI called max_batch without DPO's limit
    want = advise(load_preset("qwen2.5-0.5b"), resolve_setup("trl", seq_len=8), get_device("h200"),
                  TrainerSetup("dpo"))
    assert doc["advice"]["max_batch"] == want.max_batch and doc["advice"]["max_seq_len"] == want.max_length
    assert doc["advice"]["smallest_device"] == want.smallest_device.id
    assert [r["key"] for r in doc["advice"]["remedies"]] == [r.key for r in want.remedies]


def test_text_prints_band_notes_and_advice(capsys):
    rc, out, _ = run_cli(capsys, "--model", "llama-3.1-8b", "--batch", "8", "--seq-len", "4096", "--device",
                         "rtx-4090", "--advice")
    assert rc == 0
    assert "  band: too big" in out and "  what to change (" in out
    assert ("    1. Switch to QLoRA (lora → qlora (4-bit base)): saves 13.9 GB (13.0 GiB) → 24.9 GB, fits · about as "
            "fast\n") in out
    assert ("    4. Lower the max length (max length 4,096 → 2,048): saves 10.4 GB (9.7 GiB) → 28.3 GB, still too big · "
            "~4 % faster\n") in out
    assert "Shard over more GPUs" in out and "  largest batch that fits (at max length 4,096): 2" in out
    assert ("  usable: 25.2 GB (23.5 GiB) of 25.8 GB (24.0 GiB), the total CUDA gives PyTorch (torch.cuda's "
            "total_memory); the driver keeps the rest\n") in out
    assert "  smallest catalog device that fits: NVIDIA A100 40GB" in out
    rc, out, _ = run_cli(capsys, "--model", "llama-4-scout", "--device", "h200")
    assert "  note: Llama 4: PEFT's all-linear also matches the router" in out


def test_rule_seed_advice_is_the_rule_s(capsys):
    rc, out, _ = run_cli(capsys, "--model", "llama-3.1-8b", "--advice", "--rule", "seed", "--device", "rtx-4090")
    assert rc == 0 and "priced with the rule of thumb" in out
    assert "Lower the max length (the rule of thumb does not count it)" in out


def test_grpo_takes_trl_s_default_batch(capsys):
    doc = run_json(capsys, "--model", "qwen2.5-0.5b", "--trainer", "grpo")
    assert doc["setup"]["batch"] == 8
    assert run_json(capsys, "--model", "qwen2.5-0.5b")["setup"]["batch"] == 1


def test_sharding_over_one_gpu_is_a_note(capsys):
    doc = run_json(capsys, "--model", "llama-3.1-8b", "--sharding", "zero3")
    assert any(n.startswith("--sharding zero3 over 1 GPU changes nothing") for n in doc["notes"])


@pytest.mark.parametrize(("args", "message"), [
    (["--advice"], "--advice needs --device"),
    (["--device", "24gb"], "--device '24gb' matches several devices: mac-24gb, rtx-3090, rtx-4090, a10g, a10, l4; "
                           "give one of these ids"),
    (["--device", "rtx-4099"], "unknown device 'rtx-4099'; did you mean rtx-4090"),
    (["--model", "llama-3-8b"], "unknown model preset 'llama-3-8b'; did you mean llama-3.1-8b"),
    (["--stack", "trll"], "invalid choice: 'trll'; did you mean 'trl'?"),
    (["--device", "rtx-4090", "--capacity", "20"], "--capacity describes a custom device"),
    (["--unified"], "--unified describes a custom device"),
])
def test_unusable_flags_are_one_line_errors(capsys, args, message):
    rc, out, err = run_cli(capsys, *args)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and message in err


def test_help_shows_defaults_and_examples(capsys):
    rc, out, _ = run_cli(capsys, "--help")
    assert rc == 0
    flat = " ".join(out.split())  # argparse wraps the help text
    assert "(default: lora)" in flat and "(default: mlx for SFT on a unified-memory Apple device, trl otherwise)" in flat
    assert "(default: the stack's: 16, mlx 8)" in flat
    assert out.count("\n  python -m estimator ") == 4


def test_why_this_number_in_the_json(capsys):
    """Issue 29: the rule reconciled in steps that add up exactly, the assumptions, the closest measured runs, and on a
    device the verdict's condition and the longest length per example that fits (the advice's own answer)."""
    doc = run_json(capsys, "--size", "1.5", "--device", "laptop-36gb", "--advice")
    why = doc["why"]
    assert why["rule_bytes"] == 6_000_000_000 and why["total_bytes"] == doc["total_bytes"]
    assert why["rule_bytes"] + sum(s["bytes"] for s in why["steps"]) == doc["total_bytes"]
    assert {s["key"] for s in why["steps"]} >= {"activations", "attention", "loss"}
    device = doc["device"]
    assert device["condition"]["batch"] == 4 and device["condition"]["padded_to"] == "max_length"
    assert device["longest_len_that_fits"] == doc["advice"]["max_seq_len"] < 2048
    assert device["longest_len"]["status"] == "fits_up_to"
    assert 3 <= len(doc["assumptions"]) <= 5 and len(doc["measured"]) == 3
    assert all(a["delta_bytes"] for a in doc["assumptions"])
    no_device = run_json(capsys, "--size", "7")
    assert "device" not in no_device and no_device["why"]["steps"]
    rule = run_json(capsys, "--size", "7", "--rule", "seed", "--device", "laptop-36gb")
    assert rule["why"]["steps"] == [] and rule["why"]["rule_bytes"] == rule["total_bytes"] == 17_000_000_000


def test_why_this_number_in_the_text(capsys):
    assert main(["--size", "1.5", "--device", "laptop-36gb"]) == 0
    out = capsys.readouterr().out
    assert "  holds at: batch 4 × 2,048 tokens per example, every example padded to the max length" in out
    assert "  longest that fits: fits up to 1,579 tokens per example at batch 4" in out
    assert "  why not the rule of thumb:" in out and "= the rule + the steps" in out
    assert "  assumptions that move it most" in out and "batch 4 · MLX-LM default → batch 2: −" in out
    assert "  measured runs closest to this setup:" in out
