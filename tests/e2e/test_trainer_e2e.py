"""The trainer controls in a real browser: a GRPO link sets the numbers and draws the generation segment in its
own colour; choosing vLLM server mode in the sidebar moves the verdict, the bar and the URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from estimator import TrainerSetup, estimate, get_device, load_preset, to_gb, verdict
from estimator.stacks import resolve_setup
from tests.e2e.helpers import chart_bars, chart_total_gb, open_app, verdict_text, wait_for_app_run
from ui.charts import COMPONENT_COLORS

pytestmark = pytest.mark.e2e

QWEN = load_preset("qwen2.5-0.5b")
H100 = get_device("h100-80gb")
LINK = "/?model=qwen2.5-0.5b&batch=8&device=h100-80gb&trainer=grpo&gen=vllm-colocate"


def expected(generation: str) -> tuple[str, float]:
    tr = TrainerSetup("grpo", num_generations=8, prompt_len=512, completion_len=512, generation=generation,
                      vllm_gpu_util=0.3 if generation == "vllm-colocate" else None)
    est = estimate(QWEN, resolve_setup("trl", batch=8), trainer=tr, device_capacity=H100.capacity_bytes)
    return verdict(est.total_bytes, H100, est.high_bytes).headline, to_gb(est.total_bytes)


def test_grpo_link_then_vllm_server_mode(page: Page, app_url: str):
    open_app(page, app_url + LINK)
    headline, total = expected("vllm-colocate")
    assert verdict_text(page) == headline
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)
    bars = {t["name"]: t["x"][0] for t in chart_bars(page)}
    assert bars["Generation (KV cache / vLLM)"] == pytest.approx(0.3 * H100.capacity_bytes / 1e9)
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
