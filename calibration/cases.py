"""The calibration matrix: a fixed, deterministic list of (model config, training setup) cases.

Nothing here is random: ``get_cases()`` always returns the same list in the same order, so
validation/data/fixtures.json can be regenerated bit-for-bit (see calibration/run_matrix.py).

Case schema (input to exact.trace.trace_case)::

    {
      "id": "llama-a-full-bf16-b1s2048",      # unique, stable
      "family": "llama",                        # HF model_type
      "config": {...},                          # full HF config dict (AutoConfig.for_model(...).to_dict(), minus noise)
      "setup": {
        "method": "full" | "lora",
        "precision": "bf16" | "mixed" | "fp32",  # bf16: model in bf16, no autocast (LoRA: autocast bf16)
                                                 # mixed: fp32 model + autocast bf16; fp32: no autocast
        "optimizer": "adamw",                    # torch.optim.AdamW(fused=True), HF Trainer default
        "batch": int, "seq_len": int,
        "grad_ckpt": bool,                       # non-reentrant, every decoder layer
        "attention": "sdpa" | "eager",
        "lora_rank": int | None, "lora_alpha": int | None (2*rank),
        "lora_targets": "all-linear" | [module names] | None,
        "lora_dropout": 0.0,
        "loss": "standard" | "chunked" | "fused",  # standard: HF ForCausalLMLoss (logits.float() + cross_entropy);
                                                 # chunked: TRL 1.16 SFT fused chunked LM head; fused: Liger FLCE
                                                 # (exact/losses.py).  Missing (older fixtures) = "standard"
        "offload_activations": bool              # only with grad_ckpt: transformers activation_checkpointing_enable(
                                                 # offload=True).  Only the "rw-" cases carry the key; missing = false
      },
      "tags": [...]                              # free-form hints (e.g. "moe", "sliding_window_mask")
    }

The original 102 cases use small shapes, deliberately not those of released models; the "rw-" cases (appended
at the end, ``_rw_cases``) use released models' widths and vocabularies with 2-4 layers. fake tracing cost depends on the number of
ops (layers), not on tensor sizes, so long sequences and large vocabularies are cheap.  MoE cases with fp32
weights cannot run under FakeTensorMode (the grouped_mm meta kernel only accepts bf16) and run for real on CPU,
so they are kept tiny.
"""

from __future__ import annotations

import copy
from typing import Any

# --------------------------------------------------------------------------------------------------
# Model shapes (non-preset).  Keys are passed to AutoConfig.for_model(family, **spec).
# --------------------------------------------------------------------------------------------------
_NOISE_KEYS = {
    "transformers_version",
    "id2label",
    "label2id",
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "chunk_size_feed_forward",
    "problem_type",
    "is_encoder_decoder",
    "_name_or_path",
    "dtype",
    "torch_dtype",
}

_ARCH = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gpt_neox": "GPTNeoXForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
    "qwen3_5_text": "Qwen3_5ForCausalLM",
    "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
    "llama4_text": "Llama4ForCausalLM",
    "ernie4_5_moe": "Ernie4_5_MoeForCausalLM",
}

