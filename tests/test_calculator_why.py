"""The calculator's why-this-number and time pieces without a server: the waterfall builder (its bars add up from
the rule to our total exactly, named in the page's language), the chips' text and the sidebar values they set, the
run time box's checks, and the time and cost lines."""

from __future__ import annotations

import re

import pytest

from estimator import custom_device, estimate, generic_spec, get_device, load_preset
from estimator.advice.advise import advise
from estimator.advice.assumptions import apply_change
from estimator.advice.explain import explain
from estimator.advice.fastest import Constraints
from estimator.i18n import language
from estimator.job.stack import resolve_setup
from estimator.memory.why import STEP_KEYS, Why, WhyStep, json_total, why_not_rule
from estimator.speed.price import time_of
from estimator.speed.run import DatasetSize, run_cost, run_time
from ui.apply import widget_updates
from ui.explain_view import chip_text, chip_updates, condition_markdown, signed_gb, why_markdown
from ui.page_charts import WHY_STEP_NAMES, why_bars, why_waterfall, why_waterfall_spec
from ui.time_view import dataset_text, duration, fastest_updates, read_run_inputs, run_line, step_line

LLAMA = load_preset("llama-3.1-8b")
RTX = get_device("rtx-4090")
LAPTOP = get_device("laptop-36gb")
TRL = resolve_setup("trl")


def why_of(spec=LLAMA, setup=TRL, device=RTX) -> Why:
    return why_not_rule(spec, estimate(spec, setup), device.capacity_bytes)


# ---- the waterfall ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "setup", "device"), [
    (LLAMA, TRL, RTX),
    (LLAMA, resolve_setup("trl", method="full"), get_device("h100-80gb")),  # the precision recipe
    (LLAMA, resolve_setup("trl", method="qlora"), get_device("gpu-16gb")),  # the 4-bit base
    (generic_spec(7), resolve_setup("mlx", backend="metal", batch=4), LAPTOP),  # MLX's attention
    (load_preset("llama-3.1-70b"), resolve_setup("trl", method="full", gpus=8, sharding="zero3"),
     get_device("h100-80gb")),  # spread over 8 GPUs
])
def test_the_waterfalls_bars_add_up_from_the_rule_to_our_total_exactly(spec, setup, device):
    est = estimate(spec, setup)
    why = why_not_rule(spec, est, device.capacity_bytes)
    spec_ = why_waterfall_spec(why)
    (trace,) = spec_["data"]
    whole = trace["customdata"]
    assert whole[0] == why.rule_bytes and whole[-1] == why.total_bytes == json_total(est)
    assert whole[0] + sum(whole[1:-1]) == whole[-1]  # whole bytes: exact
    assert sum(trace["x"][:-1]) == pytest.approx(est.total_bytes / 1e9, abs=1e-6)  # the drawn GB: the total
    assert trace["measure"][0] == "absolute" and trace["measure"][-1] == "total"
    assert all(m == "relative" for m in trace["measure"][1:-1]) and 0 not in whole[1:-1]
    assert trace["meta"][1:-1] == [s.key for s in why.steps if s.bytes]
    assert len(spec_["layout"]["yaxis"]["ticktext"]) == len(whole)
    why_waterfall(why)  # plotly validates the spec


def test_the_steps_are_named_in_the_pages_language():
    why = why_of()
    english = [t.replace("<br>", " ") for t in why_waterfall_spec(why)["layout"]["yaxis"]["ticktext"]]
    assert english == ["Rule of thumb", "Adapters", "Activations", "Runtime and allocator", "This estimate"]
    with language("es"):
        spec = why_waterfall_spec(why)
        spanish = [t.replace("<br>", " ") for t in spec["layout"]["yaxis"]["ticktext"]]
        hover = spec["data"][0]["hovertext"][1]
        text = why_markdown(why)
    assert spanish == ["Regla práctica", "Adaptadores", "Activaciones", "Runtime y asignador", "Esta estimación"]
    assert spec["layout"]["separators"] == ",." and "+0,5 GB" in spec["data"][0]["text"]
    assert hover.startswith("<b>Adaptadores</b>: +0,51 GB (0,47 GiB)<br>") and "adaptadores" in hover.lower()
    assert "- **Regla práctica** 19,1 GB" in text


