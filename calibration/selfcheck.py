"""Check that fake tracing measures exactly what a real CPU run measures.

For a spread of calibration cases (every family, full/LoRA, each precision, checkpointing on/off, eager/SDPA)
the token count and vocabulary are shrunk so that a real CPU step is cheap, then the case is traced twice:
under FakeTensorMode and for real (real tensors, same MemTracker).  Every byte count must agree.

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.selfcheck             # all picks
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.selfcheck --only rw-  # only the real-width picks

The real-width ("rw-") cases are picked once per (loss, method, precision, offload) and per (family, loss) among
the non-standard losses and the offloaded ones, and shrunk to a small shape of the same family (a real CPU step at hidden 4096 would not
fit); one extra case runs TRL's chunked head over several token x vocabulary tiles (N > 2 x 4096, V > 32768).
"""

from __future__ import annotations

import copy
import sys

from calibration.cases import full_config, get_cases
from exact.trace import trace_case

_KEYS = ("peak_bytes", "first_step_peak_bytes", "params_total", "params_trainable", "optimizer_state_bytes")


def _shrink(case: dict) -> dict:
    c = copy.deepcopy(case)
    c["id"] = c["id"] + "-small"
    c["setup"]["batch"] = min(2, c["setup"]["batch"])
    c["setup"]["seq_len"] = min(256, c["setup"]["seq_len"])
    cfg = c["config"]
    if cfg["vocab_size"] > 4000:
        spec = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
        spec["vocab_size"] = 4000
        c["config"] = full_config(c["family"], spec)
    c.pop("mode", None)
    return c


# Small stand-in shapes for the real-width cases (same family and tying; a real CPU step must stay cheap).
_RW_SMALL = {
    "llama": dict(vocab_size=4000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64),
    "qwen2": dict(vocab_size=4000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2),
    "qwen3": dict(vocab_size=4000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64),
    "gemma2": dict(vocab_size=4000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, query_pre_attn_scalar=64),
}


def _shrink_rw(case: dict) -> dict:
    c = copy.deepcopy(case)
    c["id"] = c["id"] + "-small"
    c["setup"]["batch"] = min(2, c["setup"]["batch"])
    c["setup"]["seq_len"] = min(256, c["setup"]["seq_len"])
    spec = dict(_RW_SMALL[c["family"]], tie_word_embeddings=bool(c["config"].get("tie_word_embeddings")))
    c["config"] = full_config(c["family"], spec)
    c.pop("mode", None)
    return c


def _multitile_case() -> dict:
    """TRL's chunked head over 3 token tiles x 2 vocabulary tiles (N = 2*(4200-1) > 2*4096, V = 40000 > 32768)."""
    spec = dict(vocab_size=40000, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=64, tie_word_embeddings=True)
    return {
        "id": "rw-selfcheck-llama-full-bf16-b2s4200-chunked-multitile",
        "family": "llama",
        "config": full_config("llama", spec),
        "setup": {"method": "full", "precision": "bf16", "optimizer": "adamw", "batch": 2, "seq_len": 4200,
                  "grad_ckpt": False, "attention": "sdpa", "lora_rank": None, "lora_alpha": None,
                  "lora_targets": None, "lora_dropout": 0.0, "loss": "chunked", "offload_activations": False},
        "tags": ["real-width-selfcheck"],
    }


def pick_rw_cases() -> list[dict]:
    picked, seen = [], set()
    for c in get_cases():
        if not c["id"].startswith("rw-"):
            continue
        s = c["setup"]
        loss, off = s.get("loss") or "standard", bool(s.get("offload_activations"))
        if loss == "standard" and not off:
            continue
        key = (loss, s["method"], s["precision"], off)
        fam_key = (c["family"], loss)  # and every family once per loss (gemma2: soft-capping, eager attention)
        if key in seen and fam_key in seen:
            continue
        seen.update((key, fam_key))
        picked.append(_shrink_rw(c))
    return picked + [_multitile_case()]


def pick_cases() -> list[dict]:
    return _pick_original_cases() + pick_rw_cases()


def _pick_original_cases() -> list[dict]:
    cases = [c for c in get_cases() if "real_cpu_run" not in c["tags"] and not c["id"].startswith("rw-")]
    picked, seen = [], set()
    for c in cases:
        s = c["setup"]
        key = (c["family"], s["method"], s["grad_ckpt"], s["attention"])
        if key in seen:
            continue
        seen.add(key)
        picked.append(c)
    # make sure every precision appears at least once per method
    for c in cases:
        s = c["setup"]
        if not any(p["setup"]["method"] == s["method"] and p["setup"]["precision"] == s["precision"]
                   for p in picked):
            picked.append(c)
    return [_shrink(c) for c in picked]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="substring filter on the picked case ids")
    args = ap.parse_args(argv)
    bad = 0
    cases = pick_cases()
    if args.only:
        cases = [c for c in cases if any(s in c["id"] for s in args.only)]
    print(f"{len(cases)} cases, fake vs real")
    for case in cases:
        fake = trace_case(dict(case, mode="fake"))["measured"]
        real = trace_case(dict(case, mode="real"))["measured"]
        diffs = [k for k in _KEYS if fake[k] != real[k]]
        for name in ("after_forward", "after_backward", "after_step"):
            if fake["snapshots"][name] != real["snapshots"][name]:
                diffs.append(name)
        if fake["peak_by_category"] != real["peak_by_category"]:
            diffs.append("peak_by_category")
        status = "OK  " if not diffs else "DIFF"
        bad += bool(diffs)
        print(f"{status} {case['id']:70s} peak {fake['peak_bytes']:>12,d} real {real['peak_bytes']:>12,d}"
              + (f"  differs: {diffs}" if diffs else ""), flush=True)
    print(f"{len(cases) - bad} of {len(cases)} identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
