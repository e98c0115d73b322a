"""Setups side by side (issue 30 item 4): a pin is the priced setup as one link value, read back to the same setup and
the same numbers; a bad pin is left out with a note; the chart shows each pin's memory against its own device, its
speed and its run's time or cost. The page itself: tests/test_pages.py (AppTest) and tests/e2e/test_pins_e2e.py."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from estimator import custom_device, estimate, generic_spec, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.speed import time_of
from ui.page_charts import pins_chart, pins_chart_spec
from ui.params import BY_SIZE, TABLE, UPLOAD
from ui.pins import (
    KEY_SEP,
    MAX_PINS,
    PAIR_SEP,
    PIN_KEYS,
    decode_pin,
    duration,
    encode_pin,
    pin_values,
    price_pin,
    read_pins,
    resolve_pin,
)
from ui.trainer_inputs import resolve_trainer

LLAMA = load_preset("llama-3.1-8b")


def same_setup(a, b) -> list[str]:
    """The fields two setups differ in (`from_stack` says where a value came from, not what it is)."""
    return [f.name for f in fields(a) if f.name != "from_stack" and getattr(a, f.name) != getattr(b, f.name)]


def sidebar(stack: str, device, trainer: str = "sft", box: dict | None = None, **settings):
    """What the sidebar prices: the stack's setup for these settings with the device's backend, then the trainer box's
    checks (ui.trainer_inputs.resolve_trainer)."""
    from estimator.options.backends import device_backend

    setup = resolve_setup(stack, backend=device_backend(device), **settings)
    result = resolve_trainer(setup, trainer, **(box or {}))
    return result.setup, result.trainer


CASES = {
    "trl-lora-default": ("llama-3.1-8b", LLAMA, "rtx-4090", "trl", "sft", {}, dict(method="lora", batch=1,
                                                                                  seq_len=2048)),
    "full-zero3-offload-8bit": ("llama-3.1-8b", LLAMA, "h100-80gb", "trl", "sft", {}, dict(
        method="full", batch=2, seq_len=4096, grad_ckpt=True, offload_activations=True, optimizer="adamw_8bit", gpus=4,
        sharding="zero3", grad_accum=8, precision="mixed")),
    "qlora-targets-rank": ("qwen2.5-7b", load_preset("qwen2.5-7b"), "a100-40gb", "axolotl", "sft", {}, dict(
        method="qlora", batch=4, seq_len=1024, lora_rank=64, lora_targets=("q_proj", "v_proj"), attention="eager")),
    "mlx-on-a-mac": ("qwen2.5-1.5b", load_preset("qwen2.5-1.5b"), "mac-32gb", "mlx", "sft", {}, dict(
        method="lora", batch=4, seq_len=2048, lora_layers=8)),
    "torchtune-compile": ("llama-3.2-3b", load_preset("llama-3.2-3b"), "l40s", "torchtune", "sft", {}, dict(
        method="full", batch=2, seq_len=2048, compile=True, optimizer_in_bwd=True)),
    "unsloth-qlora": ("llama-3.1-8b", LLAMA, "rtx-4060-ti", "unsloth", "sft", {}, dict(method="qlora", batch=2,
                                                                                       seq_len=4096)),
    "dpo-beta": ("qwen2.5-0.5b", load_preset("qwen2.5-0.5b"), "a10g", "trl", "dpo", {"beta": "0.2",
                                                                                      "precompute_ref": True},
                 dict(method="lora", batch=2, seq_len=1024)),
    "grpo-vllm": ("qwen2.5-1.5b", load_preset("qwen2.5-1.5b"), "h100-80gb", "trl", "grpo",
                  {"gen": "vllm-colocate", "vllm_util": 0.4, "gens": 4, "prompt_len": 256, "completion_len": 1024},
                  dict(method="lora", batch=8, seq_len=2048)),
    "by-size": (BY_SIZE, generic_spec(14.0), "rtx-5090", "trl", "sft", {}, dict(method="qlora", batch=1,
                                                                                seq_len=8192)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_pin_opens_to_the_setup_and_numbers_it_was_made_from(case):
    choice, spec, device_id, stack, trainer_id, box, settings = CASES[case]
    device = get_device(device_id)
    setup, trainer = sidebar(stack, device, trainer_id, box, **settings)
    values, notes = pin_values(choice, spec, setup, device, trainer, size=14.0 if choice == BY_SIZE else None)
    assert not notes
    text = encode_pin(values)
    keys = [pair.partition(KEY_SEP)[0] for pair in text.split(PAIR_SEP)]
    assert keys[:6] == ["model", "device", "stack", "method", "batch", "max_len"] and set(keys) == set(values)
    job = resolve_pin(text, decode_pin(text))
    assert same_setup(job.setup, setup) == [] and job.trainer == trainer and job.device == device
    assert job.spec.params_total == spec.params_total
    mine = price_pin(job)
    sidebar_est = estimate(spec, setup, trainer=trainer, device_capacity=device.runtime_total_bytes)
    assert mine.estimate.total_bytes == sidebar_est.total_bytes and mine.estimate.high_bytes == sidebar_est.high_bytes
    assert mine.band == verdict(sidebar_est.total_bytes, device, sidebar_est.high_bytes, sidebar_est.low_bytes).band
    assert mine.step.tokens_per_second == time_of(spec, setup, device, trainer).tokens_per_second


def test_a_pin_holds_only_what_differs_from_the_stack():
    """The default sidebar's pin is the six keys it always holds; a changed checkpointing adds one pair."""
    device = get_device("rtx-4090")
    setup, trainer = sidebar("trl", device, method="lora", batch=1, seq_len=2048)
    values, _notes = pin_values("llama-3.1-8b", LLAMA, setup, device, trainer)
    assert encode_pin(values) == "model.llama-3.1-8b~device.rtx-4090~stack.trl~method.lora~batch.1~max_len.2048"
    setup, trainer = sidebar("trl", device, method="lora", batch=1, seq_len=2048, grad_ckpt=False)
    values, _notes = pin_values("llama-3.1-8b", LLAMA, setup, device, trainer)
    assert encode_pin(values).endswith("~max_len.2048~ckpt.false")


