"""The fixture matrix for calibration/mlx_trace.py (tiny configs, CPU-sized).

Shapes vary the ratios of vocabulary, width, heads and length on purpose:
``llama_a`` is balanced, ``llama_vocab`` is vocabulary-heavy (32k x 128),
``llama_wide`` is width-heavy with a tiny vocabulary and short heads,
``qwen2_gqa`` has GQA (4 q / 2 kv heads) and tied embeddings with q/k/v bias,
``gemma_mqa`` has one kv head, GeGLU and scaled tied embeddings.
Intermediate sizes are multiples of 64 so affine group-64 quantisation applies
to every Linear.
"""

CONFIGS = {
    "llama_a": {
        "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
        "intermediate_size": 704, "num_attention_heads": 4, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-5, "vocab_size": 8192, "tie_word_embeddings": False,
        "rope_theta": 10000.0,
    },
    "llama_vocab": {
        "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
        "intermediate_size": 384, "num_attention_heads": 8, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "vocab_size": 32000, "tie_word_embeddings": False,
        "rope_theta": 10000.0,
    },
    "llama_wide": {
        "model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
        "intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16,
        "rms_norm_eps": 1e-5, "vocab_size": 256, "tie_word_embeddings": False,
        "rope_theta": 10000.0,
    },
    "qwen2_gqa": {
        "model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 4,
        "intermediate_size": 768, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6, "vocab_size": 4096, "tie_word_embeddings": True,
        "max_position_embeddings": 4096, "rope_theta": 1000000.0,
    },
    "gemma_mqa": {
        "model_type": "gemma", "hidden_size": 256, "num_hidden_layers": 2,
        "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 64, "rms_norm_eps": 1e-6, "vocab_size": 4096, "rope_theta": 10000.0,
    },
}

Q4 = {"bits": 4, "group_size": 64, "mode": "affine"}
Q8 = {"bits": 8, "group_size": 64, "mode": "affine"}


def _case(model, method="lora", seq=256, batch=2, gc=False, layers=-1, quant=None,
          opt="adam", dtype="float32", rank=8, compile=True, probe=False, tag=""):
    setup = {
        "method": method, "rank": rank if method != "full" else None,
        "scale": 20.0 if method != "full" else None, "dropout": 0.0 if method != "full" else None,
        "num_layers": layers, "batch": batch, "seq_len": seq, "grad_checkpoint": gc,
        "quant": quant, "optimizer": opt, "dtype": dtype, "compile": compile, "steps": 3,
    }
    mode = (quant or {}).get("mode", "affine")
    q = (f"q{quant['bits']}" if mode == "affine" else mode) if quant else ""
    name = (f"{model}-{q}{method}-L{layers}-b{batch}-s{seq}" + ("-gc" if gc else "")
            + (f"-{opt}" if opt != "adam" else "") + (f"-{dtype}" if dtype != "float32" else "")
            + ("" if compile else "-nocompile") + (f"-r{rank}" if method != "full" and rank != 8 else "")
            + tag)
    c = {"name": name, "config": CONFIGS[model], "setup": setup}
    if probe:
        c["probe"] = True
    return c