# Two shapes per dense family: "a" (wider / bigger vocab) and "b" (other head layout / tying).
SHAPES: dict[str, dict[str, dict[str, Any]]] = {
    "llama": {
        "a": dict(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=64, tie_word_embeddings=False),
        "b": dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, head_dim=64, tie_word_embeddings=True),
        "c": dict(vocab_size=50000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=6,
                  num_attention_heads=16, num_key_value_heads=4, head_dim=64, tie_word_embeddings=False),
    },
    "mistral": {
        "a": dict(vocab_size=24000, hidden_size=640, intermediate_size=1792, num_hidden_layers=4,
                  num_attention_heads=10, num_key_value_heads=2, head_dim=64, sliding_window=None,
                  tie_word_embeddings=False),
        "b": dict(vocab_size=8000, hidden_size=512, intermediate_size=1536, num_hidden_layers=3,
                  num_attention_heads=8, num_key_value_heads=8, head_dim=128, sliding_window=None,
                  tie_word_embeddings=False),
        # Mistral-v0.1-style sliding window shorter than the sequence: SDPA gets a materialised mask
        "sw": dict(vocab_size=24000, hidden_size=640, intermediate_size=1792, num_hidden_layers=4,
                   num_attention_heads=10, num_key_value_heads=2, head_dim=64, sliding_window=1024,
                   tie_word_embeddings=False),
    },
    "qwen2": {
        "a": dict(vocab_size=20000, hidden_size=448, intermediate_size=1216, num_hidden_layers=4,
                  num_attention_heads=7, num_key_value_heads=1, tie_word_embeddings=True),
        "b": dict(vocab_size=6000, hidden_size=896, intermediate_size=2432, num_hidden_layers=2,
                  num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=False),
    },
    "qwen3": {
        "a": dict(vocab_size=16000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=4, head_dim=128, tie_word_embeddings=False),
        "b": dict(vocab_size=3000, hidden_size=768, intermediate_size=2048, num_hidden_layers=3,
                  num_attention_heads=12, num_key_value_heads=4, head_dim=64, tie_word_embeddings=True),
    },
    "gemma2": {
        "a": dict(vocab_size=12000, hidden_size=576, intermediate_size=1536, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=128, query_pre_attn_scalar=128,
                  tie_word_embeddings=True),
        "b": dict(vocab_size=2000, hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, head_dim=64, query_pre_attn_scalar=64,
                  tie_word_embeddings=True),
    },
    "phi3": {
        "a": dict(vocab_size=10000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=8, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  tie_word_embeddings=False),
        "b": dict(vocab_size=40000, hidden_size=768, intermediate_size=2048, num_hidden_layers=3,
                  num_attention_heads=12, num_key_value_heads=4, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  tie_word_embeddings=False),
    },
    "gpt_neox": {
        "a": dict(vocab_size=30000, hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                  num_attention_heads=8, tie_word_embeddings=False),
        "b": dict(vocab_size=5000, hidden_size=768, intermediate_size=3072, num_hidden_layers=2,
                  num_attention_heads=12, tie_word_embeddings=False),
    },
    "qwen3_moe": {
        "a": dict(vocab_size=5000, hidden_size=256, intermediate_size=768, moe_intermediate_size=256,
                  num_experts=8, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, tie_word_embeddings=False),
        "b": dict(vocab_size=3000, hidden_size=384, intermediate_size=1024, moe_intermediate_size=192,
                  num_experts=16, num_experts_per_tok=4, num_hidden_layers=3, num_attention_heads=6,
                  num_key_value_heads=2, head_dim=64, norm_topk_prob=True, tie_word_embeddings=True),
    },
    "mixtral": {
        "a": dict(vocab_size=8000, hidden_size=512, intermediate_size=768, num_local_experts=4,
                  num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                  head_dim=64, tie_word_embeddings=False),
    },
}

# LoRA target sets per family (explicit module names; "all-linear" is passed through to PEFT).
_ATTN = {
    "default": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "phi3": ["qkv_proj", "o_proj"],
    "gpt_neox": ["query_key_value", "dense"],
}
_QV = {"default": ["q_proj", "v_proj"], "phi3": ["qkv_proj"], "gpt_neox": ["query_key_value"]}
_MLP = {
    "default": ["gate_proj", "up_proj", "down_proj"],
    "phi3": ["gate_up_proj", "down_proj"],
    "gpt_neox": ["dense_h_to_4h", "dense_4h_to_h"],
}


def lora_targets(family: str, which: str) -> str | list[str]:
    if which == "all-linear":
        return "all-linear"
    table = {"attn": _ATTN, "qv": _QV, "mlp": _MLP}[which]
    return list(table.get(family, table["default"]))


def full_config(family: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Expand a shape spec into a full HF config dict (what a config.json would hold)."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(family, **spec).to_dict()
    out = {k: v for k, v in cfg.items() if k not in _NOISE_KEYS}
    out["model_type"] = family
    out["architectures"] = [_ARCH[family]]
    return out


# --------------------------------------------------------------------------------------------------
# Setup template (10 per dense family).  Token counts are rotated per family so that families do not
# all share the same (batch, seq_len) pairs.
# --------------------------------------------------------------------------------------------------
# (shape, method, precision, grad_ckpt, lora target set, rank)
_DENSE_TEMPLATE: list[tuple[str, str, str, bool, str | None, int | None]] = [
    ("a", "full", "bf16", False, None, None),
    ("b", "full", "bf16", True, None, None),
    ("a", "full", "mixed", False, None, None),
    ("b", "full", "mixed", True, None, None),
    ("a", "full", "fp32", False, None, None),
    ("a", "lora", "bf16", False, "all-linear", 16),
    ("b", "lora", "bf16", True, "qv", 8),
    ("a", "lora", "mixed", False, "attn", 32),
    ("b", "lora", "fp32", True, "mlp", 64),
    ("a", "lora", "bf16", True, "all-linear", 4),
]
# (batch, seq_len) pairs; case j of family f uses _TOKENS[(j + 3*f) % len(_TOKENS)]
_TOKENS: list[tuple[int, int]] = [
    (1, 2048), (4, 1024), (2, 512), (1, 4096), (1, 256), (2, 2048),
    (8, 512), (1, 8192), (2, 1024), (4, 256), (1, 1024), (8, 256),
]

_DENSE_FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "phi3", "gpt_neox"]
_MAX_EAGER_SEQ = 4096  # eager attention materialises b*a*s^2 fp32 scores: keep it realistic