def test_a_custom_device_and_the_rule_travel_and_the_time_is_unknown_there():
    device = custom_device(30.0, "unified")
    setup, trainer = sidebar("mlx", device, method="lora", batch=4, seq_len=2048)
    values, _notes = pin_values("llama-3.2-3b", load_preset("llama-3.2-3b"), setup, device, trainer, rule="seed")
    assert (values["device"], values["capacity"], values["kind"], values["rule"]) == ("custom", "30", "unified", "true")
    text = encode_pin(values)
    result = price_pin(resolve_pin(text, decode_pin(text)), tokens=10**8, price=2.0)
    assert result.job.device == device and result.job.rule == "seed"
    assert result.estimate.mode == "seed"  # priced with the rule, as the calculator prices it
    assert result.step is None and result.run is None and "compute figures" in result.time_note


def test_an_upload_cannot_be_pinned():
    device = get_device("rtx-4090")
    setup, trainer = sidebar("trl", device, method="lora", batch=1, seq_len=2048)
    with pytest.raises(ValueError, match="uploaded config.json"):
        pin_values(UPLOAD, LLAMA, setup, device, trainer)


def test_a_run_and_its_cost_are_the_time_model_s():
    device = get_device("a100-80gb")
    setup, trainer = sidebar("trl", device, method="full", batch=1, seq_len=2048, gpus=2, sharding="zero3")
    values, _notes = pin_values("llama-3.1-8b", LLAMA, setup, device, trainer)
    text = encode_pin(values)
    result = price_pin(resolve_pin(text, decode_pin(text)), tokens=500_000_000, price=1.5)
    tps = time_of(LLAMA, setup, device).tokens_per_second
    assert result.run.seconds == pytest.approx(500_000_000 / tps)
    assert result.cost.total == pytest.approx(result.run.seconds / 3600 * 2 * 1.5)  # hours × GPUs × price
    assert pins_chart_spec([result])["layout"]["xaxis3"]["ticktext"][0].endswith("<br>2 × A100 80GB")  # per GPU
    # tokens are per epoch, as in the calculator's run box and the CLI (one name, one meaning): 3 epochs, 3 × the time
    thrice = price_pin(resolve_pin(text, decode_pin(text)), tokens=500_000_000, price=1.5, epochs=3)
    assert thrice.run.seconds == pytest.approx(3 * result.run.seconds)
    assert thrice.cost.total == pytest.approx(3 * result.cost.total)
    years = price_pin(resolve_pin(text, decode_pin(text)), tokens=10**15)
    assert years.run is None and "years" in years.time_note  # a run of years: a note, never a number


GOOD = "model.llama-3.1-8b~device.rtx-4090~stack.trl~method.lora~batch.1~max_len.2048"