CASES = [
    # length scaling, LoRA on every block, with and without checkpointing
    *[_case("llama_a", seq=s, probe=(s == 256)) for s in (64, 128, 256, 512)],
    *[_case("llama_a", seq=s, gc=True) for s in (128, 256, 512)],
    # few LoRA layers
    _case("llama_a", layers=1), _case("llama_a", layers=1, gc=True),
    # QLoRA 4 / 8 bit, QDoRA, DoRA
    *[_case("llama_a", quant=Q4, seq=s, probe=(s == 256)) for s in (128, 256, 512)],
    _case("llama_a", quant=Q4, seq=512, gc=True),
    _case("llama_a", quant=Q8),
    _case("llama_a", method="dora"), _case("llama_a", method="dora", quant=Q4),
    # full fine-tuning
    _case("llama_a", method="full", seq=128),
    _case("llama_a", method="full", probe=True),
    _case("llama_a", method="full", gc=True),
    _case("llama_a", method="full", layers=2),
    _case("llama_a", method="full", opt="adafactor"),
    _case("llama_a", method="full", opt="sgd"),
    # batch and rank
    _case("llama_a", batch=1), _case("llama_a", batch=4), _case("llama_a", rank=64),
    # optimizers, compile off
    _case("llama_a", opt="adamw"), _case("llama_a", opt="sgd"), _case("llama_a", opt="adafactor"),
    _case("llama_a", compile=False),
    # vocabulary-heavy
    _case("llama_vocab", seq=128), _case("llama_vocab", seq=256), _case("llama_vocab", seq=256, gc=True),
    _case("llama_vocab", quant=Q4), _case("llama_vocab", method="full", seq=128),
    # width-heavy, many short heads
    _case("llama_wide"), _case("llama_wide", gc=True), _case("llama_wide", quant=Q4),
    _case("llama_wide", method="full"), _case("llama_wide", seq=512),
    # second family: qwen2 (GQA, tied, qkv bias)
    *[_case("qwen2_gqa", seq=s) for s in (128, 256, 512)],
    _case("qwen2_gqa", seq=512, gc=True), _case("qwen2_gqa", quant=Q4),
    _case("qwen2_gqa", method="full"), _case("qwen2_gqa", method="full", gc=True),
    _case("qwen2_gqa", method="dora"), _case("qwen2_gqa", layers=2),
    # third family: gemma (MQA, GeGLU)
    _case("gemma_mqa"), _case("gemma_mqa", method="full"), _case("gemma_mqa", quant=Q4),
    # bfloat16 bases (slow on CPU: short)
    _case("llama_a", seq=128, dtype="bfloat16"),
    _case("llama_a", method="full", seq=128, dtype="bfloat16"),
    _case("qwen2_gqa", quant=Q4, seq=128, dtype="bfloat16"),
]


# --------------------------------------------------------------------------------------------------------------
# Issue 21: real widths and vocabularies (the published configs' dimensions, few layers so the CPU engine can run
# them), several families; LoRA / DoRA / QLoRA 4 and 8 bit and MXFP4 / full; with and without checkpointing; all and
# few trained blocks; batch and length variations. Widths and vocabularies from each model's config.json.
REAL_CONFIGS = {
    # Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json): 128k vocabulary, GQA 32/8, tied
    "llama32_1b": {
        "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 2, "intermediate_size": 8192,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "rms_norm_eps": 1e-5,
        "vocab_size": 128256, "tie_word_embeddings": True, "rope_theta": 500000.0,
    },
    # Qwen2.5 0.5B (Qwen/Qwen2.5-0.5B): 152k vocabulary, 14 heads / 2 kv, q/k/v bias, tied
    "qwen25_05b": {
        "model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 2, "intermediate_size": 4864,
        "num_attention_heads": 14, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": 151936,
        "tie_word_embeddings": True, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
    },
    # Qwen3 0.6B (Qwen/Qwen3-0.6B): head_dim 128 > h / heads, q/k norms, tied
    "qwen3_06b": {
        "model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 2, "intermediate_size": 3072,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6,
        "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
        "rope_theta": 1000000.0,
    },
    # Mistral 7B v0.3 (mistralai/Mistral-7B-v0.3; mlx-lm maps model_type mistral to llama), one block
    "mistral_7b": {
        "model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 1, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5, "vocab_size": 32768,
        "tie_word_embeddings": False, "rope_theta": 1000000.0,
    },
    # Phi-3 mini (microsoft/Phi-3-mini-4k-instruct): fused qkv_proj and gate_up_proj, 32k vocabulary, untied
    "phi3_mini": {
        "model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 1, "intermediate_size": 8192,
        "num_attention_heads": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-5, "vocab_size": 32064,
        "tie_word_embeddings": False, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
    },
    # Gemma 3 1B text (google/gemma-3-1b-it): 262k vocabulary, one kv head, head_dim 256, q/k norms, four norms per
    # block, a sliding-window layer then a global one (pattern 2 here: mlx-lm indexes its caches by the pattern, so
    # two layers need pattern 2)
    "gemma3_1b": {
        "model_type": "gemma3_text", "hidden_size": 1152, "num_hidden_layers": 2, "intermediate_size": 6912,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "rms_norm_eps": 1e-6,
        "vocab_size": 262144, "sliding_window": 512, "sliding_window_pattern": 2, "query_pre_attn_scalar": 256,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "max_position_embeddings": 32768,
    },
}

Q8 = {"bits": 8, "group_size": 64, "mode": "affine"}
MXFP4 = {"bits": 4, "group_size": 32, "mode": "mxfp4"}


