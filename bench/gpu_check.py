"""Real training steps on a CUDA GPU next to the estimator's numbers: `torch.cuda.max_memory_allocated` and
`max_memory_reserved` of a steady-state step (step 2) against `python -m estimator --json`.

Usage (from the repo root, any python3):

  python bench/gpu_check.py                     # all cases; needs a CUDA GPU (about 3-5 min on an H100/H200)
  python bench/gpu_check.py --list              # the cases and the estimator flags each one is compared with
  python bench/gpu_check.py --cases lora-1b,full-0.5b --json out/gpu_check.json
  python bench/gpu_check.py --no-install        # use the current interpreter's torch/transformers/peft/...
  python bench/gpu_check.py --smoke             # tiny shapes, on the CPU too (then with the current interpreter):
                                                # checks the code paths, measures nothing

Without a GPU (`nvidia-smi -L` missing or listing none, or GPU_CHECK_FORCE_NO_GPU=1) it prints one line and exits 0
before installing anything. With one it creates `.venv-gpu/` in the repo root (keep it out of git), pip-installs
torch (`torch==2.13.0`, or the requirement in GPU_CHECK_TORCH), transformers, peft, trl==1.16.0, bitsandbytes and
accelerate into it, and runs itself again inside it. Offline, point pip at wheels the usual way
(PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR), or use --no-install with an interpreter that has them.

Models are built from the config dicts below with random weights (no download): a Qwen2.5-0.5B-like and a
Llama-3.2-1B-like decoder at their real widths. The same dicts go to the estimator through `--config`. Each case runs
in its own process (fresh model, fresh CUDA context, so peaks never mix): two training steps, the peak statistics
are reset after step 1 and read after step 2. Every case follows the HF Trainer conventions the estimator models:
labels = input_ids (every token counts), no attention mask, SDPA attention, `use_cache=False`, bf16 weights,
forward under bf16 autocast, PEFT's fp32 adapters (LoRA r=16 on all linear layers), non-reentrant checkpointing,
torch.optim.AdamW(fused=True) (so the estimator gets `--optimizer adamw`), clip_grad_norm_(1.0) (the estimator
counts no memory for clipping: only per-tensor norms), zero_grad(set_to_none=True). A plain loop is the estimator's
`--stack plain`; the TRL cases (TRL 1.16's fused chunked LM head) are `--stack trl --loss chunked`.

Row columns: measured peak allocated (GiB and GB), peak reserved (GiB), the estimator's `total_bytes`, its tensor
part (`total_bytes - components_bytes["overhead"]`: what `max_memory_allocated` counts), the band
`low_bytes`-`high_bytes`, and the tensor part's error against the measured allocated peak, in %
(positive = the estimator says more). Exit code 0 unless the harness itself breaks; a case that fails, runs out of
memory or times out is reported as such and the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-gpu"
STAMP = "gpu_check_requirements.txt"  # inside VENV: what was installed, so a rerun skips pip

NO_GPU_LINE = "gpu_check: no CUDA GPU found; nothing to measure"
ENV_FORCE_NO_GPU = "GPU_CHECK_FORCE_NO_GPU"
ENV_IN_VENV = "GPU_CHECK_IN_VENV"
ENV_TORCH = "GPU_CHECK_TORCH"
ENV_ESTIMATOR_PYTHON = "GPU_CHECK_ESTIMATOR_PYTHON"
DEFAULT_TORCH = "torch==2.13.0"
PACKAGES = ("transformers", "peft", "trl==1.16.0", "bitsandbytes", "accelerate")
VERSION_PACKAGES = ("torch", "transformers", "peft", "trl", "bitsandbytes", "accelerate")
CASE_TIMEOUT_S = 180
ESTIMATOR_TIMEOUT_S = 60

GIB = 1024**3
GB = 1000**3
MIB = 1024**2

# Qwen2.5-0.5B (Qwen/Qwen2.5-0.5B config.json, architecture keys): 494,032,768 parameters, embeddings tied.
QWEN_05B: dict[str, Any] = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
}
# Llama-3.2-1B (meta-llama/Llama-3.2-1B config.json without the llama3 rope scaling): 1,235,814,400 parameters.
LLAMA_1B: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-05,
}
CONFIGS: dict[str, dict[str, Any]] = {"qwen2.5-0.5b": QWEN_05B, "llama-3.2-1b": LLAMA_1B}
# --smoke: the same families shrunk to a few MB, to run every code path in seconds (on the CPU too).
SMOKE_OVERRIDES: dict[str, Any] = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                   "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
                                   "vocab_size": 512}
SMOKE_BATCH, SMOKE_SEQ_LEN = 2, 64

OPTIMIZER = "adamw"  # the estimator's id for torch.optim.AdamW(fused=True) (the plain stack's default is foreach)
LORA_RANK = 16
LORA_TARGETS = "all-linear"
MAX_GRAD_NORM = 1.0
LR = 5e-5
TRL_OUTPUTS = ("log_probs", "entropy", "is_top1")  # what TRL 1.16's SFTTrainer asks of add_fused_lm_head


@dataclass(frozen=True)
class Case:
    id: str
    model: str  # key of CONFIGS
    method: str  # full | lora | qlora
    batch: int
    seq_len: int
    grad_ckpt: bool
    stack: str = "plain"  # plain: a PyTorch loop with HF's loss; trl: TRL 1.16's fused chunked LM head
    offload: bool = False  # activation offloading (transformers 5: activation_checkpointing_enable(offload=True))

    @property
    def loss(self) -> str:
        return "chunked" if self.stack == "trl" else "standard"

    def describe(self) -> str:
        parts = [self.method, self.model, f"{self.batch}x{self.seq_len}",
                 "checkpointing on" if self.grad_ckpt else "checkpointing off"]
        if self.stack == "trl":
            parts.append("TRL fused LM head")
        if self.offload:
            parts.append("activations offloaded")
        return ", ".join(parts)


CASES: tuple[Case, ...] = (
    Case("lora-1b", "llama-3.2-1b", "lora", 4, 1024, grad_ckpt=False),
    Case("lora-1b-ckpt", "llama-3.2-1b", "lora", 4, 1024, grad_ckpt=True),
    Case("full-0.5b", "qwen2.5-0.5b", "full", 2, 1024, grad_ckpt=False),
    Case("full-0.5b-ckpt", "qwen2.5-0.5b", "full", 2, 1024, grad_ckpt=True),
    Case("qlora-1b-ckpt", "llama-3.2-1b", "qlora", 4, 1024, grad_ckpt=True),
    Case("trl-lora-1b-ckpt", "llama-3.2-1b", "lora", 4, 1024, grad_ckpt=True, stack="trl"),
    Case("trl-full-0.5b-ckpt", "qwen2.5-0.5b", "full", 2, 1024, grad_ckpt=True, stack="trl"),
    Case("lora-1b-ckpt-offload", "llama-3.2-1b", "lora", 4, 1024, grad_ckpt=True, offload=True),
)
CASES_BY_ID = {c.id: c for c in CASES}


# --------------------------------------------------------------------------------------------------
# Pure helpers (no torch): case shapes, estimator flags, rows and the summary
# --------------------------------------------------------------------------------------------------
def case_config(case: Case, smoke: bool = False) -> dict[str, Any]:
    cfg = dict(CONFIGS[case.model])
    if smoke:
        cfg.update(SMOKE_OVERRIDES)
    return cfg


def case_shape(case: Case, smoke: bool = False) -> tuple[int, int]:
    return (SMOKE_BATCH, SMOKE_SEQ_LEN) if smoke else (case.batch, case.seq_len)


def estimator_args(case: Case, config_path: str | os.PathLike[str], smoke: bool = False) -> list[str]:
    """The `python -m estimator` arguments that describe `case` (after `-m estimator`)."""
    batch, seq_len = case_shape(case, smoke)
    args = ["--json", "--config", str(config_path), "--method", case.method, "--precision", "bf16",
            "--batch", str(batch), "--seq-len", str(seq_len),
            "--grad-ckpt" if case.grad_ckpt else "--no-grad-ckpt",
            "--loss", case.loss, "--stack", case.stack, "--optimizer", OPTIMIZER]
    if case.method != "full":
        args += ["--lora-rank", str(LORA_RANK), "--lora-targets", LORA_TARGETS]
    if case.offload:
        args.append("--offload-activations")
    return args


def parse_gpu_list(text: str) -> list[str]:
    """The GPU lines of `nvidia-smi -L` ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)")."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith("GPU ")]