def test_a_long_name_takes_two_lines():
    ticks = why_waterfall_spec(why_of())["layout"]["yaxis"]["ticktext"]
    assert ticks[0] == "Rule of thumb" and "Runtime and<br>allocator" in ticks  # at most 15 characters a line


def test_every_step_has_a_short_name():
    assert set(WHY_STEP_NAMES) == set(STEP_KEYS)


def test_a_step_of_zero_bytes_is_left_out_and_the_sum_holds():
    why = Why(10, "the rule", (WhyStep("base", "b", 0), WhyStep("activations", "a", 5), WhyStep("runtime", "r", -3)),
              12)
    assert why_bars(why) == [("rule", "absolute", 10), ("activations", "relative", 5), ("runtime", "relative", -3),
                             ("total", "total", 12)]


def test_the_axis_leaves_room_for_the_last_bars_text():
    why = why_of()
    layout = why_waterfall_spec(why)["layout"]
    assert not layout.get("shapes")  # the numbers' differences only: the device is the memory bar's
    assert layout["xaxis"]["range"][1] >= 1.15 * why.total_bytes / 1e9
    assert layout["margin"]["r"] >= 50  # and the margin holds a text past the axis's end


# ---- the condition and the chips -------------------------------------------------------------------------------


def test_the_condition_line_in_spanish():
    x = explain(LLAMA, estimate(LLAMA, TRL), RTX)
    with language("es"):
        line = re.sub(r"\\(.)", r"\1", condition_markdown(x, None))  # plain()'s Markdown escapes undone
    assert line.startswith(f"**Cabe hasta {x.longest.tokens:,}".replace(",", ".") + " tokens por ejemplo con lote 1.**")
    assert ":gray[Vale para lote 1 × 2048 tokens por ejemplo, cada ejemplo" in line  # Spanish: 4 digits ungrouped


def test_a_chip_names_the_setting_its_source_the_change_and_the_bytes():
    x = explain(LLAMA, estimate(LLAMA, TRL), RTX)
    ckpt = next(a for a in x.assumptions if a.key == "grad_ckpt")
    assert chip_text(ckpt) == "checkpointing on · TRL default → checkpointing off: +14.0 GB"
    with language("es"):
        assert chip_text(ckpt) == "checkpointing activado · por defecto en TRL → checkpointing desactivado: +14,0 GB"
    assert signed_gb(-3.14e9) == "−3.1 GB"


def test_a_chips_change_becomes_the_sidebars_control_values():
    x = explain(LLAMA, estimate(LLAMA, TRL), RTX)
    by_key = {a.key: a for a in x.assumptions}
    assert chip_updates(LLAMA, TRL, by_key["grad_ckpt"]) == {"ckpt": "false"}
    assert chip_updates(LLAMA, TRL, by_key["method"]) == {"method": "qlora"}
    assert chip_updates(LLAMA, TRL, by_key["precision"]) == {"precision": "mixed"}
    assert chip_updates(LLAMA, TRL, by_key["loss"]) == {"loss": "standard"}
    assert widget_updates(LLAMA, apply_change(TRL, {"seq_len": 1024}), ["seq_len"]) == {"max_len": 1024}
    assert widget_updates(LLAMA, apply_change(TRL, {"batch": 2}), ["batch"]) == {"batch": 2}
    assert widget_updates(LLAMA, apply_change(TRL, {"grad_ckpt": True}), ["grad_ckpt"]) == {"ckpt": "true"}
    offload = apply_change(TRL, {"grad_ckpt": True, "offload_activations": True})
    assert widget_updates(LLAMA, offload, ["grad_ckpt", "offload_activations"]) == {"ckpt": "offload"}
    # MLX-LM trains its last 16 blocks; 'every block' is the model's depth (the sidebar's 0 is the stack's 16)
    mlx = resolve_setup("mlx", backend="metal")
    assert widget_updates(LLAMA, apply_change(mlx, {"lora_layers": 0}), ["lora_layers"]) == {"lora_layers": 32}
    assert widget_updates(LLAMA, apply_change(mlx, {"lora_layers": 16}), ["lora_layers"]) == {"lora_layers": 16}
    assert widget_updates(LLAMA, TRL, ["backend", "adapter_dtype"]) == {}  # no control: left out


