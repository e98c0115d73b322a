"""ui.grids and ui.page_charts: the secondary pages' computations and figures, without Streamlit.

The seed's own numbers are the fixtures: its 36 GB laptop diagram (six verdicts and three conclusions), its
size table and its 7B figure."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from estimator import (
    CATALOG,
    COMPONENT_KEYS,
    GB,
    MAX_SIZE_B,
    TrainingSetup,
    custom_device,
    estimate,
    generic_spec,
    get_device,
    load_preset,
    rule_gb,
)
from estimator.advice.solvers import best_layout, fewest_gpus, sharded, what_would_fit
from estimator.job.stack import resolve_setup
from estimator.job.trainer import TrainerSetup
from estimator.options.methods import SHARDING_LABELS, SHARDINGS
from ui.grids import (
    GPU_COUNTS,
    SEED_SIZES_B,
    SHORT_SHARDING,
    TABLE_SIZES_B,
    chosen_models,
    compare_setups,
    components_table,
    fits_grid,
    max_fitting_size_b,
    min_gpus_table,
    page_estimate_fn,
    round_size,
    scale_out_curves,
    setup_summary,
    size_and_preset_options,
    size_table,
    with_method,
)
from ui.page_charts import fits_chart, scale_out_chart

LAPTOP = get_device("laptop-36gb")
USABLE_GB = 27 * 2**30 / GB  # the laptop's usable memory: 27 GiB (75 % of 36 GiB of RAM) = 28.99 GB
# The seed's 36 GB laptop diagram: (size, method) → (its estimate in GB, its verdict).
SEED_DIAGRAM = {
    (1.5, "lora"): (6, True), (7, "lora"): (17, True), (14, "lora"): (31, False),
    (32, "qlora"): ((22, 26), True), (1.5, "full"): (22, True), (3, "full"): (40, False),
}
# The seed's size table (rule of thumb, GB): size → (LoRA, full).
SEED_TABLE = {0.5: (4, 10), 1.5: (6, 22), 3: (9, 40), 7: (17, 88), 14: (31, 172)}


@pytest.fixture(scope="module")
def seed_grid():
    return fits_grid(chosen_models([f"{s:g}B" for s in SEED_SIZES_B]), TrainingSetup(), LAPTOP, rule="seed")


def test_laptop_usable_memory_is_the_seeds_27_gb():
    assert LAPTOP.usable_bytes == 27 * 2**30  # the seed's "about 27 GB", as the GiB macOS reports


@pytest.mark.parametrize(("key", "expected"), list(SEED_DIAGRAM.items()))
def test_seed_rule_reproduces_the_laptop_diagram(seed_grid, key, expected):
    size_b, method = key
    gb, fits = expected
    cell = seed_grid.cell(size_b, method)
    total = cell.estimate.total_bytes / GB
    if isinstance(gb, tuple):
        assert gb[0] <= total <= gb[1]
    else:
        assert total == pytest.approx(gb)
    assert cell.verdict.fits is fits


def test_seed_rule_conclusions_are_computed_not_written(seed_grid):
    by_method = {c.method: c for c in seed_grid.conclusions}
    # LoRA "up to about 10B": 7B fits, 14B does not; the rule's break-even is (usable − 3) / 2 ≈ 13B.
    assert by_method["lora"].largest_listed.size_b == 7 and by_method["lora"].smallest_too_big.size_b == 14
    assert by_method["lora"].max_size_b == pytest.approx((USABLE_GB - 3) / 2, rel=0.003)
    # Full fine-tuning "up to about 1.5B": 1.5B fits, 3B does not; break-even (usable − 4) / 12.
    assert by_method["full"].largest_listed.size_b == 1.5 and by_method["full"].smallest_too_big.size_b == 3
    assert by_method["full"].max_size_b == pytest.approx((USABLE_GB - 4) / 12, rel=0.003)
    # QLoRA "27–32B models": both fit, 70B does not; break-even (3 × (usable − 3) − 3) / 2.
    assert seed_grid.cell(27, "qlora").verdict.fits and seed_grid.cell(32, "qlora").verdict.fits
    assert by_method["qlora"].largest_listed.size_b == 32 and by_method["qlora"].smallest_too_big.size_b == 70
    assert by_method["qlora"].max_size_b == pytest.approx((3 * (USABLE_GB - 3) - 3) / 2, rel=0.003)
    assert by_method["lora"].text == "LoRA: up to about 13B (7B fits, 14B is too big)."
    assert by_method["full"].text == "Full fine-tuning: up to about 2.1B (1.5B fits, 3B is too big)."
    assert by_method["qlora"].text == "QLoRA: up to about 37B (32B fits, 70B is too big)."


def test_grid_covers_every_size_and_method_in_the_seed_order(seed_grid):
    assert [c.method for c in seed_grid.cells] == [m for m in ("lora", "qlora", "full") for _ in SEED_SIZES_B]
    assert [c.size_b for c in seed_grid.cells[:len(SEED_SIZES_B)]] == list(SEED_SIZES_B)
    assert seed_grid.cells[0].label == "0.5B · LoRA"


def test_detailed_grid_verdicts_agree_with_the_estimator():
    setup = TrainingSetup(batch=2, seq_len=1024, grad_ckpt=True)
    device = get_device("rtx-4090")
    grid = fits_grid(chosen_models(["7B", "qwen2.5-7b"]), setup, device)
    for cell in grid.cells:
        spec = generic_spec(7) if cell.model_label == "7B" else load_preset("qwen2.5-7b")
        total = estimate(spec, replace(setup, method=cell.method)).total_bytes
        assert cell.estimate.total_bytes == total
        assert cell.verdict.fits is (total <= device.usable_bytes)


@pytest.mark.parametrize("method", ["lora", "qlora", "full"])
def test_max_fitting_size_is_the_break_even_of_the_detailed_estimate(method):
    setup = TrainingSetup(method=method, grad_ckpt=True)
    device = get_device("a100-40gb")
    size = max_fitting_size_b(setup, device)
    assert estimate(generic_spec(size), setup).total_bytes <= device.usable_bytes
    assert estimate(generic_spec(size * 1.01), setup).total_bytes > device.usable_bytes


def test_max_fitting_size_at_the_ends():
    tiny = custom_device(0.5)
    assert max_fitting_size_b(TrainingSetup(method="full"), tiny) is None
    huge = custom_device(100_000)
    assert max_fitting_size_b(TrainingSetup(method="qlora"), huge, rule="seed") == MAX_SIZE_B == 1000.0


def test_round_size():
    assert [round_size(x) for x in (12.04, 1.917, 34.47, 0.349, 400.0)] == [12, 1.9, 34, 0.35, 400]


def test_model_choices():
    options = size_and_preset_options()
    assert options[:len(SEED_SIZES_B)] == ["0.5B", "1.5B", "3B", "7B", "14B", "27B", "32B", "70B"]
    assert "llama-3.1-8b" in options
    models = chosen_models(["70B", "llama-3.1-8b", "nope"])
    assert [label for label, _ in models] == ["70B", "Llama-3.1-8B"]
    assert models[0][1].params_total == 70_000_000_000


def test_size_table_rule_columns_are_the_seeds_table():
    table = size_table(TrainingSetup()).set_index("Model")
    for size_b, (lora, full) in SEED_TABLE.items():
        row = table.loc[f"{size_b:g}B"]
        assert row["LoRA · rule (GB)"] == lora
        assert row["full · rule (GB)"] == full
        assert row["QLoRA · rule (GB)"] == pytest.approx(rule_gb(size_b, "qlora"))
    assert list(table["Parameters (B)"]) == list(TABLE_SIZES_B)


def test_size_table_detailed_columns_follow_the_setup():
    setup = TrainingSetup(batch=4, seq_len=512, precision="mixed", optimizer="adamw_8bit")
    table = size_table(setup, sizes=(3, 14), extra=[("Llama-3.1-8B", load_preset("llama-3.1-8b"))])
    assert list(table["Model"]) == ["3B", "Llama-3.1-8B", "14B"]
    row = table.set_index("Model").loc["Llama-3.1-8B"]
    expected = estimate(load_preset("llama-3.1-8b"), replace(setup, method="qlora")).total_bytes
    assert row["QLoRA · detailed (GB)"] == pytest.approx(expected / 1e9)
    assert row["QLoRA · detailed (GiB)"] == pytest.approx(expected / 2**30)
    assert row["full · rule (GB)"] == pytest.approx(16 * 8.030261248 + 4)  # 'mixed': the fp32 master copy


def test_compare_setups_orders_methods_and_adds_variants():
    setup = TrainingSetup(precision="bf16", optimizer="adamw")
    rows = compare_setups(setup, ["qlora", "lora"], ["mixed", "bf16", "adamw_8bit", "bogus"])
    assert [label for label, _ in rows] == ["LoRA", "LoRA · mixed", "LoRA · adamw_8bit",
                                            "QLoRA", "QLoRA · mixed", "QLoRA · adamw_8bit"]
    assert rows[1][1] == replace(setup, method="lora", precision="mixed")
    assert rows[2][1] == replace(setup, method="lora", optimizer="adamw_8bit")


@pytest.mark.parametrize("stack", ["trl", "torchtune", "unsloth"])
def test_a_stack_setup_switched_to_another_method_is_what_the_stack_does_for_it(stack):
    """Regression: the compare, fits and size pages switched methods with dataclasses.replace, keeping the LoRA
    adapter dtype for QLoRA; TRL keeps QLoRA adapters in bf16 and LoRA adapters in fp32, so the QLoRA bar
    differed from the calculator's QLoRA number."""
    spec = load_preset("llama-3.1-8b")
    for start in ("lora", "qlora", "full"):
        setup = resolve_setup(stack, method=start, batch=2, seq_len=1024)
        for method in ("full", "lora", "qlora"):
            expected = resolve_setup(stack, method=method, batch=2, seq_len=1024)
            assert with_method(setup, method) == expected
        rows = dict(compare_setups(setup, ["lora", "qlora"]))
        assert rows["QLoRA"] == resolve_setup(stack, method="qlora", batch=2, seq_len=1024)
        assert rows["LoRA"] == resolve_setup(stack, method="lora", batch=2, seq_len=1024)
    trl_lora = resolve_setup("trl")
    assert with_method(trl_lora, "qlora").adapter_dtype == "bf16" and trl_lora.adapter_dtype == "fp32"
    assert estimate(spec, with_method(trl_lora, "qlora")).total_bytes != estimate(
        spec, replace(trl_lora, method="qlora")).total_bytes
    # The user's own choices survive the switch; only the stack's are chosen again.
    mine = resolve_setup("trl", adapter_dtype="fp32", grad_ckpt=False)
    assert with_method(mine, "qlora").adapter_dtype == "fp32" and not with_method(mine, "qlora").grad_ckpt
    assert with_method(mine, "qlora").from_stack == resolve_setup("trl", method="qlora", adapter_dtype="fp32",
                                                                  grad_ckpt=False).from_stack
    # No stack: a plain replace, as before.
    assert with_method(TrainingSetup(), "qlora") == TrainingSetup(method="qlora")


