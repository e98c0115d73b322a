"""The CLI's installed versions (issue 28): --installed PKG==VERSION (repeatable) and --installed-from FILE (pip freeze /
pip list, '-' = stdin); JSON setup.versions; every bad input one line and exit 2; Unsloth's published tables at the
release they ran (`--installed unsloth==2024.12.4`)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from tests.test_cli import run_cli

FREEZE = Path(__file__).parent / "data" / "freeze" / "trl_0.16_cuda.txt"


def _json(capsys, *args):
    rc, out, err = run_cli(capsys, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def _error(capsys, *args) -> str:
    rc, out, err = run_cli(capsys, *args)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0].removeprefix("estimator: error: ")


def test_installed_pins_move_the_estimate_and_the_json_echoes_them(capsys):
    default = _json(capsys, "--model", "llama-3.1-8b")
    assert "versions" not in default["setup"]  # nothing given: the newest releases, the JSON as before
    old = _json(capsys, "--model", "llama-3.1-8b", "--installed", "trl==0.16.1", "--installed", "Transformers==4.51.3")
    v = old["setup"]["versions"]
    assert v["stack"] == "trl"
    assert v["packages"]["trl"] == {"version": "0.16.1", "from": "pin"}
    assert v["packages"]["transformers"] == {"version": "4.51.3", "from": "pin"}
    assert v["packages"]["peft"] == {"version": "0.21.2", "from": "default"}
    assert {"trl_gradient_checkpointing_default", "trl_sft_chunked_nll_default", "trl_fused_logprob_head",
            "transformers_fused_adamw_default"} <= set(v["older_behaviour"])
    assert (old["setup"]["grad_ckpt"], old["setup"]["loss"], old["setup"]["optimizer"]) == (False, "standard",
                                                                                              "adamw_foreach")
    assert round(old["total_bytes"] / 1e9, 1) == 36.3 and round(default["total_bytes"] / 1e9, 1) == 19.2
    assert old["notes"][-3] == ("Priced for the releases given: trl 0.16.1, transformers 4.51.3; this stack's other "
                                "packages at their newest modelled release.")
    assert old["notes"][-2].endswith("From trl 0.22.0 on, this estimate would be 21.8 GB.")


def test_installed_from_a_freeze_file_and_stdin(capsys, monkeypatch):
    doc = _json(capsys, "--model", "llama-3.1-8b", "--installed-from", str(FREEZE), "--installed", "trl==1.16.0")
    packages = doc["setup"]["versions"]["packages"]
    assert packages["trl"] == {"version": "1.16.0", "from": "pin"}  # a pin wins over the list
    assert packages["torch"] == {"version": "2.6.0+cu124", "from": "installed"}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FREEZE.read_bytes())))
    piped = _json(capsys, "--model", "llama-3.1-8b", "--installed-from", "-")
    assert piped["setup"]["versions"]["packages"]["trl"] == {"version": "0.16.1", "from": "installed"}


def test_a_powershell_freeze_in_utf16_reads(capsys, tmp_path):
    path = tmp_path / "freeze.txt"
    path.write_bytes("trl==0.21.0\r\n".encode("utf-16"))  # `pip freeze > freeze.txt` in Windows PowerShell
    doc = _json(capsys, "--model", "llama-3.1-8b", "--installed-from", str(path))
    assert doc["setup"]["versions"]["packages"]["trl"]["version"] == "0.21.0" and doc["setup"]["grad_ckpt"] is False


def test_text_output_names_the_releases(capsys):
    rc, out, _ = run_cli(capsys, "--model", "mixtral-8x7b", "--method", "qlora", "--installed", "transformers==4.57.6")
    assert rc == 0
    assert "  total        34.5 GB" in out
    assert ("Before transformers 5.0.0" not in out) and ("From transformers 5.0.0 on, this estimate would be 103.5 GB."
                                                        in out)


def test_published_unsloth_tables_at_the_release_they_ran(capsys):
    """`--installed unsloth==2024.12.4`: the longest length that fits (--advice) is what validation/unsloth.py's
    published-tables check gives (python -m validation, 'modelled' column), card by card, each card's usable memory
    the total CUDA gives PyTorch (on the RTX 4060's 7.75 GiB no length fits that code's fixed memory)."""
    modelled = {"rtx-4060": None, "rtx-4070": 23_464, "rtx-4080": 42_130, "rtx-4090": 81_920, "a100-40gb": 155_648,
                "rtx-a6000": 196_608, "a100-80gb": 346_404}
    for device, tokens in modelled.items():
        doc = _json(capsys, "--model", "llama-3.1-8b", "--stack", "unsloth", "--method", "qlora", "--lora-rank", "32",
                    "--device", device, "--installed", "unsloth==2024.12.4", "--advice")
        assert doc["advice"]["max_seq_len"] == tokens, device
        assert doc["setup"]["versions"]["packages"]["transformers"] == {"version": "4.46.3", "from": "framework"}
    for device, tokens in (("rtx-a6000", 13_344), ("a100-80gb", 88_941)):
        doc = _json(capsys, "--model", "llama-3.1-70b", "--stack", "unsloth", "--method", "qlora", "--lora-rank", "32",
                    "--device", device, "--installed", "unsloth==2024.12.4", "--advice")
        assert doc["advice"]["max_seq_len"] == tokens, device


# ---- bad input: one line, exit 2 -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (("--installed", "transformers>=4.57"), "--installed takes PKG==VERSION, got 'transformers>=4.57'"),
    (("--installed", "peft==zero.21"), "peft zero.21 (--installed peft==zero.21) is not a PEP 440 version"),
    (("--installed", "trl==1.15.0", "--installed", "TRL==1.16.0"),
     "trl is given twice with different versions: 1.15.0 (--installed trl==1.15.0) and 1.16.0 (--installed "
     "TRL==1.16.0)"),
    (("--installed", "transformers==5.25.0"),
     "transformers 5.25.0 (--installed transformers==5.25.0) is outside the releases the TRL stack is modelled for: "
     "4.46.0 to 5.24.0"),
    (("--stack", "unsloth", "--installed", "unsloth==2024.11.1"),
     "unsloth 2024.11.1 (--installed unsloth==2024.11.1) is outside the releases the Unsloth stack is modelled for: "
     "2024.12.1 to 2026.10.9"),
    (("--stack", "mlx", "--installed", "mlx==0.20.1"),
     "mlx 0.20.1 (--installed mlx==0.20.1) is outside the releases the MLX-LM stack is modelled for: 0.21.0 to 0.32.4"),
])
def test_bad_pins(capsys, args, message):
    assert _error(capsys, "--model", "llama-3.1-8b", *args) == message


@pytest.mark.parametrize(("text", "message"), [
    ("trl==0.16.1\nnumpy 2.2 is what I have\n",
     "line 2 of the package list is not a pip freeze or pip list line: numpy 2.2 is what I have"),
    ("transformers===4.57.1-custom-build\n", "transformers 4.57.1-custom-build (line 1) is not a PEP 440 version"),
    ("peft==0.15.1\npeft==0.14.0\n",
     "peft is given twice with different versions: 0.15.1 (line 1) and 0.14.0 (line 2)"),
    ("transformers==4.45.2\n",
     "transformers 4.45.2 (line 1) is outside the releases the TRL stack is modelled for: 4.46.0 to 5.24.0"),
    ("trl @ git+https://github.com/huggingface/trl@main\n",
     "trl (line 1) is installed without a version number (trl @ git+https://github.com/huggingface/trl@main); give it "
     "as trl==VERSION"),
    ('[{"name": "trl"}]', "entry 1 of the JSON package list has no name and version"),
])
def test_bad_package_lists_name_the_file_and_line(capsys, tmp_path, text, message):
    path = tmp_path / "freeze.txt"
    path.write_text(text)
    assert _error(capsys, "--model", "llama-3.1-8b", "--installed-from", str(path)) == f"--installed-from {path}: {message}"


def test_a_stack_the_list_implies_but_no_stack_models(capsys, tmp_path):
    path = tmp_path / "xtuner.txt"
    path.write_text("xtuner==0.2.0\ntransformers==5.2.0\npeft==0.17.1\ntorch==2.8.0\n")
    assert _error(capsys, "--model", "llama-3.1-8b", "--installed-from", str(path)) == (
        "the package list names XTuner (xtuner 0.2.0), a stack this estimate does not model, and not trl (TRL): "
        "choose the stack you run")
    doc = _json(capsys, "--model", "llama-3.1-8b", "--stack", "trainer", "--installed-from", str(path))
    assert doc["setup"]["versions"]["unmodelled_frameworks"] == ["XTuner"]  # the stack chosen: recorded


def test_unreadable_and_binary_files(capsys, tmp_path):
    missing = tmp_path / "nope.txt"
    assert _error(capsys, "--installed-from", str(missing)) == (
        f"cannot read --installed-from {missing}: No such file or directory")
    binary = tmp_path / "freeze.bin"
    binary.write_bytes(b"\x80\x81\xfe\x00trl==1.0")
    assert _error(capsys, "--installed-from", str(binary)) == (
        f"--installed-from {binary}: not a text file (pip freeze writes UTF-8 text)")


def test_nothing_else_of_the_setup_is_lost(capsys):
    # a bad version stops the run before pricing anything; with a good one every other flag is kept
    doc = _json(capsys, "--model", "qwen2.5-7b", "--method", "qlora", "--batch", "4", "--seq-len", "4096",
                "--lora-rank", "64", "--installed", "trl==0.25.1")
    s = doc["setup"]
    assert (s["method"], s["batch"], s["seq_len"], s["lora_rank"], s["qlora_prep"]) == ("qlora", 4, 4096, 64, "norms")
