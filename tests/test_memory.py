"""The detailed estimate against the closed forms and worked examples of docs/formulas.md (§3.3, §6)."""

import pytest

from estimator import COMPONENT_KEYS, TrainingSetup, estimate, load_preset
from estimator.memory.adapters import lora_params
from estimator.memory.hf.activations.common import context
from estimator.memory.hf.activations.layers import dense_layer, sliding_mask_per_token

LLAMA8 = load_preset("llama-3.1-8b")


@pytest.mark.parametrize(("setup", "per_token"), [
    (TrainingSetup(method="full", precision="bf16"), 200_840),  # A_F = 16h+4qd+4kvd+8I+4a+8
    (TrainingSetup(method="full", precision="mixed"), 241_800),  # A_M = 26h+4qd+4kvd+8I+4a+8
    (TrainingSetup(method="lora", lora_rank=16), 217_448),  # A_R = 18h+6qd+4kvd+8I+14r+4a+8
    (TrainingSetup(method="qlora", lora_rank=16, qlora_prep="peft"), 303_464),  # A_Qp = 18h+6qd+4kvd+14I+14r+4a+8
])
def test_layer_activation_closed_forms(setup, per_token):
    ctx = context(LLAMA8, setup)
    assert dense_layer(LLAMA8, ctx).total == per_token


def test_lora_on_qv_only_from_frozen_base():
    # frozen base 8h + 4qd + 4kvd + 4a + 6I + 8, plus per adapted module 2·in + 2r (§3.3)
    h, qd, kvd, inter, a, r = 4096, 4096, 1024, 14336, 32, 8
    setup = TrainingSetup(method="lora", lora_rank=r, lora_targets=("q_proj", "v_proj"))
    expected = 8 * h + 4 * qd + 4 * kvd + 4 * a + 6 * inter + 8 + 2 * (2 * h + 2 * r)
    assert dense_layer(LLAMA8, context(LLAMA8, setup)).total == expected


def test_lora_parameter_count_llama8b_r16():
    assert lora_params(LLAMA8, TrainingSetup(method="lora", lora_rank=16)) == 41_943_040


def _gb(setup):
    return estimate(LLAMA8, setup).tensor_bytes / 1e9


@pytest.mark.parametrize(("setup", "expected_gb"), [
    (TrainingSetup(method="lora", seq_len=2048), 34.2),  # §6.1: peak (allocated) ≈ 34.2 GB
    (TrainingSetup(method="lora", seq_len=2048, grad_ckpt=True), 20.5),  # §6.1 with checkpointing
    (TrainingSetup(method="full", precision="bf16", seq_len=2048), 64.6),  # §6.2(c) pure bf16
    (TrainingSetup(method="full", precision="mixed", seq_len=2048), 131.5),  # §6.2(b) start of backward
    (TrainingSetup(method="qlora", seq_len=2048, grad_ckpt=True, qlora_prep="peft"), 13.8),  # §6.1 QLoRA+ckpt
    (TrainingSetup(method="qlora", seq_len=2048, grad_ckpt=True), 10.1),  # §6.1 without prepare's fp32 upcast
])
def test_worked_examples(setup, expected_gb):
    assert _gb(setup) == pytest.approx(expected_gb, rel=0.02)


def test_components_sum_and_keys():
    est = estimate(LLAMA8, TrainingSetup(method="lora", batch=4, seq_len=2048))
    assert tuple(est.components_bytes) == COMPONENT_KEYS
    assert sum(est.components_bytes.values()) == pytest.approx(est.total_bytes)
    assert est.low_bytes < est.total_bytes < est.high_bytes
    assert est.peak_phase in {p.name for p in est.phases}
    assert est.params_trainable == 41_943_040


def test_peak_moves_to_optimizer_step_for_short_full_finetune():
    # Tiny batch × length: activations are small, so the end of backward (all grads) is the peak.
    est = estimate(LLAMA8, TrainingSetup(method="full", precision="bf16", seq_len=64))
    assert est.peak_phase in ("optimizer step", "backward, first layer")
    assert est.components_bytes["gradients"] > 15e9


