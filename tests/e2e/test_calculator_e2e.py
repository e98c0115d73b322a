"""The calculator in a real browser: links set the numbers, the keyboard moves sliders and the URL follows,
inputs survive page switches, the share link reproduces the view, downloads hold the shown numbers, and
both themes render."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from estimator import TrainingSetup, estimate, generic_spec, get_device, load_preset, to_gb, verdict
from estimator.job.stack import resolve_setup
from estimator.report.document import estimate_json
from tests.e2e.helpers import (
    chart_bars,
    chart_total_gb,
    open_app,
    open_box,
    open_select,
    verdict_text,
    wait_for_app_run,
)

pytestmark = pytest.mark.e2e

LAPTOP = get_device("laptop-36gb")
SEVEN = generic_spec(7)
# TRL named: on a Mac the default stack is MLX-LM (tests/e2e/test_mlx_e2e.py); TRL there is an MPS run.
LAPTOP_7B = "/?model=by-size&size=7&device=laptop-36gb&stack=trl"


def trl(**settings) -> TrainingSetup:
    """The setup the sidebar resolves on a CUDA GPU: the TRL stack with these settings."""
    return resolve_setup("trl", **settings)


def mps(**settings) -> TrainingSetup:
    """The same on the laptop: TRL priced as a PyTorch MPS run (no CUDA context, SDPA as eager)."""
    return resolve_setup("trl", backend="metal", **settings)


def expected(setup: TrainingSetup, rule: str | None = None) -> tuple[str, float]:
    est = estimate(SEVEN, setup, rule=rule)
    return verdict(est.total_bytes, LAPTOP, est.high_bytes).headline, to_gb(est.total_bytes)


def query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def test_link_parameters_set_the_numbers(page: Page, app_url: str):
    open_app(page, app_url + LAPTOP_7B + "&rule=true")
    assert verdict_text(page) == "Fits: 17.0 GB of 29.0 GB usable"  # the seed: 7B LoRA ≈ 17 GB; 27 GiB usable
    assert chart_total_gb(page) == pytest.approx(17.0)
    expect(page.locator(".st-key-size_step input[type=range]")).to_have_value("19")  # index of 7 on the ladder
    expect(page.locator(".st-key-size input")).to_have_value("7")  # the exact size, next to the ladder
    expect(page.locator(".st-key-rule input[type=checkbox]")).to_be_checked()
    open_app(page, app_url + LAPTOP_7B)  # the detailed estimate for the same link without the rule
    headline, total = expected(mps())
    assert verdict_text(page) == headline
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)


def test_keyboard_moves_sliders_and_the_chart_verdict_and_url_follow(page: Page, app_url: str):
    open_app(page, app_url + LAPTOP_7B)
    batch = page.locator(".st-key-batch input[type=range]")
    expect(batch).to_have_value("1")
    batch.focus()
    page.keyboard.press("ArrowRight")
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]batch=2(&|$)"))
    expect(batch).to_have_value("2")
    headline, total = expected(mps(batch=2))
    assert verdict_text(page) == headline
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)
    assert {t["name"] for t in chart_bars(page)} >= {"Weights (frozen base)", "Activations"}

    # The power-of-two length slider: End jumps to its top (131,072 tokens) and writes the exact length.
    length = page.locator(".st-key-max_len_pow2 input[type=range]")
    length.focus()
    page.keyboard.press("Home")
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]max_len=128(&|$)"))
    expect(page.locator(".st-key-max_len input")).to_have_value("128")
    headline, total = expected(mps(batch=2, seq_len=128))
    assert verdict_text(page) == headline == f"Fits: {total:,.1f} GB of 29.0 GB usable"  # 27 GiB
    assert chart_total_gb(page) == pytest.approx(total, abs=1e-6)


def test_inputs_survive_switching_pages(page: Page, app_url: str):
    """Straight from a link to another page and back, without touching a widget (Streamlit 1.67's frontend
    drops link-seeded parameters on that switch; ui.inputs carries the values over)."""
    open_app(page, app_url + LAPTOP_7B + "&method=full&rule=true&max_len=4096")
    before = verdict_text(page)
    assert before == "Too big by 59.0 GB"  # 88 GB vs the laptop's 27 GiB (29.0 GB) usable
    page.get_by_role("link", name="Compare", exact=True).click()
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"/compare"))
    expect(page.locator(".st-key-model input")).to_have_value("by-size")
    expect(page.locator(".st-key-max_len input")).to_have_value("4096")
    expect(page.locator(".st-key-rule input[type=checkbox]")).to_be_checked()
    expect(page.locator(".st-key-method").get_by_role("radio", name="full")).to_be_checked()
    page.get_by_role("link", name="Calculator").click()
    wait_for_app_run(page)
    assert verdict_text(page) == before
    expect(page.locator(".st-key-device input")).to_have_value("laptop-36gb")
    assert query(page) == {"model": ["by-size"], "device": ["laptop-36gb"], "method": ["full"], "rule": ["true"],
                           "max_len": ["4096"], "stack": ["trl"]}
    # The share link holds the same inputs.
    link = page.get_by_test_id("stCode").last.inner_text().strip()  # the share box (after the config file)
    assert parse_qs(urlsplit(link).query) == query(page)


def test_share_link_reproduces_the_view_in_a_fresh_page(page: Page, app_url: str, browser: Browser):
    open_app(page, app_url + LAPTOP_7B)
    page.locator(".st-key-batch input[type=range]").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    wait_for_app_run(page)
    expect(page).to_have_url(re.compile(r"[?&]batch=3(&|$)"))
    link = page.get_by_test_id("stCode").last.inner_text().strip()  # the share box (after the config file)
    assert link.startswith(app_url + "/?")
    assert parse_qs(urlsplit(link).query) == query(page)  # the address bar and the link agree
    shown = (verdict_text(page), chart_bars(page))

    fresh_context = browser.new_context()
    try:
        fresh = open_app(fresh_context.new_page(), link)
        assert (verdict_text(fresh), chart_bars(fresh)) == shown
        expect(fresh.locator(".st-key-batch input[type=range]")).to_have_value("3")
    finally:
        fresh_context.close()


def test_json_download_is_the_estimators_document(page: Page, app_url: str):
    open_app(page, app_url + LAPTOP_7B + "&ckpt=false")  # TRL checkpoints; the link turns it off
    open_box(page, "breakdown_box")  # the breakdown and its downloads: one click away
    with page.expect_download() as info:
        page.get_by_role("button", name="Download JSON").click()
    document = json.loads(open(info.value.path(), encoding="utf-8").read())
    # batch, length and rank at TRL's own values are TRL's (from_stack), as the CLI records them
    est = estimate(SEVEN, mps(grad_ckpt=False, offload_activations=False))
    assert document == json.loads(json.dumps(estimate_json(est, LAPTOP)))
    assert document["setup"]["stack"] == "trl" and document["setup"]["grad_ckpt"] is False
    assert "grad_ckpt" not in document["setup"]["from_stack"] and "loss" in document["setup"]["from_stack"]
    assert to_gb(document["total_bytes"]) == pytest.approx(chart_total_gb(page), abs=1e-6)


@pytest.mark.parametrize(("theme", "dark"), [("light_theme", False), ("dark_theme", True)])
def test_both_themes_render(page: Page, app_url: str, theme: str, dark: bool):
    open_app(page, app_url + LAPTOP_7B + f"&embed_options={theme}")
    background = page.get_by_test_id("stApp").evaluate("el => getComputedStyle(el).backgroundColor")
    channels = [int(c) for c in re.findall(r"\d+", background)[:3]]
    assert (sum(channels) / 3 < 80) == dark, background
    plot = page.locator(".st-key-memory_bar .js-plotly-plot")
    paper = plot.evaluate("el => el._fullLayout.paper_bgcolor")
    paper_channels = [int(c) for c in re.findall(r"\d+", paper)[:3]] if paper.startswith("rgb") else \
        [int(paper.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    assert (sum(paper_channels) / 3 < 80) == dark, paper
    # The components keep their fixed colours in both themes, and the usable line is drawn.
    colours = plot.evaluate("el => el._fullData.filter(t => t.type === 'bar').map(t => t.marker.color)")
    assert colours[0].lower() == "#56b4e9" and colours[-1].lower() == "#6e6e6e"
    expect(page.locator(".st-key-memory_bar g.annotation-text-g").filter(has_text="29 GB usable")).to_have_count(1)
    assert verdict_text(page).startswith(("Fits", "Too big"))


def test_switching_the_training_stack_changes_the_verdict_and_the_url(page: Page, app_url: str):
    """The default view is TRL's number; choosing the plain PyTorch loop in the sidebar's "Training stack"
    box gives that loop's number (no checkpointing, full fp32 logits) and the address bar records it."""
    rtx = get_device("rtx-4090")
    llama = load_preset("llama-3.1-8b")
    open_app(page, app_url + "/")
    trl_est = estimate(llama, trl())
    before = verdict_text(page)
    assert before == verdict(trl_est.total_bytes, rtx, trl_est.high_bytes).headline
    assert chart_total_gb(page) == pytest.approx(to_gb(trl_est.total_bytes), abs=1e-6)
    expect(page.locator(".st-key-stack input")).to_have_value("auto")  # TRL on a CUDA GPU

    # the box sits at the bottom edge of a 720 px viewport (the language switch is above it): centred first
    open_select(page.get_by_test_id("stSidebar").locator(".st-key-stack"))
    page.get_by_role("option", name="plain", exact=True).click()
    wait_for_app_run(page)

    plain_est = estimate(llama, resolve_setup("plain"))
    after = verdict(plain_est.total_bytes, rtx, plain_est.high_bytes).headline
    assert after != before and after.startswith("Too big by ")  # ≈ 36 GB against the 4090's 25.8 GB
    expect(page.locator("h1, h2").filter(has_text=after)).to_have_count(1)
    assert verdict_text(page) == after
    assert chart_total_gb(page) == pytest.approx(to_gb(plain_est.total_bytes), abs=1e-6)
    expect(page).to_have_url(re.compile(r"[?&]stack=plain(&|$)"))
    assert query(page) == {"stack": ["plain"]}
    expect(page.locator(".st-key-stack input")).to_have_value("plain")
    open_box(page, "calc_details")  # the stack's settings line, one click away (and in the sidebar)
    expect(page.get_by_test_id("stMain").get_by_text(
        "torch 2.x hand-written loop: checkpointing off (Plain PyTorch loop default)")).to_be_visible()
