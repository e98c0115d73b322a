"""Unsloth as Unsloth runs (issue 21 item 4): the model of its fused kernels, offloaded checkpointing and fused loss
against traces of Unsloth's own autograd code, its published longest lengths, and the path it takes per setup."""

from dataclasses import replace

import pytest

from estimator import load_preset
from estimator.advice.solvers import max_seq_len
from estimator.job.stack import resolve_setup
from estimator.memory.price import detailed_estimate as estimate
from estimator.memory.price import estimate as price
from estimator.memory.price import needs_capacity
from estimator.memory.runtimes import runtime_for
from estimator.memory.unsloth.kernels import (
    fused_linear_rows,
    layer_saved,
    reserve_bytes,
    rope_cache_bytes,
)
from estimator.memory.unsloth.model import (
    published_tables_path,
    unsloth_path,
)
from estimator.memory.unsloth.step import estimate_for_path
from estimator.options.devices import get_device
from estimator.units import GiB
from validation.unsloth import KNOWN_MISSES, TRACE_TARGET_PCT, context_rows, published_lines, trace_rows

L8 = load_preset("llama-3.1-8b")
L70 = load_preset("llama-3.1-70b")


def uses_unsloth_model(spec, setup) -> bool:
    """Unsloth's runtime runs its own kernels for this job."""
    runtime = runtime_for(setup)
    return runtime.id == "unsloth" and runtime.own_model_code(spec, setup)


def qlora(**kw):
    return resolve_setup("unsloth", **{"method": "qlora", "lora_rank": 32, "seq_len": 4096, **kw})


# ------------------------------------------------------------------------------------------------------------------
# Traces of Unsloth's own code (calibration/unsloth_trace.py)
# ------------------------------------------------------------------------------------------------------------------
TRACES = trace_rows()


def test_traces_cover_every_path():
    ids = {r["id"] for r in TRACES}
    assert len(TRACES) >= 20
    # QLoRA and 16-bit LoRA; padded (xformers) rows; double buffering off; both loss passes; PEFT fallbacks;
    # plain and no checkpointing; the standard loss; inputs under MINIMUM_SIZE; Qwen2's biased q/k/v; 70B widths
    for part in ("lora-r16", "padded", "single", "bigcard", "-qv-", "-attn-", "-gateup-", "plain", "nockpt",
                 "standard", "b1s256", "qwen2", "llama70b", "mistral", "llama3b"):
        assert any(part in i for i in ids), part
    fused = {r["id"]: r["fused"] for r in TRACES}
    assert fused["u-qwen2-7b-L2-qlora-r16-b1s4096"] == {"mlp": 2, "qkv": 0, "o": 2}  # q/k/v bias → PEFT
    assert fused["u-llama8b-L2-qlora-r16-qv-b1s4096"] == {"mlp": 0, "qkv": 0, "o": 0}


@pytest.mark.parametrize("row", TRACES, ids=lambda r: r["id"])
def test_each_trace_within_one_percent(row):
    """Measured: median 0.20 %, worst 0.46 % over 22 traces (the model misses a few MB of [T, r] products)."""
    assert abs(row["error_pct"]) <= TRACE_TARGET_PCT, row


# ------------------------------------------------------------------------------------------------------------------
# Published longest trainable lengths
# ------------------------------------------------------------------------------------------------------------------
CONTEXT = context_rows()


def test_every_published_point_is_listed_with_a_source_and_a_check():
    assert len(CONTEXT) >= 25
    assert {r["check"] for r in CONTEXT} == {"unsloth_2024", "hf_fa2", "not_comparable"}
    for r in CONTEXT:
        assert r["source"].startswith("https://") and r["code"], r["id"]
        assert (r["check"] == "not_comparable") == (r["modelled"] is None and r["error_pct"] is None) or (
            r["id"] in KNOWN_MISSES), r["id"]


@pytest.mark.parametrize("row", [r for r in CONTEXT if r["check"] != "not_comparable"], ids=lambda r: r["id"])
def test_published_points_within_15_percent(row):
    """Unsloth's points on the 2024.12 code they measured (its allocator settings priced: expandable segments and
    roundup_power2_divisions, estimator/memory/allocator.py), HF + FA2 with the Trainer stack and checkpointing.
    Measured (solver vs published, each card's usable memory CUDA's total): Unsloth 8B 12–80 GB +1.1 … +7.4 %, 70B
    48 GB +10.2 %, 80 GB −0.5 %; HF + FA2 12–80 GB −2.9 … +7.5 %, 70B −2.4 %. One point is an explained miss (the 8 GB
    one, validation.unsloth.KNOWN_MISSES)."""
    if row["id"] in KNOWN_MISSES:
        assert not row["within_target"], f"{row['id']} now meets the target: drop it from KNOWN_MISSES"
        return
    assert row["within_target"], row