def test_eager_adds_quadratic_attention():
    sdpa = estimate(LLAMA8, TrainingSetup(method="lora", seq_len=4096)).tensor_bytes
    eager = estimate(LLAMA8, TrainingSetup(method="lora", seq_len=4096, attention="eager")).tensor_bytes
    # 32 layers × 32 heads × s² × (4 fp32 + 2 bf16) bytes, at s = 4096
    assert eager - sdpa > 32 * 32 * 4096 * 4096 * 6 * 0.95


def test_chunked_loss_removes_logit_memory():
    std = estimate(LLAMA8, TrainingSetup(method="lora", seq_len=8192))
    chunked = estimate(LLAMA8, TrainingSetup(method="lora", seq_len=8192, loss="chunked"))
    # the HF loss keeps 4·T·V and adds 8·T·V in backward: 12 × 8192 × 128256 ≈ 12.6 GB (docs/formulas.md §4)
    assert std.tensor_bytes - chunked.tensor_bytes > 11e9


def test_zero3_divides_model_states():
    one = estimate(LLAMA8, TrainingSetup(method="full", precision="mixed", seq_len=512))
    eight = estimate(LLAMA8, TrainingSetup(method="full", precision="mixed", seq_len=512, gpus=8, sharding="zero3"))
    assert eight.components_bytes["optimizer"] == pytest.approx(one.components_bytes["optimizer"] / 8)
    assert eight.total_bytes < one.total_bytes / 4


def test_zero3_on_one_gpu_changes_nothing():
    plain = estimate(LLAMA8, TrainingSetup(method="full", seq_len=512))
    zero3 = estimate(LLAMA8, TrainingSetup(method="full", seq_len=512, sharding="zero3"))
    assert zero3.total_bytes == plain.total_bytes


def test_qlora_default_keeps_non_4bit_weights_in_16_bit():
    est = estimate(LLAMA8, TrainingSetup(method="qlora"))
    frozen = next(x for x in est.details if x.key == "weights.base").bytes
    assert frozen == pytest.approx(6_979_321_856 * (0.5 + 1 / 64 + 4 / 16384) + 2 * 1_050_939_392)


def test_ddp_bucket_doubles_gradients():
    one = estimate(LLAMA8, TrainingSetup(method="full", seq_len=64))
    ddp = estimate(LLAMA8, TrainingSetup(method="full", seq_len=64, gpus=2))
    step_one = next(p for p in one.phases if p.key == "optimizer_step")
    step_ddp = next(p for p in ddp.phases if p.key == "optimizer_step")
    assert step_ddp.gradients == 2 * step_one.gradients


def test_offload_moves_optimizer_to_cpu():
    est = estimate(LLAMA8, TrainingSetup(method="full", gpus=4, sharding="zero2", offload_optimizer=True))
    assert est.components_bytes["optimizer"] == 0
    params = 8_030_261_248
    terms = {x.key: x.bytes for x in est.host.details}
    # ZeRO-Offload's CPU side: fp32 Adam state (8 B), fp32 master weights (4 B), fp32 gradients (4 B), a 16-bit
    # staging buffer (2 B); each of the 4 processes' pinned master partition rounded up to a power of two
    assert [terms[k] for k in ("host.optimizer_offload", "host.master_weights", "host.offload_gradients",
                               "host.offload_staging")] == [8 * params, 4 * params, 4 * params, 2 * params]
    part = 4 * params / 4
    assert terms["host.pinned_rounding"] == 4 * ((1 << (int(part) - 1).bit_length()) - part)
    # the estimate's CPU RAM is the host's own terms, counted once (issue 27)
    assert est.cpu_offload_bytes == 18 * params + terms["host.pinned_rounding"] == est.host.offloaded_bytes


@pytest.mark.parametrize(("optimizer", "per_param"), [
    ("adamw", 4), ("adamw_8bit", 2 + 8 / 256), ("paged_adamw", 8), ("sgd", 2), ("lion", 4),
])
def test_optimizer_state_bytes_full_bf16(optimizer, per_param):
    est = estimate(LLAMA8, TrainingSetup(method="full", optimizer=optimizer, seq_len=64))
    step = next(p for p in est.phases if p.key == "optimizer_step")
    assert step.optimizer == pytest.approx(LLAMA8.params_total * per_param)


