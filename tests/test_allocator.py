"""The CUDA caching allocator as the estimate prices it (estimator/memory/allocator.py, docs/formulas.md §5.1): the
configuration strings parsed as PyTorch parses them, round_size, the slack under expandable segments, the per-request
inventory of Unsloth's step, the block-level replay model (calibration/allocator_sim.py) and the replays of traced
steps (validation/data/allocator_replays.json)."""

from __future__ import annotations

import pytest

from calibration.allocator_sim import OutOfMemory, peak_requested, replay, smallest_capacity
from estimator import load_preset
from estimator.job.stack import resolve_setup
from estimator.memory.allocator import (
    LARGE_SEGMENT,
    SMALL_BUFFER,
    TORCH_DEFAULT,
    config,
    parse_divisions,
    round_size,
    rounding_bytes,
    stack_allocator,
    step_slack,
)
from estimator.memory.overhead import ALLOCATOR_SLACK, CUDA_CONTEXT_HIGH, MODEL_ERROR_HIGH, UNSLOTH_STUDIO_OVERHEAD
from estimator.memory.price import detailed_estimate as estimate
from estimator.memory.unsloth.model import (
    ALLOCATOR_2024,
    phase_requests,
    published_tables_path,
    state_allocations,
    unsloth_moments,
    unsloth_path,
)
from estimator.memory.unsloth.step import estimate_for_path
from validation.unsloth import replay_rows

MiB = 1 << 20
L8 = load_preset("llama-3.1-8b")
UNSLOTH_LE_29 = "[32:256,64:128,256:64,>:32]"  # what unsloth_zoo 2026.10.9 sets on torch ≤ 2.9 (:326-329)


def qlora(**kw):
    base = {"method": "qlora", "lora_rank": 32, "batch": 1, "seq_len": 4096}
    base.update(kw)
    return resolve_setup("unsloth", **base)


# ------------------------------------------------------------------------------------------------------------------
# Configuration and rounding
# ------------------------------------------------------------------------------------------------------------------
def test_divisions_parse_as_pytorch_parses_them():
    # 2024.12.4's string under torch 2.5's parser: ">" fills from the last limit's interval, overwriting 256:64
    assert parse_divisions("[64:128,256:64,>:32]", "torch2.5") == (128,) * 7 + (0,) + (32,) * 8
    # torch 2.13's parser fills ">" after the last limit
    assert parse_divisions("[64:128,256:64,>:32]") == (128,) * 7 + (0, 64) + (32,) * 7
    assert parse_divisions(UNSLOTH_LE_29) == (256,) * 6 + (128, 0, 64) + (32,) * 7
    assert parse_divisions("4") == (4,) * 16  # "Keep this for backwards compatibility"


def test_round_size():
    cur = stack_allocator("unsloth")
    assert cur.expandable and cur.divisions == (0,) * 16  # torch ≥ 2.10: expandable segments only
    assert round_size(1, cur) == 512 and round_size(1200, cur) == 1536 and round_size(300 * MiB + 1, cur) == (
        300 * MiB + 512)
    old = ALLOCATOR_2024
    assert round_size(1200, old) == 1536  # 1200 B is not above 512 × 128: 512-B rounding
    assert round_size(3 * MiB + 1, old) == 3 * MiB + 16 * 1024  # [2, 4) MiB, 128 divisions: 16 KiB steps
    assert round_size(200 * MiB + 5, old) == 200 * MiB + 512  # [128, 256) MiB: no divisions (0)
    assert round_size(297 * MiB, old) == 304 * MiB  # ≥ 256 MiB, 32 divisions: 8 MiB steps
    assert round_size(297 * MiB, config("x", "roundup_power2_divisions:[64:128,256:64,>:32]", "")) == 300 * MiB
    assert round_size(256 * MiB, old) == 256 * MiB  # a power of two stays
    embed = 2 * 128256 * 4096  # Llama-3.1-8B's bf16 embedding: [512 MiB, 1 GiB), 16 MiB steps → 63 of them
    assert round_size(embed, old) - embed == 63 * 16 * MiB - embed == 6_291_456
    assert not TORCH_DEFAULT.expandable and stack_allocator("trl") is TORCH_DEFAULT


def test_slack_under_each_allocator():
    cur = stack_allocator("unsloth")
    s = step_slack(cur, 10e9, [(1200, 3), (4096, 5)], gradients=300e6)
    assert s.expected == 3 * 336 + (LARGE_SEGMENT + SMALL_BUFFER) / 2  # rounding + half a page of each pool
    assert s.high == 3 * 336 + 300e6 + 2 * (LARGE_SEGMENT + SMALL_BUFFER)
    # the stranded blocks are also bounded by the default allocator's share (full fine-tuning's gradients are big)
    assert step_slack(cur, 1e9, [], gradients=300e6).high == ALLOCATOR_SLACK * 1e9 + 2 * (LARGE_SEGMENT + SMALL_BUFFER)
    d = step_slack(TORCH_DEFAULT, 10e9, [(1200, 3)], gradients=300e6)
    assert d.expected == d.high == ALLOCATOR_SLACK * 10e9
    assert rounding_bytes([(297 * MiB, 2)], ALLOCATOR_2024) == 2 * 7 * MiB


