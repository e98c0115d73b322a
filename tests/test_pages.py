"""AppTest for the secondary pages (compare, what fits, size table, scale out, how it works): each page opened
from the entrypoint with URL parameters, asserting the numbers it shows against the estimator and the seed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from estimator import TrainingSetup, custom_device, estimate, fmt_both, generic_spec, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.options.methods import SHARDING_LABELS
from estimator.report.snippets import training_snippet
from ui.live_chart import sent_payload
from validation import accuracy_report

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
GB = 1e9


def trl(**settings) -> TrainingSetup:
    """The setup the sidebar resolves by default: the TRL stack with these settings."""
    return resolve_setup("trl", **settings)


def open_page(page: str, **params: str | list[str]) -> AppTest:
    """The app at `page` with these URL parameters, as a link would open it. AppTest applies bound URL values
    on the run after a page switch (a browser applies them on load), hence the second run."""
    at = AppTest.from_file(APP, default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly specs by chart key."""
    out = {}
    for chart in at.get("plotly_chart"):
        key = chart.proto.id.rsplit("-", 1)[-1]
        out[key] = json.loads(chart.proto.spec)
    for chart in at.get("bidi_component"):  # the calculator's live chart (ui/live_chart.py)
        out[chart.proto.id.rsplit("-", 1)[-1]] = sent_payload(chart.proto.json)["figure"]
    return out


def bar_labels(spec: dict) -> list[str]:
    """The bars' labels, top to bottom or left to right (stacked_bars puts rows at 0, 1, … with tick text)."""
    vertical = spec["data"][0].get("orientation") == "v"
    axis = spec["layout"]["xaxis" if vertical else "yaxis"]
    return axis.get("ticktext") or spec["data"][0]["x" if vertical else "y"]


def metrics(at: AppTest) -> dict[str, tuple[str, str]]:
    return {m.label: (m.value, m.delta) for m in at.metric}


# Each page's tables, told apart by a column only that table has (AppTest does not expose dataframe keys).
TABLE_COLUMNS = {"compare_table": "Component", "fits_table": "Verdict", "pins_table": "Stack · batch · device",
                 "efficiency_table": "Architecture", "real_run_false_fits": "Outcome",
                 "real_run_unmodelled": "Not modelled",
                 "size_table": "LoRA · rule (GB)", "min_gpus_table": "Memory (GB)", "published_runs": "measured_gb",
                 "optimizer_table": "Trainer optim", "stack_table": "Version read", "unsloth_published": "Current release",
                 "unsloth_terms": "Kept per token"}


def dataframe(at: AppTest, key: str):
    for df in at.dataframe:
        if TABLE_COLUMNS[key] in df.value.columns:
            return df.value
    raise KeyError(key)


# --------------------------------------------------------------------------------------------
# Compare methods
# --------------------------------------------------------------------------------------------

def test_compare_rule_mode_shows_the_calculators_rule_numbers():
    """One rule, one number per setup: Compare in rule mode shows the calculator's rule of thumb."""
    at = open_page("pages/compare.py", rule="true", model="llama-3.1-8b", device="h100-80gb")
    size_b = load_preset("llama-3.1-8b").params_total / 1e9
    assert metrics(at) == {"Full fine-tuning": (f"{12 * size_b + 4:,.1f} GB", "too big"),  # 100.4, not 128
                           "LoRA": (f"{2 * size_b + 3:,.1f} GB", "fits"),
                           "QLoRA": (f"{(2 * size_b + 3) / 3 + 3:,.1f} GB", "fits")}
    assert metrics(at)["Full fine-tuning"][0] == "100.4 GB"
    table = dataframe(at, "compare_table").set_index("Component")
    assert table.loc["Total", "QLoRA (GB)"] == pytest.approx((2 * size_b + 3) / 3 + 3)
    calc = AppTest.from_file(APP, default_timeout=30)
    for key, value in {"rule": "true", "method": "full", "device": "h100-80gb"}.items():
        calc.query_params[key] = value
    calc.run()
    assert calc.markdown[0].value.startswith(r"Expected peak 100\.4 GB")