def test_adafactor_is_factored():
    est = estimate(LLAMA8, TrainingSetup(method="full", optimizer="adafactor", seq_len=64))
    step = next(p for p in est.phases if p.key == "optimizer_step")
    state = next(x for x in step.details if x.key == "optimizer.state").bytes
    assert state < 0.01 * LLAMA8.params_total  # ≈ 4(R + C) bytes per matrix
    temp = next(x for x in step.details if x.key == "optimizer.step_temporaries").bytes
    assert temp == 3 * 4 * 128256 * 4096  # fp32 param, grad and update of the largest tensor (embedding)


def test_foreach_adamw_adds_step_temporaries():
    fused = estimate(LLAMA8, TrainingSetup(method="full", seq_len=64))
    foreach = estimate(LLAMA8, TrainingSetup(method="full", seq_len=64, optimizer="adamw_foreach"))
    assert foreach.tensor_bytes - fused.tensor_bytes == pytest.approx(2 * LLAMA8.params_total, rel=0.01)


def test_qlora_weight_storage_matches_bitsandbytes_layout():
    # NF4 + double quant: 0.5 + 1/64 + 4/(64·256) B per weight (QLoRA §3); non-linear params upcast to fp32.
    est = estimate(LLAMA8, TrainingSetup(method="qlora", qlora_prep="peft"))
    frozen = next(x for x in est.details if x.key == "weights.base").bytes
    expected = 6_979_321_856 * (0.5 + 1 / 64 + 4 / 16384) + 4 * (8_030_261_248 - 6_979_321_856)
    assert frozen == pytest.approx(expected)
    assert frozen / 1e9 == pytest.approx(7.80, abs=0.01)  # docs/formulas.md §6.1 QLoRA variant


def test_unknown_lora_target_is_a_clear_error():
    with pytest.raises(ValueError, match="not a linear module"):
        estimate(LLAMA8, TrainingSetup(method="lora", lora_targets=("query",)))


@pytest.mark.parametrize(("preset", "window", "sliding"), [
    ("gemma-2-2b", 4096, 13),  # every other layer (Gemma-2 layer_types default)
    ("gemma-3-1b", 512, 22),  # five of six (sliding_window_pattern 6)
    ("phi-3-mini", 2047, 32),  # every layer (modeling_phi3: sliding_window set)
    ("mistral-7b-v0.3", 0, 0),  # sliding_window null
    ("qwen2.5-0.5b", 0, 0),  # use_sliding_window false
])
def test_sliding_window_layers_from_config(preset, window, sliding):
    spec = load_preset(preset)
    assert (spec.sliding_window, spec.sliding_layers) == (window, sliding)


def test_sliding_window_mask_under_sdpa_only_from_the_window_on():
    # Phi-3-mini (a = k = 32, d = 96): at s >= 2047 each layer saves the c·s additive mask and K, V at q width
    # (no GQA here: qd = kvd, so only the mask): 2 B × 2048 per token per layer.
    spec = load_preset("phi-3-mini")
    below = context(spec, TrainingSetup(method="lora", seq_len=2046))
    at = context(spec, TrainingSetup(method="lora", seq_len=2048))
    eager = context(spec, TrainingSetup(method="lora", seq_len=2048, attention="eager"))
    assert sliding_mask_per_token(spec, below) == 0
    assert sliding_mask_per_token(spec, at) == 2 * 2048
    assert sliding_mask_per_token(spec, eager) == 0
    gemma3 = load_preset("gemma-3-1b")  # a = 4, k = 1, d = 256: K and V repeated to q width
    ctx = context(gemma3, TrainingSetup(method="full", precision="bf16", seq_len=1024))
    assert sliding_mask_per_token(gemma3, ctx) == 2 * 1024 + 2 * 2 * (1024 - 256)


def test_detail_keys_are_stable_ids_not_labels():
    """Code finds a term by its DetailItem.key ("<component>.<term>"); labels are only shown (docs/architecture.md)."""
    from estimator.memory.result import detail_bytes

    for setup in (TrainingSetup(method="lora"), TrainingSetup(method="full", grad_ckpt=True),
                  TrainingSetup(method="qlora", batch=2)):
        est = estimate(load_preset("qwen2.5-0.5b"), setup)
        for p in est.phases:
            keys = [x.key for x in p.details]
            assert len(keys) == len(set(keys)), p.key
            assert all(x.key.partition(".")[0] == x.component for x in p.details)
        assert {p.key for p in est.phases} >= {"loss_backward", "backward.first_layer", "optimizer_step"}
        assert detail_bytes(est.details, "overhead.cuda_context") > 0
