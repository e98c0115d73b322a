"""Meta-device parameter counts of variants of the MoE / MLA / hybrid / sink families (estimator/models/moe.py).

Each variant is a shipped preset's config.json with a few fields changed (fewer layers, other dense/sparse patterns,
biases, q_lora_rank null, ...), built with AutoModelForCausalLM.from_config on the meta device (multimodal wrappers: with their towers, as
calibration/count_params.py builds them); LoRA counts are what
PEFT's get_peft_model(LoraConfig(r=16, target_modules="all-linear")) creates. Writes
tests/data/families_moe_counts.json, which tests/test_families_moe.py checks the estimator against (no torch there).

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.count_families_moe
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM

from calibration.count_params import build_meta_model
from exact.trace import all_linear_exclude

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "families_moe_counts.json"


def _lt(n: int, every: int) -> list[str]:
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]


DROP = "<drop>"  # remove the key: the config class derives it again
# (variant id, preset id, changes to the text model's config)
VARIANTS: list[tuple[str, str, dict]] = [
    ("gpt-oss-L3-nobias-E8", "gpt-oss-20b", dict(num_hidden_layers=3, attention_bias=False, num_local_experts=8,
                                                 layer_types=["sliding_attention", "full_attention",
                                                              "sliding_attention"])),
    ("deepseek-v3-L4-noqlora", "deepseek-v3", dict(num_hidden_layers=4, first_k_dense_replace=2, q_lora_rank=None,
                                                   n_shared_experts=2, attention_bias=True)),
    ("deepseek-v3-L3", "deepseek-v3", dict(num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=64)),
    ("glm-4.5-air-L5-qknorm", "glm-4.5-air", dict(num_hidden_layers=5, first_k_dense_replace=2, use_qk_norm=True)),
    ("qwen3-next-L8-mlp-only", "qwen3-next-80b-a3b", dict(num_hidden_layers=8, mlp_only_layers=[0, 5],
                                                          layer_types=_lt(8, 4))),
    ("qwen3.5-27b-L4", "qwen3.5-27b", dict(num_hidden_layers=4, layer_types=_lt(4, 2))),
    ("qwen3.5-35b-a3b-L4", "qwen3.5-35b-a3b", dict(num_hidden_layers=4, layer_types=_lt(4, 4))),
    ("llama-4-scout-L6-step2", "llama-4-scout", dict(num_hidden_layers=6, interleave_moe_layer_step=2,
                                                     moe_layers=DROP, no_rope_layers=DROP, layer_types=DROP)),
    ("ernie-4.5-L6-bias", "ernie-4.5-21b-a3b", dict(num_hidden_layers=6, moe_layer_start_index=2,
                                                    moe_layer_end_index=4, moe_num_shared_experts=0,
                                                    use_bias=True)),
]


def variant_config(preset: str, changes: dict) -> dict:
    cfg = json.loads((ROOT / "estimator" / "models" / "presets" / f"{preset}.json").read_text())
    text = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    text.update(changes)
    for key in [k for k, v in changes.items() if v == DROP]:
        text.pop(key)
    return cfg


def meta_counts(cfg: dict) -> dict:
    kwargs = dict(cfg)
    model_type = kwargs.pop("model_type")
    config = AutoConfig.for_model(model_type, **kwargs)
    wrapper = getattr(config, "vision_config", None) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if wrapper:  # multimodal wrappers: the towers count (frozen), LoRA stays on the language model
            model = build_meta_model(config)
        else:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
        seen = {id(p): p for p in model.parameters()}
        total = sum(p.numel() for p in seen.values())
        # towers (wrappers) and Llama 4's router left out: PEFT's wrapper cannot run its tuple output
        pm = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                              exclude_modules=all_linear_exclude(model, wrapper)))
    lora = sum(p.numel() for n, p in pm.named_parameters() if "lora_" in n)
    return {"params_total": total, "lora_all_linear_r16": lora}


def main() -> int:
    out = {"_versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "peft": peft.__version__}}
    for vid, preset, changes in VARIANTS:
        cfg = variant_config(preset, changes)
        row = meta_counts(cfg)
        out[vid] = {"preset": preset, "config": cfg, **row}
        print(vid, row, flush=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
