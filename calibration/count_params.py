"""Exact parameter counts of the shipped presets, from the real Hugging Face classes on the meta device.

For every preset in ``estimator/models/presets/index.json`` this loads the local ``config.json`` copy (no network),
builds ``AutoModelForCausalLM.from_config`` under ``torch.device("meta")`` (no memory is allocated) and counts:

* ``params_total``            unique parameters (tied weights counted once, deduplicated by Parameter id)
* ``params_embedding``        input embedding + output head when it is not tied to it
* ``linear_params_in_layers`` weights + biases of every ``nn.Linear`` inside the decoder layers (what
                              bitsandbytes replaces by ``Linear4bit`` in QLoRA; fused 3-D expert tensors are
                              not ``nn.Linear`` and are reported separately as ``params_experts_fused``)
* ``params_active``           MoE only: parameters used per token (routed experts scaled by top-k / E)
* ``lora_all_linear_r16``     LoRA parameters that PEFT creates with ``LoraConfig(r=16, target_modules="all-linear")``
                              on the meta model (``lora_targets`` lists the module names it picked)

Usage (developer tool; needs .venv-cal):

    HF_HUB_OFFLINE=1 .venv-cal/bin/python -m calibration.count_params [-o tests/data/preset_param_counts.json]
        [--write-index]   # also write params_total / params_active into estimator/models/presets/index.json

Gemma 3n's vision tower is a timm model (TimmWrapperModel): its presets need timm, torchvision and Pillow, which
.venv-cal does not hold; install them beside it with ``TIMM_INSTALL`` below (run with ``PYTHONPATH=/tmp/timmlib``).
The counts in tests/data/preset_param_counts.json used timm 1.0.31 (its _versions).

Exits non-zero if a count differs from the published exact totals in ``KNOWN_TOTALS``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from estimator.models.spec import TOWER_MODULES  # noqa: E402

TIMM_INSTALL = ("pip install --no-deps --target /tmp/timmlib timm==1.0.31 torchvision==0.28.0 pillow==13.0.0, then "
                "run with PYTHONPATH=/tmp/timmlib (torchvision 0.28.0 is the release for torch 2.13.0; .venv-cal stays "
                "as it is)")


def _import_torchvision() -> None:
    """Import torchvision (when installed) before transformers does, for Gemma 3n's timm vision tower.

    PyPI's torchvision wheel is a CUDA build whose compiled ops cannot load next to the CPU torch, and its
    ``torch.library.register_fake("torchvision::nms")`` calls then raise at import. Those fake kernels belong to
    torchvision's detection ops, which timm's model definitions never call, so a failed registration is skipped
    while torchvision imports. Only the module tree is built (meta device): a parameter count needs no compiled op."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return
    import torch.library as tl

    original = tl.register_fake

    def tolerant(op, func=None, /, **kwargs):
        def register(fn):
            try:
                return original(op, fn, **kwargs)
            except RuntimeError:  # the op's schema never loaded (torchvision._C unavailable)
                return fn

        return register if func is None else register(func)

    tl.register_fake = tolerant
    try:
        import torchvision  # noqa: F401
    finally:
        tl.register_fake = original


_import_torchvision()

import peft  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from torch import nn  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ROOT / "estimator" / "models" / "presets"
DEFAULT_OUT = ROOT / "tests" / "data" / "preset_param_counts.json"
LORA_R = 16

# Exact totals published / derived independently (docs/formulas.md §1); the script fails if one differs.
KNOWN_TOTALS = {
    "llama-3.1-8b": 8_030_261_248,
    "qwen2.5-7b": 7_615_616_512,
    "gemma-2-2b": 2_614_341_888,
    "llama-3.2-1b": 1_235_814_400,
    "mistral-7b-v0.3": 7_248_023_552,
    "phi-3-mini": 3_821_079_552,
    "qwen3-8b": 8_190_735_360,
    "qwen3-30b-a3b": 30_532_122_624,
    "mixtral-8x7b": 46_702_792_704,
    "llama-3.2-3b": 3_212_749_824,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-1.5b": 1_543_714_304,
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-14b": 14_770_033_664,
    "gemma-2-9b": 9_241_705_984,
}
KNOWN_ACTIVE = {"qwen3-30b-a3b": 3_353_032_704}