def test_compare_detailed_shows_each_method_against_the_device():
    at = open_page("pages/compare.py", model="llama-3.1-8b", device="a100-80gb", batch="2", max_len="1024")
    spec, device = load_preset("llama-3.1-8b"), get_device("a100-80gb")
    shown = metrics(at)
    for label, method in (("Full fine-tuning", "full"), ("LoRA", "lora"), ("QLoRA", "qlora")):
        # Each bar is what TRL does for that method (its QLoRA adapters are bf16, its LoRA adapters fp32).
        est = estimate(spec, trl(method=method, batch=2, seq_len=1024))
        gb = est.total_bytes / GB
        value = f"{gb:,.1f} GB"  # the calculator's figure for the same setup
        assert shown[label] == (value, verdict(est.total_bytes, device, est.high_bytes, est.low_bytes).band)
    table = dataframe(at, "compare_table").set_index("Component")
    full = estimate(spec, trl(method="full", batch=2, seq_len=1024))
    qlora = estimate(spec, trl(method="qlora", batch=2, seq_len=1024))
    assert table.loc["Total", "QLoRA (GB)"] == pytest.approx(qlora.total_bytes / GB)
    assert table.loc["Total", "Full fine-tuning (GB)"] == pytest.approx(full.total_bytes / GB)
    assert table.loc["Optimizer state", "Full fine-tuning (GiB)"] == pytest.approx(
        full.components_bytes["optimizer"] / 2**30)
    chart = charts(at)["compare_chart"]
    assert chart["data"][0]["orientation"] == "v"
    assert bar_labels(chart) == ["Full fine-tuning", "LoRA", "QLoRA"]  # the seed figure's order
    usable_gb = 81_050 * 2**20 / GB  # the A100 80GB's 79.15 GiB as CUDA reports it = 85.0 GB (nvidia-smi: 85.9)
    assert any(s.get("name") == "usable" and s["y0"] == pytest.approx(usable_gb) for s in chart["layout"]["shapes"])


def test_compare_variants_and_method_subset():
    at = open_page("pages/compare.py", methods=["lora", "qlora"], variants=["adamw_8bit", "mixed"])
    table = dataframe(at, "compare_table")
    labels = [c[:-5] for c in table.columns if c.endswith("(GB)")]
    assert labels == ["LoRA", "LoRA · adamw_8bit", "LoRA · mixed", "QLoRA", "QLoRA · adamw_8bit", "QLoRA · mixed"]
    spec = load_preset("llama-3.1-8b")
    est = estimate(spec, trl(method="qlora", optimizer="adamw_8bit"))
    assert table.set_index("Component").loc["Total", "QLoRA · adamw_8bit (GB)"] == pytest.approx(est.total_bytes / GB)
    # Six bars: still vertical, one per setup.
    assert bar_labels(charts(at)["compare_chart"]) == labels


def test_compare_presentation_hides_gib_columns_and_tucks_options_away():
    at = open_page("pages/compare.py", present="true")
    (table,) = at.table  # a static table in presentation mode: the presentation fonts reach it
    assert "Component" in table.value.columns and not [c for c in table.value.columns if c.endswith("(GiB)")]
    assert at.expander[-1].label == "Options" or any(e.label == "Options" for e in at.expander)
    assert charts(at)["compare_chart"]["layout"]["font"]["size"] == 18


# --------------------------------------------------------------------------------------------
# Compare: setups side by side (pins)
# --------------------------------------------------------------------------------------------

PINS = {  # each pin with the calculator link that shows the same setup
    "model.llama-3.1-8b~device.rtx-4090~stack.trl~method.qlora~batch.1~max_len.2048":
        {"model": "llama-3.1-8b", "device": "rtx-4090", "method": "qlora", "stack": "trl"},
    "model.llama-3.1-8b~device.a100-80gb~stack.trl~method.lora~batch.4~max_len.2048~ckpt.false":
        {"model": "llama-3.1-8b", "device": "a100-80gb", "method": "lora", "batch": "4", "ckpt": "false"},
    "model.qwen2.5-7b~device.mac-32gb~stack.mlx~method.lora~batch.4~max_len.2048":
        {"model": "qwen2.5-7b", "device": "mac-32gb", "method": "lora", "stack": "mlx"},
}


def calculator_total_gb(link: dict[str, str]) -> float:
    calc = AppTest.from_file(APP, default_timeout=30)
    for key, value in link.items():
        calc.query_params[key] = value
    calc.run()
    assert not calc.exception
    return sum(t["x"][0] for t in charts(calc)["memory_bar"]["data"] if t["type"] == "bar")