def test_checked_points_mostly_within_target():
    checked = [r for r in CONTEXT if r["check"] != "not_comparable"]
    assert sum(r["within_target"] for r in checked) >= 15 and len(checked) == 16


def test_published_columns_are_straight_lines_in_the_cards_nominal_sizes():
    """Unsloth's December 2024 Llama 3.1 8B columns gain the same tokens per nominal GB between every pair of card
    sizes (Unsloth 4,719, HF + FA2 404.75), as its April 2024 Mistral table, which it calls extrapolated, does
    (3,067.5): lines through fewer runs. Two-size columns (the 70B ones) and columns with two rows on one size are not
    judged. The model's own gains over the same cards are reported beside them."""
    lines = {(line["model"], line["framework"]): line for line in published_lines()}
    assert set(lines) == {("Llama 3.1 8B Instruct", "unsloth"), ("Llama 3.1 8B Instruct", "hf_fa2"),
                          ("Mistral 7B", "unsloth")}
    u, h, m = (lines[("Llama 3.1 8B Instruct", "unsloth")], lines[("Llama 3.1 8B Instruct", "hf_fa2")],
               lines[("Mistral 7B", "unsloth")])
    assert all(line["is_line"] for line in (u, h, m))
    assert (round(u["slope"]), round(h["slope"], 1), round(m["slope"], 1)) == (4719, 404.7, 3067.5)
    assert u["sizes_gb"] == [8, 12, 16, 24, 40, 48, 80] and round(u["zero_at_gb"], 2) == 7.37
    assert m["modelled_slopes"] is None  # not checked: April 2024 code
    assert 0.95 < u["modelled_slope"] / u["slope"] < 1.05 and 0.95 < h["modelled_slope"] / h["slope"] < 1.05


def test_current_release_reaches_longer_than_the_2024_tables():
    """The current release keeps less per token (no per-layer RoPE caches, no Cut Cross-Entropy [V, h] buffer, a
    staging buffer instead of a fresh copy per layer, the embedding moved to CPU RAM when the card is tight)."""
    for r in CONTEXT:
        if r["check"] == "unsloth_2024" and r["modelled"]:
            assert r["current"] > r["modelled"], r["id"]


# ------------------------------------------------------------------------------------------------------------------
# The path Unsloth takes
# ------------------------------------------------------------------------------------------------------------------
def test_stack_runs_unsloths_model_on_llama_mistral_qwen2_lora_and_qlora():
    for name in ("llama-3.1-8b", "mistral-7b-v0.3", "qwen2.5-7b", "llama-3.2-3b"):
        assert uses_unsloth_model(load_preset(name), qlora()), name
    assert uses_unsloth_model(L8, qlora(method="lora"))
    assert not uses_unsloth_model(L8, qlora(method="full"))  # full fine-tuning loads through FastModel
    assert not uses_unsloth_model(load_preset("gemma-2-2b"), qlora())  # FastGemma2Model: HF-module estimate
    assert not uses_unsloth_model(L8, resolve_setup("trl", method="qlora"))
    note = estimate(L8, qlora(method="full")).notes
    assert any("FastModel" in str(n) for n in note)


def test_fallbacks_to_peft_when_a_group_is_partly_adapted_or_biased():
    p = unsloth_path(L8, qlora(lora_targets=("q_proj", "v_proj", "gate_proj", "up_proj", "down_proj")))
    assert (p.fused_qkv, p.fused_o, p.fused_mlp) == (False, False, True)
    qwen = unsloth_path(load_preset("qwen2.5-7b"), qlora())
    assert (qwen.fused_qkv, qwen.fused_o, qwen.fused_mlp) == (False, True, True)  # llama.py:5376-5390


def test_checkpointing_modes():
    assert unsloth_path(L8, qlora()).checkpointing == "offload"
    assert unsloth_path(L8, qlora(seq_len=511)).checkpointing == "plain"  # _utils.py:506: below 512, plain
    assert unsloth_path(L8, qlora(offload_activations=False)).checkpointing == "plain"
    assert unsloth_path(L8, qlora(grad_ckpt=False)).checkpointing == "none"
    # an input of ≤ 2 MiB is not offloaded (gradient_checkpointing.py:1408): Qwen2.5-0.5B, 1,170 tokens × 896 × 2 B
    q05 = load_preset("qwen2.5-0.5b")
    assert not unsloth_path(q05, qlora(seq_len=1170)).offloaded and unsloth_path(q05, qlora(seq_len=1171)).offloaded
    assert unsloth_path(q05, qlora(seq_len=1170)).checkpointing == "offload"


