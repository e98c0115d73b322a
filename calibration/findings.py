"""Derive per-token / per-parameter constants from traces and compare them with formulas.md.

Traces a Llama-shaped model (h=512, a=8, k=2, d=64, I=1792: the shape used in docs/formulas.md §3.3) at
L in {2, 3}, T in {256, 512} and V in {1000, 2000} and solves for

    saved activations after forward  A(L, T, V) = T*(L*a_layer + c_tok) + L*k_layer + k0     (V fixed)
    loss region                       dA/dV per token                                         (L, T fixed)

for every regime (full bf16 / mixed / fp32, LoRA variants, with and without gradient checkpointing), plus the
CE transients, optimizer-state bytes per parameter and the fused-AdamW step temporaries.

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.findings [--json calibration/findings.json]
    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.findings --families [--json calibration/findings_families.json]

The second form reports per-layer bytes/token of every family (shape "a" of calibration/cases.py).
Results are summarised in calibration/README.md ("Findings").
"""

from __future__ import annotations

import argparse
import json
import sys

from calibration.cases import full_config
from exact.trace import trace_case

H, A, K, D, I_ = 512, 8, 2, 64, 1792
QD, KVD = A * D, K * D
R = 16

REGIMES = {
    # name: (method, precision, lora targets)
    "full bf16": ("full", "bf16", None),
    "full mixed": ("full", "mixed", None),
    "full fp32": ("full", "fp32", None),
    "LoRA all-linear bf16": ("lora", "bf16", "all-linear"),
    "LoRA q,v bf16": ("lora", "bf16", ["q_proj", "v_proj"]),
    "LoRA all-linear mixed": ("lora", "mixed", "all-linear"),
    "LoRA all-linear fp32": ("lora", "fp32", "all-linear"),
}

# docs/formulas.md §3.3 closed forms (bytes/token/layer); None where formulas.md gives none
FORMULA = {
    "full bf16": 16 * H + 4 * QD + 4 * KVD + 8 * I_ + 4 * A + 8,
    "full mixed": 26 * H + 4 * QD + 4 * KVD + 8 * I_ + 4 * A + 8,
    "full fp32": None,
    "LoRA all-linear bf16": 18 * H + 6 * QD + 4 * KVD + 8 * I_ + 14 * R + 4 * A + 8,
    # frozen base 8h+4qd+4kvd+4a+6I (+8 rstd) plus 2*in+2r per adapted module (q: in=h, v: in=h)
    "LoRA q,v bf16": 8 * H + 4 * QD + 4 * KVD + 4 * A + 6 * I_ + 8 + 2 * (2 * H + 2 * R),
    "LoRA all-linear mixed": None,
    "LoRA all-linear fp32": 28 * H + 8 * QD + 4 * KVD + 10 * I_ + 28 * R + 4 * A + 8,  # (R32)
}


def _case(method, precision, targets, L, T, V, ckpt) -> dict:
    spec = dict(vocab_size=V, hidden_size=H, intermediate_size=I_, num_hidden_layers=L, num_attention_heads=A,
                num_key_value_heads=K, head_dim=D, tie_word_embeddings=False, max_position_embeddings=4096)
    setup = {
        "method": method, "precision": precision, "optimizer": "adamw", "batch": 1, "seq_len": T,
        "grad_ckpt": ckpt, "attention": "sdpa", "lora_rank": R if method == "lora" else None,
        "lora_alpha": 2 * R if method == "lora" else None, "lora_targets": targets, "lora_dropout": 0.0,
        "loss": "standard",
    }
    return {"id": f"findings-{method}-{precision}-L{L}-T{T}-V{V}-{ckpt}", "family": "llama",
            "config": full_config("llama", spec), "setup": setup, "mode": "fake"}


def _acts(m: dict) -> int:
    return m["snapshots"]["after_forward"]["activations"]