def _setup(method, precision, batch, seq, ckpt, attention, targets=None, rank=None) -> dict[str, Any]:
    return {
        "method": method,
        "precision": precision,
        "optimizer": "adamw",
        "batch": int(batch),
        "seq_len": int(seq),
        "grad_ckpt": bool(ckpt),
        "attention": attention,
        "lora_rank": int(rank) if method == "lora" else None,
        "lora_alpha": 2 * int(rank) if method == "lora" else None,
        "lora_targets": targets if method == "lora" else None,
        "lora_dropout": 0.0,
        "loss": "standard",
    }


def _case_id(family, shape, setup) -> str:
    parts = [family, shape, setup["method"]]
    if setup["method"] == "lora":
        t = setup["lora_targets"]
        tname = "all" if t == "all-linear" else "+".join(x.replace("_proj", "") for x in t)
        parts.append(f"r{setup['lora_rank']}-{tname}")
    parts.append(setup["precision"])
    parts.append(f"b{setup['batch']}s{setup['seq_len']}")
    if setup["grad_ckpt"]:
        parts.append("ckpt")
    parts.append(setup["attention"])
    return "-".join(parts)


def _make(family: str, shape: str, setup: dict[str, Any], tags: list[str] | None = None, mode=None) -> dict:
    case = {
        "id": _case_id(family, shape, setup),
        "family": family,
        "config": full_config(family, SHAPES[family][shape]),
        "setup": setup,
        "tags": list(tags or []),
    }
    if mode:
        case["mode"] = mode
    return case


