"""The MLX-LM stack (issue 21): mlx-lm's defaults, the MLX step model's terms, quantisation, backends and Apple
devices, LoRA on the last N layers for every stack, the MLX snippet and remedies, and the refusals."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from estimator import estimate, generic_spec, get_device, load_preset, remedies, spec_from_config
from estimator.job.stack import resolve_setup
from estimator.memory.result import detail_bytes
from estimator.options.quantization import mlx_bytes_per_weight
from estimator.options.stacks import MLX_STACK, STACK_SIZE_FIELDS
from estimator.report.snippets import training_snippet
from tests.test_cli import run_cli

LLAMA = load_preset("llama-3.1-8b")
QWEN = load_preset("qwen2.5-0.5b")


def mlx(**kw):
    return resolve_setup(MLX_STACK, **{"backend": "metal", **kw})


# --- the stack's defaults ---------------------------------------------------------------------------------------

def test_mlx_defaults_are_mlx_lms():
    s = mlx()
    assert (s.batch, s.seq_len, s.lora_rank, s.lora_layers, s.optimizer, s.grad_ckpt, s.adapter_dtype) == (
        4, 2048, 8, 16, "adam", False, "fp32")
    assert (s.quant_mode, s.quant_bits, s.quant_group) == ("affine", 4, 64)
    assert set(STACK_SIZE_FIELDS) <= set(s.from_stack)
    # a given value wins and is not marked as the stack's
    t = mlx(batch=1, lora_rank=16, lora_layers=4)
    assert (t.batch, t.lora_rank, t.lora_layers) == (1, 16, 4)
    assert not {"batch", "lora_rank", "lora_layers"} & set(t.from_stack)


def test_one_batch_mechanism_for_stacks_and_trainers():
    assert resolve_setup("trl").batch == 1 and resolve_setup("mlx").batch == 4
    assert resolve_setup("trl", trainer="grpo").batch == 8  # TRL's per_device_train_batch_size for GRPO


def test_cli_prices_mlx_lm_defaults_on_a_mac(capsys):
    rc, out, _ = run_cli(capsys, "--model", "llama-3.1-8b", "--device", "laptop-36gb", "--json")
    doc = json.loads(out)
    assert rc == 0
    s = doc["setup"]
    assert (s["stack"], s["batch"], s["seq_len"], s["lora_rank"], s["lora_layers"], s["backend"]) == (
        "mlx", 4, 2048, 8, 16, "metal")
    est = estimate(LLAMA, mlx())
    assert doc["total_bytes"] == pytest.approx(est.total_bytes)
    # the PyTorch stacks stay selectable on a Mac and are priced as MPS runs
    rc, out, _ = run_cli(capsys, "--model", "llama-3.1-8b", "--device", "laptop-36gb", "--stack", "trl", "--json")
    doc = json.loads(out)
    assert doc["setup"]["stack"] == "trl" and doc["setup"]["backend"] == "metal"
    assert doc["components_bytes"]["overhead"] == pytest.approx(0.05 * (doc["total_bytes"] - doc["components_bytes"][
        "overhead"]), rel=0.01)  # allocator slack only: no CUDA context on MPS
    assert any("MPS" in n for n in doc["notes"])


# --- the MLX model's terms --------------------------------------------------------------------------------------

def test_resident_is_weights_adapters_and_adam_state():
    s = mlx(precision="bf16")
    est = estimate(LLAMA, s)
    lora_per_block = sum(8 * (m.in_features + m.out_features) for m in LLAMA.linears)
    assert est.params_trainable == 16 * lora_per_block  # the last 16 blocks carry adapters (mlx_lm/lora.py:59)
    assert est.components_bytes["weights"] == pytest.approx(2 * LLAMA.params_total + 4 * est.params_trainable)
    assert est.components_bytes["optimizer"] == pytest.approx(2 * 4 * est.params_trainable)  # Adam m, v in fp32


def test_attention_probabilities_grow_with_the_square_of_the_length():
    # max_seq_length S: the model runs on S − 1 positions (iterate_batches pads to ≤ S, default_loss drops one)
    a = estimate(LLAMA, mlx(seq_len=1025))
    b = estimate(LLAMA, mlx(seq_len=2049))
    pa, pb = (detail_bytes(e.details, "activations.attention_scores") for e in (a, b))
    assert pa == 16 * 4 * LLAMA.num_heads * 1024 ** 2 * 2  # 16 blocks × B × H × L² × bf16
    assert pb == 4 * pa
    # halving the trained blocks halves the saved part
    c = estimate(LLAMA, mlx(lora_layers=8))
    assert detail_bytes(c.details, "activations.layers") == pytest.approx(
        detail_bytes(b.details, "activations.layers") / 2, rel=0.01)


def test_checkpointing_keeps_block_inputs_only():
    on = estimate(LLAMA, mlx(grad_ckpt=True))
    off = estimate(LLAMA, mlx())
    assert detail_bytes(on.details, "activations.checkpoints") == 16 * 4 * 2047 * LLAMA.hidden_size * 2
    assert on.total_bytes < 0.6 * off.total_bytes


def test_metal_is_priced_as_the_measured_cpu_path_and_cuda_drops_the_probabilities():
    cpu = estimate(QWEN, replace(mlx(), backend="cpu"))
    metal = estimate(QWEN, mlx())
    assert metal.total_bytes == pytest.approx(cpu.total_bytes)  # docs/formulas.md §12.3: the same unfused path
    cuda = estimate(QWEN, resolve_setup(MLX_STACK, backend="cuda"))
    assert detail_bytes(cuda.details, "activations.attention_scores") == 0  # cuDNN's forward keeps no probabilities
    assert cuda.components_bytes["overhead"] > 0  # a CUDA context
    odd = estimate(QWEN, resolve_setup(MLX_STACK, backend="cuda", seq_len=2017))  # VJP falls back: L % 128 != 0
    assert detail_bytes(odd.details, "activations.attention_scores") == 0  # the forward is still cuDNN's
    tiled = estimate(QWEN, resolve_setup(MLX_STACK, backend="cuda", seq_len=2049))  # L = 2048: cuDNN's VJP

    def block_temps(est):
        (phase,) = [p for p in est.phases if p.key == "backward.block"]
        return detail_bytes(phase.details, "activations.backward_temporaries")

    assert block_temps(odd) > block_temps(tiled)  # the fallback VJP rebuilds one block's probabilities
    fp32 = estimate(QWEN, resolve_setup(MLX_STACK, backend="cuda", precision="fp32"))  # cuDNN: 16-bit only
    assert detail_bytes(fp32.details, "activations.attention_scores") > 0


def test_full_fine_tuning_trains_the_last_blocks_only():
    est = estimate(QWEN, mlx(method="full"))
    per_block = sum(m.params_per_copy for m in QWEN.linears) + 2 * QWEN.hidden_size
    assert est.params_trainable == 16 * per_block
    assert {p.key for p in est.phases} == {"loss_backward", "backward.block", "optimizer_step"}


@pytest.mark.parametrize(("mode", "bits", "group", "expected"), [
    ("affine", 4, 64, 0.5625), ("affine", 8, 64, 1.0625), ("affine", 2, 32, 0.375), ("affine", 3, 128, 0.40625),
    ("mxfp4", 4, 32, 0.53125), ("nvfp4", 4, 16, 0.5625), ("mxfp8", 8, 32, 1.03125)])
def test_bytes_per_weight_match_mx_quantize(mode, bits, group, expected):
    # measured with mx.quantize on a bf16 matrix (mlx 0.32.4): packed uint32 codes + scales (+ biases)
    assert mlx_bytes_per_weight(mode, bits, group, 2) == expected


def test_qlora_quantises_linears_and_embeddings():
    est = estimate(LLAMA, mlx(method="qlora"))
    quantised = LLAMA.params_quantizable + LLAMA.params_embedding
    frozen = quantised * 0.5625 + (LLAMA.params_total - quantised) * 2
    assert est.components_bytes["weights"] == pytest.approx(frozen + 4 * est.params_trainable)
    mx4 = estimate(LLAMA, mlx(method="qlora", quant_mode="mxfp4"))
    assert mx4.components_bytes["weights"] < est.components_bytes["weights"]


def test_a_pre_quantised_mlx_community_config_sets_the_base():
    cfg = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 8192,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": True,
           "quantization": {"group_size": 64, "bits": 4}}
    spec = spec_from_config(cfg)
    assert spec.quantization == ("affine", 4, 64)
    est = estimate(spec, mlx())  # LoRA on the quantised base
    assert est.components_bytes["weights"] < 0.35 * 2 * spec.params_total
    with pytest.raises(ValueError, match="quantised layers are frozen"):
        estimate(spec, mlx(method="full"))
    with pytest.raises(ValueError, match="only the MLX-LM stack loads it"):
        estimate(spec, resolve_setup("trl"))
    for bad, match in (({"group_size": 64, "bits": 7}, "no 7-bit form"), ({"bits": 4}, "group_size"),
                       ({"group_size": 64, "bits": 4, "mode": "gptq"}, "not one MLX 0.32.4 defines")):
        with pytest.raises(ValueError, match=match):
            spec_from_config({**cfg, "quantization": bad})


def test_the_stack_default_of_16_blocks_on_a_shallower_model_is_priced_with_all_and_said():
    small = generic_spec(0.1)  # 14 layers
    est = estimate(small, mlx())
    assert any("refuses that" in str(n) for n in est.notes)
    with pytest.raises(ValueError, match="more than"):
        estimate(small, mlx(lora_layers=20))


def test_unmodelled_families_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="mixture-of-experts"):
        estimate(load_preset("mixtral-8x7b"), mlx())
    with pytest.raises(ValueError, match="non-gated MLP or a parallel block"):
        estimate(load_preset("phi-2"), mlx())


# --- LoRA on the last N layers, PyTorch stacks ------------------------------------------------------------------

def test_peft_layers_to_transform_without_checkpointing_frees_the_frozen_prefix():
    all_layers = estimate(LLAMA, resolve_setup("trl", grad_ckpt=False))
    last8 = estimate(LLAMA, resolve_setup("trl", grad_ckpt=False, lora_layers=8))
    assert last8.params_trainable == pytest.approx(all_layers.params_trainable / 4, rel=1e-6)
    acts = [e.components_bytes["activations"] for e in (all_layers, last8)]
    assert acts[1] < 0.5 * acts[0]


def test_with_checkpointing_the_input_requires_grad_and_every_layer_keeps_its_input():
    all_layers = estimate(LLAMA, resolve_setup("trl"))
    last8 = estimate(LLAMA, resolve_setup("trl", lora_layers=8))
    assert detail_bytes(last8.details, "activations.checkpoints") == detail_bytes(
        all_layers.details, "activations.checkpoints")
    assert any("input requires grad" in str(n) for n in last8.notes)


# --- devices and backends ---------------------------------------------------------------------------------------

def test_mac_usable_memory_is_the_published_working_set():
    assert get_device("mac-32gb").usable_bytes == int(21845.34 * 2**20)
    assert get_device("laptop-36gb").usable_bytes == 27 * 2**30  # none published: three quarters


@pytest.mark.parametrize(("argv", "match"), [
    (("--stack", "mlx", "--method", "qlora", "--quant", "nf4"), "NF4 does not run under MLX"),
    (("--stack", "mlx", "--device", "mi300x"), "no ROCm backend"),
    (("--stack", "mlx", "--trainer", "dpo"), "supervised fine-tuning only"),
    (("--stack", "mlx", "--optimizer", "adamw_8bit"), "mlx-lm's --optimizer offers"),
    (("--stack", "mlx", "--precision", "mixed"), "no mixed precision"),
    (("--stack", "torchtune", "--lora-layers", "4"), "torchtune's LoRA builders"),
    (("--stack", "trl", "--dora"), "DoRA is modelled for the MLX-LM stack only"),
    (("--stack", "trl", "--method", "full", "--lora-layers", "4"), "trains every layer"),
    (("--lora-layers", "40"), "more than Llama-3.1-8B's 32"),
    (("--stack", "mlx", "--lora-layers", "40"), "more than Llama-3.1-8B's 32"),
    (("--backend", "metal", "--device", "rtx-4090"), "does not match rtx-4090"),
    (("--stack", "unsloth", "--device", "laptop-36gb"), "MLX path"),
    (("--stack", "trl", "--device", "laptop-36gb", "--optimizer", "adamw_8bit"), "8-bit optimizer kernel"),
    (("--stack", "trainer", "--device", "laptop-36gb", "--loss", "fused"), "Triton"),
    (("--stack", "mlx", "--method", "qlora", "--quant", "affine", "--quant-bits", "7"), "no 7-bit form"),
    (("--stack", "mlx", "--method", "qlora", "--quant", "mxfp4", "--quant-group", "64"), "no group size 64"),
])
def test_what_a_stack_cannot_run_exits_2_with_the_reason(capsys, argv, match):
    rc, out, err = run_cli(capsys, "--model", "llama-3.1-8b", *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and match in err


def test_unknown_bits_in_an_uploaded_config_exit_2(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000,
                                "quantization": {"group_size": 64, "bits": 7}}))
    rc, _out, err = run_cli(capsys, "--config", str(path), "--stack", "mlx")
    assert rc == 2 and "no 7-bit form" in err


# --- snippet and remedies ---------------------------------------------------------------------------------------

def test_the_snippet_is_mlx_lm_lora_config_matching_the_estimate():
    s = mlx(method="qlora", quant_mode="mxfp4", batch=2, lora_layers=8, grad_ckpt=True, dora=True)
    text = training_snippet(LLAMA, s)
    cfg = yaml.safe_load(text)
    assert (cfg["fine_tune_type"], cfg["batch_size"], cfg["num_layers"], cfg["max_seq_length"],
            cfg["grad_checkpoint"], cfg["optimizer"]) == ("dora", 2, 8, 2048, True, "adam")
    assert cfg["lora_parameters"] == {"rank": 8, "dropout": 0.0, "scale": 20.0}
    assert "mlx_lm.convert --hf-path meta-llama/Llama-3.1-8B" in text and "--q-mode mxfp4" in text
    assert "mlx_lm.lora --config lora_config.yaml" in text
    full = yaml.safe_load(training_snippet(LLAMA, mlx(method="full", lora_layers=0)))
    assert full["fine_tune_type"] == "full" and full["num_layers"] == -1


def test_mlx_remedies_include_fewer_layers_and_no_sharding():
    found = {r.key: r for r in remedies(LLAMA, mlx())}
    assert found["fewer_layers"].applicable and found["fewer_layers"].saves_bytes > 0
    assert "16 → 8" in found["fewer_layers"].change
    assert found["checkpointing"].saves_bytes > found["fewer_layers"].saves_bytes
    assert "sharding" not in found


def test_docs_laptop_table_is_the_one_the_command_prints():
    """docs/mlx.md §8 (issue 21's 36 GB laptop re-answered) is `python -m validation.mlx --laptop`'s output."""
    from pathlib import Path

    from validation.mlx import laptop_markdown, laptop_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "mlx.md").read_text(encoding="utf-8")
    assert laptop_markdown() in doc
    seven = {r["method"]: r for r in laptop_table() if r["size_b"] == 7}
    assert seven["qlora"]["mlx_batch1"]["band"] == "fits" and seven["lora"]["trl_cuda"]["band"] == "fits"
    assert seven["lora"]["mlx_defaults"]["band"] == "too big"


@pytest.mark.parametrize("stack", ["trl", "trainer", "plain", "unsloth", "axolotl"])
def test_peft_snippets_carry_layers_to_transform(stack):
    text = training_snippet(LLAMA, resolve_setup(stack, lora_layers=4))
    key = "peft_layers_to_transform: [28, 29, 30, 31]" if stack == "axolotl" else "layers_to_transform=[28, 29, 30, 31]"
    assert key in text
    assert "layers_to_transform" not in training_snippet(LLAMA, resolve_setup(stack))  # every layer: PEFT's default


def test_switching_to_full_drops_the_adapters_own_choices():
    """The compare page re-resolves a setup per method (with_method): a TRL LoRA run on the last 8 layers, or an
    MLX DoRA run, compared with full fine-tuning must not raise (found by test_fuzz_app_long). MLX-LM keeps
    --num-layers for full fine-tuning (it trains the last N blocks); TRL's full run trains every layer."""
    from estimator.job.stack import with_method
    from ui.grids import compare_setups

    trl = with_method(resolve_setup("trl", method="lora", lora_layers=8), "full")
    assert trl.method == "full" and not trl.lora_layers
    mlx = with_method(resolve_setup(MLX_STACK, method="lora", dora=True, lora_layers=4, backend="metal"), "full")
    assert mlx.method == "full" and not mlx.dora and mlx.lora_layers == 4
    setups = compare_setups(resolve_setup("trl", method="lora", lora_layers=8), ("full", "lora", "qlora"))
    assert [s.method for _, s in setups] == ["full", "lora", "qlora"]


def test_lm_head_target_is_outside_mlx_lms_blocks():
    """mlx-lm adapts the linears inside the trained blocks (tuner/utils.py:95-111): an lm_head target gets no
    adapter (noted, same estimate, left out of the YAML keys); lm_head alone would train nothing and is refused
    (found by test_fuzz_app_long: targets=lm_head on a Mac)."""
    from estimator.report.snippets.mlx import _keys

    spec = load_preset("llama-3.2-1b")
    with_head = resolve_setup(MLX_STACK, backend="metal", lora_targets=("q_proj", "lm_head"))
    est = estimate(spec, with_head)
    assert est.total_bytes == estimate(spec, replace(with_head, lora_targets=("q_proj",))).total_bytes
    assert any("lm_head" in str(n) for n in est.notes)
    assert _keys(spec, with_head) == ["self_attn.q_proj"]
    with pytest.raises(ValueError, match="nothing"):
        estimate(spec, resolve_setup(MLX_STACK, backend="metal", lora_targets=("lm_head",)))