def test_per_token_layer_bytes_match_the_source():
    """Llama 3.1 8B, fused kernels, packed SDPA: 6h + 6q + 4kv + 4i + 4·nh + 8 bytes per token (docs/formulas.md
    §3.8) = 110,728."""
    p = unsloth_path(L8, qlora())
    assert layer_saved(L8, p).total == 110_728
    xf = layer_saved(L8, replace(p, attention="xformers")).total
    assert xf - layer_saved(L8, p).total == 4 * 8192 - (8192 + 2048 * 2 + 8192 + 8192) + 0  # 4·q vs q+2kv+q+q


def test_offloaded_checkpoints_are_in_cpu_ram_not_on_the_gpu():
    e = estimate(L8, qlora(seq_len=60000))
    layer_input = 2 * 4096 * 60000
    # 31 of 32 layer inputs in pinned host blocks + the 200 initial 256 KiB slots; host RAM rounds each block up to a
    # power of two, as the trace's pinned blocks; the estimate's CPU RAM is the host's own terms, counted once
    slots = 200 * 256 * 1024
    terms = {x.key: x.bytes for x in e.host.details}
    assert terms["host.checkpoint_offload"] == 31 * layer_input + slots
    block = 1 << (layer_input - 1).bit_length()
    assert terms["host.pinned_rounding"] == 31 * (block - layer_input)
    assert e.cpu_offload_bytes == 31 * block + slots == terms["host.checkpoint_offload"] + terms["host.pinned_rounding"]
    keys = {x.key for x in e.details}
    assert {"activations.offload_staging", "activations.checkpoints", "activations.recomputed_layer"} <= keys
    staging = sum(x.bytes for x in e.details if x.key == "activations.offload_staging")
    assert staging == 2 * layer_input  # double buffering without a card: counted


def test_loss_is_fused_without_logits():
    e = estimate(L8, qlora(seq_len=65536))
    loss = next(p for p in e.phases if p.key == "loss")
    buf = sum(x.bytes for x in loss.details if x.key == "activations.loss_backward")
    assert buf < 0.4e9  # one 4096 × 16384 fp32 tile + an fp32 [4096, h] accumulator, not [T, V] logits
    std = estimate(L8, qlora(seq_len=65536, loss="standard"))
    back = next(p for p in std.phases if p.key == "loss_backward")
    assert back.activations > 2 * 2 * 65536 * 128256  # bf16 logits + their gradient (cross_entropy_loss.py:482-494)
    assert std.peak_phase == back.name


def test_fused_linear_rows_follow_unsloth():
    assert fused_linear_rows(100_000, 4096, 128256, 2 * GiB) == 2048  # pow2 ≤ 100000·4096/128256 = 3194
    assert fused_linear_rows(1000, 4096, 128256, 2 * GiB) == 512  # at least 512 rows (the 512 × 151,936 floor)
    assert fused_linear_rows(300, 4096, 128256, 2 * GiB) == 300  # never more than the rows


def test_rope_cache_and_reserve():
    p = unsloth_path(L8, qlora())
    assert rope_cache_bytes(L8, p, 4096) == 2 * 131072 * 128 * 2  # padding-free: max_position_embeddings rows
    assert rope_cache_bytes(L8, replace(p, padding_free=False), 4096) == 2 * 32768 * 128 * 2
    old = replace(p, layer_rope_caches=True)  # transformers < 4.48 (fork transformers_model_level_rope)
    assert rope_cache_bytes(L8, old, 81920) == 2 * 128 * 2 * (32 * 81920 + 32768)  # one cache per layer
    # block_swap.py:573-585 at 8192 tokens, batch 1, r=32 LoRA (fp32 + 12 B per trainable parameter)
    assert reserve_bytes(L8, 8192, 83886080) == pytest.approx(
        (8192 * 4096 * 48 + 2048 * 128256 * 4 + 83886080 * 16) * 17 / 16 + (256 << 20))


def test_decisions_by_the_card():
    """The embedding goes to CPU RAM when Unsloth's reserve exceeds what loading leaves free; double buffering stays
    off within 512 MiB of the card's end; without a card neither is taken away. Just below that, double buffering
    starts and step 2 runs out of memory: a band of lengths that do not fit between two that do (the solver reports
    the lower edge)."""
    card = get_device("rtx-4090")
    small = card.runtime_total_bytes  # what Unsloth reads: torch.cuda's total (24,078 MiB), not nvidia-smi's
    s = qlora(seq_len=90_000)
    assert needs_capacity(L8, s) and not needs_capacity(L8, resolve_setup("trl", method="qlora"))
    near = estimate(L8, s, small)
    far = estimate(L8, s)
    embed = 2 * 128256 * 4096
    assert near.cpu_offload_bytes - far.cpu_offload_bytes == pytest.approx(embed)
    assert {x.key: x.bytes for x in near.host.details}["host.embedding_offload"] == embed
    assert "host.embedding_offload" not in {x.key for x in far.host.details}
    assert any("offload_embedding" in str(n) for n in near.notes)
    stage = lambda e: sum(x.bytes for x in e.details if x.key == "activations.offload_staging")  # noqa: E731
    one = 2 * 4096 * 106_500
    tight = estimate(L8, qlora(seq_len=106_500), small)
    assert stage(tight) == one and tight.total_bytes <= card.usable_bytes  # no second buffer: fits
    band = estimate(L8, qlora(seq_len=103_000), small)
    assert stage(band) == 2 * 2 * 4096 * 103_000 and band.total_bytes > card.usable_bytes
    assert price(L8, s, device_capacity=small).total_bytes == near.total_bytes
    assert price(L8, resolve_setup("trl", method="qlora"), device_capacity=small) is price(
        L8, resolve_setup("trl", method="qlora"))  # other stacks: one cached estimate for any card