def test_compare_pins_show_the_calculators_numbers_with_time_and_cost():
    """One link, three pinned setups (two GPUs and a Mac, two stacks): each column is the calculator's estimate for
    the same setup, against its own device; tokens per second from the time model; the run's cost at the price."""
    from estimator.speed import time_of

    at = open_page("pages/compare.py", pins=list(PINS), tokens="200000000", price="2.5")
    chart = charts(at)["pins_chart"]
    memory = [t for t in chart["data"] if t["type"] == "bar" and t.get("yaxis", "y") == "y"]
    totals = [sum(t["y"][i] for t in memory) for i in range(3)]
    assert totals == pytest.approx([calculator_total_gb(link) for link in PINS.values()], rel=1e-9)
    usable = [sh["y0"] for sh in chart["layout"]["shapes"] if sh["name"] == "usable"]
    assert usable == pytest.approx([get_device(d).usable_bytes / GB for d in ("rtx-4090", "a100-80gb", "mac-32gb")])
    speed = next(t for t in chart["data"] if t.get("yaxis") == "y2")
    tps = time_of(load_preset("llama-3.1-8b"), trl(method="qlora"), get_device("rtx-4090")).tokens_per_second
    assert speed["y"][0] == pytest.approx(tps)
    cost = next(t for t in chart["data"] if t.get("yaxis") == "y3")
    assert cost["y"][0] == pytest.approx(200_000_000 / tps / 3600 * 2.5)
    table = dataframe(at, "pins_table")
    # the A100 80GB pin's upper end (85.9 GB's nvidia-smi figure held it) is above the 85.0 GB CUDA gives: close call
    assert list(table["Pin"]) == ["1", "2", "3"] and list(table["Verdict"])[:2] == ["fits", "close call"]
    assert list(table["Stack · batch · device"]) == ["TRL · batch 1 × 2,048 · RTX 4090",
                                                     "TRL · batch 4 × 2,048 · A100 80GB",
                                                     "MLX-LM · batch 4 × 2,048 · Mac 32 GB"]
    link = next(c.value for c in at.code if c.value.count("pins=") == 3 and "present" not in c.value)
    assert link.endswith("&tokens=200000000&price=2.5") and "~ckpt.false" in link
    assert not at.warning


def test_compare_a_bad_pin_is_left_out_with_a_note_and_the_rest_show():
    good = list(PINS)[0]
    at = open_page("pages/compare.py", pins=[good, "zzz", good + "~colour.red", good.replace("batch.1", "batch.0")])
    notes = [w.value.replace("\\", "") for w in at.warning]
    assert notes == ["Pinned setup 2 of the link could not be read ('zzz' is not a key.value pair); it is left out.",
                     "Pinned setup 3 of the link could not be read ('colour' is not a setting a pin holds); it is "
                     "left out.",
                     "Pinned setup 4 of the link could not be read ('0' is not a valid value for 'batch'); it is left "
                     "out."]
    assert len(dataframe(at, "pins_table")) == 1


def pins_in(at: AppTest) -> list[str]:
    value = at.query_params.get("pins") or []
    return [value] if isinstance(value, str) else list(value)


def test_compare_pin_button_adds_the_sidebars_setup_and_unpin_removes_it():
    at = open_page("pages/compare.py", method="qlora", device="a100-80gb", ckpt="false")
    assert not [d for d in at.dataframe if "Stack · batch · device" in d.value.columns]  # nothing pinned yet
    at.button(key="pin_add").click().run()
    text = "model.llama-3.1-8b~device.a100-80gb~stack.trl~method.qlora~batch.1~max_len.2048~ckpt.false"
    assert pins_in(at) == [text]
    assert at.button(key="pin_add").disabled  # this setup is pinned already
    table = dataframe(at, "pins_table")
    est = estimate(load_preset("llama-3.1-8b"), trl(method="qlora", grad_ckpt=False))
    assert table["Memory (GB)"][0] == (f"{est.total_bytes / GB:,.1f} (likely {est.low_bytes / GB:,.1f}–"
                                       f"{est.high_bytes / GB:,.1f})")
    at.switch_page("pages/calculator.py").run()
    at.switch_page("pages/compare.py").run()
    assert pins_in(at) == [text]  # a page switch keeps the pins
    at.button(key="pin_remove_1").click().run()
    assert pins_in(at) == []


# --------------------------------------------------------------------------------------------
# What fits my device
# --------------------------------------------------------------------------------------------

SEED_VERDICTS = {("1.5B", "LoRA"): (6.0, "fits"), ("7B", "LoRA"): (17.0, "fits"), ("14B", "LoRA"): (31.0, "too big"),
                 ("1.5B", "full"): (22.0, "fits"), ("3B", "full"): (40.0, "too big")}


def test_fits_rule_mode_on_the_36gb_laptop_gives_the_seeds_six_verdicts():
    at = open_page("pages/fits.py", rule="true", device="laptop-36gb")
    table = dataframe(at, "fits_table").set_index(["Model", "Method"])
    for key, (gb, word) in SEED_VERDICTS.items():
        assert table.loc[key, "Estimate (GB)"] == pytest.approx(gb)
        assert table.loc[key, "Verdict"] == word
    assert 22 <= table.loc[("32B", "QLoRA"), "Estimate (GB)"] <= 26
    assert table.loc[("32B", "QLoRA"), "Verdict"] == "fits"
    lines = [m.value.replace("\\", "") for m in at.markdown]
    # Break-evens at the laptop's 27 GiB (29.0 GB) usable: (29 − 3) / 2, (29 − 4) / 12, (3 × (29 − 3) − 3) / 2.
    assert "- **LoRA: up to about 13B (7B fits, 14B is too big).**" in lines
    assert "- **Full fine-tuning: up to about 2.1B (1.5B fits, 3B is too big).**" in lines
    assert "- **QLoRA: up to about 37B (32B fits, 70B is too big).**" in lines
    annotations = [a["text"] for a in charts(at)["fits_chart"]["layout"]["annotations"] if a.get("name") == "verdict"]
    assert "<b>17.0 GB · fits</b>" in annotations and "<b>31.0 GB · too big</b>" in annotations