def gpu_present() -> bool:
    """Cheap: `nvidia-smi -L` exists and lists at least one GPU (no torch, nothing installed)."""
    if os.environ.get(ENV_FORCE_NO_GPU, "").strip() not in ("", "0"):
        return False
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and bool(parse_gpu_list(proc.stdout))


def tensor_bytes(doc: dict[str, Any]) -> int:
    """The estimate without the CUDA context/allocator overhead: what max_memory_allocated counts."""
    return int(doc["total_bytes"]) - int(doc["components_bytes"].get("overhead", 0))


def error_pct(estimate_bytes: float, measured_bytes: float) -> float:
    return (estimate_bytes - measured_bytes) / measured_bytes * 100.0


def setup_mismatches(case: Case, setup: dict[str, Any], smoke: bool = False) -> list[str]:
    """Keys of the estimator's echoed `setup` that disagree with the case (keys it does not echo are skipped)."""
    batch, seq_len = case_shape(case, smoke)
    want: dict[str, Any] = {"method": case.method, "precision": "bf16", "batch": batch, "seq_len": seq_len,
                            "grad_ckpt": case.grad_ckpt, "loss": case.loss, "stack": case.stack, "optimizer": OPTIMIZER,
                            "offload_activations": case.offload}
    return [f"{k}={setup[k]!r} (want {v!r})" for k, v in want.items() if k in setup and setup[k] != v]


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def _gb(n: float | None) -> str:
    return "-" if n is None else f"{n / GB:.2f}"