def _real(model, **kw):
    c = _case(model if model in CONFIGS else "llama_a", **kw)
    c["config"] = REAL_CONFIGS[model]
    c["name"] = model + c["name"][len("llama_a"):] if model not in CONFIGS else c["name"]
    return c


REAL_CASES = [
    # Llama 3.2 1B widths: LoRA all / last block, length, checkpointing, QLoRA 4-bit and MXFP4, DoRA, full
    _real("llama32_1b", batch=1, seq=256), _real("llama32_1b", batch=1, seq=512),
    _real("llama32_1b", batch=1, seq=512, gc=True), _real("llama32_1b", batch=1, seq=256, layers=1),
    _real("llama32_1b", batch=1, seq=256, quant=Q4), _real("llama32_1b", batch=1, seq=256, quant=MXFP4),
    _real("llama32_1b", batch=1, seq=256, method="dora"), _real("llama32_1b", batch=1, seq=256, method="full", layers=1),
    # Qwen2.5 0.5B widths: batch 2 with checkpointing, QLoRA, full, bf16
    _real("qwen25_05b", batch=1, seq=512), _real("qwen25_05b", batch=2, seq=512, gc=True),
    _real("qwen25_05b", batch=1, seq=512, quant=Q4), _real("qwen25_05b", batch=1, seq=512, method="full"),
    _real("qwen25_05b", batch=1, seq=256, dtype="bfloat16"),
    # Qwen3 0.6B (q/k norms, head_dim 128), Mistral 7B and Phi-3 mini (one block), Gemma 3 1B text
    _real("qwen3_06b", batch=1, seq=512), _real("mistral_7b", batch=1, seq=512), _real("phi3_mini", batch=1, seq=512),
    _real("gemma3_1b", batch=1, seq=256),
]


# --------------------------------------------------------------------------------------------------------------
# Issue 21: probes that separate the terms of the model (docs/formulas.md §12; calibration/mlx_fit.py). Synthetic
# Llama-class blocks; a tiny vocabulary isolates the blocks, a tiny block isolates the loss, T = 32 isolates the
# optimizer update of full fine-tuning.
def _probe_cfg(h=256, inter=None, layers=1, heads=4, kv=None, vocab=256, head_dim=None, tie=False):
    c = {"model_type": "llama", "hidden_size": h, "num_hidden_layers": layers,
         "intermediate_size": inter or int(2.75 * h) // 64 * 64, "num_attention_heads": heads,
         "num_key_value_heads": kv or heads, "rms_norm_eps": 1e-5, "vocab_size": vocab, "tie_word_embeddings": tie,
         "rope_theta": 10000.0}
    if head_dim:
        c["head_dim"] = head_dim
    return c


def _probe(name, config, method="lora", batch=1, seq=256, layers=-1, gc=False, opt="adam", dtype="float32"):
    c = _case("llama_a", method=method, seq=seq, batch=batch, gc=gc, layers=layers, opt=opt, dtype=dtype)
    return {"name": name, "config": config, "setup": c["setup"]}