def test_fits_grid_and_size_table_use_the_stacks_setup_per_method():
    device = get_device("rtx-4090")
    setup = resolve_setup("trl")
    grid = fits_grid([("7B", generic_spec(7))], setup, device, None, ["lora", "qlora"])
    expected = estimate(generic_spec(7), resolve_setup("trl", method="qlora"))
    assert grid.cell(7, "qlora").estimate.total_bytes == expected.total_bytes
    table = size_table(setup, sizes=(7,)).set_index("Model")
    assert table.loc["7B", "QLoRA · detailed (GB)"] == pytest.approx(expected.total_bytes / GB)


def test_components_table_sums_to_the_total():
    spec = load_preset("llama-3.1-8b")
    rows = [(label, estimate(spec, s)) for label, s in compare_setups(TrainingSetup(), ["full", "lora"])]
    table = components_table(rows).set_index("Component")
    for label, est in rows:
        assert table[f"{label} (GB)"].iloc[:len(COMPONENT_KEYS)].sum() == pytest.approx(est.total_bytes / 1e9)
        assert table.loc["Total", f"{label} (GiB)"] == pytest.approx(est.total_bytes / 2**30)


# --------------------------------------------------------------------------------------------
# Scale out
# --------------------------------------------------------------------------------------------

SEVENTY_FULL = TrainingSetup(method="full", grad_ckpt=True)