# ------------------------------------------------------------------------------------------------------------------
# The estimate
# ------------------------------------------------------------------------------------------------------------------
def _slack(e) -> float:
    return sum(x.bytes for x in e.details if x.key == "overhead.allocator_slack")


def test_unsloth_estimate_prices_expandable_segments():
    """At 4,096 tokens every request of Llama-3.1-8B's step is a multiple of 512 B (widths × 4,096 tokens, NF4
    pieces of 4096-wide matrices, 8-bit states of 32-row adapters): the expected slack is half a page per pool."""
    e = estimate(L8, qlora())
    assert _slack(e) == (LARGE_SEGMENT + SMALL_BUFFER) / 2
    assert e.total_bytes == pytest.approx(e.tensor_bytes + 0.5e9 + 11 * MiB)
    grads = max(p.gradients for p in e.phases)  # one backward's: the optimizer step holds them all
    high = e.tensor_bytes + min(grads, ALLOCATOR_SLACK * e.tensor_bytes) + 2 * (LARGE_SEGMENT + SMALL_BUFFER)
    # the context's high end: Unsloth Studio's 1.4 GiB process overhead (docs/unsloth.md §12), not PyTorch's 1.0 GB
    assert e.high_bytes == pytest.approx(high * (1 + MODEL_ERROR_HIGH) + UNSLOTH_STUDIO_OVERHEAD)
    assert UNSLOTH_STUDIO_OVERHEAD > CUDA_CONTEXT_HIGH
    assert e.low_bytes < e.total_bytes < e.high_bytes
    odd = estimate(L8, qlora(seq_len=4097))  # [T] fp32 and int32 tensors are no longer multiples of 512 B
    assert 11 * MiB < _slack(odd) < 11 * MiB + 50 * 512
    # the floor stays a lower bound of every length's total
    for n in (512, 4096, 65536):
        e = estimate(L8, qlora(seq_len=n))
        assert e.floor_bytes <= e.total_bytes


def test_other_stacks_keep_five_percent():
    trl = estimate(L8, resolve_setup("trl", method="qlora", seq_len=4096))
    assert _slack(trl) == pytest.approx(ALLOCATOR_SLACK * trl.tensor_bytes)
    assert trl.high_bytes == pytest.approx(trl.tensor_bytes * (1 + MODEL_ERROR_HIGH) * (1 + ALLOCATOR_SLACK)
                                           + CUDA_CONTEXT_HIGH)
    full = estimate(L8, qlora(method="full", seq_len=1024))  # FastModel: transformers' modules, Unsloth's allocator
    assert _slack(full) == (LARGE_SEGMENT + SMALL_BUFFER) / 2


def test_the_2024_code_rounds_by_divisions():
    round_ = estimate_for_path(L8, qlora(seq_len=81920), published_tables_path(L8, qlora(seq_len=81920)))
    # 81,920 = 10 × 2¹³ tokens: every activation is a whole number of its interval's steps; only the embedding and
    # the head round, by 6.3 MB each
    assert _slack(round_) - (LARGE_SEGMENT + SMALL_BUFFER) / 2 == 2 * 6_291_456
    s = qlora(seq_len=81000)
    e = estimate_for_path(L8, s, published_tables_path(L8, s))
    rounded = _slack(e) - (LARGE_SEGMENT + SMALL_BUFFER) / 2
    # [T, i] activations of 2.3 GB round by up to 64 MiB each (32 divisions of [2 GiB, 4 GiB))
    assert 2 * 6_291_456 + 10 * MiB < rounded < 400e6


@pytest.mark.parametrize("setup", [
    qlora(), qlora(seq_len=300), qlora(grad_ckpt=False, seq_len=1024), qlora(offload_activations=False),
    qlora(loss="standard", seq_len=2048), qlora(method="lora", lora_rank=16),
    qlora(lora_targets=("q_proj", "v_proj", "gate_proj", "up_proj")), qlora(batch=2, seq_len=2048),
], ids=["offload", "small-input", "no-ckpt", "plain", "standard-loss", "lora16", "partial", "b2"])
def test_requests_are_the_items_tensor_by_tensor(setup):
    """Each moment's requests add up to its activation items; the model states' to the phase's states."""
    for p in (unsloth_path(L8, setup), published_tables_path(L8, setup)):
        e = estimate_for_path(L8, setup, p)
        requests = phase_requests(L8, setup, p)
        for m in unsloth_moments(L8, setup, p):
            assert sum(b * n for b, n in m.allocations) == pytest.approx(sum(x.bytes for x in m.acts), rel=1e-12)
            phase = next(ph for ph in e.phases if ph.key == m.key)
            states = sum(b * n for b, n in state_allocations(L8, setup, p, m.grads))
            assert states == pytest.approx(phase.weights + phase.gradients + phase.optimizer, rel=2e-3), m.key
            assert sum(b * n for b, n in requests(phase)) == pytest.approx(phase.total, rel=2e-3)


