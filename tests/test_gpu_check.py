"""bench/gpu_check.py without a GPU: the no-GPU exit installs nothing, and the pure helpers (cases → estimator
flags, rows, summary) give the expected text. The real measurement needs a CUDA GPU and is not run here."""

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_check.py"
GIB = 1024**3


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is created
    spec.loader.exec_module(mod)
    return mod


gc = _load()


def _fake_exe(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _clean_env(path: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    env["PATH"] = path
    env.update(extra)
    return env


@pytest.fixture
def copy_root(tmp_path):
    """A repo root holding only bench/gpu_check.py: whatever the script would install would land in it."""
    (tmp_path / "bench").mkdir()
    shutil.copy(SCRIPT, tmp_path / "bench" / "gpu_check.py")
    return tmp_path


def _run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "bench" / "gpu_check.py"), *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------------------------------
# The no-GPU path
# --------------------------------------------------------------------------------------------------
def test_no_nvidia_smi_prints_one_line_and_installs_nothing(copy_root, tmp_path):
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    proc = _run(copy_root, _clean_env(str(empty_bin)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "gpu_check: no CUDA GPU found; nothing to measure\n"
    assert proc.stderr == ""
    assert not (copy_root / ".venv-gpu").exists()
    assert sorted(p.name for p in copy_root.iterdir()) == ["bench", "empty-bin"]


def test_nvidia_smi_listing_no_gpu(copy_root, tmp_path):
    fake_bin = tmp_path / "fake-bin"
    _fake_exe(fake_bin, "nvidia-smi", 'echo "No devices were found"; exit 6')
    proc = _run(copy_root, _clean_env(str(fake_bin)))
    assert (proc.returncode, proc.stdout) == (0, "gpu_check: no CUDA GPU found; nothing to measure\n")
    assert not (copy_root / ".venv-gpu").exists()


def test_force_no_gpu_env_wins_over_a_listed_gpu(copy_root, tmp_path):
    fake_bin = tmp_path / "fake-bin"
    _fake_exe(fake_bin, "nvidia-smi", 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"')
    proc = _run(copy_root, _clean_env(str(fake_bin), GPU_CHECK_FORCE_NO_GPU="1"), "--json", "out.json")
    assert (proc.returncode, proc.stdout) == (0, "gpu_check: no CUDA GPU found; nothing to measure\n")
    assert not (copy_root / ".venv-gpu").exists()
    assert not (copy_root / "out.json").exists()


def test_in_repo_from_the_root(tmp_path):
    """`python bench/gpu_check.py` as documented, in the repo itself."""
    had_venv = (ROOT / ".venv-gpu").exists()
    proc = subprocess.run([sys.executable, "bench/gpu_check.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=_clean_env(str(tmp_path), GPU_CHECK_FORCE_NO_GPU="1"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "gpu_check: no CUDA GPU found; nothing to measure\n", "")
    assert (ROOT / ".venv-gpu").exists() == had_venv


def test_gpu_present_reads_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.delenv("GPU_CHECK_FORCE_NO_GPU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert gc.gpu_present() is False
    fake_bin = tmp_path / "fake-bin"
    _fake_exe(fake_bin, "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1234)"')
    monkeypatch.setenv("PATH", str(fake_bin))
    assert gc.gpu_present() is True
    monkeypatch.setenv("GPU_CHECK_FORCE_NO_GPU", "1")
    assert gc.gpu_present() is False
    monkeypatch.setenv("GPU_CHECK_FORCE_NO_GPU", "0")
    assert gc.gpu_present() is True


def test_parse_gpu_list():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n  MIG 1g.10gb Device 0: (UUID: MIG-bbbb)\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc)\n")
    assert gc.parse_gpu_list(text) == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)",
                                       "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc)"]
    assert gc.parse_gpu_list("No devices were found\n") == []
    assert gc.parse_gpu_list("") == []


def test_list_needs_no_gpu(copy_root, tmp_path):
    proc = _run(copy_root, _clean_env(str(tmp_path)), "--list")
    assert proc.returncode == 0, proc.stderr
    ids = [line.split()[0] for line in proc.stdout.splitlines() if not line.startswith(" ")]
    assert ids == ["lora-1b", "lora-1b-ckpt", "full-0.5b", "full-0.5b-ckpt", "qlora-1b-ckpt", "trl-lora-1b-ckpt",
                   "trl-full-0.5b-ckpt", "lora-1b-ckpt-offload"]
    assert "python -m estimator --json --config CFG.json --method qlora" in proc.stdout
    assert not (copy_root / ".venv-gpu").exists()


def test_unknown_case_is_a_usage_error(copy_root, tmp_path):
    proc = _run(copy_root, _clean_env(str(tmp_path)), "--cases", "lora-1b,nope")
    assert proc.returncode == 2
    assert "unknown case(s) nope" in proc.stderr
    with pytest.raises(ValueError, match="unknown case"):
        gc.select_cases("nope")
    assert [c.id for c in gc.select_cases(" full-0.5b , lora-1b ")] == ["full-0.5b", "lora-1b"]
    assert gc.select_cases(None) == list(gc.CASES)


# --------------------------------------------------------------------------------------------------
# Cases → estimator flags
# --------------------------------------------------------------------------------------------------
LORA = ["--lora-rank", "16", "--lora-targets", "all-linear"]
EXPECTED_FLAGS = {
    "lora-1b": ["--method", "lora", "--batch", "4", "--seq-len", "1024", "--no-grad-ckpt", "--loss", "standard",
                "--stack", "plain", "--optimizer", "adamw", *LORA],
    "lora-1b-ckpt": ["--method", "lora", "--batch", "4", "--seq-len", "1024", "--grad-ckpt", "--loss", "standard",
                     "--stack", "plain", "--optimizer", "adamw", *LORA],
    "full-0.5b": ["--method", "full", "--batch", "2", "--seq-len", "1024", "--no-grad-ckpt", "--loss", "standard",
                  "--stack", "plain", "--optimizer", "adamw"],
    "full-0.5b-ckpt": ["--method", "full", "--batch", "2", "--seq-len", "1024", "--grad-ckpt", "--loss", "standard",
                       "--stack", "plain", "--optimizer", "adamw"],
    "qlora-1b-ckpt": ["--method", "qlora", "--batch", "4", "--seq-len", "1024", "--grad-ckpt", "--loss", "standard",
                      "--stack", "plain", "--optimizer", "adamw", *LORA],
    "trl-lora-1b-ckpt": ["--method", "lora", "--batch", "4", "--seq-len", "1024", "--grad-ckpt", "--loss", "chunked",
                         "--stack", "trl", "--optimizer", "adamw", *LORA],
    "trl-full-0.5b-ckpt": ["--method", "full", "--batch", "2", "--seq-len", "1024", "--grad-ckpt", "--loss",
                           "chunked", "--stack", "trl", "--optimizer", "adamw"],
    "lora-1b-ckpt-offload": ["--method", "lora", "--batch", "4", "--seq-len", "1024", "--grad-ckpt", "--loss",
                             "standard", "--stack", "plain", "--optimizer", "adamw", *LORA, "--offload-activations"],
}


def _flags_without_precision(args: list[str]) -> list[str]:
    assert args[:3] == ["--json", "--config", "/tmp/m.json"]
    assert args[5:7] == ["--precision", "bf16"]
    return args[3:5] + args[7:]


@pytest.mark.parametrize("case_id", list(EXPECTED_FLAGS))
def test_estimator_args_per_case(case_id):
    case = gc.CASES_BY_ID[case_id]
    assert _flags_without_precision(gc.estimator_args(case, "/tmp/m.json")) == EXPECTED_FLAGS[case_id]


def test_every_case_has_expected_flags_and_shapes():
    assert set(gc.CASES_BY_ID) == set(EXPECTED_FLAGS)
    smoke = gc.estimator_args(gc.CASES_BY_ID["full-0.5b"], Path("/tmp/m.json"), smoke=True)
    assert smoke[7:11] == ["--batch", "2", "--seq-len", "64"]
    assert gc.case_shape(gc.CASES_BY_ID["lora-1b"]) == (4, 1024)
    assert gc.CASES_BY_ID["trl-lora-1b-ckpt"].loss == "chunked"
    assert gc.CASES_BY_ID["qlora-1b-ckpt"].loss == "standard"


def test_configs_are_the_real_widths():
    assert gc.case_config(gc.CASES_BY_ID["full-0.5b"]) == gc.QWEN_05B
    q, ll = gc.QWEN_05B, gc.LLAMA_1B
    assert (q["model_type"], q["hidden_size"], q["num_hidden_layers"], q["num_attention_heads"],
            q["num_key_value_heads"], q["intermediate_size"], q["vocab_size"], q["tie_word_embeddings"],
            q["rope_theta"], q["rms_norm_eps"]) == ("qwen2", 896, 24, 14, 2, 4864, 151936, True, 1e6, 1e-6)
    assert (ll["model_type"], ll["hidden_size"], ll["num_hidden_layers"], ll["num_attention_heads"],
            ll["num_key_value_heads"], ll["head_dim"], ll["intermediate_size"], ll["vocab_size"],
            ll["tie_word_embeddings"]) == ("llama", 2048, 16, 32, 8, 64, 8192, 128256, True)
    tiny = gc.case_config(gc.CASES_BY_ID["lora-1b"], smoke=True)
    assert (tiny["model_type"], tiny["hidden_size"], tiny["vocab_size"]) == ("llama", 64, 512)
    assert gc.LLAMA_1B["hidden_size"] == 2048  # the smoke copy did not touch the original


# --------------------------------------------------------------------------------------------------
# The estimator subprocess
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case_id", ["full-0.5b", "trl-lora-1b-ckpt", "qlora-1b-ckpt", "lora-1b-ckpt-offload"])
def test_run_estimator_with_the_repo_cli(case_id):
    case = gc.CASES_BY_ID[case_id]
    doc, err = gc.run_estimator(case, gc.case_config(case), python=sys.executable)
    if doc is None:  # a flag the CLI does not know yet: one argparse line, reported in the row
        assert err.startswith("estimator: error:"), err
        return
    assert err is None
    assert doc["total_bytes"] == sum(doc["components_bytes"].values())
    assert 0 < gc.tensor_bytes(doc) < doc["total_bytes"]
    assert doc["low_bytes"] < doc["total_bytes"] < doc["high_bytes"]
    assert gc.setup_mismatches(case, doc["setup"]) == []
    want_params = {"qwen2.5-0.5b": 494_032_768, "llama-3.2-1b": 1_235_814_400}[case.model]
    assert doc["params_total"] == want_params


def test_run_estimator_reports_a_rejected_flag(tmp_path):
    fake = _fake_exe(tmp_path, "python", 'echo "usage: python -m estimator ..." >&2\n'
                                         'echo "estimator: error: unrecognized arguments: --stack plain" >&2\nexit 2')
    doc, err = gc.run_estimator(gc.CASES_BY_ID["lora-1b"], gc.LLAMA_1B, python=str(fake))
    assert doc is None
    assert err == "estimator: error: unrecognized arguments: --stack plain"
    doc, err = gc.run_estimator(gc.CASES_BY_ID["lora-1b"], gc.LLAMA_1B, python=str(tmp_path / "missing"))
    assert doc is None and err.startswith("estimator did not run:")


def test_run_estimator_writes_the_config_it_is_given(tmp_path):
    seen = tmp_path / "seen.json"
    fake = _fake_exe(tmp_path, "python", f'while [ "$1" != "--config" ]; do shift; done; cp "$2" {seen}\n'
                                         'echo \'{"total_bytes": 3, "components_bytes": {"overhead": 1}, '
                                         '"low_bytes": 2, "high_bytes": 4, "setup": {}}\'')
    doc, err = gc.run_estimator(gc.CASES_BY_ID["full-0.5b"], gc.QWEN_05B, python=str(fake))
    assert err is None and doc["total_bytes"] == 3 and gc.tensor_bytes(doc) == 2
    assert json.loads(seen.read_text()) == gc.QWEN_05B


# --------------------------------------------------------------------------------------------------
# Rows and summary
# --------------------------------------------------------------------------------------------------
def _est(total_gib: float, overhead_gib: float, low_gib: float, high_gib: float) -> dict:
    return {"total_bytes": int(total_gib * GIB), "low_bytes": int(low_gib * GIB), "high_bytes": int(high_gib * GIB),
            "components_bytes": {"weights": int((total_gib - overhead_gib) * GIB), "overhead": int(overhead_gib * GIB)}}


def test_header_row():
    assert gc.header_row() == ("case                   alloc GiB  alloc GB  resv GiB  est GiB tensor GiB     band GiB"
                               "    error")


def test_row_of_a_measured_case():
    res = {"case": "lora-1b", "status": "ok",
           "measured": {"max_allocated_bytes": 10 * GIB, "max_reserved_bytes": 11 * GIB},
           "estimate": _est(12, 1, 9, 14), "setup_mismatches": []}
    # tensor part 11 GiB vs 10 GiB measured: +10.0 %; 10 GiB = 10.74 GB
    assert gc.format_row(res) == ("lora-1b                    10.00     10.74     11.00    12.00      11.00"
                                  "   9.00-14.00   +10.0%")
    assert gc.error_pct(9 * GIB, 10 * GIB) == pytest.approx(-10.0)
    assert gc.tensor_bytes(_est(12, 1, 9, 14)) == 11 * GIB


def test_row_of_an_oom_case_with_a_rejected_estimator_flag():
    res = {"case": "full-0.5b", "status": "oom", "error": "OutOfMemoryError: CUDA out of memory.",
           "measured": {}, "estimate": None,
           "estimator_error": "estimator: error: unrecognized arguments: --stack plain"}
    assert gc.format_row(res).split("\n") == [
        "full-0.5b                      -         -         -        -          -            -      OOM",
        "    oom: OutOfMemoryError: CUDA out of memory.",
        "    estimator: error: unrecognized arguments: --stack plain",
    ]


def test_row_of_a_skipped_case_and_a_setup_mismatch():
    skipped = {"case": "lora-1b-ckpt-offload", "status": "skipped", "error": "no offload", "measured": {},
               "estimate": _est(4, 0.5, 3, 5), "setup_mismatches": []}
    assert gc.format_row(skipped).split("\n") == [
        "lora-1b-ckpt-offload           -         -         -     4.00       3.50    3.00-5.00  SKIPPED",
        "    skipped: no offload",
    ]
    case = gc.CASES_BY_ID["lora-1b-ckpt"]
    setup = {"method": "lora", "batch": 4, "seq_len": 1024, "grad_ckpt": False, "loss": "standard",
             "stack": "plain", "optimizer": "adamw", "precision": "bf16", "unrelated": 1}
    mism = gc.setup_mismatches(case, setup)
    assert mism == ["grad_ckpt=False (want True)"]
    row = {"case": case.id, "status": "ok", "measured": {"max_allocated_bytes": 2 * GIB, "max_reserved_bytes": 3 * GIB},
           "estimate": _est(3, 1, 1.5, 4), "setup_mismatches": mism}
    assert gc.format_row(row).split("\n")[1:] == ["    estimator setup differs: grad_ckpt=False (want True)"]
    assert gc.format_row(row).split("\n")[0].endswith("+0.0%")


def test_summary():
    results = [{"case": "a", "error_pct": 10.0}, {"case": "b", "error_pct": -25.5}, {"case": "c", "error_pct": 2.5},
               {"case": "d", "error_pct": None}, {"case": "e"}]
    assert gc.summarize(results) == ("summary: 3 of 5 cases compared; |error| of the tensor estimate vs "
                                     "max_memory_allocated: median 10.0%, worst 25.5% (b)")
    assert gc.summarize([{"case": "a", "error_pct": None}]) == (
        "summary: 0 of 1 cases have both a measurement and an estimate")


def test_header_line_and_requirements(monkeypatch):
    assert gc.header_line({"gpu": "NVIDIA H200", "total_memory_mib": 143771, "torch_cuda": "13.0", "smoke": False}) \
        == "gpu_check: NVIDIA H200, 143771 MiB (torch total_memory), CUDA 13.0"
    assert gc.header_line({"gpu": "cpu", "total_memory_mib": None, "smoke": True}) == (
        "gpu_check: no CUDA device, running on the CPU  [--smoke: tiny shapes, not a measurement]")
    monkeypatch.delenv("GPU_CHECK_TORCH", raising=False)
    assert gc.requirements() == ["torch==2.13.0", "transformers", "peft", "trl==1.16.0", "bitsandbytes", "accelerate"]
    monkeypatch.setenv("GPU_CHECK_TORCH", "torch==2.11.0 --extra-index-url https://example.invalid/cu130")
    assert gc.requirements()[:3] == ["torch==2.11.0", "--extra-index-url", "https://example.invalid/cu130"]


def test_module_does_not_import_torch():
    code = (f"import importlib.util, sys; s = importlib.util.spec_from_file_location('g', {str(SCRIPT)!r}); "
            "m = importlib.util.module_from_spec(s); sys.modules['g'] = m; s.loader.exec_module(m); "
            "print(sorted(k for k in ('torch', 'transformers', 'peft', 'trl', 'bitsandbytes') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
