"""The trainer calibration matrix and the estimator's answer for each case, without torch (the traces live in
calibration/trainer_trace.py; the stored results in validation/data/trainer_findings.json are re-checked by
tests/test_trainer_calibration.py)."""

from __future__ import annotations

from calibration.cases import RW_MODELS as _REAL_WIDTH


def matrix() -> list[dict]:
    """Real widths (Qwen2.5-0.5B: 896 hidden, 151,936 vocabulary; Qwen3-0.6B: 1,024 hidden) with few layers; every
    trainer, LoRA and full, bf16, checkpointing on (TRL's default), TRL's loss per trainer."""
    out = []
    picks = {"qwen2.5-0.5b": 4, "qwen3-0.6b": 2}
    for name, layers in picks.items():
        family, cfg = _REAL_WIDTH[name]
        cfg = dict(cfg, num_hidden_layers=layers)
        for trainer in ("dpo", "kto", "orpo", "reward", "grpo"):
            for method in ("lora", "full"):
                seq = 512
                case = {"name": f"{name}-{trainer}-{method}", "family": family, "config": cfg, "trainer": trainer,
                        "method": method, "precision": "bf16", "batch": 2 if trainer != "grpo" else 4,
                        "seq_len": seq + (256 if trainer == "grpo" else 0), "completion": 256}
                out.append(case)
    return out


def estimate_case(case: dict) -> tuple[float, str]:
    """The estimator's tensor peak (total minus overhead) for the same step."""
    from estimator import TrainerSetup, estimate, spec_from_config
    from estimator.job.stack import resolve_setup

    spec = spec_from_config({"model_type": case["family"], **case["config"]}, name=case["name"])
    kw = dict(method=case["method"], precision=case["precision"], batch=case["batch"], grad_ckpt=True)
    if case["trainer"] == "grpo":
        trainer = TrainerSetup("grpo", num_generations=case["batch"], prompt_len=case["seq_len"] - case["completion"],
                               completion_len=case["completion"])
        setup = resolve_setup("trl", **kw)
    else:
        trainer = TrainerSetup(case["trainer"])
        setup = resolve_setup("trl", seq_len=case["seq_len"], **kw)
    est = estimate(spec, setup, trainer=trainer)
    return est.total_bytes - est.components_bytes["overhead"], est.peak_phase


# The KV-cache check: a tiny random-weight Qwen3 (real CPU generate, calibration/trainer_trace.py kv_check) with
# these (sequences, prompt, completion) runs.
KV_FAMILY = "qwen3"
KV_CONFIG = dict(_REAL_WIDTH["qwen3-0.6b"][1], num_hidden_layers=2, vocab_size=1024, hidden_size=256,
                 intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=64)
KV_RUNS = ((4, 32, 16), (8, 64, 32))


def kv_estimate(sequences: int, prompt: int, completion: int) -> int:
    """The estimator's KV cache for one run: prompt + completion − 1 cached positions (estimator/memory/trainers.py)."""
    from estimator import spec_from_config
    from estimator.job.stack import resolve_setup
    from estimator.memory.trainers import kv_cache_bytes

    spec = spec_from_config({"model_type": KV_FAMILY, **KV_CONFIG}, name=KV_FAMILY)
    return int(kv_cache_bytes(spec, resolve_setup("trl"), sequences, prompt + completion - 1))