PROBE_CASES = [
    # the optimizer update of full fine-tuning (T = 32): how many blocks' updates are in flight
    *[_probe(f"upd-h256-n{n}", _probe_cfg(256, 704, n, 4), "full", seq=32) for n in (1, 2, 3, 4, 6, 8, 16)],
    *[_probe(f"upd-h512-n{n}", _probe_cfg(512, 1408, n, 16), "full", seq=32) for n in (2, 4, 8)],
    _probe("upd-h256-n8-sgd", _probe_cfg(256, 704, 8, 4), "full", seq=32, opt="sgd"),
    _probe("upd-h256-n8-bf16", _probe_cfg(256, 704, 8, 4), "full", seq=32, dtype="bfloat16"),
    _probe("upd-h256-n8-last2", _probe_cfg(256, 704, 8, 4), "full", seq=32, layers=2),
    *[_probe(f"wide-full-T32-{o}", _probe_cfg(512, 1408, 2, 16), "full", seq=32, opt=o)
      for o in ("sgd", "adafactor", "muon")],
    _probe("wide-full-T32-L1", _probe_cfg(512, 1408, 2, 16), "full", seq=32, layers=1),
    _probe("wide-lora-T32", _probe_cfg(512, 1408, 2, 16), seq=32),
    # the loss: vocabulary × length × dtype with a tiny block
    *[_probe(f"loss-V{v}-S{s}", _probe_cfg(64, 128, 1, 2, vocab=v), seq=s) for v in (16000, 32000, 64000)
      for s in (128, 256)],
    _probe("loss-V32000-S256-tied", _probe_cfg(64, 128, 1, 2, vocab=32000, tie=True)),
    *[_probe(f"loss-V32000-S{s}-bf16", _probe_cfg(64, 128, 1, 2, vocab=32000), seq=s, dtype="bfloat16")
      for s in (128, 256)],
    *[_probe(f"head-h{h}-V32000-S256", _probe_cfg(h, 128, 1, 2, vocab=32000, head_dim=32)) for h in (64, 256, 512)],
    # one block's saved tensors: 4 blocks vs 1 over width, MLP size, heads, GQA, head_dim, dtype, length
    *[_probe(f"w-h{h}-I{i}-H{hh}-S{s}-n{n}", _probe_cfg(h, i, n, hh), seq=s)
      for h, i, hh in ((512, 1408, 8), (512, 512, 8), (512, 2816, 8), (1024, 1024, 8), (512, 1408, 32))
      for s in (256, 512) for n in (1, 4)],
    *[_probe(f"w-h{h}-I{i}-H{hh}-n{n}", _probe_cfg(h, i, n, hh))
      for h, i, hh in ((256, 704, 4), (512, 1408, 8), (1024, 2816, 16), (512, 512, 8), (512, 2048, 8),
                       (512, 1408, 2), (512, 1408, 32)) for n in (1, 2)],
    *[_probe(f"gqa-kv{kv}-n{n}", _probe_cfg(512, 1408, n, 8, kv=kv), seq=512) for kv in (1, 2, 8) for n in (1, 4)],
    *[_probe(f"qdim1024-n{n}", _probe_cfg(512, 1408, n, 8, head_dim=128), seq=512) for n in (1, 4)],
    *[_probe(f"bf16-h512-n{n}", _probe_cfg(512, 1408, n, 8), dtype="bfloat16") for n in (1, 4)],
    *[_probe(f"full-h512-n{n}", _probe_cfg(512, 1408, n, 8), "full", seq=512) for n in (1, 4)],
    *[_probe(f"gc-h512-n{n}", _probe_cfg(512, 1408, n, 8), seq=512, gc=True) for n in (1, 4)],
    *[_probe(f"a-lora-n{n}", CONFIGS["llama_a"], batch=2, layers=n) for n in (1, 2, 3, 4)],
    # Phi-3's fused qkv_proj and gate_up_proj (mlx_lm/models/phi3.py): 4 blocks vs 1
    *[_probe(f"phi3-h512-n{n}", {**_probe_cfg(512, 1408, n, 8), "model_type": "phi3", "max_position_embeddings": 4096,
                                 "original_max_position_embeddings": 4096}, seq=512) for n in (1, 4)],
]


# Issue 28: without checkpointing at 512-1,024 tokens, where the B·H·L² probabilities dominate the loss backward: LoRA,
# a 4-bit base and full fine-tuning on the three tiny families and at real widths. Written to their own file
# (validation/data/mlx_fixtures_long.json, checked by tests/test_mlx_long.py against issue 28's MLX targets):
#   .venv-mlx/bin/python -m calibration.mlx_trace --out validation/data/mlx_fixtures_long.json \
#       $(.venv-mlx/bin/python -c "from calibration.mlx_cases import LONG_CASES; print(' '.join('--only ' + c['name'] for c in LONG_CASES))")
LONG_CASES = [
    *[_case(m, seq=1024) for m in ("llama_a", "qwen2_gqa", "gemma_mqa")],
    *[_case(m, quant=Q4, seq=1024) for m in ("llama_a", "qwen2_gqa", "gemma_mqa")],
    _case("llama_a", quant=Q4, seq=1024, batch=1),
    *[_case(m, method="full", seq=1024) for m in ("llama_a", "qwen2_gqa", "gemma_mqa")],
    _case("llama_a", method="full", seq=512),
    _real("qwen25_05b", batch=1, seq=1024, method="full"), _real("qwen25_05b", batch=1, seq=1024),
    _real("qwen3_06b", batch=1, seq=1024, method="full"), _real("qwen25_05b", batch=1, seq=1024, quant=Q4),
]