def _dense_cases() -> list[dict]:
    cases = []
    for f, family in enumerate(_DENSE_FAMILIES):
        for j, (shape, method, precision, ckpt, tset, rank) in enumerate(_DENSE_TEMPLATE):
            batch, seq = _TOKENS[(j + 3 * f) % len(_TOKENS)]
            attention = "sdpa"
            if family == "gemma2":
                attention = "eager"  # Gemma-2 logit soft-capping needs eager attention
            elif j == 9 and family in ("llama", "mistral", "qwen2"):
                attention = "eager"  # a few eager-attention cases for SDPA-capable families
            if attention == "eager" and seq > _MAX_EAGER_SEQ:
                batch, seq = batch * (seq // _MAX_EAGER_SEQ), _MAX_EAGER_SEQ
            targets = lora_targets(family, tset) if method == "lora" else None
            st = _setup(method, precision, batch, seq, ckpt, attention, targets, rank)
            tags = ["dense"] + (["eager_attention"] if attention == "eager" else [])
            cases.append(_make(family, shape, st, tags))
    return cases


def _extra_cases() -> list[dict]:
    """Hand-picked cases for axes the template does not reach."""
    out = []
    # the biggest llama shape: weights dominate at short sequences, activations at long ones
    out.append(_make("llama", "c", _setup("full", "bf16", 1, 512, False, "sdpa"), ["dense", "weights_dominant"]))
    out.append(_make("llama", "c", _setup("full", "mixed", 2, 4096, True, "sdpa"), ["dense"]))
    out.append(_make("llama", "c", _setup("lora", "bf16", 4, 2048, False, "sdpa", "all-linear", 32), ["dense"]))
    out.append(_make("llama", "c", _setup("lora", "bf16", 1, 8192, True, "sdpa", lora_targets("llama", "qv"), 16),
                     ["dense"]))
    out.append(_make("llama", "b", _setup("full", "fp32", 2, 2048, True, "sdpa"), ["dense"]))
    out.append(_make("llama", "b", _setup("lora", "mixed", 1, 512, True, "eager", "all-linear", 8),
                     ["dense", "eager_attention"]))
    out.append(_make("qwen2", "a", _setup("lora", "fp32", 2, 1024, False, "sdpa", "all-linear", 16), ["dense"]))
    out.append(_make("qwen3", "b", _setup("full", "bf16", 8, 1024, False, "eager"), ["dense", "eager_attention"]))
    out.append(_make("phi3", "a", _setup("lora", "mixed", 4, 512, True, "sdpa", "all-linear", 16), ["dense"]))
    out.append(_make("gpt_neox", "a", _setup("full", "fp32", 1, 2048, True, "sdpa"), ["dense"]))
    # sliding window < seq_len: transformers builds a (b,1,s,s) bool mask, SDPA drops enable_gqa (repeat_kv)
    out.append(_make("mistral", "sw", _setup("full", "bf16", 1, 4096, False, "sdpa"), ["dense", "sliding_window_mask"]))
    out.append(_make("mistral", "sw", _setup("lora", "bf16", 2, 2048, True, "sdpa", "all-linear", 16),
                     ["dense", "sliding_window_mask"]))
    # short sequences, bigger shapes: weights, gradients and optimizer states dominate the peak
    wd = ["dense", "weights_dominant"]
    out.append(_make("llama", "c", _setup("full", "mixed", 1, 256, False, "sdpa"), wd))
    out.append(_make("llama", "c", _setup("full", "fp32", 1, 256, True, "sdpa"), wd))
    out.append(_make("llama", "c", _setup("lora", "bf16", 1, 256, True, "sdpa", "all-linear", 8), wd))
    out.append(_make("qwen2", "b", _setup("full", "bf16", 1, 256, False, "sdpa"), wd))
    out.append(_make("qwen3", "b", _setup("full", "mixed", 2, 256, True, "sdpa"), wd))
    out.append(_make("phi3", "b", _setup("lora", "mixed", 1, 256, True, "sdpa", "all-linear", 16), wd))
    out.append(_make("gpt_neox", "b", _setup("full", "fp32", 1, 256, False, "sdpa"), wd))
    out.append(_make("mistral", "b", _setup("full", "mixed", 1, 512, True, "sdpa"), wd))
    out.append(_make("gemma2", "a", _setup("full", "bf16", 1, 256, False, "eager"), wd + ["eager_attention"]))
    return out


def _moe_cases() -> list[dict]:
    out = []
    bf16 = [  # fake-traced
        ("a", "full", "bf16", 1, 2048, False, None, None),
        ("a", "full", "bf16", 2, 1024, True, None, None),
        ("b", "full", "bf16", 4, 512, False, None, None),
        ("b", "lora", "bf16", 1, 4096, False, "all-linear", 16),
        ("a", "lora", "bf16", 2, 2048, True, "attn", 8),
    ]
    for shape, method, precision, b, s, ckpt, tset, rank in bf16:
        targets = lora_targets("qwen3_moe", tset) if method == "lora" else None
        out.append(_make("qwen3_moe", shape, _setup(method, precision, b, s, ckpt, "sdpa", targets, rank), ["moe"]))
    real = [  # fp32 expert weights: grouped_mm has no fp32 meta kernel -> real CPU run (tiny on purpose)
        ("a", "full", "mixed", 1, 512, False, None, None),
        ("a", "full", "fp32", 1, 256, True, None, None),
        ("a", "lora", "mixed", 2, 256, True, "all-linear", 8),
    ]
    for shape, method, precision, b, s, ckpt, tset, rank in real:
        targets = lora_targets("qwen3_moe", tset) if method == "lora" else None
        out.append(_make("qwen3_moe", shape, _setup(method, precision, b, s, ckpt, "sdpa", targets, rank),
                         ["moe", "real_cpu_run"]))
    out.append(_make("qwen3_moe", "b", _setup("full", "bf16", 1, 256, False, "sdpa"), ["moe", "weights_dominant"]))
    out.append(_make("mixtral", "a", _setup("full", "bf16", 2, 1024, False, "sdpa"), ["moe"]))
    out.append(_make("mixtral", "a", _setup("lora", "bf16", 1, 2048, True, "sdpa", "all-linear", 16), ["moe"]))
    return out


# --------------------------------------------------------------------------------------------------
# Real-width cases (prefix "rw-"): released models' hidden sizes, heads and vocabularies, with only 2-4 decoder
# layers (fake tracing cost grows with the op count, not with tensor sizes).  They exercise the loss heads
# ("standard", TRL's "chunked", Liger's "fused"), activation offloading and the tied-embedding end of backward at
# the widths where those terms matter.  RoPE parameters are left at the family defaults (no effect on memory).
# --------------------------------------------------------------------------------------------------
RW_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama3.2-1b": ("llama", dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=3,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                                  tie_word_embeddings=True)),
    "llama3.2-3b": ("llama", dict(vocab_size=128256, hidden_size=3072, intermediate_size=8192, num_hidden_layers=2,
                                  num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                                  tie_word_embeddings=True)),
    "qwen2.5-0.5b": ("qwen2", dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=4,
                                   num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen2.5-1.5b": ("qwen2", dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960,
                                   num_hidden_layers=2, num_attention_heads=12, num_key_value_heads=2,
                                   tie_word_embeddings=True)),
    "qwen3-0.6b": ("qwen3", dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=3,
                                 num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 tie_word_embeddings=True)),
    # Gemma-2 defaults are the 2B's: head_dim 256, query_pre_attn_scalar 256, attention soft-capping 50, final
    # logit soft-capping 30, sliding window 4096 on alternate layers
    "gemma2-2b": ("gemma2", dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=2,
                                 num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                                 query_pre_attn_scalar=256, final_logit_softcapping=30.0,
                                 attn_logit_softcapping=50.0, tie_word_embeddings=True)),
    "llama3.1-8b": ("llama", dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=2,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                  tie_word_embeddings=False)),
}
LOSSES = ("standard", "chunked", "fused")
_ROT = None  # template marker: loss rotates over LOSSES by model
# (method, precision, grad_ckpt, offload_activations, loss, stack tag).  grad_ckpt None: alternates by model.
_RW_TEMPLATE: list[tuple[str, str, bool | None, bool, str | None, str | None]] = [
    ("full", "bf16", False, False, "standard", "stack-plain"),
    ("full", "bf16", True, False, "chunked", "stack-trl-default"),  # TRL 1.16 SFT defaults: bf16, ckpt, chunked
    ("full", "bf16", True, False, "fused", "stack-hf-liger"),  # HF Trainer use_liger_kernel=True + ckpt
    ("full", "bf16", True, True, _ROT, None),
    ("full", "mixed", True, False, _ROT, None),
    ("full", "mixed", False, False, _ROT, None),
    ("full", "fp32", None, False, _ROT, None),
    ("lora", "bf16", False, False, "standard", "stack-plain"),
    ("lora", "bf16", True, False, "chunked", "stack-trl-default"),
    ("lora", "bf16", True, True, _ROT, None),
    ("lora", "mixed|fp32", None, False, _ROT, None),  # mixed on even models, fp32 on odd ones
    ("lora", "bf16", True, False, "fused", "stack-hf-liger"),
]
_RW_TOKENS: list[tuple[int, int]] = [
    (1, 512), (2, 1024), (1, 2048), (4, 1024), (1, 4096), (2, 2048),
    (4, 512), (2, 4096), (1, 1024), (4, 2048), (2, 512), (4, 4096),
]


