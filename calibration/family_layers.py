"""Per-layer saved activations of issue 11's dense families at real widths, traced against the estimator.

The few-layer real-width cases (calibration/cases.py ``rwd-``) are dominated by the loss at these vocabularies, so
they check the layers only loosely. Here each family's real-width shape (``RWD_MODELS``, vocabulary cut to 1000)
is traced with 2 and 3 decoder layers at b=1, T=512, bf16, no checkpointing; the difference of the activations
alive after forward is one decoder layer's saved tensors, compared with ``estimator.memory.hf.activations.layers.dense_layer``.

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.family_layers [--json calibration/findings_dense_families.json]

``--hybrid`` does the same for the Gated DeltaNet models of ``RW_MOE_MODELS`` (LoRA all-linear, under autocast as
the HF Trainer runs it): [linear, full] against [linear, linear, full] and [linear, full, full], one linear-attention
and one full-attention layer each, compared with the estimator's layer activations plus the layer's autocast adapter
copies (the difference of two whole-model estimates):

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.family_layers --hybrid \
        --json calibration/findings_hybrid_layers.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

T = 512


def _shape(spec: dict, layers: int) -> dict:
    spec = copy.deepcopy(spec)
    text = spec.get("text_config", spec)
    text["num_hidden_layers"] = layers
    text["vocab_size"] = 1000
    text["pad_token_id"] = text["bos_token_id"] = text["eos_token_id"] = 0  # inside the cut vocabulary
    if "text_config" in spec:
        spec["image_token_index"] = 999
    return spec


def layer_row(model: str, method: str) -> dict:
    from calibration.cases import RWD_MODELS, full_config
    from exact.trace import trace_case

    family, spec = RWD_MODELS[model]
    after = {}
    for layers in (2, 3):
        setup = {"method": method, "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq_len": T,
                 "grad_ckpt": False, "attention": "sdpa", "lora_rank": 16 if method == "lora" else None,
                 "lora_alpha": 32 if method == "lora" else None,
                 "lora_targets": "all-linear" if method == "lora" else None, "lora_dropout": 0.0, "loss": "standard"}
        case = {"id": f"layers-{model}-{method}-L{layers}", "family": family,
                "config": full_config(family, _shape(spec, layers)), "setup": setup, "mode": "auto"}
        after[layers] = trace_case(case)["measured"]["snapshots"]["after_forward"]["activations"]
    traced = after[3] - after[2]
    estimated = estimated_layer_bytes(model, method)
    return {"model": model, "family": family, "method": method, "tokens": T, "traced_layer_bytes": traced,
            "estimated_layer_bytes": estimated, "error_pct": round(100 * (estimated - traced) / traced, 3)}


def estimated_layer_bytes(model: str, method: str) -> float:
    """The estimator's bytes of one decoder layer of this real-width shape at b=1, T=512, bf16."""
    from calibration.cases import RWD_MODELS, full_config
    from estimator import TrainingSetup, spec_from_config
    from estimator.memory.adapters import lora_params
    from estimator.memory.hf.activations.common import context
    from estimator.memory.hf.activations.layers import dense_layer
    from estimator.memory.hf.step_activations import autocast_copies

    family, spec = RWD_MODELS[model]
    est_spec = spec_from_config(full_config(family, _shape(spec, 3)))
    setup = TrainingSetup(method=method, precision="bf16", batch=1, seq_len=T)
    ctx = context(est_spec, setup)
    # + the layer's autocast copies of its fp32 LoRA weights, which the tracer counts with the activations
    # (estimator.memory.hf.step_activations.autocast_copies: 2 B per adapter parameter of the layer)
    casts = autocast_copies(est_spec, setup, lora_params(est_spec, setup, ctx.adapted))[1]
    return dense_layer(est_spec, ctx).total * T + casts