COLUMNS = (("case", 22), ("alloc GiB", 9), ("alloc GB", 9), ("resv GiB", 9), ("est GiB", 8), ("tensor GiB", 10),
           ("band GiB", 12), ("error", 8))


def header_row() -> str:
    name, width = COLUMNS[0]
    return " ".join([f"{name:<{width}}"] + [f"{n:>{w}}" for n, w in COLUMNS[1:]])


def format_row(result: dict[str, Any]) -> str:
    """One row (plus indented note lines) for a case result: see run_one() for the keys."""
    m = result.get("measured") or {}
    est = result.get("estimate")
    alloc = m.get("max_allocated_bytes")
    tensor = tensor_bytes(est) if est else None
    band = f"{est['low_bytes'] / GIB:.2f}-{est['high_bytes'] / GIB:.2f}" if est else "-"
    if alloc is not None and tensor is not None:
        err = f"{error_pct(tensor, alloc):+.1f}%"
    else:
        err = "-" if result.get("status") == "ok" else str(result.get("status", "?")).upper()
    cells = [_gib(alloc), _gb(alloc), _gib(m.get("max_reserved_bytes")), _gib(est["total_bytes"] if est else None),
             _gib(tensor), band, err]
    line = " ".join([f"{result['case']:<{COLUMNS[0][1]}}"] + [f"{c:>{w}}" for c, (_, w) in zip(cells, COLUMNS[1:], strict=True)])
    notes = []
    if result.get("status") not in (None, "ok"):
        notes.append(f"{result['status']}: {result.get('error') or 'no detail'}")
    if result.get("estimator_error"):
        notes.append(result["estimator_error"])
    notes += [f"estimator setup differs: {x}" for x in result.get("setup_mismatches", ())]
    return "\n".join([line] + [f"    {n}" for n in notes])


def summarize(results: list[dict[str, Any]]) -> str:
    errs = [(abs(r["error_pct"]), r["case"]) for r in results if r.get("error_pct") is not None]
    if not errs:
        return f"summary: 0 of {len(results)} cases have both a measurement and an estimate"
    worst, worst_case = max(errs)
    med = statistics.median(e for e, _ in errs)
    return (f"summary: {len(errs)} of {len(results)} cases compared; |error| of the tensor estimate vs "
            f"max_memory_allocated: median {med:.1f}%, worst {worst:.1f}% ({worst_case})")


def header_line(header: dict[str, Any]) -> str:
    if header.get("total_memory_mib") is None:
        where = "no CUDA device, running on the CPU"
    else:
        where = f"{header['gpu']}, {header['total_memory_mib']} MiB (torch total_memory), CUDA {header['torch_cuda']}"
    return f"gpu_check: {where}" + ("  [--smoke: tiny shapes, not a measurement]" if header.get("smoke") else "")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in VERSION_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def requirements() -> list[str]:
    return shlex.split(os.environ.get(ENV_TORCH) or DEFAULT_TORCH) + list(PACKAGES)


# --------------------------------------------------------------------------------------------------
# The estimator (the repo's python, its CLI)
# --------------------------------------------------------------------------------------------------
def estimator_python() -> str:
    override = os.environ.get(ENV_ESTIMATOR_PYTHON)
    if override:
        return override
    repo_python = ROOT / ".venv" / "bin" / "python"
    if repo_python.exists() and os.access(repo_python, os.X_OK):
        return str(repo_python)
    return sys.executable


