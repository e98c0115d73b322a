"""The Import a training config box in a real browser: an uploaded torchtune recipe and a pasted Axolotl config
fill the sidebar (widget values and the address), the three lists show, the verdict is the estimator's for the
imported setup, a bad file shows its message and the page keeps working, and the exported file downloads.
Set SCREENSHOT_DIR to keep screenshots of the box."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from estimator import estimate, get_device, load_preset, to_gb, verdict
from estimator.job.configs import import_config
from tests.e2e.helpers import chart_total_gb, fill_text_area, open_app, verdict_text, wait_for_app_run
from tests.e2e.helpers import open_box as open_calculator_box

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "data" / "configs"
TORCHTUNE = DATA / "torchtune" / "llama3_2" / "1B_lora_single_device.yaml"
AXOLOTL = DATA / "axolotl" / "llama-3" / "qlora-1b-kto.yaml"  # meta-llama/Llama-3.2-1B: a preset, no Hub read


def query(page: Page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def shot(page: Page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


def expected_headline(text: str, name: str, max_len: int | None = None) -> str:
    imp = import_config(text, name=name)
    setup = imp.setup() if max_len is None else imp.setup(seq_len=max_len)
    est = estimate(load_preset(imp.model.preset), setup, trainer=imp.trainer_setup(),
                   device_capacity=get_device("rtx-4090").runtime_total_bytes)
    return verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline


def open_box(page: Page) -> None:
    box = page.locator("[data-testid='stSidebar'] [data-testid='stExpander']").filter(
        has_text="Import a training config").first
    if not box.locator(".st-key-config_read").is_visible():
        box.locator("summary").click()
    expect(box.locator(".st-key-config_read")).to_be_visible()


def paste(page: Page, text: str) -> None:
    """Paste a config's text into the box and read it."""
    fill_text_area(page, "config_text", text, then="config_read")


def test_upload_a_config_fills_the_sidebar_and_lists_what_was_read(page: Page, app_url: str):
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_app(page, app_url)
    open_box(page)
    page.locator(".st-key-config_files input[type=file]").set_input_files(str(TORCHTUNE))
    wait_for_app_run(page)
    page.wait_for_function("() => location.search.includes('stack=torchtune')", timeout=30_000)
    q = query(page)
    assert {"model": "llama-3.2-1b", "stack": "torchtune", "batch": "4", "rank": "64", "accum": "8"}.items() <= q.items()
    assert q["targets"] == "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    expect(page.locator(".st-key-batch input[type=range]")).to_have_value("4")
    expect(page.locator(".st-key-targets input")).to_have_value("q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    expect(page.locator(".st-key-accum input")).to_have_value("8")
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar.get_by_text("1B_lora_single_device.yaml: torchtune 0.6.1 recipe YAML → stack torchtune")).to_be_visible()
    for title in ("Read (", "Ignored (", "Not honoured (1)"):
        expect(sidebar.locator(".st-key-config_list").get_by_role("radio").filter(has_text=title)).to_be_visible()
    expect(sidebar.get_by_text("batch_size: 4 → batch per GPU = 4", exact=False).first).to_be_attached()
    sidebar.locator(".st-key-config_list").get_by_role("radio").filter(has_text="Not honoured (1)").click()
    wait_for_app_run(page)  # one list at a time: the one that says what was not applied
    expect(sidebar.get_by_text("tokenizer.max_seq_len: null → null: no truncation", exact=False).first).to_be_attached()
    assert verdict_text(page) == expected_headline(TORCHTUNE.read_text(), TORCHTUNE.name, max_len=2048)
    shot(page, "config-import-upload")


def test_paste_a_config_then_a_bad_one_keeps_the_page(page: Page, app_url: str):
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_app(page, app_url)
    open_box(page)
    paste(page, AXOLOTL.read_text())
    page.wait_for_function("() => location.search.includes('stack=axolotl')", timeout=30_000)
    q = query(page)
    # batch 2 is KTO's own default (job.stack.default_settings): a default stays out of the link, the slider shows it
    assert {"stack": "axolotl", "method": "qlora", "trainer": "kto", "beta": "0.5", "rank": "32",
            "optimizer": "adamw_8bit", "ckpt": "true"}.items() <= q.items() and "batch" not in q
    expect(page.locator(".st-key-trainer input")).to_have_value("kto")
    headline = verdict_text(page)
    assert headline == expected_headline(AXOLOTL.read_text(), AXOLOTL.name)
    shot(page, "config-import-paste")

    paste(page, "base_model: x\nlora_target_modules: [q_proj\n<script>alert(1)</script>")
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar.get_by_text("could not be read: not valid YAML", exact=False)).to_be_visible()
    assert page.evaluate("() => document.querySelectorAll('script').length") == page.evaluate(
        "() => [...document.querySelectorAll('script')].filter(s => !s.textContent.includes('alert(1)')).length")
    assert verdict_text(page) == headline  # the settings are unchanged
    assert query(page)["stack"] == "axolotl"
    shot(page, "config-import-bad")

    page.get_by_text("Config file for this estimate (axolotl_config.yml)").click()
    with page.expect_download() as info:
        page.locator(".st-key-download_config button").click()
    text = Path(info.value.path()).read_text()
    assert text.startswith("# will-it-fit: stack=axolotl trainer=kto gpus=1")
    assert import_config(text).trainer_kwargs["trainer"] == "kto"


MLX_LM = DATA / "mlx_lm" / "lora_config.yaml"  # mlx-community/Llama-3.2-1B-Instruct-bf16: the preset llama-3.2-1b


def test_paste_an_mlx_lm_config_on_the_laptop_prices_it_on_metal(page: Page, app_url: str):
    """mlx-lm's shipped lora_config.yaml pasted on the 36 GB laptop: the stack, batch, rank, trained blocks and
    length are mlx-lm's file's, and the verdict is the estimator's for MLX-LM on Metal."""
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_app(page, app_url + "/?device=laptop-36gb")
    open_box(page)
    paste(page, MLX_LM.read_text())
    page.wait_for_function("() => location.search.includes('stack=mlx')", timeout=30_000)
    q = query(page)
    # batch 4 and rank 8 are mlx-lm's own defaults (job.stack.default_settings): they stay out of the link
    assert {"stack": "mlx", "model": "llama-3.2-1b", "device": "laptop-36gb", "lora_layers": "16",
            "optimizer": "adamw"}.items() <= q.items() and "batch" not in q and "rank" not in q
    expect(page.locator(".st-key-lora_layers input")).to_have_value("16")
    imp = import_config(MLX_LM.read_text(), name=MLX_LM.name)
    est = estimate(load_preset(imp.model.preset), imp.setup(), device_capacity=get_device("laptop-36gb").runtime_total_bytes)
    assert verdict_text(page) == verdict(est.total_bytes, get_device("laptop-36gb"), est.high_bytes,
                                          est.low_bytes).headline
    assert chart_total_gb(page) == pytest.approx(to_gb(est.total_bytes), abs=1e-6)
    open_calculator_box(page, "calc_details")  # the estimate's notes: in the details, one click away
    expect(page.get_by_text("MLX trains attention unfused", exact=False).first).to_be_visible()
    page.wait_for_timeout(1_000)  # the bars glide to their new lengths
    shot(page, "config-import-mlx")
