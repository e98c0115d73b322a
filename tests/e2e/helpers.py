"""Helpers for the browser tests: waiting for Streamlit to settle and reading what the page shows."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

VERDICT = re.compile(r"(Fits: .+ usable|Too big by [\d,.]+ (?:GB|MB: right at the limit))")


def wait_for_app_run(page: Page, timeout: int = 30_000) -> None:
    """Connected, the script finished, no skeletons left, and every plotly chart drawn (Streamlit's own
    e2e helper, plus the charts)."""
    page.wait_for_timeout(250)  # let debounced widget changes reach the server
    for state in ("[data-test-connection-state='CONNECTED']", "[data-test-script-state='notRunning']"):
        page.locator(f"[data-testid='stApp']{state}").wait_for(state="attached", timeout=timeout)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=timeout)
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".every(c => c.querySelector('.js-plotly-plot') && c.querySelector('.main-svg'))",
                           timeout=timeout)
    # The calculator's live chart (ui/live_chart.py) loads plotly.js itself, then plots in place.
    page.wait_for_function("() => [...document.querySelectorAll('.wif-live-plot')]"
                           ".every(c => c.classList.contains('js-plotly-plot') && c.querySelector('.main-svg'))",
                           timeout=timeout)


def open_app(page: Page, url: str) -> Page:
    page.goto(url)
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=30_000)
    wait_for_app_run(page)
    return page


def verdict_text(page: Page) -> str:
    """The verdict headline ('Fits: 17.0 GB of 27.0 GB usable' / 'Too big by 7.1 GB')."""
    heading = page.locator("h1, h2").filter(has_text=VERDICT).first
    match = VERDICT.search(heading.inner_text())
    assert match, heading.inner_text()
    return match.group(1)


def chart_bars(page: Page, key: str = "memory_bar") -> list[dict]:
    """The plotly traces the browser drew in the chart with this key: name, orientation and values."""
    plot = page.locator(f".st-key-{key} .js-plotly-plot")
    return plot.evaluate("el => el.data.filter(t => t.type === 'bar')"
                         ".map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))")


def chart_total_gb(page: Page, key: str = "memory_bar") -> float:
    return sum(t["x"][0] for t in chart_bars(page, key))


def open_select(box) -> None:
    """Open a selectbox's list: centred in the viewport first (at a viewport edge its list may not open)."""
    box.evaluate("e => e.scrollIntoView({block: 'center'})")
    box.click()


def open_box(page: Page, key: str) -> None:
    """Open one of the calculator's one-click expanders by its key (breakdown_box, calc_details, config_file,
    why_rule, measured_runs: their contents are drawn only when open) and wait for them."""
    box = page.locator(f".st-key-{key}")
    box.locator("summary").click()
    wait_for_app_run(page)
    expect(box.locator("details")).to_have_attribute("open", "")


def fill_text_area(page: Page, key: str, text: str, then: str | None = None) -> None:
    """Fill the text area with this widget key and apply it (Streamlit applies a text area on Ctrl+Enter or blur),
    wait for that rerun, then click the button keyed `then` and wait again. Clicking the button straight after
    filling would blur the area mid-click: the two reruns race and the click can be lost on a loaded machine."""
    area = page.locator(f".st-key-{key} textarea")
    area.fill(text)
    area.press("Control+Enter")
    wait_for_app_run(page)
    if then is not None:
        page.locator(f".st-key-{then} button").click()
        wait_for_app_run(page)