def run_estimator(case: Case, config: dict[str, Any], smoke: bool = False,
                  python: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(the estimator's JSON document, None) or (None, one line saying why there is none)."""
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        path = Path(tmp) / f"{case.model}.json"
        path.write_text(json.dumps(config, indent=2))
        cmd = [python or estimator_python(), "-m", "estimator", *estimator_args(case, path, smoke)]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=ESTIMATOR_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"estimator did not run: {exc}"
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        return None, (lines[-1] if lines else f"estimator exited {proc.returncode}")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        return None, f"estimator printed no JSON ({exc})"
    return doc, None


# --------------------------------------------------------------------------------------------------
# One case, in its own process (imports torch)
# --------------------------------------------------------------------------------------------------
def _hf_config(cfg: dict[str, Any]):
    from transformers import AutoConfig

    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
    return AutoConfig.for_model(cfg["model_type"], **kwargs)


def _enable_ckpt(model, offload: bool) -> None:
    kwargs = {"use_reentrant": False}
    if offload:  # offload_supported() was checked before
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs, offload=True)
    elif hasattr(model, "activation_checkpointing_enable"):  # transformers 5
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:  # transformers 4.x
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def offload_supported(model) -> bool:
    import inspect

    fn = getattr(model, "activation_checkpointing_enable", None)
    return fn is not None and "offload" in inspect.signature(fn).parameters


class Skip(Exception):
    pass


def _build(case: Case, cfg: dict[str, Any], device: str):
    import torch
    from transformers import AutoModelForCausalLM

    hf_cfg = _hf_config(cfg)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    if case.method == "qlora":
        # A real 4-bit load: save the random bf16 model, reload it with bitsandbytes NF4 (double quant).
        from transformers import BitsAndBytesConfig

        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                 bnb_4bit_compute_dtype=torch.bfloat16)
        with tempfile.TemporaryDirectory(prefix="gpu_check_qlora_") as tmp:
            model.save_pretrained(tmp)
            del model
            _free(device)
            model = AutoModelForCausalLM.from_pretrained(
                tmp, quantization_config=bnb, dtype=torch.bfloat16, attn_implementation="sdpa",
                device_map={"": device})
    if case.offload and not device.startswith("cuda"):
        raise Skip("activation offloading pins host memory: CUDA only")
    if case.offload and not offload_supported(model):
        import transformers

        raise Skip(f"transformers {transformers.__version__} has no activation_checkpointing_enable(offload=...)")
    if case.stack == "trl":
        from trl.trainer.utils import add_fused_lm_head

        add_fused_lm_head(model, outputs=TRL_OUTPUTS)  # on the base model, before PEFT wraps it
    model.config.use_cache = False
    if case.grad_ckpt:
        _enable_ckpt(model, case.offload)
    if case.method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, target_modules=LORA_TARGETS, lora_dropout=0.0,
                          bias="none", task_type="CAUSAL_LM")
        model = get_peft_model(model, lcfg)  # autocast_adapter_dtype=True: fp32 adapters
    model.train()
    return model


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_case_here(case: Case, smoke: bool = False) -> dict[str, Any]:
    """Build the model and run two training steps in this process; the measurement of step 2."""
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda:0" if cuda else "cpu"
    cfg = case_config(case, smoke)
    batch, seq_len = case_shape(case, smoke)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    try:
        model = _build(case, cfg, device)
    except Skip as exc:
        return {"status": "skipped", "error": str(exc)}
    build_s = time.perf_counter() - t0
    params = list(model.parameters())  # tied weights once
    trainable = [p for p in params if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=LR, weight_decay=0.0, fused=True)
    vocab = int(cfg["vocab_size"])

    def step() -> float:
        input_ids = torch.randint(0, vocab, (batch, seq_len), device=device)
        labels = input_ids.clone()
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            if case.stack == "trl":
                loss = model(input_ids=input_ids, labels=labels, fused_lm_head=True).loss
            else:
                loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, MAX_GRAD_NORM)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    out: dict[str, Any] = {"status": "ok", "device": device, "build_s": round(build_s, 2),
                           "params_total": sum(p.numel() for p in params),
                           "params_trainable": sum(p.numel() for p in trainable)}
    losses = [step()]
    if cuda:
        torch.cuda.synchronize()
        out["max_allocated_through_step1_bytes"] = torch.cuda.max_memory_allocated()
        out["allocated_before_step2_bytes"] = torch.cuda.memory_allocated()
        out["reserved_before_step2_bytes"] = torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    t1 = time.perf_counter()
    losses.append(step())
    if cuda:
        torch.cuda.synchronize()
        out["max_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_reserved_bytes"] = torch.cuda.max_memory_reserved()
    out["step2_s"] = round(time.perf_counter() - t1, 3)
    out["losses"] = [round(x, 4) for x in losses]
    return out


