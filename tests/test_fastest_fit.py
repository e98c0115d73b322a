"""The fastest setup that fits (estimator/advice/fastest.py): named cases give a specific setup; the answer fits, keeps
the effective batch, and is the fastest of the whole search space up to TIE (checked against every combination and
batch shape priced by brute force); the constraints hold; a device without figures has no answer."""

from __future__ import annotations

import itertools

import pytest

from estimator.advice.advise import advise
from estimator.advice.fastest import (
    TIE,
    Change,
    Constraints,
    _changes,
    _configs,
    _Search,
    divisors,
    fastest_fit,
)
from estimator.advice.search import solver_estimate_fn
from estimator.job.stack import resolve_setup
from estimator.job.trainer import TrainerSetup
from estimator.memory.price import detailed_estimate, estimate
from estimator.models.presets import load_preset
from estimator.options.devices import custom_device, get_device
from estimator.speed import step_time

LLAMA = load_preset("llama-3.1-8b")
RTX = get_device("rtx-4090")
A100 = get_device("a100-80gb")


def test_lora_at_batch_8_on_a_4090_trades_the_batch_for_accumulation():
    """Llama-3.1-8B LoRA, 8 × 4,096 tokens under TRL: 38.8 GB, too big for a 4090. Keeping 8 examples per optimizer
    step, the largest micro-batch that fits is 2 (× 4 micro-steps): 23.3 GB, 1,869 tokens/s, 2 % under the
    8 × 1 step's 1,909 (more launches, more accumulation)."""
    setup = resolve_setup("trl", batch=8, seq_len=4096)
    assert estimate(LLAMA, setup).total_bytes > RTX.usable_bytes
    fit = fastest_fit(LLAMA, setup, RTX)
    assert fit.changes == (Change("batch", (8, 1), (2, 4)),)
    assert (fit.setup.method, fit.setup.grad_ckpt, fit.setup.optimizer) == ("lora", True, "adamw")
    assert fit.estimate.total_bytes <= RTX.usable_bytes and fit.estimate.total_bytes == pytest.approx(23.29e9, rel=1e-3)
    assert fit.tokens_per_second == pytest.approx(1868.8, abs=0.5)
    assert fit.speedup == pytest.approx(0.979, abs=0.001)
    assert fit.step == step_time(LLAMA, fit.setup, RTX)  # one computation: the time model's own step
    # allowed to change the method: QLoRA at the full batch is as fast (1,901 tokens/s) with one change
    qlora = fastest_fit(LLAMA, setup, RTX, constraints=Constraints(change_method=True))
    assert qlora.changes == (Change("method", "lora", "qlora"),) and qlora.setup.batch == 8
    assert qlora.tokens_per_second == pytest.approx(1900.9, abs=0.5)


def test_full_fine_tuning_on_an_a100_drops_checkpointing():
    """TRL checkpoints by default; Llama-3.1-8B full at batch 1 fits an A100 80GB without it (68.5 GB), 28 % faster:
    the checkpointing factor the remedies quote, from the other side."""
    setup = resolve_setup("trl", method="full")
    fit = fastest_fit(LLAMA, setup, A100)
    assert fit.changes == (Change("grad_ckpt", True, False),)
    assert fit.speedup == pytest.approx(1.2835, abs=0.001) and fit.tokens_per_second == pytest.approx(2804.7, abs=0.5)
    assert fit.estimate.total_bytes == pytest.approx(68.49e9, rel=1e-3)