def independent_min_gpus(setup: TrainingSetup, sharding: str, device_id: str, limit: int = 64) -> int | None:
    spec = load_preset("llama-3.1-70b")
    usable = get_device(device_id).usable_bytes
    for n in range(1, limit + 1):
        if estimate(spec, replace(setup, gpus=n, sharding=sharding)).total_bytes <= usable:
            return n
    return None


def test_min_gpus_table_matches_an_independent_search():
    spec = load_preset("llama-3.1-70b")
    table = min_gpus_table(spec, SEVENTY_FULL).set_index("Device")
    assert list(table.index) == [d.name for d in CATALOG if d.kind == "discrete"]
    for device_id in ("h100-80gb", "a100-40gb", "rtx-4090"):
        name = get_device(device_id).name
        for sharding in SHARDINGS:
            expected = independent_min_gpus(SEVENTY_FULL, sharding, device_id)
            got = table.loc[name, SHORT_SHARDING[sharding]]
            assert (None if pd.isna(got) else int(got)) == expected


def count_by_count(spec, setup: TrainingSetup, device, trainer, per_node: int) -> int | None:
    """The smallest whole-node GPU count whose per-GPU estimate (the page's) fits: every count tried in turn."""
    fn = page_estimate_fn(trainer)
    return next((n for n in range(per_node, 65, per_node)
                 if fn(spec, replace(setup, gpus=n)).total_bytes <= device.usable_bytes), None)