def child_main(case_id: str, result_path: str, smoke: bool) -> int:
    case = CASES_BY_ID[case_id]
    try:
        res = run_case_here(case, smoke)
    except Exception as exc:  # reported, not raised: the parent goes on with the next case
        import traceback

        traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        oom = type(exc).__name__ == "OutOfMemoryError" or "out of memory" in first.lower()
        res = {"status": "oom" if oom else "failed", "error": f"{type(exc).__name__}: {first}"}
        with contextlib.suppress(Exception):  # best effort: the peak up to the failure
            import torch

            if torch.cuda.is_available():
                res["max_allocated_bytes_at_failure"] = torch.cuda.max_memory_allocated()
    Path(result_path).write_text(json.dumps(res))
    return 0


def probe_main(result_path: str) -> int:
    import torch

    info: dict[str, Any] = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda}
    if info["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, total_memory_mib=props.total_memory // MIB,
                    capability=f"{props.major}.{props.minor}")
    Path(result_path).write_text(json.dumps(info))
    return 0


# --------------------------------------------------------------------------------------------------
# The parent: install, probe, run each case in a child, print
# --------------------------------------------------------------------------------------------------
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               TRANSFORMERS_VERBOSITY="error", PYTHONUNBUFFERED="1")
    return env


def _child(args: list[str], timeout: float) -> tuple[dict[str, Any] | None, str, str | None]:
    """Run this script with `args` + a result file; (result or None, output tail, error)."""
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *args, "--_result", str(result_path)]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")
            tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
            return None, tail[-2000:], f"no result after {timeout:.0f} s (killed)"
        tail = (proc.stdout + proc.stderr)[-2000:]
        if not result_path.exists():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            return None, tail, f"exited {proc.returncode}: {lines[-1] if lines else 'no output'}"
        return json.loads(result_path.read_text()), tail, None


def run_one(case: Case, smoke: bool, timeout: float) -> dict[str, Any]:
    result: dict[str, Any] = {"case": case.id, "setup": asdict(case), "estimator_flags": None}
    est, est_err = run_estimator(case, case_config(case, smoke), smoke)
    result["estimator_flags"] = " ".join(estimator_args(case, "CFG.json", smoke))
    t0 = time.perf_counter()
    args = ["--_child", case.id] + (["--smoke"] if smoke else [])
    measured, tail, err = _child(args, timeout)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    if measured is None:
        result.update(status="timeout" if "killed" in (err or "") else "failed", error=err, log_tail=tail)
        measured = {}
    else:
        result["status"] = measured.pop("status")
        if "error" in measured:
            result["error"] = measured.pop("error")
        if result["status"] != "ok":
            result["log_tail"] = tail
    result["measured"] = measured
    if est is not None:
        result["estimate"] = {k: est[k] for k in ("total_bytes", "components_bytes", "low_bytes", "high_bytes",
                                                  "peak_phase", "params_total", "params_trainable") if k in est}
        result["estimator_setup"] = est.get("setup", {})
        result["setup_mismatches"] = setup_mismatches(case, est.get("setup", {}), smoke)
    else:
        result["estimate"] = None
        result["estimator_error"] = est_err
    alloc = measured.get("max_allocated_bytes")
    result["error_pct"] = (round(error_pct(tensor_bytes(est), alloc), 2)
                           if est is not None and alloc else None)
    return result


