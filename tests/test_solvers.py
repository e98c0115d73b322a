"""The search-style solvers (estimator/advice/): the one search they share (bisect_last), each solver against a
plain count-by-count or halving search on the estimator, the calculator's advice in one call, and the number of
estimates one calculator rerun computes (the estimate cache's misses)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from streamlit.testing.v1 import AppTest

from estimator import TrainerSetup, estimate, get_device, load_preset, max_batch, max_seq_len
from estimator.advice.advise import advise
from estimator.advice.remedies import shard_remedy
from estimator.advice.search import _smallest_int, bisect_last
from estimator.advice.solvers import fewest_gpus, max_completion_len, sharded
from estimator.job.stack import resolve_setup
from estimator.memory.adapters import lora_targets
from estimator.memory.price import detailed_estimate, estimate_trainer
from tests.test_calculator_page import APP, TIMEOUT, markdown_text

RTX = get_device("rtx-4090")
LLAMA = load_preset("llama-3.1-8b")
SEVENTY = load_preset("llama-3.1-70b")
TRL = resolve_setup("trl")


def halving(lo: int, hi: int, fits) -> int | None:
    """The plain bisection the solvers used before: the reference answer."""
    if not fits(lo):
        return None
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


class Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, x):
        self.calls += 1
        return self.fn(x)


# ---- the one search ------------------------------------------------------------------------------------------


def shaped(shape: str, base: float, slope: float, kink: int):
    """A nondecreasing memory-like curve: a line, a line with a steeper part, stairs, or a gentle parabola."""
    return {
        "linear": lambda x: base + slope * x,
        "kink": lambda x: base + slope * x + (50 * slope * (x - kink) if x > kink else 0),
        "steps": lambda x: base + slope * 7 * (x // 7),
        "quadratic": lambda x: base + slope * x + 1e-3 * slope * x * x,
    }[shape]


@pytest.mark.parametrize("shape", ["linear", "kink", "steps", "quadratic"])
def test_bisect_last_finds_what_halving_finds_for_any_monotone_shape(shape):
    rng = random.Random(shape)
    for _ in range(400):
        hi = rng.choice([2, 7, 256, 2**21])
        base, slope = rng.uniform(0, 100), rng.uniform(1e-3, 10)
        value = shaped(shape, base, slope, rng.randint(1, hi))
        limit = rng.uniform(0, base + 1.5 * slope * hi)
        hints = rng.sample(range(1, hi + 1), k=min(2, hi)) if rng.random() < 0.5 else ()
        expected = halving(1, hi, lambda x, v=value, lim=limit: v(x) <= lim)
        assert bisect_last(1, hi, value, limit, hints=hints) == expected


def test_bisect_last_needs_few_probes_on_a_line_and_never_many_more_than_halving():
    value = Counted(lambda s: 3e9 + 1.7e5 * s)  # bytes against tokens: one phase, affine
    limit = 25.5e9
    answer = bisect_last(1, 2**21, value, limit, hints=(2048, 1024))
    assert answer == math.floor((limit - 3e9) / 1.7e5) == 132352
    assert value.calls == 4  # the two hints, the line's answer and the point above it
    steps = Counted(lambda x: 7 * (x // 7))
    assert bisect_last(1, 2**21, steps, 1e6) == 1000005
    assert steps.calls <= 2 * (21 + 2)  # the halving safeguard: bounded by bisection's count, twice over


def test_bisect_last_on_real_numbers_stops_within_the_tolerance():
    value = lambda size: 2.0 + 2.2 * size  # noqa: E731
    found = bisect_last(0.1, 1000.0, value, 24.0, integer=False, rel_tol=0.002)
    assert found <= 10.0 < found * 1.002  # the answer is 10: found just below it
    assert bisect_last(0.1, 1000.0, value, 1.0, integer=False) is None
    assert bisect_last(0.1, 1000.0, value, 1e6, integer=False) == 1000.0


def test_smallest_int_is_the_first_count_that_fits_for_memory_that_falls_as_gpus_are_added():
    per_gpu = lambda n: 20 + 800 / n + (3 if n > 1 else 0)  # noqa: E731
    coord = (lambda k: 1 / k, lambda u: 1 / u)
    for limit in (24.0, 30.5, 60.0, 500.0, 823.1):
        expected = next((n for n in range(1, 65) if per_gpu(n) <= limit), None)
        assert _smallest_int(1, 64, per_gpu, limit, coord=coord) == expected
    assert _smallest_int(1, 64, per_gpu, 10.0, coord=coord) is None


# ---- the solvers against plain searches on the estimator -----------------------------------------------------


@pytest.mark.parametrize("model,settings", [
    ("llama-3.1-8b", {"method": "lora"}),
    ("llama-3.1-8b", {"method": "qlora", "batch": 4, "seq_len": 4096}),
    ("qwen2.5-7b", {"method": "lora", "attention": "eager", "seq_len": 1024}),
    ("llama-3.2-1b", {"method": "full", "batch": 3}),
])
def test_max_batch_and_max_seq_len_match_a_plain_halving_on_the_estimator(model, settings):
    spec, setup = load_preset(model), resolve_setup("trl", **settings)
    usable = RTX.usable_bytes

    def fits(**change) -> bool:
        return estimate(spec, replace(setup, **change)).total_bytes <= usable

    assert max_batch(spec, setup, usable, limit=256) == halving(1, 256, lambda b: fits(batch=b))
    assert max_seq_len(spec, setup, usable, limit=1 << 21) == halving(1, 1 << 21, lambda s: fits(seq_len=s))


def test_no_batch_or_length_fits_when_the_optimizer_step_alone_is_too_big():
    setup = resolve_setup("trl", method="full")
    est = estimate(SEVENTY, setup)
    one = estimate(SEVENTY, replace(setup, batch=1, seq_len=1))
    assert est.floor_bytes <= one.total_bytes <= est.total_bytes  # a lower bound at any batch and length
    assert est.floor_bytes > RTX.usable_bytes
    assert max_batch(SEVENTY, setup, RTX.usable_bytes) is None and max_seq_len(SEVENTY, setup, RTX.usable_bytes) is None


def test_grpo_max_completion_length_matches_a_plain_halving():
    tr = TrainerSetup("grpo")
    setup = resolve_setup("trl", method="lora", batch=8)
    usable = RTX.usable_bytes

    def fits(c: int) -> bool:
        return estimate_trainer(LLAMA, setup, replace(tr, completion_len=c), None, strict=False).total_bytes <= usable

    limit = (1 << 21) - tr.prompt_length
    assert max_completion_len(LLAMA, setup, tr, usable) == halving(1, limit, fits)


def test_fewest_gpus_with_a_guess_or_a_floor_matches_a_count_by_count_search():
    setup = sharded(resolve_setup("trl", method="full", batch=2), "zero3")
    per_gpu = {n: estimate(SEVENTY, replace(setup, gpus=n)).total_bytes for n in range(1, 65)}
    linear = next(n for n in range(1, 65) if per_gpu[n] <= RTX.usable_bytes)
    assert linear == 60  # 23.51 GiB per RTX 4090 (CUDA's total); 56 against nvidia-smi's 24,564 MiB
    for guess in (None, 2, 30, 56, 64, 500):
        assert fewest_gpus(SEVENTY, setup, RTX.usable_bytes, guess=guess) == linear
    assert fewest_gpus(SEVENTY, setup, RTX.usable_bytes, at_least=60) == 60
    assert fewest_gpus(SEVENTY, setup, RTX.usable_bytes, max_gpus=40) is None


def test_shard_remedy_names_the_fewest_gpus_and_only_when_it_does_not_fit():
    setup = resolve_setup("trl", method="full", batch=2)
    remedy = shard_remedy(SEVENTY, setup, RTX, order=6)
    after = estimate(SEVENTY, replace(sharded(setup, "zero3"), gpus=60))
    assert remedy.change == "1 → 60 GPUs, ZeRO-3 / FSDP full shard"
    assert remedy.new_total_bytes == after.total_bytes
    assert shard_remedy(LLAMA, TRL, RTX, order=6) is None  # it fits already


def test_advise_gathers_the_calculators_answers():
    advice = advise(LLAMA, TRL, RTX, batch_limit=256, length_limit=1 << 21)
    # no sharding: it fits. The changes that help come cheapest in time first (the 8-bit optimizer and offload move
    # LoRA's small optimizer state: about as fast; QLoRA +6 %, half the length +9 % per token at batch 1; a smaller
    # model last, as in the seed), then the ones that do not apply (batch already 1, checkpointing already on)
    assert [r.key for r in advice.remedies] == ["optimizer_8bit", "offload_optimizer", "qlora", "shorter_length",
                                                "smaller_model", "smaller_batch", "checkpointing"]
    factors = [r.time_factor for r in advice.remedies[:4]]
    assert factors == sorted(factors) and factors[2] == pytest.approx(1.064, abs=0.005)
    assert advice.remedies[4].time_factor < 0.5  # Llama 3.2 3B: more than twice the tokens per second
    assert [r.time_factor for r in advice.remedies[5:]] == [None, None] and advice.time_note == ""
    assert advice.max_batch == max_batch(LLAMA, TRL, RTX.usable_bytes, limit=256) == 5
    assert advice.max_length == max_seq_len(LLAMA, TRL, RTX.usable_bytes) == 11534
    assert advice.smallest_device.usable_bytes >= estimate(LLAMA, TRL).total_bytes
    too_big = advise(SEVENTY, resolve_setup("trl", method="full"), RTX)
    # sharding over 42 GPUs is the one change that fits: first (3.2 % of the time on the clock, 1.35 × the GPU-hours)
    shard = too_big.remedies[0]
    assert shard.title == "Shard over more GPUs" and too_big.max_batch is None and shard.new_setup.gpus == 42
    assert shard.time_factor * 42 == pytest.approx(1.35, abs=0.05)
    rule = advise(LLAMA, resolve_setup("trl", method="full"), RTX, rule="seed")
    assert all(r.title != "Shard over more GPUs" for r in rule.remedies)
    qlora = next(r for r in rule.remedies if r.key == "qlora")
    assert qlora.new_total_bytes == estimate(LLAMA, resolve_setup("trl", method="qlora"), rule="seed").total_bytes
    assert [r.key for r in rule.remedies[:2]] == ["lora", "qlora"]  # the two the rule fits, faster than full


def test_lora_targets_are_checked_against_the_architecture():
    assert lora_targets(LLAMA, "q_proj, v_proj") == ("q_proj", "v_proj")
    assert lora_targets(LLAMA, "all-linear") == ("all-linear",)
    with pytest.raises(ValueError, match="not a linear module of llama"):
        lora_targets(LLAMA, "query_key_value")


# ---- estimates per calculator rerun ---------------------------------------------------------------------------

# issue 12: the page computed 41 before (the base setup five times); 8 until issue 30: the 8-bit optimizer and
# optimizer offload remedies add one estimate each, and the halved batch keeps the effective batch by accumulation,
# which the largest-batch search (at the setup's own accumulation) does not price for it (11); issue 28's version notes
# price the other side of each fork that can move the shown job (memory/forks.py may_matter: 3 for TRL's defaults,
# its checkpointing, loss and optimizer forks: 14). Since the calculator shows why this number (issue 29) and the
# fastest setup that fits (issue 30): the assumption chips price one alternative per setting (precision,
# checkpointing switched, the loss, the attention… 5–7 the remedies do not share) and the fastest-fit search prices
# 2–7 batch shapes and switches; a batch or length at the stack's own value is the stack's (from_stack), which a few
# searches price again under the other record (docs/performance.md)
ESTIMATES_PER_RERUN = 26


def computed() -> int:
    """Detailed estimates computed so far (the cache's misses; cache hits reuse an estimate)."""
    return detailed_estimate.cache_info().misses


@pytest.mark.parametrize("params,shown,budget", [
    ({}, "1. **Use an 8-bit optimizer**", ESTIMATES_PER_RERUN),
    ({"model": "llama-3.1-70b", "method": "full"}, "**Shard over more GPUs** (1 → 60 GPUs", ESTIMATES_PER_RERUN),
    # Unsloth's step is priced on the card and is piecewise in batch and length (its peak moves from the first
    # layer's backward to the last one's, the second staging buffer is dropped near the card's end), so its first
    # run's solvers take more probes; one estimate costs under a millisecond
    ({"stack": "unsloth", "method": "qlora"}, "**Lower the max length**", 2 * ESTIMATES_PER_RERUN),
])
def test_a_calculator_rerun_computes_at_most_two_dozen_estimates(params, shown, budget):
    """The page's estimate is computed once and reused by the remedies and the solvers; a slider change
    then reuses what the last run computed. Counted from a cleared cache, so the numbers are exact."""
    detailed_estimate.cache_clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    first = computed()
    assert 1 <= first <= budget
    counts = []
    for batch in (2, 3, 4, 8):
        before = computed()
        at.slider(key="batch").set_value(batch).run()
        counts.append(computed() - before)
        if batch == 2:  # the remedies are on the page (the too-big setup's sharding priced at batch 2)
            assert shown in markdown_text(at)
    assert not at.exception
    assert all(1 <= n <= budget for n in counts), counts