# ---- time and cost ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "english", "spanish"), [
    (0.0123, "12 ms", "12 ms"), (1.137, "1.14 s", "1,14 s"), (42.0, "42.0 s", "42,0 s"), (600, "10.0 min", "10,0 min"),
    (55_525, "15.4 h", "15,4 h"), (300_000, "3.5 days", "3,5 días"),
])
def test_durations(seconds, english, spanish):
    assert duration(seconds) == english
    with language("es"):
        assert duration(seconds) == spanish


def test_the_step_and_run_lines_are_the_time_models():
    step = time_of(LLAMA, TRL, RTX)
    assert step_line(step) == (f"~{round(step.tokens_per_second):,} tokens/s · {step.step_seconds:.2f} s per optimizer "
                               "step (2,048 tokens × 1 GPU)")
    data = DatasetSize(tokens=100_000_000, epochs=2.0)
    run = run_time(LLAMA, TRL, RTX, data)
    cost = run_cost(run, 2.5)
    assert run_line(run, data, cost) == (f"Run: 100,000,000 tokens × 2 epochs → {run.hours:.1f} h ({run.steps:,} "
                                         f"optimizer steps) · cost {cost.total:,.2f} ({cost.gpu_hours:,.2f} "
                                         "GPU-hours × 2.5 per GPU-hour)")
    with language("es"):
        assert dataset_text(DatasetSize(examples=50_000, typical_len=600, epochs=1.0)) == \
            "50.000 ejemplos de ~600 tokens × 1 época"
        assert dataset_text(DatasetSize(tokens=10**6, epochs=1.5)) == "1.000.000 tokens × 1,5 épocas"


@pytest.mark.parametrize(("values", "device", "dataset", "notes"), [
    ({}, RTX, None, ()),
    ({"tokens": 1000}, RTX, DatasetSize(tokens=1000), ()),
    ({"examples": 500, "typical_len": 300, "epochs": 3.0}, RTX, DatasetSize(examples=500, typical_len=300, epochs=3.0),
     ()),
    ({"tokens": 1000, "examples": 10}, RTX, None, ("Run time: give the dataset size as tokens or as examples, not "
                                                   "both.",)),
    ({"price": 2.0}, RTX, None, ("The cost is the run's GPU-hours × the price: give the dataset size too.",)),
    ({"tflops": 100.0}, custom_device(48, "discrete"), None,
     ("A custom device's time needs both figures: its TFLOPS and its memory bandwidth.",)),
    ({"tflops": 100.0}, RTX, None, ()),  # a catalog device has its own figures: the box's are off and unread
])
def test_the_run_box_reads_what_the_time_model_takes(values, device, dataset, notes):
    got = read_run_inputs(values, device)
    assert got.dataset == dataset and got.notes == notes and got.compute is None


def test_a_custom_devices_figures_make_its_compute():
    got = read_run_inputs({"tflops": 150.0, "bandwidth": 900.0, "tokens": 10**6, "price": 3.0},
                          custom_device(48, "discrete"))
    assert got.figures_given and got.compute is not None and got.compute.tflops_for("bf16") == 150.0
    assert got.compute.memory_gbps == 900.0 and got.price == 3.0 and got.dataset == DatasetSize(tokens=10**6)


def test_the_fastest_fit_becomes_the_sidebars_batch_and_accumulation():
    setup = resolve_setup("trl", grad_accum=4)
    fit = advise(LLAMA, setup, RTX, fastest=Constraints()).fastest_fit
    assert fastest_updates(LLAMA, fit) == {"batch": 4, "accum": 1}
    small = generic_spec(1.5)
    fit = advise(small, setup, RTX, fastest=Constraints()).fastest_fit
    assert {c.key for c in fit.changes} == {"grad_ckpt", "batch"}
    assert fastest_updates(small, fit) == {"ckpt": "false", "batch": 2, "accum": 2}