def ensure_venv() -> Path | None:
    """Create .venv-gpu and install the requirements (skipped when its stamp matches); its python, or None."""
    py = VENV / "bin" / "python"
    reqs = requirements()
    stamp = VENV / STAMP
    if py.exists() and stamp.exists() and stamp.read_text().split("\n") == reqs:
        return py
    print(f"gpu_check: installing {' '.join(reqs)} into {VENV} (once)", flush=True)
    if not py.exists():
        rc = subprocess.call([sys.executable, "-m", "venv", str(VENV)])
        if rc != 0 or not py.exists():
            print(f"gpu_check: `{sys.executable} -m venv {VENV}` failed (exit {rc})", file=sys.stderr)
            return None
    rc = subprocess.call([str(py), "-m", "pip", "install", "--disable-pip-version-check", *reqs])
    if rc != 0:
        print(f"gpu_check: pip install into {VENV} failed (exit {rc}); offline, set PIP_NO_INDEX=1 "
              "PIP_FIND_LINKS=DIR with the wheels, or run with --no-install", file=sys.stderr)
        return None
    stamp.write_text("\n".join(reqs))
    return py


def select_cases(spec: str | None) -> list[Case]:
    if not spec:
        return list(CASES)
    ids = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [i for i in ids if i not in CASES_BY_ID]
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; see --list")
    return [CASES_BY_ID[i] for i in ids]


def list_lines() -> list[str]:
    return [f"{c.id:<22} {c.describe()}\n{'':<22} python -m estimator {' '.join(estimator_args(c, 'CFG.json'))}"
            for c in CASES]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python bench/gpu_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma-separated case ids (default: all; see --list)")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT")
    p.add_argument("--list", action="store_true", help="list the cases and their estimator flags")
    p.add_argument("--no-install", action="store_true", help="use the current interpreter; install nothing")
    p.add_argument("--timeout", type=float, default=CASE_TIMEOUT_S, help="seconds per case (default %(default)s)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny shapes, CPU allowed: checks the code paths, measures nothing meaningful")
    p.add_argument("--_child", help=argparse.SUPPRESS)
    p.add_argument("--_probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args._child:
        return child_main(args._child, args._result, args.smoke)
    if args._probe:
        return probe_main(args._result)
    if args.list:
        print("\n".join(list_lines()))
        return 0
    try:
        cases = select_cases(args.cases)
    except ValueError as exc:
        parser.error(str(exc))
    gpu = gpu_present()
    if not gpu and not args.smoke:
        print(NO_GPU_LINE)
        return 0
    if gpu and not args.no_install and not os.environ.get(ENV_IN_VENV):  # --smoke on a CPU installs nothing
        py = ensure_venv()
        if py is None:
            return 1
        env = dict(os.environ, **{ENV_IN_VENV: "1"})
        return subprocess.call([str(py), str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:])],
                               env=env)
    return run_all(cases, args)


def run_all(cases: list[Case], args: argparse.Namespace) -> int:
    t_start = time.perf_counter()
    probe, _tail, err = _child(["--_probe"], 120)
    if probe is None:
        print(f"gpu_check: the torch probe failed in {sys.executable}: {err}", file=sys.stderr)
        return 1
    if not probe["cuda_available"] and not args.smoke:
        print(f"gpu_check: nvidia-smi lists a GPU but torch {package_versions()['torch']} "
              f"(CUDA {probe['torch_cuda']}) in {sys.executable} cannot use it", file=sys.stderr)
        return 1
    versions = package_versions()
    header = {"gpu": probe.get("gpu", "cpu"), "total_memory_mib": probe.get("total_memory_mib"),
              "torch_cuda": probe.get("torch_cuda"), "python": sys.executable, "versions": versions,
              "estimator_python": estimator_python(), "smoke": args.smoke,
              "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    print(header_line(header))
    print("  " + ", ".join(f"{k} {v or 'missing'}" for k, v in versions.items()))
    if header["pytorch_cuda_alloc_conf"]:
        print(f"  PYTORCH_CUDA_ALLOC_CONF={header['pytorch_cuda_alloc_conf']}")
    print("  measured: step 2 peaks (reset after step 1); tensor = estimator total - overhead; "
          "error = tensor vs alloc")
    print(header_row(), flush=True)
    results: list[dict[str, Any]] = []
    for case in cases:
        res = run_one(case, args.smoke, args.timeout)
        results.append(res)
        print(format_row(res), flush=True)
        if args.json:
            _write_json(args.json, header, results, time.perf_counter() - t_start)
    print(summarize(results))
    print(f"gpu_check: {len(cases)} case(s) in {time.perf_counter() - t_start:.0f} s")
    if args.json:
        _write_json(args.json, header, results, time.perf_counter() - t_start)
    return 0


def _write_json(path: str, header: dict[str, Any], results: list[dict[str, Any]], wall_s: float) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"header": header, "results": results, "summary": summarize(results),
                               "wall_s": round(wall_s, 1)}, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
