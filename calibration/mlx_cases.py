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
    q = f"q{quant['bits']}" if quant else ""
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