def _hybrid_config(model: str, types: list[str]) -> tuple[str, dict]:
    from calibration.cases import RW_MOE_MODELS, full_config

    family, spec = RW_MOE_MODELS[model]
    spec = _shape(spec, len(types))
    spec["layer_types"] = types
    return family, full_config(family, spec)


def _estimated_layers(config: dict, method: str) -> float:
    """The estimator's saved layer activations + autocast adapter copies of a whole model (b=1, T, bf16)."""
    from estimator import TrainingSetup, estimate, spec_from_config

    est = estimate(spec_from_config(config), TrainingSetup(method=method, precision="bf16", batch=1, seq_len=T))
    return sum(d.bytes for d in est.details if d.key in ("activations.layers", "weights.autocast_copies"))


def hybrid_rows(model: str, method: str = "lora") -> list[dict]:
    from exact.trace import trace_case

    base = ["linear_attention", "full_attention"]
    shapes = {"base": base, "linear": ["linear_attention"] + base, "full": base + ["full_attention"]}
    traced, estimated = {}, {}
    for key, types in shapes.items():
        family, config = _hybrid_config(model, types)
        setup = {"method": method, "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq_len": T,
                 "grad_ckpt": False, "attention": "sdpa", "lora_rank": 16 if method == "lora" else None,
                 "lora_alpha": 32 if method == "lora" else None,
                 "lora_targets": "all-linear" if method == "lora" else None, "lora_dropout": 0.0, "loss": "standard",
                 "offload_activations": False}
        case = {"id": f"hybrid-{model}-{method}-{key}", "family": family, "config": config, "setup": setup}
        traced[key] = trace_case(case)["measured"]["snapshots"]["after_forward"]["activations"]
        estimated[key] = _estimated_layers(config, method)
    rows = []
    for kind in ("linear", "full"):
        tr, es = traced[kind] - traced["base"], estimated[kind] - estimated["base"]
        rows.append({"model": model, "family": family, "method": method, "layer": f"{kind}_attention",
                     "tokens": T, "traced_layer_bytes": tr, "estimated_layer_bytes": es,
                     "error_pct": round(100 * (es - tr) / tr, 3)})
    return rows


def main(argv: list[str] | None = None) -> int:
    from calibration.cases import RWD_MODELS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--only", action="append", default=[], help="model names (default: all)")
    ap.add_argument("--recompute", help="re-estimate the rows of this JSON file (no tracing) and write --json")
    ap.add_argument("--hybrid", action="store_true",
                    help="the Gated DeltaNet models' linear- and full-attention layers (LoRA all-linear)")
    args = ap.parse_args(argv)
    if args.hybrid:
        rows = []
        for model in args.only or ["qwen3.5-27b", "qwen3-next-80b"]:
            for row in hybrid_rows(model):
                rows.append(row)
                print(f"{model:16s} {row['layer']:17s} traced {row['traced_layer_bytes'] / T:10.1f} B/tok  "
                      f"estimated {row['estimated_layer_bytes'] / T:10.1f} B/tok  {row['error_pct']:+.2f} %",
                      flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
                fh.write("\n")
        return 0
    if args.recompute:
        with open(args.recompute) as fh:
            rows = json.load(fh)
        for row in rows:
            row["estimated_layer_bytes"] = estimated_layer_bytes(row["model"], row["method"])
            row["error_pct"] = round(100 * (row["estimated_layer_bytes"] - row["traced_layer_bytes"])
                                     / row["traced_layer_bytes"], 3)
            print(f"{row['model']:16s} {row['method']:4s} {row['error_pct']:+.2f} %")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
                fh.write("\n")
        return 0
    rows = []
    for model in args.only or list(RWD_MODELS):
        for method in ("full", "lora"):
            row = layer_row(model, method)
            rows.append(row)
            print(f"{model:16s} {method:4s} traced {row['traced_layer_bytes'] / T:10.1f} B/tok  estimated "
                  f"{row['estimated_layer_bytes'] / T:10.1f} B/tok  {row['error_pct']:+.2f} %", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