# ------------------------------------------------------------------------------------------------------------------
# The block-level model (calibration/allocator_sim.py)
# ------------------------------------------------------------------------------------------------------------------
def test_replay_expandable_segments_map_pages_and_unmap_free_ones():
    """100 MiB, 50 MiB, free the first, 120 MiB: pages of 20 MiB are mapped on demand (280 MiB unconstrained); with
    180 MiB the 120 MiB request fails, the free 100 MiB is unmapped and the request maps new pages at the end."""
    ev = [("a", 1, 100 * MiB), ("a", 2, 50 * MiB), ("f", 1), ("a", 3, 120 * MiB), ("f", 2), ("a", 4, 30 * MiB)]
    cur = stack_allocator("unsloth")
    assert replay(ev, cur, 1 << 40).peak_reserved == 280 * MiB
    assert peak_requested(ev) == 170 * MiB
    assert smallest_capacity(ev, cur) == 180 * MiB  # 170 MiB of tensors in whole 20 MiB pages (9)
    a = replay(ev, cur, 180 * MiB)
    assert a.retries == 1 and a.reserved == 180 * MiB  # 30 MiB went into the 50 MiB freed: no new page
    # the default allocator cudaFrees the whole free 100 MiB segment instead: 170 MiB
    assert smallest_capacity(ev, TORCH_DEFAULT) == 170 * MiB


def test_replay_a_split_segment_strands_its_rest_without_expandable_segments():
    """100 MiB freed, 60 MiB carved from it, 50 MiB more: PyTorch's default cannot give back the 40 MiB left in the
    split segment (150 MiB); expandable segments unmap its whole pages (120 MiB, the tensors' 110 MiB in pages)."""
    ev = [("a", 1, 100 * MiB), ("f", 1), ("a", 2, 60 * MiB), ("a", 3, 50 * MiB)]
    assert peak_requested(ev) == 110 * MiB
    assert smallest_capacity(ev, TORCH_DEFAULT) == 150 * MiB
    assert smallest_capacity(ev, stack_allocator("unsloth")) == 120 * MiB
    with pytest.raises(OutOfMemory):
        replay(ev, TORCH_DEFAULT, 149 * MiB)


def test_replay_rounds_each_request():
    ev = [("a", 1, 297 * MiB), ("a", 2, 1200)]
    assert replay(ev, ALLOCATOR_2024, 1 << 40).peak_allocated == 304 * MiB + 1536
    assert replay(ev, stack_allocator("unsloth"), 1 << 40).peak_allocated == 297 * MiB + 1536


# ------------------------------------------------------------------------------------------------------------------
# Replays of traced steps
# ------------------------------------------------------------------------------------------------------------------
REPLAYS = replay_rows()


def test_replays_exist_at_full_depth():
    assert len(REPLAYS) >= 6 and {r["layers"] for r in REPLAYS} >= {28, 32, 80}


@pytest.mark.parametrize("row", REPLAYS, ids=lambda r: r["id"])
def test_replayed_slack_lies_in_the_estimate_band(row):
    """Measured (least memory above the tensors' peak under Unsloth's settings): 22–80 MiB for Llama-3.1-8B
    widths, 67 MiB for Llama-3.2-3B, 282 MiB for Llama-3.3-70B widths; the estimate expects 11 MiB (half a page of
    each pool; the rest is free blocks stranded between the LoRA gradients the backward places, which the high band
    bounds by the gradients' bytes)."""
    assert row["expected"] <= row["replay_current"] <= row["high"]
    # the traced step's own peak: the estimate within 1 % (the replay's log adds the load and step 1)
    assert row["estimated_tensor_peak"] == pytest.approx(row["trace_peak"], rel=0.01)
    assert row["trace_peak"] <= row["tensor_peak"] <= row["trace_peak"] * 1.02


@pytest.mark.parametrize("row", REPLAYS, ids=lambda r: r["id"])
def test_default_allocator_replays_stay_within_five_percent(row):
    """PyTorch's defaults on the same logs: 1.4–4.9 % above the tensors' peak (split segments keep their free rest),
    within the 5 % the other stacks are priced with."""
    assert 0 < row["replay_default_pct"] <= 100 * ALLOCATOR_SLACK
    assert row["replay_default"] > row["replay_current"]


def test_states_inventory_counts_the_8bit_optimizer_and_nf4_pieces():
    s = qlora()
    p = unsloth_path(L8, s)
    states = dict()
    for b, n in state_allocations(L8, s, p, "all"):
        states[b] = states.get(b, 0) + n
    assert states[4096 * 4096 // 2] == 2 * 32  # q and o packed NF4 codes, 32 layers
    assert states[32 * 4096] >= 2 * 6 * 32  # uint8 8-bit states (two per matrix) of the six 4096-wide A matrices
    assert states[4 * 32 * 4096 // 256] >= 2 * 6 * 32  # and their fp32 absmax per 256 elements