def test_the_constraints_decide_what_may_change():
    setup = resolve_setup("trl", method="full", batch=4)
    assert fastest_fit(LLAMA, setup, RTX) is None  # 8B full on one 4090: nothing fits with batch, ckpt, optimizer
    qlora = fastest_fit(LLAMA, setup, RTX, constraints=Constraints(change_method=True))
    assert [c.key for c in qlora.changes] == ["method", "grad_ckpt", "batch"]
    assert (qlora.setup.method, qlora.setup.grad_ckpt, qlora.setup.batch, qlora.setup.grad_accum) == ("qlora", False, 1, 4)
    assert qlora.speedup == pytest.approx(1.71, abs=0.01)
    more = fastest_fit(LLAMA, setup, RTX, constraints=Constraints(max_gpus=8))
    # the fewest GPUs that fit, moved to a count that divides the effective batch (4): ZeRO-3 over 4 GPUs, 1 each
    assert more.changes == (Change("gpus", 1, 4), Change("sharding", "none", "zero3"), Change("batch", (4, 1), (1, 1)))
    assert more.tokens_per_second == pytest.approx(4396.2, abs=0.5)
    # up to 3 GPUs: 3 would not divide the 4 examples per step; 2 keep them, with the optimizer state in CPU RAM
    three = fastest_fit(LLAMA, setup, RTX, constraints=Constraints(max_gpus=3))
    assert three.changes == (Change("gpus", 1, 2), Change("sharding", "none", "zero3"),
                             Change("offload_optimizer", False, True), Change("batch", (4, 1), (2, 1)))


def test_seventy_b_full_spreads_over_a_whole_node_of_h100s():
    setup = resolve_setup("trl", method="full", batch=8)
    fit = fastest_fit(load_preset("llama-3.1-70b"), setup, get_device("h100-80gb"), constraints=Constraints(max_gpus=64))
    assert fit.changes == (Change("gpus", 1, 8), Change("sharding", "none", "zero3"), Change("batch", (8, 1), (1, 1)))
    assert fit.setup.batch * fit.setup.grad_accum * fit.setup.gpus == 8  # the effective batch kept


def _brute_force(spec, setup, device, tr, constraints):
    """Every combination the solver may try, at every batch shape that keeps the effective batch, priced."""
    fn = solver_estimate_fn(tr, device.runtime_total_bytes)
    search = _Search(spec, setup, device, tr, fn, None)
    scale = constraints.max_gpus is not None
    out = []
    for config in _configs(spec, setup, device, tr, constraints, setup.gpus, scale):
        for shaped in search.shapes(config):
            if fn(spec, shaped).total_bytes <= device.usable_bytes:
                out.append((search.time(shaped).tokens_per_second_per_gpu, shaped))
    return out


@pytest.mark.parametrize(("preset", "kwargs", "device", "constraints"), [
    ("llama-3.1-8b", {"batch": 8, "seq_len": 4096}, "rtx-4090", Constraints()),
    ("llama-3.1-8b", {"batch": 8, "seq_len": 4096}, "rtx-4090", Constraints(change_method=True)),
    ("llama-3.1-8b", {"method": "full", "batch": 6}, "a100-80gb", Constraints(change_method=True)),
    ("qwen2.5-7b", {"method": "full", "batch": 2, "grad_accum": 3, "gpus": 4, "sharding": "zero1"}, "h100-80gb",
     Constraints(max_gpus=4)),
    ("qwen2.5-1.5b", {"stack": "torchtune", "method": "lora", "batch": 12, "seq_len": 4096}, "l4", Constraints()),
])
def test_the_answer_is_the_fastest_of_every_setup_it_may_try(preset, kwargs, device, constraints):
    """Brute force over the whole space: the answer fits, keeps the effective batch, is within TIE of the fastest
    fitting setup, and no setup that close needs fewer changes."""
    spec, dev, tr = load_preset(preset), get_device(device), TrainerSetup("sft")
    kwargs = dict(kwargs)
    stack = kwargs.pop("stack", "trl")
    setup = resolve_setup(stack, **kwargs)
    fit = fastest_fit(spec, setup, dev, constraints=constraints)
    every = _brute_force(spec, setup, dev, tr, constraints)
    assert fit is not None and every
    top = max(speed for speed, _ in every)
    assert fit.step.tokens_per_second_per_gpu >= top * (1 - TIE)
    assert fit.estimate.total_bytes <= dev.usable_bytes
    assert fit.setup.batch * fit.setup.grad_accum * fit.setup.gpus == setup.batch * setup.grad_accum * setup.gpus
    close = [s for speed, s in every if speed >= top * (1 - TIE)]
    assert len(fit.changes) == min(len(_changes(setup, s)) for s in close)
    if not constraints.change_method:
        assert fit.setup.method == setup.method
    if constraints.max_gpus is None:
        assert (fit.setup.gpus, fit.setup.sharding) == (setup.gpus, setup.sharding)