def test_fits_writes_sizes_and_usable_memory_as_the_calculator_does():
    """Spanish: '6,5B', not '6.5B' (sizes in the page's language, 1,5B among the bars too); the usable memory with the
    calculator's one decimal (25.2 GB usable of 25.8 GB on an RTX 4090: CUDA's total of nvidia-smi's, not 25 GB)."""
    import re

    at = open_page("pages/fits.py", lang="es", device="laptop-36gb", models=["1.5B", "7B"])
    lines = [m.value.replace("\\", "") for m in at.markdown if "hasta unos" in m.value]
    # (mlx-lm's own batch of 4 on the Mac: LoRA up to about 0,38B)
    assert any(re.search(r"LoRA: hasta unos \d+,\d+B", line) for line in lines), lines
    assert not [line for line in lines if re.search(r"\d\.\d+B", line)], lines
    assert "1,5B" in list(dataframe(at, "fits_table").iloc[:, 0])  # the Model column, named in Spanish
    en = open_page("pages/fits.py", device="rtx-4090")
    rtx = get_device("rtx-4090")
    caption = next(c.value.replace("\\", "") for c in en.caption if "GB usable of" in c.value)
    assert f"{rtx.usable_bytes / GB:.1f} GB usable of {rtx.capacity_bytes / GB:.1f} GB" == "25.2 GB usable of 25.8 GB"
    assert "25.2 GB usable of 25.8 GB" in caption, caption
    calc = open_page("pages/calculator.py", device="rtx-4090")
    assert any("25.2 GB usable" in str(h.value) for h in calc.header)  # the calculator's verdict, same figure


def test_fits_detailed_with_presets_agrees_with_the_estimator():
    at = open_page("pages/fits.py", device="rtx-4090", models=["7B", "qwen2.5-7b"], methods=["qlora"],
                   ckpt="true")
    table = dataframe(at, "fits_table")
    assert list(table["Model"]) == ["Qwen2.5-7B", "7B"] or list(table["Model"]) == ["7B", "Qwen2.5-7B"]
    setup = trl(method="qlora", grad_ckpt=True, offload_activations=False)  # what ckpt=true sets
    usable = get_device("rtx-4090").usable_bytes
    for _, row in table.iterrows():
        spec = load_preset("qwen2.5-7b") if row["Model"] == "Qwen2.5-7B" else generic_spec(7)
        est = estimate(spec, setup)
        assert row["Estimate (GB)"] == pytest.approx(est.total_bytes / GB)
        assert row["Verdict"] == verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes, est.low_bytes).band
        assert row["Verdict"] in (("fits", "close call") if est.total_bytes <= usable else ("borderline", "too big"))
    assert sum(1 for m in at.markdown if "QLoRA" in m.value) == 1  # one conclusion, for the chosen method


# --------------------------------------------------------------------------------------------
# Size table
# --------------------------------------------------------------------------------------------

SEED_TABLE = {"0.5B": (4, 10), "1.5B": (6, 22), "3B": (9, 40), "7B": (17, 88), "14B": (31, 172)}


def test_size_table_rule_columns_equal_the_seeds_table():
    at = open_page("pages/sizes.py", model="by-size")
    table = dataframe(at, "size_table").set_index("Model")
    for size, (lora, full) in SEED_TABLE.items():
        assert (table.loc[size, "LoRA · rule (GB)"], table.loc[size, "full · rule (GB)"]) == (lora, full)
    assert list(table.index)[-3:] == ["100B", "200B", "405B"]  # extended to larger sizes
    assert "QLoRA · rule (GB)" in table.columns
    assert at.download_button[0].proto.url.endswith(".csv")


def test_size_table_detailed_columns_follow_the_sidebar_setup_and_add_your_model():
    at = open_page("pages/sizes.py", batch="4", max_len="1024", ckpt="true", precision="mixed")
    table = dataframe(at, "size_table").set_index("Model")
    setup = trl(batch=4, seq_len=1024, grad_ckpt=True, offload_activations=False, precision="mixed")
    est = estimate(generic_spec(14), trl(method="full", batch=4, seq_len=1024, grad_ckpt=True, precision="mixed"))
    assert table.loc["14B", "full · detailed (GB)"] == pytest.approx(est.total_bytes / GB)
    assert table.loc["14B", "full · rule (GB)"] == pytest.approx(16 * 14 + 4)  # mixed: the fp32 master copy
    mine = load_preset("llama-3.1-8b")
    assert table.loc["Llama-3.1-8B (yours)", "LoRA · detailed (GiB)"] == pytest.approx(
        estimate(mine, setup).total_bytes / 2**30)