@pytest.mark.parametrize(("text", "reason"), [
    ("", "'' is not a key.value pair"),
    ("zzz", "'zzz' is not a key.value pair"),
    ("model.llama-3.1-8b", "it lacks device, stack, method, batch, max_len"),
    (GOOD + "~colour.red", "'colour' is not a setting a pin holds"),
    (GOOD + "~host_ram.64", "'host_ram' is not a setting a pin holds"),  # the machine, not the setup
    (GOOD.replace("batch.1", "batch.0"), "'0' is not a valid value for 'batch'"),
    (GOOD.replace("max_len.2048", "max_len.inf"), "'inf' is not a valid value for 'max_len'"),
    (GOOD.replace("model.llama-3.1-8b", "model.upload"), "'upload' is not a valid value for 'model'"),
    (GOOD.replace("stack.trl", "stack.nemo"), "'nemo' is not a valid value for 'stack'"),
    (GOOD + "~batch.2", "'batch' is given twice"),
    (GOOD + "~targets." + "x" * 700, "longer than 600 characters"),
    (GOOD + "~beta.-1", "'-1' is not a valid value for 'beta'"),
])
def test_a_bad_pin_is_left_out_with_its_reason(text, reason):
    with pytest.raises(ValueError) as err:
        decode_pin(text)
    assert str(err.value) == reason
    pins, notes = read_pins([GOOD.replace("rtx-4090", "h100-80gb"), text])
    assert len(pins) == 1 and notes == [f"Pinned setup 2 of the link could not be read ({reason}); it is left out."]


def test_a_pin_the_stack_refuses_is_a_value_error_not_a_traceback():
    """Each value is one the sidebar takes, the combination is not: resolve_pin says why (the page notes it)."""
    text = GOOD + "~targets.not_a_module"
    with pytest.raises(ValueError, match="not_a_module"):
        resolve_pin(text, decode_pin(text))
    text = GOOD.replace("method.lora", "method.full") + "~compile.true"  # TRL has no compile switch
    with pytest.raises(ValueError, match="torchtune"):
        resolve_pin(text, decode_pin(text))


def test_at_most_four_pins_each_once():
    texts = [GOOD.replace("batch.1", f"batch.{b}") for b in (1, 2, 3, 4, 5)]
    pins, notes = read_pins([texts[0], texts[0], *texts[1:]])
    assert [t for t, _v in pins] == texts[:MAX_PINS]
    assert notes == ["Pinned setup 2 is the same as an earlier one; shown once.",
                     "The link has 6 pinned setups; the page shows the first 4."]


def test_every_pin_key_is_a_link_key_and_the_separators_never_appear_in_one():
    assert set(PIN_KEYS) <= set(TABLE) and len(PIN_KEYS) == len(set(PIN_KEYS))
    assert not any(KEY_SEP in k or PAIR_SEP in k for k in PIN_KEYS)
    assert {"present", "host_ram", "tokens", "price", "pins"}.isdisjoint(PIN_KEYS)


def test_a_column_names_its_device_short():
    from ui.pins import short_device

    assert [short_device(get_device(d)) for d in ("rtx-4090", "a100-80gb", "t4", "mac-32gb", "mi300x")] == [
        "RTX 4090", "A100 80GB", "T4", "Mac 32 GB", "MI300X"]
    assert short_device(custom_device(24.0, "discrete")) == "Custom 24 GB (GPU)"


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (90, 2_700, 12_240, 400_000)] == ["1.5 min", "45 min", "3.4 h", "4.6 days"]


# ---- the chart ------------------------------------------------------------------------------------------------------

def _results(tokens=None, price=None):
    out = []
    for device_id, method, stack in (("rtx-4090", "qlora", "trl"), ("a100-80gb", "lora", "trl"),
                                     ("mac-32gb", "lora", "mlx")):
        device = get_device(device_id)
        setup, trainer = sidebar(stack, device, method=method, batch=2, seq_len=2048)
        values, _notes = pin_values("llama-3.2-3b", load_preset("llama-3.2-3b"), setup, device, trainer)
        text = encode_pin(values)
        out.append(price_pin(resolve_pin(text, decode_pin(text)), tokens, price))
    return out


def test_the_chart_stacks_each_pins_memory_against_its_own_device():
    results = _results()
    spec = pins_chart_spec(results)
    bars = [t for t in spec["data"] if t["type"] == "bar" and t.get("yaxis", "y") == "y"]
    totals = [sum(t["y"][i] for t in bars) for i in range(3)]
    assert totals == pytest.approx([r.estimate.total_bytes / 1e9 for r in results])
    usable = [s for s in spec["layout"]["shapes"] if s["name"] == "usable"]
    assert [(s["x0"] + s["x1"]) / 2 for s in usable] == pytest.approx([0, 1, 2])
    assert [s["y0"] for s in usable] == pytest.approx([r.usable_bytes / 1e9 for r in results])
    assert usable[2]["y0"] < 32  # the Mac's usable share of its RAM, not its RAM
    totals_written = [a for a in spec["layout"]["annotations"] if a["name"] == "total"]
    assert [a["y"] for a in totals_written] == pytest.approx(  # above the bar and its usable line
        [max(r.estimate.total_bytes, r.usable_bytes) / 1e9 for r in results])
    labels = [a["text"] for a in totals_written]
    assert labels[0] == f"<b>{results[0].estimate.total_bytes / 1e9:.1f} GB</b><br>{results[0].band}"
    speed = next(t for t in spec["data"] if t.get("yaxis") == "y2")
    assert speed["y"] == pytest.approx([r.tokens_per_second for r in results])
    assert "yaxis3" not in spec["layout"]  # no dataset size: no run row
    assert spec["layout"]["xaxis2"]["ticktext"][1] == "<b>2</b> · Llama-3.2-3B<br>LoRA · 2 × 2,048<br>A100 80GB"
    pins_chart(results)  # a valid plotly figure