def analyse(name: str, ckpt: bool) -> dict:
    method, precision, targets = REGIMES[name]
    T1, T2, V1, V2 = 256, 512, 1000, 2000
    ms = {}
    for L in (2, 3):
        for T in (T1, T2):
            ms[(L, T, V1)] = trace_case(_case(method, precision, targets, L, T, V1, ckpt))["measured"]
    for T in (T1, T2):
        ms[(2, T, V2)] = trace_case(_case(method, precision, targets, 2, T, V2, ckpt))["measured"]

    def split(f):
        """f(L, T, V) -> (per layer per token, per layer const, per token per vocab, per vocab const,
        outside-layers per token at V=0, outside-layers const at V=0)."""
        d1 = f(3, T1, V1) - f(2, T1, V1)
        d2 = f(3, T2, V1) - f(2, T2, V1)
        lt = (d2 - d1) / (T2 - T1)
        lc = d1 - lt * T1
        v1 = f(2, T1, V2) - f(2, T1, V1)
        v2 = f(2, T2, V2) - f(2, T2, V1)
        vt = (v2 - v1) / ((T2 - T1) * (V2 - V1))
        vc = (v1 - vt * T1 * (V2 - V1)) / (V2 - V1)
        r1 = f(2, T1, V1) - 2 * (lt * T1 + lc) - V1 * (vt * T1 + vc)
        r2 = f(2, T2, V1) - 2 * (lt * T2 + lc) - V1 * (vt * T2 + vc)
        ot = (r2 - r1) / (T2 - T1)
        oc = r1 - ot * T1
        return lt, lc, vt, vc, ot, oc

    acts = split(lambda L, T, V: ms[(L, T, V)]["snapshots"]["after_forward"]["activations"])
    # transients relative to the end of forward (at L=2): CE forward peak and start-of-backward peak
    fwd = split(lambda L, T, V: ms[(2, T, V)]["region_peaks"]["forward:head"]
                - ms[(2, T, V)]["snapshots"]["after_forward"]["total"])
    bwd = split(lambda L, T, V: ms[(2, T, V)]["region_peaks"]["backward:head"]
                - ms[(2, T, V)]["snapshots"]["after_forward"]["total"])
    m1 = ms[(2, T2, V1)]
    p_t = m1["params_trainable"]
    opt_per_param = m1["optimizer_state_bytes"] / p_t
    ab = m1["snapshots"]["after_backward"]["total"]
    return {
        "regime": name,
        "grad_ckpt": ckpt,
        "per_layer_bytes_per_token": acts[0],
        "per_layer_const_bytes": acts[1],
        "formula_per_layer": None if ckpt else FORMULA[name],
        "loss_kept_bytes_per_token_per_vocab": acts[2],
        "kept_bytes_per_vocab_entry_const": acts[3],
        "outside_layers_bytes_per_token": acts[4],
        "outside_layers_const_bytes": acts[5],
        "ce_forward_transient_per_token_per_vocab": fwd[2],
        "start_of_backward_extra_per_token_per_vocab": bwd[2],
        "params_trainable": p_t,
        "optimizer_bytes_per_trainable_param": opt_per_param,
        "optimizer_state_bytes": m1["optimizer_state_bytes"],
        "fused_adamw_step_temporaries_bytes": m1["phase_peaks"].get("optimizer_step", ab) - ab,
        "grad_clip_temporaries_bytes": m1["phase_peaks"].get("grad_clip", ab) - ab,
        "leaked_after_step_bytes": max(m["leaked_after_step_bytes"] for m in ms.values()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the raw numbers here")
    ap.add_argument("--families", action="store_true", help="per-family per-layer table instead")
    args = ap.parse_args(argv)
    if args.families:
        rows = families_main()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
        return 0
    rows = []
    for name in REGIMES:
        for ckpt in (False, True):
            r = analyse(name, ckpt)
            rows.append(r)
            f = r["formula_per_layer"]
            print(
                f"{name:22s} ckpt={'on ' if ckpt else 'off'} layer {r['per_layer_bytes_per_token']:8.1f} B/tok"
                f" +{r['per_layer_const_bytes']:,.0f} B"
                + (f" [formula {f}, {r['per_layer_bytes_per_token'] - f:+.0f}]" if f else "")
                + f" | outside {r['outside_layers_bytes_per_token']:.1f} B/tok +{r['outside_layers_const_bytes']:,.0f}"
                f" | kept {r['loss_kept_bytes_per_token_per_vocab']:.2f}/tok/V +{r['kept_bytes_per_vocab_entry_const']:.1f}/V"
                f" | fwdCE {r['ce_forward_transient_per_token_per_vocab']:.2f} bwd0 "
                f"{r['start_of_backward_extra_per_token_per_vocab']:.2f} /tok/V"
                f" | opt {r['optimizer_bytes_per_trainable_param']:.4f} B/p ({r['params_trainable']:,d} p)"
                f" step+{r['fused_adamw_step_temporaries_bytes']} clip+{r['grad_clip_temporaries_bytes']}"
                f" leak {r['leaked_after_step_bytes']}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0



# --------------------------------------------------------------------------------------------------
# Per-family per-layer activations (shape "a" of each family in calibration/cases.py)
# --------------------------------------------------------------------------------------------------
def family_layer_bytes(family: str, method: str = "full", attention: str | None = None) -> dict:
    """Per-layer saved bytes at T=256 and T=512 (b=1, bf16, no checkpointing): alpha*T + beta*T^2."""
    from calibration.cases import SHAPES, lora_targets

    spec = dict(SHAPES[family]["a"])
    spec["vocab_size"] = 1000
    if attention is None:
        attention = "eager" if family == "gemma2" else "sdpa"
    per = {}
    for T in (256, 512):
        vals = {}
        for L in (2, 3):
            sp = dict(spec, num_hidden_layers=L)
            setup = {
                "method": method, "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq_len": T,
                "grad_ckpt": False, "attention": attention, "lora_rank": R if method == "lora" else None,
                "lora_alpha": 2 * R if method == "lora" else None,
                "lora_targets": lora_targets(family, "all-linear") if method == "lora" else None,
                "lora_dropout": 0.0, "loss": "standard",
            }
            case = {"id": f"fam-{family}-{L}-{T}", "family": family, "config": full_config(family, sp),
                    "setup": setup, "mode": "auto"}
            m = trace_case(case)["measured"]
            vals[L] = m["snapshots"]["after_forward"]["activations"]
        per[T] = vals[3] - vals[2]
    # per(T) = alpha*T + beta*T^2 + c.  Two points: eager attention (s^2 terms) -> assume c = 0 (true for full FT,
    # checked for llama); SDPA -> beta = 0 and c = token-independent per-layer bytes (LoRA/autocast weight casts).
    t1, t2 = 256, 512
    if attention == "eager":
        beta = (per[t2] / t2 - per[t1] / t1) / (t2 - t1)
        alpha = per[t1] / t1 - beta * t1
        const = 0.0
    else:
        beta = 0.0
        alpha = (per[t2] - per[t1]) / (t2 - t1)
        const = per[t1] - alpha * t1
    h = spec["hidden_size"]
    a = spec["num_attention_heads"]
    k = spec.get("num_key_value_heads", a)
    d = spec.get("head_dim") or h // a
    inter = spec.get("moe_intermediate_size") or spec["intermediate_size"]
    f_full = 16 * h + 4 * a * d + 4 * k * d + 8 * inter + 4 * a + 8
    return {"family": family, "method": method, "attention": attention, "alpha_bytes_per_token": alpha,
            "beta_bytes_per_token_sq": beta, "const_bytes": const, "per_layer_T256": per[t1], "per_layer_T512": per[t2],
            "llama_formula_A_F": f_full if method == "full" else None}


def families_main() -> list[dict]:
    rows = []
    for fam in ("llama", "mistral", "qwen2", "qwen3", "gemma2", "phi3", "gpt_neox", "qwen3_moe", "mixtral"):
        for method, attn in (("full", None), ("full", "eager"), ("lora", None)):
            if fam == "gemma2" and attn == "eager":
                continue
            if attn == "eager" and fam not in ("llama",):
                continue
            r = family_layer_bytes(fam, method, attn)
            rows.append(r)
            f = r["llama_formula_A_F"]
            print(f"{fam:10s} {method:4s} {r['attention']:5s} per layer {r['alpha_bytes_per_token']:9.1f} B/tok"
                  f" + {r['beta_bytes_per_token_sq']:7.2f} B*T/tok + {r['const_bytes']:,.0f} B"
                  + (f"  (Llama A_F with these dims: {f})" if f else ""), flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