# --------------------------------------------------------------------------------------------
# Scale out
# --------------------------------------------------------------------------------------------

H100 = "NVIDIA H100 80GB HBM3 (81,559 MiB)"  # the device's name: nvidia-smi's product name and total


def smallest_gpu_count(setup: TrainingSetup, device_id: str, limit: int = 64) -> int | None:
    """Computed here, independently of the page: walk the GPU counts until the per-GPU estimate fits."""
    spec, usable = load_preset("llama-3.1-70b"), get_device(device_id).usable_bytes
    return next((n for n in range(1, limit + 1)
                 if estimate(spec, replace(setup, gpus=n)).total_bytes <= usable), None)


def test_scale_out_llama70b_full_on_h100_under_zero3():
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true")
    expected = smallest_gpu_count(trl(method="full", grad_ckpt=True, sharding="zero3"), "h100-80gb")
    assert expected == 8
    table = dataframe(at, "min_gpus_table").set_index("Device")
    assert table.loc[H100, "ZeRO-3 / FSDP"] == f"{expected} (close call)"  # the same band as the line below
    assert table.loc["NVIDIA H200 (143,771 MiB)", "ZeRO-3 / FSDP"] == "5"  # fits with its whole likely range
    assert (table["DDP"] == "> 64").all()  # 70B full never fits one GPU's whole copy
    # The expected peak fits on 8 but the likely high does not: the calculator's close call, not a green "fits".
    est = estimate(load_preset("llama-3.1-70b"), trl(method="full", grad_ckpt=True, sharding="zero3", gpus=8))
    assert est.total_bytes <= get_device("h100-80gb").usable_bytes < est.high_bytes
    assert not at.success
    warning = at.warning[0].value.replace("\\", "")
    assert warning.startswith(f"Close call: fits on {expected} × {H100} with ZeRO-3")
    assert "the upper end of the likely range" in warning and "With 9 × " in warning
    chart = charts(at)["scale_chart"]
    assert chart["layout"]["xaxis"]["type"] == "log"
    zero3 = next(t for t in chart["data"] if t["name"] == SHARDING_LABELS["zero3"])
    assert zero3["x"] == [1, 2, 4, 8, 16, 32, 64]


def test_scale_out_headline_names_a_layout_that_fits_on_the_fewest_gpus_before_asking_for_more():
    """Qwen2.5-7B full fine-tuning on A100 40 GB: on two GPUs ZeRO-2 is a close call but ZeRO-3 fits with its whole
    likely range, so the headline is ZeRO-3 on two, not 'close call with ZeRO-2 … with 3 × A100 the upper end fits'."""
    a100, spec = get_device("a100-40gb"), load_preset("qwen2.5-7b")
    zero2 = estimate(spec, trl(method="full", sharding="zero2", gpus=2))
    zero3 = estimate(spec, trl(method="full", sharding="zero3", gpus=2))
    assert verdict(zero2.total_bytes, a100, zero2.high_bytes).band == "close call"
    assert verdict(zero3.total_bytes, a100, zero3.high_bytes).band == "fits"
    at = open_page("pages/scale.py", model="qwen2.5-7b", method="full", device="a100-40gb")
    assert not at.warning
    headline = at.success[0].value.replace("\\", "")
    assert headline.startswith(f"Fits on 2 × {a100.name} with {SHARDING_LABELS['zero3']}: "
                               f"{fmt_both(zero3.total_bytes)} per GPU"), headline
    assert "3 ×" not in headline


def test_scale_out_offload_and_gpu_limit():
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true",
                   offload="true", maxgpus="16")
    setup = trl(method="full", grad_ckpt=True, sharding="zero2", offload_optimizer=True)
    table = dataframe(at, "min_gpus_table").set_index("Device")
    expected = smallest_gpu_count(setup, "h100-80gb", 16)
    close = expected and estimate(load_preset("llama-3.1-70b"), replace(setup, gpus=expected)).high_bytes > get_device(
        "h100-80gb").usable_bytes
    assert table.loc[H100, "ZeRO-2"] == (f"{expected}" + (" (close call)" if close else "") if expected else "> 16")
    zero3 = next(t for t in charts(at)["scale_chart"]["data"] if t["name"] == SHARDING_LABELS["zero3"])
    assert zero3["x"] == [1, 2, 4, 8, 16]