def _rw_case_id(model: str, layers: int, setup: dict[str, Any]) -> str:
    parts = ["rw", model, f"L{layers}", setup["method"]]
    if setup["method"] == "lora":
        parts.append(f"r{setup['lora_rank']}-all")
    parts += [setup["precision"], f"b{setup['batch']}s{setup['seq_len']}"]
    if setup["grad_ckpt"]:
        parts.append("ckpt")
    if setup["offload_activations"]:
        parts.append("offload")
    parts += [setup["loss"], setup["attention"]]
    return "-".join(parts)


def _rw_cases() -> list[dict]:
    out = []
    for m, (model, (family, spec)) in enumerate(RW_MODELS.items()):
        tied = bool(spec["tie_word_embeddings"])
        for j, (method, precision, ckpt, offload, loss, stack) in enumerate(_RW_TEMPLATE):
            if precision == "mixed|fp32":
                precision = "mixed" if m % 2 == 0 else "fp32"
            if ckpt is None:
                ckpt = m % 2 == 0
            if loss is _ROT:
                loss = LOSSES[(j + m) % len(LOSSES)]
            batch, seq = _RW_TOKENS[(j + 5 * m) % len(_RW_TOKENS)]
            attention = "eager" if family == "gemma2" else "sdpa"
            st = _setup(method, precision, batch, seq, ckpt, attention,
                        "all-linear" if method == "lora" else None, 16 if method == "lora" else None)
            st["loss"] = loss
            st["offload_activations"] = bool(offload)
            tags = ["dense", "real-width", "tied" if tied else "untied", f"loss-{loss}"]
            if offload:
                tags.append("offload")
            if stack:
                tags.append(stack)
            if attention == "eager":
                tags.append("eager_attention")
            out.append({
                "id": _rw_case_id(model, int(spec["num_hidden_layers"]), st),
                "family": family,
                "config": full_config(family, spec),
                "setup": st,
                "tags": tags,
            })
    return out


# --------------------------------------------------------------------------------------------------
# Issue 11's dense families and multimodal wrappers at real widths (prefix "rwd-"; fixtures in
# validation/data/fixtures_dense_families.json).  Few layers keep the fake traces quick; the wrappers keep
# two tower layers at the tower's real width.  Dropout is set to 0 (StarCoder2's configs say 0.1; the estimator
# notes that it does not count dropout masks).  Gemma 3 with image inputs: the "rwi-" cases below.
# --------------------------------------------------------------------------------------------------
_SIGLIP_896 = dict(model_type="siglip_vision_model", hidden_size=1152, image_size=896, intermediate_size=4304,
                   num_attention_heads=16, num_hidden_layers=2, patch_size=14, vision_use_head=False)
