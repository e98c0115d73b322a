"""Setups side by side in a real browser (issue 30): pin three setups on the Compare page, copy the link that opens
them, open it in a fresh browser context (no session, no cookies): the same three setups appear with the same
numbers."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.helpers import open_app, wait_for_app_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def entrypoint_first(browser: Browser, app_url: str) -> None:
    """Open the entrypoint once before any deep link (Streamlit serves /compare from st.navigation only after some
    session has run it)."""
    page = browser.new_page()
    open_app(page, app_url)
    page.close()


def shown(page: Page) -> dict:
    """What the pins show: each column's memory (the stacked bars' sum), usable line, tokens per second and run cost
    as the browser drew them, the words written on the chart (totals, verdicts, speeds, costs) and its description."""
    chart = page.locator(".st-key-pins_chart .js-plotly-plot")
    numbers = chart.evaluate("""el => {
        const memory = el.data.filter(t => t.type === 'bar' && (t.yaxis || 'y') === 'y');
        const columns = memory[0].y.length;
        const totals = [...Array(columns).keys()].map(i => memory.reduce((s, t) => s + (t.y[i] || 0), 0));
        const row = axis => Array.from((el.data.find(t => t.yaxis === axis) || {y: []}).y);
        const usable = el.layout.shapes.filter(s => s.name === 'usable').map(s => s.y0);
        return {totals: totals.map(v => v.toFixed(6)), usable, speed: row('y2'), cost: row('y3'),
                labels: Array.from(el.layout.xaxis3.ticktext), written: el.layout.annotations.map(a => a.text)};
    }""")
    numbers["alt"] = page.locator(".st-key-pins_chart [role=img]").first.get_attribute("aria-label")
    return numbers


def pin(page: Page) -> None:
    page.get_by_role("button", name="Pin this setup").click()
    wait_for_app_run(page)
    expect(page.get_by_role("button", name="Pinned")).to_be_visible()


def choose_method(page: Page, method: str) -> None:
    page.locator(".st-key-method").get_by_role("radio", name=method, exact=True).click()
    wait_for_app_run(page)


def test_three_pinned_setups_open_the_same_in_a_fresh_browser(page: Page, browser: Browser, app_url: str):
    open_app(page, app_url + "/compare?model=qwen2.5-7b&device=a100-80gb")
    expect(page.get_by_role("heading", name="Setups side by side")).to_be_visible()
    page.locator(".st-key-tokens input").fill("200000000")
    page.locator(".st-key-tokens input").press("Enter")
    wait_for_app_run(page)
    page.locator(".st-key-price input").fill("2.5")
    page.locator(".st-key-price input").press("Enter")
    wait_for_app_run(page)
    pin(page)  # LoRA, the sidebar's default
    choose_method(page, "qlora")
    pin(page)
    choose_method(page, "full")
    pin(page)
    before = shown(page)
    assert len(before["totals"]) == 3 and len(set(before["totals"])) == 3
    assert [label.split("<br>")[1].split(" · ")[0] for label in before["labels"]] == [
        "LoRA", "QLoRA", "Full fine-tuning"]
    assert len(before["cost"]) == 3 and all(c > 0 for c in before["cost"])
    code = page.get_by_test_id("stCode").filter(has_text="pins=").first
    link = code.inner_text().strip()
    assert len(parse_qs(urlsplit(link).query)["pins"]) == 3
    assert urlsplit(link).path == "/compare"

    fresh = browser.new_context()
    other = fresh.new_page()
    try:
        open_app(other, link)
        after = shown(other)
        assert after == before
        # the fresh page's sidebar is the default one: the pins alone carried the three setups
        expect(other.locator(".st-key-method").get_by_role("radio", name="lora", exact=True)).to_be_checked()
    finally:
        fresh.close()
