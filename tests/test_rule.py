"""The seed page's rule of thumb reproduces every figure the product page gives (quoted in the README)."""

import pytest

from estimator import TrainingSetup, estimate, generic_spec, get_device, load_preset, rule_gb, seed_figure_gb, verdict
from estimator.memory.rule import rule_components_gb

SIZE_TABLE = [(0.5, 4, 10), (1.5, 6, 22), (3, 9, 40), (7, 17, 88), (14, 31, 172)]


@pytest.mark.parametrize(("size", "lora", "full"), SIZE_TABLE)
def test_size_table(size, lora, full):
    assert rule_gb(size, "lora") == pytest.approx(lora)
    assert rule_gb(size, "full") == pytest.approx(full)


def test_master_copy_is_16_gb_per_billion():
    assert rule_gb(7, "full", master_copy=True) == pytest.approx(16 * 7 + 4)
    assert rule_components_gb(1, "full", master_copy=True)["optimizer"] == pytest.approx(12)


def test_qlora_examples():
    assert round(rule_gb(8, "qlora")) == 9  # "an 8B model needs about 9 GB instead of 19"
    assert round(rule_gb(8, "lora")) == 19
    assert 22 <= rule_gb(27, "qlora") <= 26 and 22 <= rule_gb(32, "qlora") <= 26


LAPTOP_VERDICTS = [(1.5, "lora", 6, True), (7, "lora", 17, True), (14, "lora", 31, False),
                   (32, "qlora", 25.3, True), (1.5, "full", 22, True), (3, "full", 40, False)]


@pytest.mark.parametrize(("size", "method", "approx_gb", "fits"), LAPTOP_VERDICTS)
def test_36gb_laptop_six_verdicts(size, method, approx_gb, fits):
    laptop = get_device("laptop-36gb")
    assert laptop.usable_bytes == 27 * 2**30  # 36 GiB of RAM as macOS reports it, 75 % usable (29.0 GB)
    est = estimate(generic_spec(size), TrainingSetup(method=method), rule="seed")
    assert est.total_bytes / 1e9 == pytest.approx(approx_gb, abs=0.5)
    assert verdict(est.total_bytes, laptop).fits is fits


def test_16gb_nvidia_gpu():
    gpu = get_device("gpu-16gb")
    assert gpu.usable_bytes == 15_872 * 2**20  # discrete: the card's own memory as CUDA reports it (RTX 4080 class)
    lora = estimate(generic_spec(8), TrainingSetup(method="lora"), rule="seed")
    qlora = estimate(generic_spec(8), TrainingSetup(method="qlora"), rule="seed")
    assert round(lora.total_bytes / 1e9) == 19 and not verdict(lora.total_bytes, gpu).fits
    assert round(qlora.total_bytes / 1e9) == 9 and verdict(qlora.total_bytes, gpu).fits


def test_seed_mode_mixed_precision_selects_master_copy():
    est = estimate(generic_spec(7), TrainingSetup(method="full", precision="mixed"), rule="seed")
    assert est.total_bytes == pytest.approx(116e9)
    assert sum(est.components_bytes.values()) == pytest.approx(est.total_bytes)


def test_seven_b_figure_before_activations():
    spec = generic_spec(7)
    assert sum(seed_figure_gb(spec, "full").values()) == pytest.approx(112)
    assert round(sum(seed_figure_gb(spec, "lora").values())) == 15
    assert 4 <= sum(seed_figure_gb(spec, "qlora").values()) <= 5
    # the adapter is "about 40 million weights" for a 7B model at rank 16, all linear layers
    adapter_gb = seed_figure_gb(spec, "lora")["trainable weights"] / 2
    assert 30e6 < adapter_gb * 1e9 < 50e6


def test_unified_three_quarters_and_discrete_cudas_total():
    assert get_device("mac-48gb").usable_bytes == 36 * 2**30  # 75 % of 48 GiB
    assert get_device("a100-80gb").usable_bytes == 81_050 * 2**20  # the 79.15 GiB CUDA gives, not nvidia-smi's 81,920


def test_preset_uses_exact_parameter_count():
    est = estimate(load_preset("llama-3.1-8b"), TrainingSetup(method="lora"), rule="seed")
    assert est.total_bytes == pytest.approx((2 * 8.030261248 + 3) * 1e9)


@pytest.mark.parametrize("size", [0.1, 0.25, 0.5, 0.74, 0.75, 1, 8, 70, 405])
def test_rule_qlora_never_exceeds_its_lora(size):
    assert rule_gb(size, "qlora") <= rule_gb(size, "lora")
    assert rule_gb(0.5, "qlora") == pytest.approx(rule_gb(0.5, "lora"))  # 4.0 GB, not 4.3
    assert rule_gb(8, "qlora") < rule_gb(8, "lora")  # the seed's 9 vs 19 GB still holds