RWD_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "olmo2-7b": ("olmo2", dict(vocab_size=100352, hidden_size=4096, intermediate_size=11008, num_hidden_layers=2,
                               num_attention_heads=32, num_key_value_heads=32, tie_word_embeddings=False)),
    "granite3.3-8b": ("granite", dict(vocab_size=49159, hidden_size=4096, intermediate_size=12800, num_hidden_layers=2,
                                      num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
                                      embedding_multiplier=12.0, residual_multiplier=0.22,
                                      attention_multiplier=0.0078125, logits_scaling=16.0)),
    "smollm3-3b": ("smollm3", dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=2,
                                   num_attention_heads=16, num_key_value_heads=4, tie_word_embeddings=True,
                                   no_rope_layer_interval=2)),
    "cohere2-r7b": ("cohere2", dict(vocab_size=256000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=2,
                                    num_attention_heads=32, num_key_value_heads=8, head_dim=128, sliding_window=4096,
                                    logit_scale=0.25, tie_word_embeddings=True)),
    "starcoder2-3b": ("starcoder2", dict(vocab_size=49152, hidden_size=3072, intermediate_size=12288,
                                         num_hidden_layers=2, num_attention_heads=24, num_key_value_heads=2,
                                         use_bias=True, sliding_window=4096, attention_dropout=0.0,
                                         residual_dropout=0.0, embedding_dropout=0.0, tie_word_embeddings=True)),
    "ernie4.5-0.3b": ("ernie4_5", dict(vocab_size=103424, hidden_size=1024, intermediate_size=3072,
                                       num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=2, head_dim=128,
                                       use_bias=False, tie_word_embeddings=True)),
    "gemma3-4b": ("gemma3", dict(
        text_config=dict(model_type="gemma3_text", vocab_size=262208, hidden_size=2560, intermediate_size=10240,
                         num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                         query_pre_attn_scalar=256, sliding_window=1024),
        vision_config=_SIGLIP_896, mm_tokens_per_image=256, image_token_index=262144)),
    "mistral3-24b": ("mistral3", dict(
        text_config=dict(model_type="mistral", vocab_size=131072, hidden_size=5120, intermediate_size=32768,
                         num_hidden_layers=2, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                         sliding_window=None, tie_word_embeddings=False),
        vision_config=dict(model_type="pixtral", hidden_size=1024, intermediate_size=4096, num_hidden_layers=2,
                           num_attention_heads=16, head_dim=64, patch_size=14, image_size=1540),
        tie_word_embeddings=False, image_token_index=10, spatial_merge_size=2)),
}
_ARCH.update({"olmo2": "Olmo2ForCausalLM", "granite": "GraniteForCausalLM", "smollm3": "SmolLM3ForCausalLM",
              "cohere2": "Cohere2ForCausalLM", "starcoder2": "Starcoder2ForCausalLM", "ernie4_5": "Ernie4_5ForCausalLM",
              "gemma3": "Gemma3ForConditionalGeneration", "mistral3": "Mistral3ForConditionalGeneration"})
# (method, precision, grad_ckpt): full and LoRA all-linear (r 16), with and without checkpointing (a cohere2 layer
# pattern of 3 sliding + 1 full layer needs no more layers here: every sequence is within the 4096 window)
_RWD_TEMPLATE = [("full", "bf16", False), ("full", "mixed", True), ("lora", "bf16", False), ("lora", "bf16", True)]


def _rwd_cases() -> list[dict]:
    out = []
    for m, (model, (family, spec)) in enumerate(RWD_MODELS.items()):
        layers = int((spec.get("text_config") or spec)["num_hidden_layers"])
        tied = bool((spec.get("text_config") or spec).get("tie_word_embeddings", True))
        for j, (method, precision, ckpt) in enumerate(_RWD_TEMPLATE):
            batch, seq = _RW_TOKENS[(j + 5 * m) % len(_RW_TOKENS)]
            st = _setup(method, precision, batch, seq, ckpt, "sdpa",
                        "all-linear" if method == "lora" else None, 16 if method == "lora" else None)
            st["offload_activations"] = False
            out.append({"id": "rwd-" + _rw_case_id(model, layers, st)[3:], "family": family,
                        "config": full_config(family, spec), "setup": st,
                        "tags": ["dense", "real-width", "tied" if tied else "untied", "loss-standard"]})
    return out


# Gemma 3 with image inputs (prefix "rwi-"; fixtures in validation/data/fixtures_image_inputs.json): the rwd- Gemma 3
# 4B shape with its 896-px SigLIP tower (2 layers) and one image per example, whose 256 placeholder tokens come on
# top of seq_len text tokens (exact/trace.py _train_step). The fake trace used to fail on the placeholder
# check and fall back to a real CPU run that never finished; it takes about a minute since the check is skipped
# under fake mode. LoRA all-linear (the tower stays frozen, without adapters), with and without checkpointing.
def _rwi_cases() -> list[dict]:
    family, spec = RWD_MODELS["gemma3-4b"]
    out = []
    for ckpt, seq in ((False, 768), (True, 1792)):
        st = _setup("lora", "bf16", 1, seq, ckpt, "sdpa", "all-linear", 16)
        st["offload_activations"] = False
        st["image_tokens"] = int(spec["mm_tokens_per_image"])
        out.append({"id": "rwi-" + _rw_case_id("gemma3-4b", 2, st)[3:] + f"-img{st['image_tokens']}",
                    "family": family, "config": full_config(family, spec), "setup": st,
                    "tags": ["dense", "real-width", "image-inputs", "loss-standard"]})
    return out


# Real-width MoE / MLA / hybrid / attention-sink families (issue 11; estimator/models/moe.py): the presets' text
# models at their real widths and expert counts with 2-4 layers that keep one layer of each kind (dense and MoE,
# linear and full attention, sliding and full).  bf16 only: the fused experts' grouped_mm has no fp32 meta kernel.
# The hybrid Gated DeltaNet models (qwen3_next, qwen3_5*) keep the minimal pattern, one linear-attention layer and
# one full-attention layer, and their own shorter template (_RW_HYBRID_TEMPLATE): without flash-linear-attention
# transformers runs torch_chunk_gated_delta_rule, a Python loop over 64-token chunks whose every op goes through
# FakeTensorMode and MemTracker (a 4-layer case at 2048 tokens took 5-20 minutes on 2 cores; 2 layers at
# 1024 tokens, 16 chunks, take 0.5-1.5 minutes).
# --------------------------------------------------------------------------------------------------
_HYBRID = ["linear_attention", "full_attention"]