def load_config(preset_id: str):
    raw = json.loads((PRESETS / f"{preset_id}.json").read_text())
    kwargs = dict(raw)
    model_type = kwargs.pop("model_type")
    kwargs.pop("auto_map", None)  # never resolve remote code; the in-library class is the reference
    return AutoConfig.for_model(model_type, **kwargs), raw


def build_meta_model(cfg) -> nn.Module:
    if getattr(cfg, "model_type", "") == "gemma3n":  # the MobileNetV5 vision tower: TimmWrapperModel -> timm
        try:
            import timm  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError as exc:
            raise SystemExit(f"Gemma 3n's vision tower needs timm ({exc}): {TIMM_INSTALL}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            if getattr(cfg, "vision_config", None) is not None:
                # multimodal wrappers (gemma3, mistral3): the ...ForConditionalGeneration class, towers included
                from transformers import AutoModelForImageTextToText

                return AutoModelForImageTextToText.from_config(cfg, trust_remote_code=False)
            return AutoModelForCausalLM.from_config(cfg, trust_remote_code=False)


def tower_params(model: nn.Module) -> int:
    """Parameters outside the language model and its head: vision/audio towers and projectors."""
    lm = model.get_decoder() if hasattr(model, "get_decoder") else None
    inside = {id(p) for p in lm.parameters()} if lm is not None else set()
    out = model.get_output_embeddings()
    if out is not None:
        inside |= {id(p) for p in out.parameters()}
    return sum(p.numel() for _, p in unique_params(model).values() if id(p) not in inside)


def unique_params(module: nn.Module) -> dict[int, tuple[str, nn.Parameter]]:
    seen: dict[int, tuple[str, nn.Parameter]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        seen.setdefault(id(p), (name, p))
    return seen


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The ModuleList holding the decoder blocks (the longest ModuleList whose length is num_hidden_layers)."""
    n = model.config.get_text_config().num_hidden_layers
    for _, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n:
            return mod
    raise RuntimeError("decoder layer list not found")


def moe_fields(cfg) -> tuple[int, int] | None:
    cfg = cfg.get_text_config()  # multimodal wrappers (llama4, qwen3_5_moe, gemma4) keep the MoE fields there
    experts = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    top_k = getattr(cfg, "num_experts_per_tok", None) or getattr(cfg, "top_k_experts", None)  # Gemma 4: top_k_experts
    if experts and top_k:
        return int(experts), int(top_k)
    return None


def is_routed_expert_param(name: str) -> bool:
    return ".experts." in name and "shared_expert" not in name


def count(preset_id: str) -> dict:
    cfg, _raw = load_config(preset_id)
    model = build_meta_model(cfg)

    params = unique_params(model)
    total = sum(p.numel() for _, p in params.values())

    emb_in = model.get_input_embeddings().weight
    out_mod = model.get_output_embeddings()
    emb = emb_in.numel()
    tied = out_mod is not None and out_mod.weight is emb_in
    if out_mod is not None and not tied:
        emb += out_mod.weight.numel() + (out_mod.bias.numel() if getattr(out_mod, "bias", None) is not None else 0)

    layers = decoder_layers(model)
    linear_in_layers = 0
    for mod in layers.modules():
        if isinstance(mod, nn.Linear):
            linear_in_layers += mod.weight.numel() + (mod.bias.numel() if mod.bias is not None else 0)

    fused_expert = 0
    routed_expert = 0
    for name, p in params.values():
        if is_routed_expert_param(name):
            routed_expert += p.numel()
            if p.dim() >= 3:
                fused_expert += p.numel()

    row: dict = {
        "model_type": cfg.model_type,
        "architecture": type(model).__name__,
        "params_total": total,
        "params_embedding": emb,
        "tie_word_embeddings": bool(tied),
        "linear_params_in_layers": linear_in_layers,
    }
    if getattr(cfg, "vision_config", None) is not None:
        row["params_tower"] = tower_params(model)

    moe = moe_fields(cfg)
    if moe:
        n_experts, top_k = moe
        # routed experts are split evenly; each token uses top_k of n_experts in every MoE layer
        inactive = routed_expert - routed_expert * top_k // n_experts
        assert (routed_expert * top_k) % n_experts == 0
        row.update(
            {
                "num_experts": n_experts,
                "experts_per_token": top_k,
                "params_routed_experts": routed_expert,
                "params_active": total - inactive,
                "experts_fused": fused_expert > 0,
                "params_experts_fused": fused_expert,
            }
        )

    # LoRA "all-linear" exactly as PEFT builds it (on the meta model: nothing is allocated)
    lin_formula = 0
    output_name = None
    for name, mod in model.named_modules():
        if mod is out_mod:
            output_name = name
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and name != output_name and not re.fullmatch(TOWER_MODULES, name):
            lin_formula += LORA_R * (mod.in_features + mod.out_features)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # multimodal wrappers: adapters on the language model only, as the estimator and the tracer count them
            # (plain "all-linear" would also adapt every linear of the vision tower); Llama 4's router is left out
            # as well (exact/trace.py all_linear_exclude: PEFT's wrapper cannot run its tuple output)
            from exact.trace import all_linear_exclude

            exclude = all_linear_exclude(model, getattr(cfg, "vision_config", None) is not None)
            pm = get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=32, target_modules="all-linear",
                                                  exclude_modules=exclude))
        lora = sum(p.numel() for n, p in pm.named_parameters() if "lora_" in n)
        row["lora_all_linear_r16"] = lora
        row["lora_targets"] = lora_targets(pm)
        row["lora_method"] = "peft.get_peft_model on the meta model"
    except Exception as exc:  # pragma: no cover - fallback documented in the output
        row["lora_all_linear_r16"] = lin_formula
        row["lora_method"] = f"formula r*sum(in+out) over nn.Linear except the output head (PEFT failed: {exc!r})"
    row["lora_formula_r16"] = lin_formula
    if moe:
        row["lora_unfused_equivalent_r16"] = lin_formula + unfused_moe_lora(model, n_experts, LORA_R)
        targets = row.get("lora_targets", [])
        if any(t.startswith("mlp.experts[") for t in targets):
            row["lora_note"] = (
                "PEFT maps 'all-linear' back to the transformers-v4 targets (router + every expert's gate/up/down) "
                "and adapts the fused 3-D expert tensors with lora.ParamWrapper (target_parameters): rank r*E per "
                "tensor, 2r for the fused gate_up_proj with a dense B, so it creates more parameters than the v4 "
                "unfused layout (lora_unfused_equivalent_r16)."
            )
        elif fused_expert:
            row["lora_note"] = (
                "PEFT applied no v4->v5 MoE conversion for this model_type: 'all-linear' only finds the nn.Linear "
                "modules, so the routed experts and the router get no LoRA (lora_unfused_equivalent_r16 is what the "
                "v4 unfused layout would give)."
            )
    return row


def lora_targets(peft_model: nn.Module) -> list[str]:
    """Adapted modules as 'path.inside.layer' (+ '[param]' for PEFT ParamWrapper on a fused/non-Linear tensor)."""
    out = set()
    for name, mod in peft_model.named_modules():
        if not hasattr(mod, "lora_A") or not len(mod.lora_A):
            continue
        parts = name.split(".")
        # strip 'base_model.model.model.layers.<i>.' and the nested 'base_layer' of stacked ParamWrappers
        if "layers" in parts:
            parts = parts[parts.index("layers") + 2 :]
        parts = [x for x in parts if x != "base_layer"]
        label = ".".join(parts)
        param = getattr(mod, "parameter_name", None)
        out.add(f"{label}[{param}]" if param else label)
    return sorted(out)


def unfused_moe_lora(model: nn.Module, n_experts: int, r: int) -> int:
    """LoRA params of the same targets when experts/router are separate nn.Linear (transformers v4 layout):
    router r*(h+E) per layer when the router is not an nn.Linear, and r*(in+out) per expert matrix, with a fused
    gate_up_proj (E, 2I, h) split back into gate (I, h) and up (I, h)."""
    total = 0
    for name, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if p.dim() == 3 and is_routed_expert_param(f"{name}.{pname}"):
                e, out_f, in_f = p.shape
                if pname == "gate_up_proj":
                    total += e * 2 * r * (in_f + out_f // 2)
                else:
                    total += e * r * (in_f + out_f)
        if name.endswith("mlp.gate") and not isinstance(mod, nn.Linear) and hasattr(mod, "weight"):
            e, h = mod.weight.shape
            assert e == n_experts
            total += r * (h + e)
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--write-index", action="store_true", help="write params_total/params_active into index.json")
    ap.add_argument("ids", nargs="*", help="preset ids (default: all in index.json)")
    args = ap.parse_args(argv)

    index = json.loads((PRESETS / "index.json").read_text())
    ids = args.ids or [e["id"] for e in index]

    result: dict = {
        "_versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "python": sys.version.split()[0],
        },
        "_notes": (
            "Counts from AutoModelForCausalLM.from_config on the meta device (calibration/count_params.py). "
            "params_embedding = input embedding + untied output head. linear_params_in_layers = nn.Linear "
            "weights+biases inside the decoder layers. lora_all_linear_r16 = LoRA params PEFT creates with "
            "LoraConfig(r=16, target_modules='all-linear'); lora_formula_r16 = r*sum(in+out) over every "
            "nn.Linear except the output head. Multimodal wrappers (gemma3, mistral3, gemma4, gemma3n, llama4, "
            "qwen3_5, qwen3_5_moe): AutoModelForImageTextToText, towers included in params_total (params_tower = "
            "towers + projectors); LoRA all-linear excludes the towers (exclude_modules, as the estimator counts "
            "adapters on the language model only). Gemma 3n's MobileNetV5 vision encoder is a timm model "
            "(TimmWrapperModel -> timm.create_model(vision_config.architecture, num_classes=0)), built with the "
            "timm named in _versions and counted in params_total and params_tower. Multimodal MoE wrappers: params_active from the text config's "
            "expert fields."
        ),
    }
    failures = []
    for pid in ids:
        t0 = time.perf_counter()
        row = count(pid)
        result[pid] = row
        exp = KNOWN_TOTALS.get(pid)
        ok = exp is None or exp == row["params_total"]
        if pid in KNOWN_ACTIVE:
            ok = ok and KNOWN_ACTIVE[pid] == row.get("params_active")
        if not ok:
            failures.append(pid)
        extra = f" active={row['params_active']:,}" if "params_active" in row else ""
        print(
            f"{pid:20s} total={row['params_total']:>15,}{extra} lora16={row['lora_all_linear_r16']:,} "
            f"{'OK' if exp else '--'}{'' if ok else ' MISMATCH expected ' + format(exp, ',')} "
            f"({time.perf_counter() - t0:.1f}s)",
            flush=True,
        )

    if "timm" in sys.modules:  # Gemma 3n's vision tower was built
        result["_versions"]["timm"] = sys.modules["timm"].__version__
        result["_versions"]["torchvision"] = sys.modules["torchvision"].__version__
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")

    if args.write_index:
        for entry in index:
            row = result.get(entry["id"])
            if row is None:
                continue
            entry["params_total"] = row["params_total"]
            if "params_active" in row:
                entry["params_active"] = row["params_active"]
            else:
                entry.pop("params_active", None)
        ordered = [
            {k: e[k] for k in ("id", "name", "hf_repo", "family", "params_total", "params_active", "source") if k in e}
            for e in index
        ]
        (PRESETS / "index.json").write_text(json.dumps(ordered, indent=2) + "\n")
        print(f"updated {PRESETS / 'index.json'}")

    if failures:
        print(f"MISMATCH for {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
