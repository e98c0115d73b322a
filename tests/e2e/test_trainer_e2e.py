"""The trainer controls in a real browser: a GRPO link sets the numbers and draws the generation segment in its
own colour; choosing vLLM server mode in the sidebar moves the verdict, the bar and the URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from estimator import TrainerSetup, estimate, get_device, load_preset, to_gb, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import chart_bars, chart_total_gb, open_app, verdict_text, wait_for_app_run
from ui.charts import COMPONENT_COLORS

pytestmark = pytest.mark.e2e

QWEN = load_preset("qwen2.5-0.5b")
H100 = get_device("h100-80gb")
LINK = "/?model=qwen2.5-0.5b&batch=8&device=h100-80gb&trainer=grpo&gen=vllm-colocate"


def expected(generation: str) -> tuple[str, float]:
    tr = TrainerSetup("grpo", num_generations=8, prompt_len=512, completion_len=512, generation=generation,
                      vllm_gpu_util=0.3 if generation == "vllm-colocate" else None)
    est = estimate(QWEN, resolve_setup("trl", batch=8), trainer=tr, device_capacity=H100.runtime_total_bytes)
    return verdict(est.total_bytes, H100, est.high_bytes).headline, to_gb(est.total_bytes)


def test_grpo_link_then_vllm_server_mode(page: Page, app_url: str):
    open_app(page, app_url + LINK)
    headline, total = expected("vllm-colocate")
    assert verdict_text(page) == headline
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)
    bars = {t["name"]: t["x"][0] for t in chart_bars(page)}
    assert bars["Generation (KV cache / vLLM)"] == pytest.approx(0.3 * H100.runtime_total_bytes / 1e9)  # of CUDA's total
    color = page.locator(".st-key-memory_bar .js-plotly-plot").evaluate(
        "el => el.data.find(t => t.name === 'Generation (KV cache / vLLM)').marker.color")
    assert color == COMPONENT_COLORS["generation"]

    page.locator(".st-key-gen button").filter(has_text="vllm-server").click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]gen=vllm-server(&|$)"))
    headline, total = expected("vllm-server")
    assert verdict_text(page) == headline
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)
    assert "Generation (KV cache / vLLM)" not in {t["name"] for t in chart_bars(page)}


def dpo_total(method: str = "lora") -> float:
    from estimator.job.stack import with_method

    return to_gb(estimate(QWEN, with_method(resolve_setup("trl", batch=2), method),
                          trainer=TrainerSetup("dpo")).total_bytes)


def test_trainer_chosen_on_the_calculator_survives_page_switches(page: Page, app_url: str):
    """Choose DPO in the sidebar, go to Compare (which prices DPO for every method) and back: the Trainer box,
    the address and the numbers keep DPO (Streamlit 1.67 drops bound parameters on a page switch unless
    ui.inputs carries them over)."""
    from urllib.parse import parse_qs, urlsplit

    open_app(page, app_url + "/?model=qwen2.5-0.5b&batch=2&device=h100-80gb")
    page.get_by_test_id("stSidebar").get_by_text(re.compile(r"^Trainer: SFT, DPO, GRPO")).click()  # the expander
    page.locator(".st-key-trainer input").click()
    page.get_by_role("option", name="dpo", exact=True).click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]trainer=dpo(&|$)"))
    before = verdict_text(page)
    assert chart_total_gb(page) == pytest.approx(dpo_total(), abs=1e-6)

    page.get_by_role("link", name="Compare", exact=True).click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"/compare\?.*trainer=dpo"))
    expect(page.locator(".st-key-trainer input")).to_have_value("dpo")
    labels = page.get_by_test_id("stMetricLabel").all_inner_texts()
    values = page.get_by_test_id("stMetricValue").all_inner_texts()
    shown = dict(zip((x.strip() for x in labels), (v.strip() for v in values), strict=True))
    assert shown["Full fine-tuning"] == f"{dpo_total('full'):,.1f} GB"
    assert shown["LoRA"] == f"{dpo_total('lora'):,.1f} GB"
    expect(page.get_by_text(re.compile(r"DPO \(TRL 1\.16\.0\)")).first).to_be_visible()

    page.get_by_role("link", name="Calculator").click()
    wait_for_app_run(page)
    expect(page.locator(".st-key-trainer input")).to_have_value("dpo")
    assert verdict_text(page) == before
    assert parse_qs(urlsplit(page.url).query)["trainer"] == ["dpo"]
    page.reload()
    wait_for_app_run(page)
    assert verdict_text(page) == before  # the address alone reproduces it


def test_grpo_link_disables_max_length_and_survives_page_switches(page: Page, app_url: str):
    """Straight from a link, no widget touched: Streamlit 1.67's frontend drops link-seeded parameters on a page
    switch; ui.inputs carries the trainer box over like the rest of the sidebar."""
    open_app(page, app_url + LINK)
    headline, _ = expected("vllm-colocate")
    expect(page.locator(".st-key-max_len input")).to_be_disabled()
    expect(page.get_by_text("GRPO trains on prompt + completion")).to_be_visible()
    page.get_by_role("link", name="Compare", exact=True).click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"/compare\?.*trainer=grpo"))
    expect(page).to_have_url(re.compile(r"[?&]gen=vllm-colocate(&|$)"))
    expect(page.locator(".st-key-max_len input")).to_be_disabled()
    page.get_by_role("link", name="Calculator").click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]trainer=grpo(&|$)"))
    assert verdict_text(page) == headline