_Q35 = dict(head_dim=256, linear_num_key_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
            linear_conv_kernel_dim=4, vocab_size=248320, tie_word_embeddings=False)
RW_MOE_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt-oss-20b": ("gpt_oss", dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=2,
                                    num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_local_experts=32,
                                    num_experts_per_tok=4, sliding_window=128, tie_word_embeddings=False,
                                    layer_types=["sliding_attention", "full_attention"])),
    "deepseek-v3": ("deepseek_v3", dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432,
                                        moe_intermediate_size=2048, num_hidden_layers=2, first_k_dense_replace=1,
                                        num_attention_heads=128, num_key_value_heads=128, n_routed_experts=256,
                                        n_shared_experts=1, num_experts_per_tok=8, q_lora_rank=1536,
                                        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                                        v_head_dim=128, tie_word_embeddings=False)),
    "glm-4.5-air": ("glm4_moe", dict(vocab_size=151552, hidden_size=4096, intermediate_size=10944,
                                     moe_intermediate_size=1408, num_hidden_layers=2, first_k_dense_replace=1,
                                     num_attention_heads=96, num_key_value_heads=8, head_dim=128, attention_bias=True,
                                     n_routed_experts=128, n_shared_experts=1, num_experts_per_tok=8,
                                     tie_word_embeddings=False)),
    "qwen3-next-80b": ("qwen3_next", dict(vocab_size=151936, hidden_size=2048, num_hidden_layers=2,
                                          num_attention_heads=16, num_key_value_heads=2, head_dim=256,
                                          linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                                          linear_value_head_dim=128, num_experts=512, num_experts_per_tok=10,
                                          moe_intermediate_size=512, shared_expert_intermediate_size=512,
                                          layer_types=_HYBRID, tie_word_embeddings=False)),
    "qwen3.5-27b": ("qwen3_5_text", dict(hidden_size=5120, intermediate_size=17408, num_hidden_layers=2,
                                         num_attention_heads=24, num_key_value_heads=4, linear_num_value_heads=48,
                                         layer_types=_HYBRID, **_Q35)),
    "qwen3.5-35b-a3b": ("qwen3_5_moe_text", dict(hidden_size=2048, num_hidden_layers=2, num_attention_heads=16,
                                                 num_key_value_heads=2, linear_num_value_heads=32, num_experts=256,
                                                 num_experts_per_tok=8, moe_intermediate_size=512,
                                                 shared_expert_intermediate_size=512, layer_types=_HYBRID, **_Q35)),
    "llama-4-scout": ("llama4_text", dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192,
                                          intermediate_size_mlp=16384, num_hidden_layers=4, num_attention_heads=40,
                                          num_key_value_heads=8, head_dim=128, num_local_experts=16,
                                          num_experts_per_tok=1, interleave_moe_layer_step=2,
                                          attention_chunk_size=8192, tie_word_embeddings=False)),
    "ernie-4.5-21b": ("ernie4_5_moe", dict(vocab_size=103424, hidden_size=2560, intermediate_size=12288,
                                           moe_intermediate_size=1536, num_hidden_layers=2, num_attention_heads=20,
                                           num_key_value_heads=4, moe_num_experts=64, moe_k=6,
                                           moe_num_shared_experts=2, moe_layer_start_index=1, moe_layer_end_index=1,
                                           tie_word_embeddings=True)),
}
# (method, grad_ckpt, batch, seq_len)
_RW_MOE_TEMPLATE = [("full", False, 1, 1024), ("lora", True, 1, 2048), ("full", True, 2, 1024),
                    ("lora", False, 1, 1024)]
# the hybrids: every sequence a multiple of the 64-token chunk (no padding inside the delta rule)
_RW_HYBRID_TEMPLATE = [("full", False, 1, 1024), ("lora", True, 1, 1024), ("full", True, 2, 512),
                       ("lora", False, 1, 1024)]
_HYBRID_FAMILIES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def _rw_moe_cases() -> list[dict]:
    out = []
    for model, (family, spec) in RW_MOE_MODELS.items():
        for method, ckpt, batch, seq in (_RW_HYBRID_TEMPLATE if family in _HYBRID_FAMILIES else _RW_MOE_TEMPLATE):
            attention = "eager" if family == "gpt_oss" else "sdpa"  # sinks: transformers needs eager for gpt-oss
            st = _setup(method, "bf16", batch, seq, ckpt, attention, "all-linear" if method == "lora" else None,
                        16 if method == "lora" else None)
            st["offload_activations"] = False
            tags = ["moe-family", "real-width", f"loss-{st['loss']}"] + (["eager_attention"] if attention == "eager"
                                                                        else [])
            out.append({"id": _rw_case_id(model, int(spec["num_hidden_layers"]), st), "family": family,
                        "config": full_config(family, spec), "setup": st, "tags": tags})
    return out