def test_scale_out_follows_the_sidebars_optimizer_offload():
    """One setting, one switch: the sidebar's "Optimizer state in CPU RAM" (opt_offload) prices the page's ZeRO/FSDP
    lines and headline; the page has no switch of its own to override it."""
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true",
                   opt_offload="true")
    assert "offload" not in [t.key for t in at.main.toggle]
    spec, setup = load_preset("llama-3.1-70b"), trl(method="full", grad_ckpt=True, offload_optimizer=True)
    expected = estimate(spec, replace(setup, sharding="zero3", gpus=8))
    assert expected.components_bytes["optimizer"] == 0 and expected.cpu_offload_bytes > 0
    zero3 = next(t for t in charts(at)["scale_chart"]["data"] if t["name"] == SHARDING_LABELS["zero3"])
    assert zero3["y"][zero3["x"].index(8)] == pytest.approx(expected.total_bytes / GB)
    assert any("Optimizer state in CPU RAM: on" in c.value for c in at.caption)
    off = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true")
    assert any("Optimizer state in CPU RAM: off" in c.value for c in off.caption)


def test_an_old_scale_link_with_offload_sets_the_sidebars_switch():
    """Links from before carry the page's own offload=true: it becomes the sidebar's opt_offload, unnoted (the
    same meaning); when the link gives both and they disagree, the sidebar's is used and a note says so."""
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true",
                   offload="true")
    assert at.sidebar.toggle(key="opt_offload").value is True
    assert "offload" not in at.query_params and at.query_params["opt_offload"] == "true"
    assert not [w.value for w in at.warning if "link" in w.value]
    assert any("Optimizer state in CPU RAM: on" in c.value for c in at.caption)
    both = AppTest.from_file(APP, default_timeout=30)
    both.query_params["offload"], both.query_params["opt_offload"] = "true", "false"
    both.run()
    assert both.sidebar.toggle(key="opt_offload").value is False
    notes = [w.value.replace("\\", "") for w in both.warning]
    assert any("The link's 'offload=true' (Scale out's old switch) is the sidebar's 'opt_offload' now; the link "
               "also gives 'opt_offload=false', which is used." in n for n in notes), notes


def test_scale_out_what_would_fit_lines_flag_close_calls():
    """Nothing fits 8 × H100 without checkpointing; each way out is priced, and one that fits only as a close call
    (the expected peak fits, the upper end of the likely range does not) says so, as the calculator would."""
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="false",
                   maxgpus="8")
    assert at.error and "No layout up to 8 × " in at.error[0].value.replace("\\", "")
    lines = next(m.value for m in at.markdown if "What would make it fit" in m.value).replace("\\", "").split("\n")
    ckpt_line = next(line for line in lines if line.startswith("- gradient checkpointing on: "))
    h100 = get_device("h100-80gb")
    n = int(ckpt_line.split(": ")[1].split(" × ")[0])
    est = estimate(load_preset("llama-3.1-70b"), trl(method="full", grad_ckpt=True, sharding="zero3", gpus=n))
    band = verdict(est.total_bytes, h100, est.high_bytes, est.low_bytes).band
    assert band == "close call"
    assert ckpt_line.endswith(f"per GPU (close call: the upper end of the likely range, {fmt_both(est.high_bytes)}, "
                              "is above the usable memory)")


def test_compare_says_close_call_where_the_calculator_does():
    """A custom device between LoRA's expected peak and the upper end of its likely range: the calculator's close
    call, so Compare's LoRA card says 'close call', not 'fits'."""
    spec = load_preset("llama-3.1-8b")
    est = estimate(spec, trl(method="lora"))
    per_gb = custom_device(100.0).usable_bytes / 100.0  # usable bytes per GB typed
    capacity = round((est.total_bytes + est.high_bytes) / 2 / per_gb, 1)
    device = custom_device(capacity)
    assert est.total_bytes <= device.usable_bytes < est.high_bytes
    at = open_page("pages/compare.py", device="custom", capacity=f"{capacity:g}")
    shown = metrics(at)
    assert shown["LoRA"] == (f"{est.total_bytes / GB:,.1f} GB", "close call")
    assert shown["QLoRA"][1] == "fits" and shown["Full fine-tuning"][1] == "too big"


def test_scale_out_in_rule_mode_says_it_uses_the_detailed_estimate():
    at = open_page("pages/scale.py", rule="true")
    assert any("rule of thumb has no notion of GPUs" in i.value for i in at.info)


# --------------------------------------------------------------------------------------------
# How it works
# --------------------------------------------------------------------------------------------