def test_the_chart_adds_the_runs_cost_or_time_and_grows_for_a_room():
    results = _results(tokens=200_000_000, price=2.0)
    spec = pins_chart_spec(results, font_size=20)
    cost = next(t for t in spec["data"] if t.get("yaxis") == "y3")
    assert cost["y"] == pytest.approx([r.cost.total for r in results])
    written = [a["text"] for a in spec["layout"]["annotations"] if a["name"] == "run"]
    assert written[0].startswith(f"<b>{results[0].cost.total:,.2f}</b><br>") and written[0].endswith(" h")
    speeds = [a["text"] for a in spec["layout"]["annotations"] if a["name"] == "speed"]
    assert speeds[1] == f"<b>{results[1].tokens_per_second:,.0f}</b><br>tokens/s"
    assert spec["layout"]["yaxis3"]["title"]["text"] == "Cost per run"
    assert spec["layout"]["xaxis3"]["ticktext"] and spec["layout"]["xaxis3"]["tickfont"]["size"] == 20
    assert spec["layout"]["font"]["size"] == 20
    assert {a["font"]["size"] for a in spec["layout"]["annotations"] if a["name"] in ("speed", "run")} == {24}
    hours = pins_chart_spec(_results(tokens=200_000_000))
    run = next(t for t in hours["data"] if t.get("yaxis") == "y3")
    assert hours["layout"]["yaxis3"]["title"]["text"] == "Time per run"
    assert run["y"] == pytest.approx([r.run.hours for r in _results(tokens=200_000_000)])


def test_a_pin_without_a_time_says_so_in_its_column():
    device = custom_device(24.0, "discrete")
    setup, trainer = sidebar("trl", device, method="lora", batch=1, seq_len=2048)
    values, _notes = pin_values("llama-3.2-3b", load_preset("llama-3.2-3b"), setup, device, trainer)
    text = encode_pin(values)
    results = [*_results(), price_pin(resolve_pin(text, decode_pin(text)))]
    spec = pins_chart_spec(results)
    unknown = [a for a in spec["layout"]["annotations"] if a["name"] == "unknown"]
    assert [a["x"] for a in unknown] == [3] and unknown[0]["text"] == "time unknown"


def test_spanish_pins_are_translated():
    from estimator.i18n import set_language

    set_language("es")
    try:
        results = _results(tokens=200_000_000)
        spec = pins_chart_spec(results)
        assert spec["layout"]["yaxis"]["title"]["text"] != "Memory (GB)"
        assert spec["layout"]["separators"] == ",."
        with pytest.raises(ValueError) as err:
            decode_pin("zzz")
        assert str(err.value) == "'zzz' no es un par clave.valor"
        assert spec["layout"]["yaxis3"]["title"]["text"] == "Tiempo por ejecución"
        assert duration(12_240) == "3,4 h"
    finally:
        set_language("en")


def test_replace_keeps_pins_pure():
    """resolve_pin never changes the job it is given: two reads of one pin are equal."""
    a = resolve_pin(GOOD, decode_pin(GOOD))
    b = resolve_pin(GOOD, decode_pin(GOOD))
    assert a == b and replace(a, notes=()) == b


def test_a_pin_carries_the_releases_given():
    """A setup priced at releases the user gave (the sidebar's versions box) pins with them: Mixtral-8x7B QLoRA on
    transformers 4.57.6 (per-expert nn.Linear, quantised) opens at 34.5 GB, not transformers 5's 103.5 GB."""
    from estimator import TrainerSetup, get_device, load_preset
    from estimator.job.stack import resolve_setup
    from ui.pins import decode_pin, encode_pin, pin_values, price_pin, resolve_pin

    spec, device = load_preset("mixtral-8x7b"), get_device("a100-80gb")
    setup = resolve_setup("trl", method="qlora", pins=("transformers==4.57.6",))
    values, notes = pin_values("mixtral-8x7b", spec, setup, device, TrainerSetup())
    text = encode_pin(values)
    assert values["versions"] == "transformers==4.57.6" and not notes
    job = resolve_pin(text, decode_pin(text))
    assert job.setup.versions == setup.versions and job.setup.method == "qlora"
    assert round(price_pin(job).estimate.total_bytes / 1e9, 1) == 34.5
