"""The calculator's sliders rerun only their fragment (ui.inputs.live_page): a batch change re-sends the
sliders and the page's body, not the rest of the sidebar, and everything that depends on the batch still
updates: the verdict, the advice, the share link and the address, and the next page after a switch."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from estimator import estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import open_app, verdict_text, wait_for_app_run

pytestmark = pytest.mark.e2e

# Count the server's messages (ForwardMsgs) the page receives on its websocket.
COUNT_MESSAGES = """
window.__wifIn = 0;
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const ws = new NativeWebSocket(...args);
  ws.addEventListener('message', () => { window.__wifIn += 1; });
  return ws;
};
window.WebSocket.prototype = NativeWebSocket.prototype;
Object.assign(window.WebSocket, NativeWebSocket);
"""


def messages_for(page: Page, action) -> int:  # noqa: ANN001 - a callable that changes an input
    page.evaluate("() => { window.__wifIn = 0; }")
    action()
    wait_for_app_run(page)
    page.wait_for_timeout(300)
    return page.evaluate("() => window.__wifIn")


def expected_headline(batch: int) -> str:
    est = estimate(load_preset("qwen2.5-7b"), resolve_setup("trl", batch=batch))
    return verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline


def test_a_slider_reruns_only_its_fragment_and_everything_it_feeds_updates(page: Page, app_url: str):
    page.add_init_script(COUNT_MESSAGES)
    open_app(page, app_url + "/?model=qwen2.5-7b&device=rtx-4090")
    assert verdict_text(page) == expected_headline(1)
    slider = page.locator(".st-key-batch input[type=range]")
    slider.focus()
    fragment = messages_for(page, lambda: page.keyboard.press("ArrowRight"))  # batch 1 → 2
    assert verdict_text(page) == expected_headline(2)
    assert "batch=2" in page.url
    share = page.get_by_test_id("stCode").last.inner_text()
    assert "batch=2" in share and "model=qwen2.5-7b" in share
    assert page.get_by_text(re.compile(r"Longest max length that fits \(at batch 2\)")).count() == 1
    # A settled input (the rule-of-thumb switch) reruns the whole page: the sidebar is sent again too.
    whole = messages_for(page, lambda: page.locator(".st-key-rule label").click())
    page.locator(".st-key-rule label").click()
    wait_for_app_run(page)
    assert fragment < 0.7 * whole, (fragment, whole)
    # The fragment remembered its batch for the next page: the switch keeps it in the address and the setup.
    page.get_by_role("link", name="Compare", exact=True).click()
    wait_for_app_run(page)
    assert "/compare" in page.url and "batch=2" in page.url
    expect(page.locator(".st-key-batch input[type=range]")).to_have_value("2")


def test_a_links_notes_show_once_not_on_every_slider_move(page: Page, app_url: str):
    """A note about the link's values belongs to the run that read the link: the next slider move (a fragment
    rerun, which does not read the link again) does not repeat it."""
    open_app(page, app_url + "/?device=rtx-4090&precision=zz9")
    note = page.get_by_text("The link's value for 'precision' was not valid")
    expect(note).to_have_count(1)
    page.locator(".st-key-batch input[type=range]").focus()
    page.keyboard.press("ArrowRight")
    wait_for_app_run(page)
    expect(page.locator(".st-key-batch input[type=range]")).to_have_value("2")
    expect(note).to_have_count(0)