def test_how_it_works_shows_the_accuracy_report_and_the_snippet():
    at = open_page("pages/how.py", batch="4", max_len="4096", method="qlora", ckpt="true")
    report = accuracy_report()
    published = report["published"]
    assert metrics(at)["Published runs: median error"][0] == f"{published['median_abs_pct']:.1f} %"
    runs = dataframe(at, "published_runs")
    assert len(runs) == published["n"]
    assert list(runs["error_pct"]) == pytest.approx([r["error_pct"] for r in published["rows"]])
    tracer_metric = metrics(at)["Tracer runs: median error"][0]
    tracer = report["tracer"]
    assert tracer_metric == (f"{tracer['median_abs_pct']:.1f} %" if tracer["n"] else "–")
    code = at.code[0]  # then the share box
    expected = training_snippet(load_preset("llama-3.1-8b"),
                                trl(method="qlora", batch=4, seq_len=4096, grad_ckpt=True, offload_activations=False))
    assert code.value.splitlines()[1].startswith("# Stack: TRL, TRL 1.16.0")
    assert code.value == expected.rstrip("\n")
    assert "per_device_train_batch_size=4" in code.value and "max_length=4096" in code.value
    from estimator.options.optimizers import OPTIMIZERS

    assert len(dataframe(at, "optimizer_table")) == len(OPTIMIZERS) == 10  # adamw_foreach, then mlx-lm's adam, muon
    from estimator.options.stacks import STACKS

    stacks = dataframe(at, "stack_table")
    assert list(stacks["Stack"]) == [s.label for s in STACKS.values()]  # every stack, MLX-LM last
    assert len(at.get("latex")) >= 8  # the formulas
    headers = [h.value for h in at.main.header]
    assert headers == ["What goes into the peak", "The formulas", "Training stacks", "Unsloth, as Unsloth runs",
                       "MLX-LM on a Mac", "Preference & RL", "Assumptions", "Units", "How long it takes",
                       "How accurate is it?", "Real runs: is the verdict right?", "Versions modelled",
                       "The exact trace", "Known limits", "A training script for this setup"]
    # Unsloth's section: its per-token terms (summing to the layer's saved bytes) and every published point
    from validation.unsloth import context_rows

    published = dataframe(at, "unsloth_published")
    assert len(published) == len(context_rows())
    rows = {r["Point"]: r for r in published.to_dict("records")}
    assert (rows["uns-8b-12"]["Modelled"], rows["uns-8b-12"]["Error %"]) == ("23,464", "+7.4")
    assert (rows["uns-8b-08"]["Modelled"], rows["uns-8b-08"]["Error %"]) == ("—", "—")  # fits no length: a dash
    assert (rows["hf-8b-12"]["Current release"], rows["mis-7b-08"]["Modelled"], rows["mis-7b-08"]["Error %"]) == (
        "—", "—", "—")  # no answer there: a dash, never "None"
    lines = [m.value for m in at.markdown if "The published columns are straight lines" in m.value]
    assert len(lines) == 1 and "4,719 for Unsloth from 8 to 80 GB, 405 for transformers" in lines[0]
    assert "RTX 4060 has 8,188 MiB, an 80 GB H100 81,559 MiB" in lines[0]  # the catalog's capacities
    assert len(dataframe(at, "unsloth_terms")) >= 10


def test_how_it_works_explains_the_time_model_and_the_real_run_check():
    """The time model's section times the sidebar's setup (the time model's own numbers) and shows its held-out
    accuracy; the real-run check counts false fits first; every version fork is listed (issues 28 and 30)."""
    from estimator.options.versions import FORKS
    from estimator.speed import time_of
    from validation.real_runs import real_runs_report

    at = open_page("pages/how.py", method="full", device="a100-80gb", batch="2")
    step = time_of(load_preset("llama-3.1-8b"), trl(method="full", batch=2), get_device("a100-80gb"))
    line = next(m.value for m in at.markdown if "For the sidebar" in m.value).replace("\\", "")
    assert f"{step.tokens_per_second:,.0f} tokens per second" in line
    assert f"{step.flops_per_step / step.tokens_per_step / 1e9:,.1f} GFLOP per trained token" in line
    speed = accuracy_report()["speed"]
    shown = metrics(at)
    assert shown["Held-out runs: median error"][0] == f"{speed['held_out']['median_abs_pct']:.1f} %"
    assert shown["Fit runs: median error"][0] == f"{speed['fit']['median_abs_pct']:.1f} %"
    efficiency = dataframe(at, "efficiency_table").set_index("GPU")
    assert efficiency.loc["NVIDIA A100 80GB", "TRL, Trainer, Axolotl, plain"] == "57 %"  # CALIBRATION.pytorch
    assert efficiency.loc["NVIDIA H100 80GB HBM3", "TRL, Trainer, Axolotl, plain"] == "32 %"  # × the Hopper factor
    assert efficiency.loc["Apple silicon 64 GB unified", "Unsloth"] == "—"
    real = real_runs_report()
    verdicts = real["modelled"]["verdicts"]
    assert shown["False fits"][0] == str(verdicts["false fit"])
    assert shown["False alarms"][0] == str(verdicts["false alarm"])
    assert shown["Verdicts right"][0] == f"{verdicts['right']} of {verdicts['judged']}"
    # no false fit at a modelled release since usable memory is CUDA's total (TRL 0.16's DPO on an A100 80GB was one)
    assert [r["id"] for r in real["rows"] if r["verdict"] == "false fit" and not r["unmodelled"]] == []
    assert "None at the releases the estimate models." in [c.value for c in at.caption]
    assert len(dataframe(at, "real_run_unmodelled")) == real["not_modelled"]["n"]
    forks = next(m.value for m in at.markdown if "transformers 5\\.0\\.0" in m.value or "transformers 5.0.0" in m.value)
    assert forks.count("\n- ") + 1 == len(FORKS)