def test_solver_figures_for_the_issue():
    """issue 21: Llama 3.1 8B QLoRA r32 all-linear batch 1 (47.7k on 24 GB, 206k on 80 GB before) and Llama 3.3 70B
    (50.6k on 80 GB, 2.9k on 48 GB before). With Unsloth's own kernels and a 5 % allocator slack: 98.5k, 402k, 108k,
    17.7k; with its allocator settings priced (expandable segments: 11.5 MB of slack): 104.9k, 423.6k, 119.2k,
    24.9k."""
    def longest(spec, device):
        d = get_device(device)
        return max_seq_len(spec, qlora(seq_len=2048), d.usable_bytes,
                           lambda sp, st: estimate(sp, st, d.runtime_total_bytes))

    assert 100_000 < longest(L8, "rtx-4090") < 110_000
    assert 410_000 < longest(L8, "a100-80gb") < 440_000
    assert 112_000 < longest(L70, "a100-80gb") < 125_000
    assert 22_000 < longest(L70, "rtx-a6000") < 28_000


def test_published_tables_path_is_the_2024_code():
    p = published_tables_path(L8, qlora())
    assert (p.attention, p.checkpointing, p.padding_free) == ("xformers", "reload", False)
    assert p.fresh_dequant and p.lora_out_of_place and p.cut_cross_entropy and p.layer_rope_caches
    assert p.published_2024 and not p.offloaded and not p.double_buffer and p.embedding_on_gpu
    e = estimate_for_path(L8, qlora(seq_len=2048), p)
    loss = next(x for x in e.phases if x.key == "loss_backward")
    assert sum(x.bytes for x in loss.details if x.key == "activations.loss_backward") >= 2 * 128256 * 4096


# Unsloth Studio's own estimate for Llama-3.1-8B QLoRA r16 on the seven projections, batch 1 × 2,048, adamw_8bit,
# 'unsloth' checkpointing, SDPA, double-quantised 4-bit (studio/backend/utils/hardware/vram_estimation.py at
# 015bdef0d9, with the attention and 4-bit settings unsloth PR #10815 makes it read): its terms add up to 8.09 GB
# (docs/unsloth.md §12). Studio says it does not fit an 8 GB card.
STUDIO_8B_2K = 8.09e9


def test_the_band_holds_unsloth_studios_estimate_at_its_release():
    """Issue 28: Studio's figure differs from ours by terms we follow the source for (the 4-bit storage, the LoRA and
    8-bit Adam bytes, the traced activations), by the input embedding (kept on the GPU until unsloth 2026.10.1, fork
    unsloth_offload_embedding_auto) and by a 1.4 GiB process overhead we cannot check without a GPU, taken as the
    Unsloth context's high end. At Studio's release (2026.9.14) on an 8 GB RTX 4060 our band now holds Studio's 8.09 GB
    and the verdict is a close call; before, its high end (8.56 GB) said "fits". Fails before."""
    from estimator.memory.overhead import UNSLOTH_STUDIO_OVERHEAD
    from estimator.memory.verdict import verdict

    card = get_device("rtx-4060")
    s = resolve_setup("unsloth", method="qlora", batch=1, seq_len=2048, pins=("unsloth==2026.9.14",))
    e = price(L8, s, device_capacity=card.runtime_total_bytes)
    assert e.low_bytes < e.total_bytes < STUDIO_8B_2K < e.high_bytes
    assert verdict(e.total_bytes, card, e.high_bytes, e.low_bytes).band == "close call"
    assert UNSLOTH_STUDIO_OVERHEAD == int(1.4 * 2**30)
    # the context's expected value stays PyTorch's (0.5 GB): the widening moves the high end only
    from estimator.memory.overhead import CUDA_CONTEXT_BYTES

    assert next(x.bytes for x in e.details if x.key == "overhead.cuda_context") == CUDA_CONTEXT_BYTES
