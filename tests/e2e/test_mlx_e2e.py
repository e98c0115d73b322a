"""MLX-LM on the 36 GB laptop in a real browser: `stack=mlx` prices mlx_lm lora on Metal (the verdict and the chart
are the estimator's), the page says that attention keeps length² probabilities, the How page draws the s² figure
and shows the mlx_lm lora YAML config that matches the estimate."""

from __future__ import annotations

import pytest
import yaml
from playwright.sync_api import Page, expect

from estimator import estimate, get_device, load_preset, to_gb, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import chart_total_gb, open_app, open_box, verdict_text

pytestmark = pytest.mark.e2e

LAPTOP = get_device("laptop-36gb")
LLAMA = load_preset("llama-3.1-8b")
LINK = "/?stack=mlx&device=laptop-36gb&method=qlora"


def sidebar_setup():
    """What the sidebar resolves for LINK: MLX-LM on Metal with its own batch 4 and rank 8 (the CLI's too:
    job.stack.default_settings) and 2,048 tokens."""
    return resolve_setup("mlx", method="qlora", precision="bf16", batch=4, seq_len=2048, lora_rank=8,
                         attention="sdpa", gpus=1, sharding="none", backend="metal")


def test_stack_mlx_on_the_laptop_verdict_note_and_snippet(page: Page, app_url: str):
    open_app(page, app_url + LINK)
    est = estimate(LLAMA, sidebar_setup())
    assert verdict_text(page) == verdict(est.total_bytes, LAPTOP, est.high_bytes, est.low_bytes).headline
    assert chart_total_gb(page) == pytest.approx(to_gb(est.total_bytes), abs=1e-6)
    open_box(page, "calc_details")  # the estimate's notes: one click away
    expect(page.get_by_text("MLX trains attention unfused", exact=False).first).to_be_visible()

    open_app(page, app_url + "/how" + LINK[1:])
    expect(page.locator(".st-key-mlx_attention_chart .js-plotly-plot")).to_be_attached()
    code = page.locator("[data-testid='stCode']").filter(has_text="mlx_lm.lora --config").first
    code.scroll_into_view_if_needed()
    text = code.inner_text()
    cfg = yaml.safe_load(text)
    assert (cfg["fine_tune_type"], cfg["batch_size"], cfg["num_layers"], cfg["max_seq_length"]) == (
        "lora", 4, 16, 2048)  # mlx-lm's own batch and rank (job.stack.default_settings), as the CLI gives
    assert cfg["lora_parameters"]["rank"] == 8
    assert "mlx_lm.convert" in text and "-q --q-bits 4 --q-group-size 64" in text
    page.screenshot(path="/tmp/mlx_how.png", full_page=False)