@pytest.mark.parametrize("page", ["pages/compare.py", "pages/fits.py", "pages/sizes.py", "pages/scale.py",
                                  "pages/how.py"])
def test_every_page_renders_in_presentation_mode_without_warnings(page):
    at = open_page(page, present="true", device="laptop-36gb")
    assert not at.warning and not at.error
    assert at.title[0].value


# --------------------------------------------------------------------------------------------
# Page-specific URL parameters
# --------------------------------------------------------------------------------------------

PAGE_LINKS = {"pages/compare.py": {"methods": ["lora", "qlora"], "variants": "mixed", "tokens": "200000000",
                                   "epochs": "2.0", "price": "2.5"},
              "pages/fits.py": {"models": ["7B", "14B"], "methods": "lora"},
              "pages/scale.py": {"maxgpus": "16", "pernode": "8"}}


def test_page_params_are_the_ones_the_pages_bind():
    from ui.inputs import PAGE_PARAMS, PARAMS

    bound = set()
    for page in PAGE_LINKS:
        at = open_page(page)
        keys = {w.key for kind in ("multiselect", "toggle", "select_slider", "button_group", "number_input")
                for w in getattr(at.main, kind)}
        assert keys == set(PAGE_LINKS[page]), page
        bound |= keys
    bound.add("pins")  # Compare's pinned setups: a list the page keeps in the address itself (no widget)
    # The calculator's trainer box binds its own parameters in the sidebar (ui/trainer_inputs.py).
    from ui.trainer_inputs import TRAINER_PARAMS

    calc = open_page("pages/calculator.py")
    sidebar = {w.key for kind in ("selectbox", "text_input", "toggle", "slider", "select_slider", "button_group")
               for w in getattr(calc.sidebar, kind)}
    assert set(TRAINER_PARAMS) <= sidebar
    bound |= set(TRAINER_PARAMS)
    # and its run time and cost box, at the sidebar's end (ui/time_view.py)
    from ui.time_view import FIGURE_KEYS, RUN_KEYS

    numbers = {w.key for w in open_page("pages/calculator.py", device="custom").sidebar.number_input}  # figures: custom
    assert set(RUN_KEYS + FIGURE_KEYS) <= numbers
    bound |= set(RUN_KEYS + FIGURE_KEYS)
    assert bound == set(PAGE_PARAMS)  # ui.inputs knows every page parameter, so none is reported unknown
    assert not bound & set(PARAMS)  # and none shadows a shared sidebar parameter


@pytest.mark.parametrize("page", list(PAGE_LINKS))
def test_page_params_set_their_widgets(page):
    at = open_page(page, **PAGE_LINKS[page])
    for key, value in PAGE_LINKS[page].items():
        got = at.get_by_key(key).value
        if key in ("methods", "variants", "models"):  # multiselects
            assert list(got) == (value if isinstance(value, list) else [value])
        else:
            assert str(got).lower() == value


@pytest.mark.parametrize("page", list(PAGE_LINKS))
def test_page_params_are_not_reported_as_unknown(page):
    at = open_page(page, **PAGE_LINKS[page])
    assert not [w.value for w in at.warning if "unknown" in w.value]


def test_scale_out_whole_nodes_and_what_would_make_it_fit():
    """GPUs 8 to a node: counts are whole nodes; when nothing up to 64 fits, the page says what would."""
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="true",
                   pernode="8")
    table = dataframe(at, "min_gpus_table").set_index("Device")
    counts = [int(n.split()[0]) for n in table["ZeRO-3 / FSDP"] if not n.startswith(">")]
    assert counts and all(n % 8 == 0 for n in counts)
    warning = at.warning[0].value.replace("\\", "")
    assert f"fits on 8 × {H100}, 1 node of 8, with ZeRO-3" in warning and f"With 16 × {H100}, 2 nodes of 8," in warning
    at = open_page("pages/scale.py", model="llama-3.1-70b", method="full", device="h100-80gb", ckpt="false")
    assert at.error[0].value.replace("\\", "").startswith("No layout up to 64 × ")
    advice = next(m.value for m in at.markdown if m.value.startswith("**What would make it fit:**"))
    assert "gradient checkpointing on: 8 × " in advice.replace("\\", "")