# Real-width Gemma 4 / Gemma 3n text models (issue 11; estimator/models/gemma.py): the presets' widths with 2-4
# layers that keep one layer of each kind: sliding and full attention (Gemma 4: global_head_dim 512 on full layers),
# K/V-sharing layers (with Gemma 4 E2B's double-wide MLP), per-layer inputs (PLE), Gemma 4's MoE block with K = V
# global attention, Gemma 3n's AltUp / LAuReL and activation sparsity.  Text models only: Gemma 3n's vision
# encoder is a timm model.  bf16 only, as the MoE families.
# --------------------------------------------------------------------------------------------------
_SF = ["sliding_attention", "full_attention"]
RW_GEMMA_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "gemma-4-e2b": ("gemma4_text", dict(vocab_size=262144, vocab_size_per_layer_input=262144, hidden_size=1536,
                                        intermediate_size=6144, num_hidden_layers=4, num_attention_heads=8,
                                        num_key_value_heads=1, head_dim=256, global_head_dim=512,
                                        hidden_size_per_layer_input=256, num_kv_shared_layers=2,
                                        use_double_wide_mlp=True, layer_types=_SF * 2, sliding_window=512,
                                        final_logit_softcapping=30.0)),
    "gemma-4-26b-a4b": ("gemma4_text", dict(vocab_size=262144, hidden_size=2816, intermediate_size=2112,
                                            num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=8,
                                            head_dim=256, global_head_dim=512, num_global_key_value_heads=2,
                                            attention_k_eq_v=True, hidden_size_per_layer_input=0,
                                            enable_moe_block=True, num_experts=128, top_k_experts=8,
                                            moe_intermediate_size=704, layer_types=_SF, sliding_window=1024,
                                            final_logit_softcapping=30.0, use_bidirectional_attention="vision")),
    "gemma-4-31b": ("gemma4_text", dict(vocab_size=262144, hidden_size=5376, intermediate_size=21504,
                                        num_hidden_layers=2, num_attention_heads=32, num_key_value_heads=16,
                                        head_dim=256, global_head_dim=512, num_global_key_value_heads=4,
                                        attention_k_eq_v=True, hidden_size_per_layer_input=0, layer_types=_SF,
                                        sliding_window=1024, final_logit_softcapping=30.0,
                                        use_bidirectional_attention="vision")),
    "gemma-3n-e2b": ("gemma3n_text", dict(vocab_size=262400, vocab_size_per_layer_input=262144, hidden_size=2048,
                                          intermediate_size=8192, num_hidden_layers=4, num_attention_heads=8,
                                          num_key_value_heads=2, head_dim=256, hidden_size_per_layer_input=256,
                                          num_kv_shared_layers=2, layer_types=_SF * 2, sliding_window=512,
                                          activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0],
                                          final_logit_softcapping=30.0)),
}
_ARCH.update({"gemma4_text": "Gemma4ForCausalLM", "gemma3n_text": "Gemma3nForCausalLM"})


def _rw_gemma_cases() -> list[dict]:
    out = []
    for model, (family, spec) in RW_GEMMA_MODELS.items():
        for method, ckpt, batch, seq in _RW_MOE_TEMPLATE:
            st = _setup(method, "bf16", batch, seq, ckpt, "sdpa", "all-linear" if method == "lora" else None,
                        16 if method == "lora" else None)
            st["offload_activations"] = False
            # "rwg-": kept apart from the "rw-" cases of fixtures.json (run_matrix --only-prefix rw- --merge)
            out.append({"id": "rwg-" + _rw_case_id(model, int(spec["num_hidden_layers"]), st)[3:],
                        "family": family, "config": full_config(family, spec), "setup": st,
                        "tags": ["gemma-family", "real-width", f"loss-{st['loss']}"]})
    return out


def get_cases() -> list[dict]:
    """All calibration cases, deterministic order, unique ids."""
    cases = (_dense_cases() + _extra_cases() + _moe_cases() + _rw_cases() + _rwd_cases() + _rw_moe_cases()
             + _rw_gemma_cases() + _rwi_cases())
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise AssertionError(f"duplicate case ids: {sorted(dup)}")
    return copy.deepcopy(cases)


if __name__ == "__main__":
    import collections
    import json
    import sys

    cs = get_cases()
    if "--json" in sys.argv:
        json.dump(cs, sys.stdout, indent=1)
    else:
        for c in cs:
            print(c["id"])
        cnt = collections.Counter((c["family"], c["setup"]["method"], c["setup"]["precision"]) for c in cs)
        print(len(cs), "cases")
        for k, v in sorted(cnt.items()):
            print(" ", *k, v)
