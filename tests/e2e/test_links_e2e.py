"""Links a team can trust, in a real browser: every page keeps the whole state in the address after a page
switch and a reload, hand-written links give what a user expects, the rule of thumb gives one number per
setup on every page, and presentation mode is readable at 1920×1080."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from estimator import load_preset
from tests.e2e.helpers import open_app, verdict_text, wait_for_app_run

pytestmark = pytest.mark.e2e

STATE = {"model": "qwen2.5-7b", "method": "qlora", "ckpt": "true", "device": "rtx-4060-ti"}
PAGES = [("Compare", "/compare"), ("What fits", "/fits"), ("Sizes", "/sizes"),
         ("Scale out", "/scale"), ("Out of memory?", "/oom"), ("How it works", "/how"),
         ("Calculator", "/")]


@pytest.fixture(scope="module", autouse=True)
def entrypoint_first(browser, app_url: str) -> None:
    """Open the entrypoint once before any deep link (Streamlit serves /compare… from st.navigation only
    after some session has run it)."""
    page = browser.new_page()
    open_app(page, app_url)
    page.close()


def address(page: Page) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(page.url)
    return parts.path, parse_qs(parts.query)


def holds(page: Page, state: dict[str, str]) -> None:
    _, params = address(page)
    assert {k: params.get(k) for k in state} == {k: [v] for k, v in state.items()}, page.url


def go(page: Page, name: str) -> None:
    page.get_by_role("link", name=name, exact=True).first.click()
    wait_for_app_run(page)


def share_link(page: Page) -> str:
    return page.get_by_test_id("stCode").last.inner_text().strip()


def test_every_page_keeps_the_state_in_the_address_after_navigation_and_reload(page: Page, app_url: str):
    open_app(page, app_url + "/?" + "&".join(f"{k}={v}" for k, v in STATE.items()))
    for name, path in PAGES:
        go(page, name)
        expect(page).to_have_url(re.compile(re.escape(path) + r"\?"))
        holds(page, STATE)
        page.reload()
        wait_for_app_run(page)
        holds(page, STATE)  # F5 (or the copied address) gives the same view
        expect(page.get_by_text("Qwen2.5-7B").first).to_be_visible()
        expect(page.locator(".st-key-device_pick input")).to_have_value(re.compile(r"RTX 4060 Ti"))  # the picker
        # every page offers the share box, and its link holds the same state
        link = urlsplit(share_link(page))
        assert link.path == path and {k: parse_qs(link.query).get(k) for k in STATE} == {
            k: [v] for k, v in STATE.items()}


def test_a_pages_own_controls_come_back_with_it(page: Page, app_url: str):
    open_app(page, app_url + "/compare?model=qwen2.5-7b&methods=full&methods=lora")
    expect(page.get_by_test_id("stMetricLabel")).to_have_count(2)
    go(page, "Scale out")
    holds(page, {"model": "qwen2.5-7b"})
    assert "methods" not in address(page)[1]  # compare's control is compare's
    go(page, "Compare")
    assert address(page)[1].get("methods") == ["full", "lora"]
    expect(page.get_by_test_id("stMetricLabel")).to_have_count(2)
    page.reload()
    wait_for_app_run(page)
    expect(page.get_by_test_id("stMetricLabel")).to_have_count(2)


@pytest.mark.parametrize(("query", "caption", "verdict"), [
    ("/?size=7&method=lora&rule=true", "7B (generic decoder)", "Fits: 17.0 GB of 25.2 GB usable"),
    ("/?size=13&rule=true", "13B (generic decoder)", "Too big by 3.8 GB"),
    ("/?size=34&method=qlora&rule=true&device=a100-80gb", "34B (generic decoder)", None),
    ("/?size=72&method=qlora&device=h100-80gb", "72B (generic decoder)", None),
    ("/?size=405&method=qlora&device=b200", "405B (generic decoder)", None),
])
def test_size_without_model_means_by_size_and_any_size_is_accepted(page: Page, app_url: str, query: str,
                                                                   caption: str, verdict: str | None):
    open_app(page, app_url + query)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stMain").get_by_text(caption).first).to_be_visible()
    expect(page.get_by_text("was not valid")).to_have_count(0)  # nothing refused
    _, params = address(page)
    size = query.split("size=")[1].split("&")[0]
    assert params["model"] == ["by-size"]  # written into the address, so the link stays by size
    assert params.get("size") == (None if size == "7" else [size])  # 7 is the default: Streamlit leaves it out
    if verdict:
        assert verdict_text(page) == verdict


def test_size_link_on_another_page_and_a_refused_value_gets_a_note(page: Page, app_url: str):
    open_app(page, app_url + "/compare?size=14")
    expect(page.get_by_text(re.compile(r"^14B \(generic decoder\) · batch")).first).to_be_visible()
    assert address(page)[1]["size"] == ["14"]
    open_app(page, app_url + "/?size=2000&methods=bogus")
    expect(page.get_by_text("The link's value for 'size' was not valid; using the default (7).")).to_be_visible()
    expect(page.get_by_text(re.compile(r"The link's value for 'methods' was not valid \(bogus\)"))).to_be_visible()


def test_the_rule_of_thumb_gives_one_number_per_setup_on_every_page(page: Page, app_url: str):
    size_b = load_preset("llama-3.1-8b").params_total / 1e9
    full, lora = 12 * size_b + 4, 2 * size_b + 3
    qlora = lora / 3 + 3
    open_app(page, app_url + "/?rule=true&method=full&device=h100-80gb")
    expect(page.get_by_text(f"Expected peak {full:,.1f} GB").first).to_be_visible()  # 100.4 GB
    expect(page.get_by_text(re.compile(rf"Switch to QLoRA.*→ {qlora:,.1f} GB, fits"))).to_be_visible()
    go(page, "Compare")
    values = dict(zip(page.get_by_test_id("stMetricLabel").all_inner_texts(),
                      page.get_by_test_id("stMetricValue").all_inner_texts(), strict=True))
    assert values == {"Full fine-tuning": f"{full:,.1f} GB", "LoRA": f"{lora:,.1f} GB", "QLoRA": f"{qlora:,.1f} GB"}
    assert values["Full fine-tuning"] == "100.4 GB"
    go(page, "Sizes")
    row = page.get_by_test_id("stDataFrame")  # the grid draws on a canvas: read the CSV download instead
    expect(row).to_be_visible()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV (GB and GiB)").click()
    text = open(info.value.path(), encoding="utf-8").read()
    yours = next(line for line in text.splitlines() if line.startswith("Llama-3.1-8B (yours)"))
    assert f"{full:.3f}" in yours and f"{lora:.3f}" in yours and f"{qlora:.3f}" in yours


def _font_px(page: Page, locator) -> float:
    return float(locator.evaluate("el => parseFloat(getComputedStyle(el).fontSize)"))


def test_presentation_mode_is_readable_at_1920x1080(page: Page, app_url: str):
    page.set_viewport_size({"width": 1920, "height": 1080})
    open_app(page, app_url + "/?present=true&method=qlora&device=gpu-16gb")
    setup_line = page.locator("h2").filter(has_text="Llama-3.1-8B · QLoRA · ").first
    verdict = page.locator("h1").filter(has_text="Fits: ").first
    expect(setup_line).to_be_visible()
    assert _font_px(page, setup_line) >= 0.75 * _font_px(page, verdict) >= 30
    remedy = page.get_by_test_id("stMain").locator("ol li").filter(has_text="saves").first
    assert _font_px(page, remedy) >= 20
    for path, cell in (("/compare", "Component"), ("/scale", "Device")):
        open_app(page, app_url + path + "?present=true&method=full&model=llama-3.1-70b&device=h100-80gb")
        header = page.get_by_test_id("stTable").locator("th").filter(has_text=cell).first
        expect(header).to_be_visible()
        assert _font_px(page, header) >= 20
        assert _font_px(page, page.get_by_test_id("stTable").locator("td").first) >= 20