@pytest.mark.parametrize(("model", "method", "trainer", "per_node", "offload"), [
    ("llama-3.1-8b", "lora", None, 1, False),
    ("llama-3.1-70b", "full", None, 8, True),
    ("qwen3-30b-a3b", "qlora", None, 2, False),
    ("llama-3.2-3b", "full", TrainerSetup("dpo"), 1, False),
    # GRPO under ZeRO-3 gathers the weights for generation: per-GPU memory rises again with more GPUs, so the
    # table tries every count (min_gpus_for_devices(monotone=False)); 3 GPUs fit where 4 and more do not.
    ("llama-3.2-3b", "full", TrainerSetup("grpo"), 1, False),
])
def test_min_gpus_table_is_the_count_by_count_answer_for_every_gpu(model, method, trainer, per_node, offload):
    """The devices are searched from the most memory down (estimator.advice.solvers.min_gpus_for_devices): the
    table must still be what trying every count for every device gives."""
    spec = load_preset(model)
    setup = resolve_setup("trl", method=method)
    table = min_gpus_table(spec, setup, offload=offload, per_node=per_node, trainer=trainer).set_index("Device")
    answers = set()
    for device in (d for d in CATALOG if d.kind == "discrete"):
        for sharding in SHARDINGS:
            got = table.loc[device.name, SHORT_SHARDING[sharding]]
            expected = count_by_count(spec, sharded(setup, sharding, offload), device, trainer, per_node)
            assert (None if pd.isna(got) else int(got)) == expected, (device.id, sharding)
            answers.add(expected)
    assert len(answers) > 2  # the case tells devices apart


def test_zero3_shrinks_per_gpu_memory_and_ddp_does_not():
    curves = scale_out_curves(load_preset("llama-3.1-70b"), SEVENTY_FULL)
    zero3 = [e.total_bytes for e in curves["zero3"]]
    assert all(b < a for a, b in zip(zero3, zero3[1:], strict=False))
    ddp = [e.total_bytes for e in curves["none"]]
    assert min(ddp[1:]) >= ddp[0]  # data parallel copies everything, plus gradient buckets


def test_offload_moves_optimizer_state_to_cpu_except_for_plain_data_parallel():
    spec = load_preset("llama-3.1-8b")
    curves = scale_out_curves(spec, TrainingSetup(method="full"), (1, 4), offload=True)
    assert all(e.cpu_offload_bytes == 0 for e in curves["none"])
    for sharding in ("zero1", "zero2", "zero3"):
        for est in curves[sharding]:
            assert est.components_bytes["optimizer"] == 0 and est.cpu_offload_bytes > 0
    plain = scale_out_curves(spec, TrainingSetup(method="full"), (4,))["zero3"][0]
    assert curves["zero3"][1].total_bytes < plain.total_bytes


def test_best_layout_is_the_fewest_gpus_then_the_simplest_sharding():
    spec = load_preset("llama-3.1-70b")
    layout = best_layout(spec, SEVENTY_FULL, get_device("h100-80gb"), SHARDINGS)
    sharding, n, est = layout.sharding, layout.gpus, layout.estimate
    expected = min((independent_min_gpus(SEVENTY_FULL, s, "h100-80gb") or 10**6, i) for i, s in enumerate(SHARDINGS))
    assert (n, sharding) == (expected[0], SHARDINGS[expected[1]])
    assert est.setup.gpus == n and est.total_bytes <= get_device("h100-80gb").usable_bytes
    assert best_layout(spec, SEVENTY_FULL, get_device("gpu-16gb"), SHARDINGS, max_gpus=8) is None


def test_best_layout_prefers_a_sharding_whose_likely_range_fits_at_the_fewest_gpus():
    """2 × A100 40 GB, Qwen2.5-7B full: ZeRO-2 fits there only as a close call, ZeRO-3 with its upper end; the layout
    is ZeRO-3 on two. With likely_high, the fewest GPUs at which any sharding's upper end fits. (Llama 3.1 8B's ZeRO-2
    on two no longer fits the 39.39 GiB CUDA gives an A100 40GB at all.)"""
    spec, a100 = load_preset("qwen2.5-7b"), get_device("a100-40gb")
    setup = resolve_setup("trl", method="full")
    layout = best_layout(spec, setup, a100, SHARDINGS)
    assert (layout.gpus, layout.sharding) == (2, "zero3")
    assert layout.estimate.high_bytes <= a100.usable_bytes
    zero2 = estimate(spec, replace(sharded(setup, "zero2"), gpus=2))
    assert zero2.total_bytes <= a100.usable_bytes < zero2.high_bytes  # the close call it used to name
    safe = best_layout(spec, setup, a100, SHARDINGS, likely_high=True)
    assert (safe.gpus, safe.sharding) == (2, "zero3")


