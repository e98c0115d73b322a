"""The sidebar's "Your releases" box in a real browser: a pasted pip freeze sets the pickers and the address's
`versions` (never the list), the verdict is the estimator's for those releases, the share link opened in a fresh page
reproduces the pickers and the verdict, and a list that cannot be read is one line with nothing else changed.
Set SCREENSHOT_DIR to keep screenshots of the box (empty, pasted, an error) at 1,440 and 390 px."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from bench.common import streamlit_server
from estimator import estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import fill_text_area, open_app, verdict_text

pytestmark = pytest.mark.e2e

FREEZE = """accelerate==1.10.1
bitsandbytes==0.47.0
numpy==2.2.6
peft==0.17.1
torch==2.8.0+cu128
transformers==4.57.6
trl==0.21.0
"""
LINK = "transformers==4.57.6,trl==0.21.0,peft==0.17.1,bitsandbytes==0.47.0,torch==2.8.0"
PICKED = {"trl": "0.21.0", "transformers": "4.57.6", "peft": "0.17.1", "bitsandbytes": "0.47.0", "torch": "2.8.0"}
SIZES = {"1440": {"width": 1440, "height": 900}, "390": {"width": 390, "height": 844}}


def query(page: Page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def box(page: Page):
    return page.locator("[data-testid='stSidebar'] [data-testid='stExpander']").filter(has_text="Your releases").first


def open_box(page: Page) -> None:
    sidebar = page.get_by_test_id("stSidebar")
    if not sidebar.is_visible() or sidebar.get_attribute("aria-expanded") == "false":
        page.get_by_test_id("stExpandSidebarButton").click()  # a phone's width starts with the sidebar folded
    b = box(page)
    b.scroll_into_view_if_needed()
    if not b.locator(".st-key-versions_read").is_visible():
        b.locator("summary").click()
    expect(b.locator(".st-key-versions_read")).to_be_visible()


def paste(page: Page, text: str) -> None:
    fill_text_area(page, "versions_paste", text, then="versions_read")


def picked(page: Page) -> dict[str, str]:
    return {p: page.locator(f".st-key-versions_pick_{p} input").input_value() for p in PICKED}


def shot(page: Page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        b = box(page)
        b.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)
        b.screenshot(path=str(Path(folder) / f"{name}-box.png"))


def expected_headline(**pins: str) -> str:
    setup = resolve_setup("trl", pins=tuple(f"{p}=={v}" for p, v in pins.items()))
    rtx = get_device("rtx-4090")
    est = estimate(load_preset("llama-3.1-8b"), setup, device_capacity=rtx.runtime_total_bytes)
    return verdict(est.total_bytes, rtx, est.high_bytes, est.low_bytes).headline


def server_log(proc) -> str:  # noqa: ANN001 - bench.common's Popen with its log file
    proc.log.flush()
    proc.log.seek(0)
    return proc.log.read()


def test_a_pasted_freeze_is_in_the_link_and_a_fresh_page_reproduces_it(page: Page, browser):
    """On a server of its own, so that its log starts clean: the box's callbacks set the hidden link widget and the
    pickers, and Streamlit logs no Session State warning for it (it does, once, for a widget with a default)."""
    with streamlit_server() as (url, proc, _started):
        check_paste_and_link(page, browser, url)
        log = server_log(proc)
    assert "Session State API" not in log and "Stack (most recent call last)" not in log, log[-3000:]


def check_paste_and_link(page: Page, browser, app_url: str) -> None:  # noqa: ANN001 - pytest-playwright's Browser
    page.set_viewport_size(SIZES["1440"])
    open_app(page, app_url)
    default = verdict_text(page)
    open_box(page)
    shot(page, "versions-empty-1440")
    paste(page, FREEZE)
    page.wait_for_function("() => location.search.includes('versions=')", timeout=30_000)
    assert query(page)["versions"] == LINK and "numpy" not in page.url  # the modelled packages, never the list
    assert picked(page) == PICKED
    headline = verdict_text(page)
    assert headline == expected_headline(**PICKED) != default  # TRL 0.21: checkpointing off by default
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text("7 packages read (freeze); the pickers are set:", exact=False)).to_be_visible()
    expect(page.get_by_text("From trl 0.22.0 on, this estimate would be", exact=False).first).to_be_attached()
    shot(page, "versions-pasted-1440")

    fresh = browser.new_page()  # another visitor opens the address
    fresh.set_viewport_size(SIZES["1440"])
    open_app(fresh, page.url)
    assert query(fresh)["versions"] == LINK
    assert picked(fresh) == PICKED and verdict_text(fresh) == headline
    fresh.close()

    paste(page, "transformers==4.57.6\ntrl==0.21.0\ntrl==0.16.1\n")
    expect(sidebar.get_by_text("The package list could not be read: trl is given twice with different versions",
                               exact=False)).to_be_visible()
    assert query(page)["versions"] == LINK and picked(page) == PICKED and verdict_text(page) == headline
    shot(page, "versions-error-1440")


def test_the_box_at_a_phones_width(page: Page, app_url: str):
    """At 390 px the box fits the sidebar, its buttons and pickers usable; the screenshots show it empty, pasted and
    with an error."""
    page.set_viewport_size(SIZES["390"])
    open_app(page, app_url)
    open_box(page)
    shot(page, "versions-empty-390")
    paste(page, FREEZE)
    page.wait_for_function("() => location.search.includes('versions=')", timeout=30_000)
    assert picked(page) == PICKED
    b = box(page)
    width = page.get_by_test_id("stSidebar").bounding_box()["width"]
    assert b.bounding_box()["width"] <= width
    shot(page, "versions-pasted-390")
    paste(page, "this is not a package list")
    expect(page.get_by_test_id("stSidebar").get_by_text("The package list could not be read: line 1",
                                                        exact=False)).to_be_visible()
    assert picked(page) == PICKED
    shot(page, "versions-error-390")
