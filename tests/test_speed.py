"""The time model (estimator/speed/): FLOPs against hand-computed values for a real preset, the remedies' time factors
against the ranges their projects publish (and as advise() prices and orders them), bad input, the accuracy report
against its own data, and the device catalog's compute figures."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest

from estimator.advice.advise import advise
from estimator.advice.timing import fits, time_phrase
from estimator.i18n import Text
from estimator.job.stack import resolve_setup
from estimator.job.trainer import TrainerSetup
from estimator.models.presets import load_preset
from estimator.options.compute import APPLE_CHIPS, custom_compute
from estimator.options.devices import CATALOG, custom_device, get_device, with_chip
from estimator.speed import (
    CALIBRATION,
    DatasetSize,
    run_cost,
    run_time,
    step_flops,
    step_time,
    time_factor,
    time_of,
)
from estimator.speed.flops import attention_flops_per_token, linear_flops_per_token
from validation import speed as vs

LLAMA = load_preset("llama-3.1-8b")
A100 = get_device("a100-80gb")
# Llama 3.1 8B by hand (config.json: hidden 4096, 32 layers, 32 heads × 128, 8 KV heads, MLP 14,336, vocab 128,256):
# per layer q 4096² + k, v 4096·1024 each + o 4096² + gate, up, down 4096·14336 each = 218,103,808 weights.
DECODER_LINEARS = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
HEAD = 4096 * 128256
N = DECODER_LINEARS + HEAD  # 7,504,658,432 matmul parameters a token goes through (the embedding is a lookup)
# Attention at 2,048 tokens with a causal flash kernel: per layer 2 × (2048 / 2) × (4096 + 4096), 32 layers.
ATTN_2048 = 32 * 2 * 1024 * (4096 + 4096)


def test_llama_31_8b_counts_its_decoder_linears_and_head_by_hand():
    assert DECODER_LINEARS == 6_979_321_856 and N == 7_504_658_432
    assert linear_flops_per_token(LLAMA) == 2 * DECODER_LINEARS
    # the same total from the parameter count: all parameters less the input embedding and the RMSNorm weights
    assert N == LLAMA.params_total - 4096 * 128256 - (2 * 32 + 1) * 4096
    assert attention_flops_per_token(LLAMA, 2048, causal_skip=True) == ATTN_2048
    # an eager kernel scores the whole 2,048 × 2,048 matrix: twice the causal flash kernel's
    assert attention_flops_per_token(LLAMA, 2048, causal_skip=False) == 2 * ATTN_2048


def test_full_fine_tuning_is_6n_per_token_plus_the_attention_term():
    setup = resolve_setup("trl", method="full", batch=2, seq_len=2048, grad_ckpt=False)
    flops = step_flops(LLAMA, setup, causal_skip=True)
    assert flops.tokens == 4096
    per_token = flops.total / flops.tokens
    # forward 2N + attention; backward 4N (input and weight grads) + 2.5 × attention (FlashAttention-2's backward)
    assert per_token == pytest.approx(6 * N + 3.5 * ATTN_2048, rel=1e-12)
    assert per_token / (6 * N) == pytest.approx(1.0 + 3.5 * ATTN_2048 / (6 * N), rel=1e-12)  # +4.2 % at 2k
    ckpt = step_flops(LLAMA, replace(setup, grad_ckpt=True), causal_skip=True)
    # checkpointing runs every layer's forward again (not the head)
    assert (ckpt.total - flops.total) / flops.tokens == pytest.approx(2 * DECODER_LINEARS + ATTN_2048, rel=1e-12)


def test_lora_backward_is_input_gradients_plus_the_adapters():
    setup = resolve_setup("trl", method="lora", batch=1, seq_len=2048, grad_ckpt=False, lora_rank=16,
                          lora_targets=("q_proj", "v_proj"))
    flops = step_flops(LLAMA, setup, causal_skip=True)
    adapters = 32 * 2 * 16 * ((4096 + 4096) + (4096 + 1024))  # 2·r·(in + out) for q and v in every layer
    assert flops.forward / flops.tokens == pytest.approx(2 * N + ATTN_2048 + adapters, rel=1e-12)
    # the frozen linears' input gradients: one matmul per forward one (2N FLOPs per token)
    assert flops.backward / flops.tokens == pytest.approx(2 * N + 2.5 * ATTN_2048 + 2 * adapters, rel=1e-12)
    # adapters on the last 8 layers only: the backward stops below them
    last8 = step_flops(LLAMA, replace(setup, lora_layers=8), causal_skip=True)
    assert last8.backward / last8.tokens == pytest.approx(
        2 * DECODER_LINEARS / 4 + 2 * HEAD + 2.5 * ATTN_2048 / 4 + 2 * adapters / 4, rel=1e-12)


def test_a_mixture_of_experts_counts_the_experts_a_token_reaches():
    spec = load_preset("qwen3-30b-a3b")  # 128 experts, 8 per token, 48 layers
    dense = sum(m.in_features * m.out_features * (m.layers or spec.num_layers) for m in spec.linears
                if not m.role.startswith("expert"))
    experts = sum(m.in_features * m.out_features * 8 * (m.layers or spec.num_layers) for m in spec.linears
                  if m.role.startswith("expert"))
    assert linear_flops_per_token(spec) == 2 * (dense + experts)
    assert linear_flops_per_token(spec) < 0.15 * 2 * spec.params_total  # 3 B active of 30 B


# --- remedies priced in time against what their projects publish -------------------------------------------------
# Gradient checkpointing: "Training will be ~20% slower" (transformers docs, https://huggingface.co/docs/transformers/
# en/grad_checkpointing); torchtune's flags table: + Activation Checkpointing −21.41 % tokens/s, i.e. 1.272 × the time
# (pytorch/torchtune README, Llama 3.2 3B full fine-tuning on an A100). The seed: 20-30 % slower.
def test_checkpointing_full_fine_tuning_lands_in_the_published_20_to_30_percent():
    spec = load_preset("llama-3.2-3b")
    base = resolve_setup("torchtune", method="full", batch=2, seq_len=4096, grad_ckpt=False, compile=True,
                         loss="chunked", optimizer="adamw_foreach")
    factor = time_factor(spec, base, replace(base, grad_ckpt=True), A100)
    assert factor == pytest.approx(1.272, abs=0.02)  # torchtune's own measured pair
    for preset in ("llama-3.1-8b", "qwen2.5-7b", "llama-3.2-3b"):
        for device in ("a100-80gb", "h100-80gb", "rtx-4090", "l40s"):
            for batch, length in ((1, 2048), (4, 1024)):
                a = resolve_setup("trl", method="full", batch=batch, seq_len=length, grad_ckpt=False)
                f = time_factor(load_preset(preset), a, replace(a, grad_ckpt=True), get_device(device))
                # one more forward against three: at most 8N/6N = 1.33 by the FLOPs; the optimizer step and the
                # launches dilute it. The model spans 1.23-1.32 over this grid (a little over the seed's 30 % for small
                # models on fast GPUs, where the matmuls are most of the step)
                assert 1.20 <= f <= 1.33, (preset, device, batch, f)


def test_checkpointing_under_lora_costs_more_than_under_full_fine_tuning():
    # LoRA's backward skips the weight gradients (1 forward-equivalent instead of 2), so recomputing the forward adds
    # 1 to 2 instead of 1 to 3: about +46 % by the FLOPs. No published LoRA pair with and without checkpointing was found.
    a = resolve_setup("trl", method="lora", batch=4, seq_len=2048, grad_ckpt=False)
    f = time_factor(LLAMA, a, replace(a, grad_ckpt=True), A100)
    assert 1.40 <= f <= 1.50


# QLoRA against LoRA: torchtune's flags table, LoRA 8,210 → QLoRA 8,035 tokens/s (1.022 × the time, compiled, packed
# 2 × 4,096 on an A100); LitGPT's resource tables (tutorials/resource-tables.md, Oct 2023, bitsandbytes 0.41.1, A100,
# micro-batch 1 of Alpaca): bnb.nf4 over None 1.09 × (phi-1.5) to 1.56 × (Llama 2 7B) and 2.00 × (13B); LitGPT's config
# hub twins on an A10G (config_hub/finetune/README.md, qlora.yaml over lora.yaml): 1.08 × to 1.98 ×.
def test_qlora_slowdown_lies_inside_the_published_range():
    spec = load_preset("llama-3.2-3b")
    targets = ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    lora = resolve_setup("torchtune", method="lora", batch=2, seq_len=4096, grad_ckpt=True, compile=True,
                         loss="chunked", lora_rank=64, lora_targets=targets, offload_activations=True)
    qlora = resolve_setup("torchtune", method="qlora", batch=2, seq_len=4096, grad_ckpt=True, compile=True,
                          loss="chunked", lora_rank=64, lora_targets=targets, offload_activations=True)
    assert time_factor(spec, lora, qlora, A100) == pytest.approx(1.022, abs=0.02)
    llama2 = vs._spec("llama-2-7b")
    small = resolve_setup("litgpt", method="lora", batch=1, seq_len=300, lora_rank=8, lora_targets=("q_proj", "v_proj"))
    f = time_factor(llama2, small, replace(small, method="qlora", optimizer="paged_adamw"), get_device("a100-40gb"))
    assert 1.08 <= f <= 2.0  # the model says 1.23; LitGPT measured 1.56 with the 2023 bitsandbytes


def test_accumulation_with_a_smaller_batch_costs_the_launches_it_repeats():
    a = resolve_setup("trl", method="lora", batch=8, seq_len=1024)
    b = replace(a, batch=4, grad_accum=2)  # the same tokens per optimizer step
    f = time_factor(LLAMA, a, b, A100)
    assert 1.0 < f < 1.1
    assert step_time(LLAMA, b, A100).tokens_per_step == step_time(LLAMA, a, A100).tokens_per_step


def test_offload_sharding_and_generation_are_priced():
    full = resolve_setup("trl", method="full", batch=1, seq_len=2048, sharding="zero3", offload_optimizer=True)
    st = step_time(LLAMA, full, get_device("rtx-4090"))
    keys = {t.key for t in st.terms}
    assert {"offload", "cpu_optimizer"} <= keys and "optimizer" not in keys
    eight = resolve_setup("trl", method="full", batch=1, seq_len=2048, gpus=8, sharding="zero3")
    pcie = step_time(LLAMA, eight, get_device("rtx-4090")).seconds_by_category()["collective"]
    nvlink = step_time(LLAMA, eight, get_device("h100-80gb")).seconds_by_category()["collective"]
    assert pcie > 0.1 and nvlink == 0.0  # 25 GB/s of PCIe cannot hide the gathers; NVLink can
    spec = load_preset("qwen2.5-1.5b")
    grpo = resolve_setup("trl", trainer="grpo", method="lora")
    hf = step_time(spec, grpo, get_device("h100-80gb"), TrainerSetup("grpo", generation="hf"))
    vllm = step_time(spec, grpo, get_device("h100-80gb"), TrainerSetup("grpo", generation="vllm-colocate"))
    assert hf.step_seconds > 5 * vllm.step_seconds  # transformers generate pays the launches of every decode step
    dpo = resolve_setup("trl", trainer="dpo", method="lora", batch=2, seq_len=1024)
    with_ref = step_time(spec, dpo, A100, TrainerSetup("dpo"))
    precomputed = step_time(spec, dpo, A100, TrainerSetup("dpo", precompute_ref=True))
    assert with_ref.flops_per_step > precomputed.flops_per_step
    assert with_ref.tokens_per_step == 2 * 2 * 1024  # chosen and rejected


def test_run_time_and_cost_follow_the_step():
    setup = resolve_setup("trl", method="lora", batch=4, seq_len=2048, grad_accum=2)
    run = run_time(LLAMA, setup, A100, DatasetSize(tokens=50_000_000, epochs=2))
    assert run.seconds == pytest.approx(100_000_000 / run.step.tokens_per_second)
    examples = run_time(LLAMA, setup, A100, DatasetSize(examples=10_001, epochs=3))
    assert examples.steps == math.ceil(10_001 * 3 / 8)
    assert examples.seconds == pytest.approx(examples.steps * examples.step.step_seconds)
    short = run_time(LLAMA, setup, A100, DatasetSize(examples=10_001, typical_len=512, epochs=3))
    assert short.seconds < examples.seconds / 3  # rows of 512 tokens instead of 2,048
    cost = run_cost(run, 2.5)
    assert cost.total == pytest.approx(run.hours * 1 * 2.5) and cost.gpu_hours == pytest.approx(run.hours)


def _message(exc: pytest.ExceptionInfo[ValueError]) -> Text:
    message = exc.value.args[0]
    assert isinstance(message, Text)  # translatable, with its values
    return message


@pytest.mark.parametrize("kwargs", [{"tokens": 0}, {"tokens": -5}, {"tokens": float("nan")}, {"tokens": True},
                                    {"examples": 0}, {"examples": 2.5}, {"tokens": 10, "epochs": 0},
                                    {"tokens": 10, "epochs": float("inf")}, {"tokens": 10**16}])
def test_a_bad_dataset_size_is_one_clear_line(kwargs):
    with pytest.raises(ValueError) as exc:
        DatasetSize(**kwargs)
    assert "\n" not in str(_message(exc))


def test_dataset_size_needs_one_unit():
    for kwargs, words in (({}, "give the dataset size"), ({"tokens": 1, "examples": 1}, "not both"),
                          ({"tokens": 100, "typical_len": 10}, "needs a number of examples")):
        with pytest.raises(ValueError) as exc:
            DatasetSize(**kwargs)
        assert words in str(_message(exc))


@pytest.mark.parametrize("price", [0, -1, float("inf"), float("nan"), "3", 10**7])
def test_a_bad_price_is_refused(price):
    run = run_time(LLAMA, resolve_setup("trl"), A100, DatasetSize(tokens=1_000_000))
    with pytest.raises(ValueError) as exc:
        run_cost(run, price)
    assert "price per GPU-hour" in str(_message(exc))


def test_a_run_of_years_is_refused():
    big = load_preset("llama-3.1-70b")
    setup = resolve_setup("trl", method="qlora", batch=1, seq_len=2048)
    with pytest.raises(ValueError) as exc:
        run_time(big, setup, get_device("rtx-3060"), DatasetSize(tokens=10**14))
    assert "years" in str(_message(exc))


def test_a_custom_device_has_no_time_unless_given_figures():
    device = custom_device(24)
    setup = resolve_setup("trl")
    with pytest.raises(ValueError) as exc:
        step_time(LLAMA, setup, device)
    assert "no compute figures" in str(_message(exc))
    mine = step_time(LLAMA, setup, device, compute=custom_compute(165.2, 1008))
    catalog = step_time(LLAMA, setup, get_device("rtx-4090"))
    assert mine.step_seconds == pytest.approx(catalog.step_seconds, rel=0.05)  # a 4090's figures, typed
    for bad in ((0, 100), (100, -1), (float("nan"), 100), (True, 100), (1e9, 100)):
        with pytest.raises(ValueError):
            custom_compute(*bad)


def test_a_precision_the_card_lacks_is_refused():
    with pytest.raises(ValueError) as exc:
        step_time(LLAMA, resolve_setup("trl", method="qlora", precision="bf16"), get_device("t4"))
    assert "no published bf16" in str(_message(exc))
    assert step_time(LLAMA, resolve_setup("trl", method="qlora", precision="fp16"), get_device("t4")).step_seconds > 0


# --- the device catalog ------------------------------------------------------------------------------------------
def test_every_catalog_device_has_cited_compute_figures():
    for device in CATALOG:
        c = device.compute
        assert c is not None, device.id
        assert (c.tflops_for("bf16") or c.tflops_for("fp16") or 0) > 0, device.id
        assert c.memory_gbps > 0 and c.host_gbps > 0 and c.arch, device.id
        assert "http" in c.source, device.id
        if device.kind == "unified":
            assert device.chip in APPLE_CHIPS and c.gpu_class == "apple"
        else:
            assert c.gpu_class in ("datacenter", "workstation", "consumer")
            assert c.tflops_for("fp8") is None or c.tflops_for("fp8") > c.tflops_for("fp16")
    assert custom_device(24).compute is None


def test_a_mac_is_timed_by_its_slowest_chip_unless_told():
    mac = get_device("mac-128gb")
    assert mac.chip == "m3-max"  # 30-core, 300 GB/s: the slowest chip sold with 128 GB
    faster = with_chip(mac, "m3-max-40c")
    setup = resolve_setup("mlx", backend="metal")
    spec = load_preset("qwen2.5-1.5b")
    assert step_time(spec, setup, faster).step_seconds < step_time(spec, setup, mac).step_seconds
    with pytest.raises(ValueError):
        with_chip(A100, "m3-max")
    with pytest.raises(ValueError):
        with_chip(mac, "m9")


# --- the accuracy report against its data -------------------------------------------------------------------------
def test_the_report_figures_are_the_rows_errors():
    report = vs.speed_report()
    rows = report["rows"]
    assert len(rows) == len(vs.throughput_rows()) == 20
    for split in ("fit", "held_out"):
        errors = [abs(100 * (r["predicted"] - r["measured"]) / r["measured"]) for r in rows if r["split"] == split]
        assert report[split]["n"] == len(errors)
        assert report[split]["median_abs_pct"] == pytest.approx(statistics.median(errors))
        assert report[split]["worst_abs_pct"] == pytest.approx(max(errors))
    assert report["held_out"]["n"] * 3 >= len(rows)  # at least a third held out
    held = {(r["stack"], r["method"]) for r in rows if r["split"] == "held_out"}
    assert {"torchtune", "plain", "mlx"} <= {s for s, _ in held} and {"full", "lora", "qlora"} <= {m for _, m in held}
    # the issue's targets, as measured today (a change that breaks them shows here)
    assert report["held_out"]["median_abs_pct"] <= vs.TARGET_MEDIAN_PCT
    assert report["held_out"]["worst_abs_pct"] <= vs.TARGET_WORST_PCT


def test_each_row_replays_its_quoted_setting():
    for row in vs.throughput_rows():
        spec, setup, device = vs.replay(row)
        assert setup.batch == int(row["batch"]) and setup.seq_len == int(row["seq_len"])
        assert setup.method == row["method"] and setup.gpus == int(row["gpus"])
        assert row["source_detail"] and row["source"]
        assert float(row["measured_value"]) > 0


def test_the_shipped_constants_are_the_fit_of_the_fit_rows():
    fitted = vs.fit_constants()
    for name in vs.BOUNDS:
        shipped, found = getattr(CALIBRATION, name), getattr(fitted, name)
        assert shipped == pytest.approx(found, rel=0.01, abs=1e-5), name


# --- the remedies as advise() prices them on a device (estimator/advice/timing.py) ------------------------------
def _remedy(setup, key, device=A100, spec=LLAMA):
    return next(r for r in advise(spec, setup, device).remedies if r.key == key)


def test_the_checkpointing_remedy_for_llama_8b_full_on_an_a100_is_in_the_published_range():
    ckpt = _remedy(resolve_setup("trl", method="full", grad_ckpt=False), "checkpointing")
    assert 1.20 <= ckpt.time_factor <= 1.32 and ckpt.time_factor == pytest.approx(1.2835, abs=1e-3)
    assert ckpt.time_factor == pytest.approx(time_factor(LLAMA, resolve_setup("trl", method="full", grad_ckpt=False),
                                                         ckpt.new_setup, A100))  # speed.time_factor, the same call
    assert ckpt.caveat == ("Activations are recomputed in backward, one more forward pass: ~28 % slower here "
                           "(published: 20–30 %).")


def test_the_lora_checkpointing_remedy_says_why_it_costs_more():
    ckpt = _remedy(resolve_setup("trl", method="lora", grad_ckpt=False, batch=4), "checkpointing")
    assert ckpt.time_factor == pytest.approx(1.4556, abs=1e-3)
    assert ckpt.caveat.endswith("~46 % slower here, more than the 20–30 % published for full fine-tuning because "
                                "LoRA's backward computes no weight gradients.")


@pytest.mark.parametrize(("device", "factor"), [("rtx-4090", 1.064), ("a100-80gb", 1.054), ("h100-80gb", 1.051),
                                                ("l40s", 1.144)])
def test_the_qlora_remedy_lands_in_the_range_its_projects_publish(device, factor):
    """LoRA → QLoRA at TRL's defaults (batch 1 × 2,048): between torchtune's 1.022 and LitGPT's 2.0 (bitsandbytes
    0.41.1, Alpaca at micro-batch 1); the caveat quotes it instead of "somewhat slower"."""
    qlora = _remedy(resolve_setup("trl"), "qlora", get_device(device))
    assert 1.02 <= qlora.time_factor <= 2.0 and qlora.time_factor == pytest.approx(factor, abs=1e-3)
    assert "somewhat" not in qlora.caveat and f"~{round(100 * (factor - 1))} % slower here" in qlora.caveat


def test_remedies_that_fit_come_cheapest_in_time_first():
    for spec, setup, device in ((LLAMA, resolve_setup("trl", batch=8, seq_len=4096), "rtx-4090"),
                                (LLAMA, resolve_setup("trl", method="full"), "rtx-4090"),
                                (LLAMA, resolve_setup("trl", method="full", batch=4, grad_ckpt=False), "a100-80gb"),
                                (load_preset("qwen2.5-7b"), resolve_setup("trl"), "l4")):
        dev = get_device(device)
        found = advise(spec, setup, dev).remedies
        fitting = [r for r in found if fits(r, dev.usable_bytes)]
        assert fitting == list(found[:len(fitting)])  # the ones that fit come first
        same_model = [r for r in fitting if r.new_spec is None and r.new_setup.gpus == setup.gpus]
        assert [r.time_factor for r in same_model] == sorted(r.time_factor for r in same_model)
        assert [r.key for r in fitting[len(same_model):]] in (
            [], ["sharding"], ["smaller_model"], ["sharding", "smaller_model"])


def test_time_of_is_the_time_model_s_step_kept():
    setup = resolve_setup("trl")
    assert time_of(LLAMA, setup, A100) == step_time(LLAMA, setup, A100)
    assert time_of(LLAMA, setup, A100) is time_of(LLAMA, setup, A100, TrainerSetup("sft"))  # one cache entry
    with pytest.raises(ValueError, match="no compute figures"):
        time_of(LLAMA, setup, custom_device(24))


def test_time_phrases():
    assert time_phrase(1.2835) == "~28 % slower" and time_phrase(0.5) == "~100 % faster"
    assert time_phrase(1.004) == "about as fast" and time_phrase(0.9951) == "about as fast"