def test_fewest_gpus_bisects_to_the_linear_search_and_whole_nodes():
    """The bisection finds what a count-by-count search finds; with 8 GPUs a node, the next whole node."""
    spec, h100 = load_preset("llama-3.1-70b"), get_device("h100-80gb")
    setup = sharded(SEVENTY_FULL, "zero3")
    linear = next(n for n in range(1, 65)
                  if estimate(spec, replace(setup, gpus=n)).total_bytes <= h100.usable_bytes)
    assert fewest_gpus(spec, setup, h100.usable_bytes) == linear
    assert fewest_gpus(spec, setup, h100.usable_bytes, per_node=8) == -(-linear // 8) * 8
    assert fewest_gpus(spec, setup, 1e9) is None
    high = fewest_gpus(spec, setup, h100.usable_bytes, likely_high=True)
    assert high >= linear and estimate(spec, replace(setup, gpus=high)).high_bytes <= h100.usable_bytes


def test_what_would_fit_names_checkpointing_offload_and_more_gpus():
    spec, h100 = load_preset("llama-3.1-70b"), get_device("h100-80gb")
    no_ckpt = resolve_setup("trl", method="full", grad_ckpt=False)  # the issue: "no layout up to 64 fits"
    assert best_layout(spec, no_ckpt, h100, SHARDINGS) is None
    found = dict(what_would_fit(spec, no_ckpt, h100, SHARDINGS))
    assert "gradient checkpointing on" in found and found["gradient checkpointing on"].estimate.setup.grad_ckpt
    assert all(layout.estimate.total_bytes <= h100.usable_bytes for layout in found.values())


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

def test_fits_chart_marks_every_bar_and_draws_the_usable_line(seed_grid):
    fig = fits_chart(seed_grid)
    verdicts = [a for a in fig.layout.annotations if a.name == "verdict"]
    assert len(verdicts) == len(seed_grid.cells)
    labels = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext, strict=True))
    texts = {labels[a.y]: a.text for a in verdicts}
    assert "fits" in texts["7B · LoRA"] and "17.0 GB" in texts["7B · LoRA"]
    assert "too big" in texts["14B · LoRA"] and "31.0 GB" in texts["14B · LoRA"]
    assert "too big" in texts["3B · full"] and "40.0 GB" in texts["3B · full"]
    usable = [s for s in fig.layout.shapes if s.name == "usable"]
    assert usable and usable[0].x0 == pytest.approx(USABLE_GB)
    assert fig.layout.xaxis.range[1] == pytest.approx(36 * 2**30 / GB * 1.6)  # 70B full (844 GB) runs off the edge


def test_scale_out_chart_is_log2_with_the_usable_line():
    curves = scale_out_curves(load_preset("llama-3.1-70b"), SEVENTY_FULL)
    fig = scale_out_chart(curves, GPU_COUNTS, get_device("h100-80gb"))
    assert fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8, 16, 32, 64]
    assert [t.name for t in fig.data] == [SHARDING_LABELS[s] for s in SHARDINGS]
    zero3 = fig.data[SHARDINGS.index("zero3")]
    assert list(zero3.y) == [e.total_bytes / 1e9 for e in curves["zero3"]]
    # 84.9 GB: the 79.11 GiB CUDA gives an H100 80GB, not nvidia-smi's 81,559 MiB (85.5 GB)
    assert [s.y0 for s in fig.layout.shapes if s.name == "usable"] == [pytest.approx(round(79.11 * 1024) * 2**20 / GB)]


def test_setup_summary():
    text = setup_summary(load_preset("llama-3.1-8b"), TrainingSetup(batch=2, gpus=4, sharding="zero3"),
                         get_device("h100-80gb"))
    assert text == ("Llama-3.1-8B · batch 2 × 2,048 tokens · bf16 · adamw · checkpointing off · "
                    "4 GPUs, ZeRO-3 / FSDP full shard · NVIDIA H100 80GB HBM3 (81,559 MiB)")
    assert setup_summary(None, TrainingSetup(), None).startswith("batch 1")