def test_trainers_get_a_batch_trl_accepts():
    """DPO at batch 8 on a 4090 with Qwen2.5-0.5B fits as it is; GRPO's generation batch (batch × accumulation)
    stays divisible by num_generations whatever the solver picks."""
    dpo = fastest_fit(load_preset("qwen2.5-0.5b"), resolve_setup("trl", trainer="dpo", batch=8), RTX,
                      TrainerSetup("dpo"))
    assert dpo.changes == () and dpo.speedup == 1.0
    spec = load_preset("qwen2.5-7b")
    setup = resolve_setup("trl", trainer="grpo", batch=16, method="lora")
    fit = fastest_fit(spec, setup, get_device("a100-40gb"), TrainerSetup("grpo"))
    assert fit is not None
    assert (fit.setup.batch * fit.setup.grad_accum) % TrainerSetup("grpo").gens == 0
    assert fit.estimate.total_bytes <= get_device("a100-40gb").usable_bytes


def test_a_device_without_figures_has_no_fastest_fit():
    device = custom_device(24)
    with pytest.raises(ValueError, match="no compute figures"):
        fastest_fit(LLAMA, resolve_setup("trl"), device)
    advice = advise(LLAMA, resolve_setup("trl"), device, fastest=Constraints())
    assert advice.fastest_fit is None and "no compute figures" in advice.fastest_note
    assert advice.time_note == advice.fastest_note and all(r.time_factor is None for r in advice.remedies)
    from estimator.options.compute import custom_compute

    given = advise(LLAMA, resolve_setup("trl"), device, compute=custom_compute(165.2, 1008), fastest=Constraints())
    assert given.fastest_fit is not None and given.time_note == ""


def test_nothing_fits_says_what_to_allow():
    setup = resolve_setup("trl", method="full", batch=4)
    advice = advise(LLAMA, setup, RTX, fastest=Constraints())
    assert advice.fastest_fit is None
    assert advice.fastest_note == ("No setup fits this device by changing the batch and accumulation, checkpointing "
                                   "and the optimizer: allow a method change (QLoRA) or more GPUs.")
    seventy = advise(load_preset("llama-3.1-70b"), resolve_setup("trl", method="full"), get_device("mac-16gb"),
                     fastest=Constraints(change_method=True))
    assert seventy.fastest_note.startswith("No setup fits this device, whatever the method")


def test_the_search_prices_few_estimates():
    """Counted from a cleared cache (a count, not a timing: bench/fastest_fit.py prints the times): the combinations
    are tried fastest bound first, so the named case prices its own setup, the fitting shape and a handful of
    probes."""
    detailed_estimate.cache_clear()
    fastest_fit(LLAMA, resolve_setup("trl", batch=8, seq_len=4096), RTX)
    assert detailed_estimate.cache_info().misses <= 16


def test_divisors():
    assert divisors(1) == [1] and divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(49) == [1, 7, 49]
    assert all(divisors(n) == [d for d in range(1, n + 1) if n % d == 0] for n in range(1, 200))
    assert list(itertools.islice(divisors(2**16), 3)) == [1, 2, 4]


def test_constraints_are_checked():
    for bad in (0, -1, 5000, True, 2.5):
        with pytest.raises(ValueError, match="max_gpus must be between 1 and 4,096"):
            Constraints(max_gpus=bad)
