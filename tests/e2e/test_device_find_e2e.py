"""The sidebar's device box in a real browser, on a server of its own so its log starts clean: the first use of
"Find a device" (and of the picker) logs no Session State warning, the picker shows the device's name and the
address keeps its id."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from bench.common import streamlit_server
from estimator import get_device
from tests.e2e.helpers import open_app, open_select, wait_for_app_run

pytestmark = pytest.mark.e2e


def server_log(proc) -> str:  # noqa: ANN001 - bench.common's Popen with its log file
    proc.log.flush()
    proc.log.seek(0)
    return proc.log.read()


def test_the_first_find_and_pick_log_no_session_state_warning(page: Page):
    """Streamlit logs "The widget with key … was created with a default value but also had its value set via the
    Session State API", with a stack trace, the first time a callback sets a widget that has a default: the find
    box setting the Device picker did, on a fresh server."""
    with streamlit_server() as (url, proc, _started):
        open_app(page, url + "/")
        box = page.locator(".st-key-device_find input")
        box.fill("36 GB MacBook")
        box.press("Enter")
        wait_for_app_run(page)
        laptop = get_device("laptop-36gb")
        expect(page.locator(".st-key-device_pick input")).to_have_value(laptop.name)
        expect(page.get_by_test_id("stSidebar").get_by_text(f"Found {laptop.name}")).to_be_visible()
        assert "device=laptop-36gb" in page.url
        open_select(page.get_by_test_id("stSidebar").locator(".st-key-device_pick"))
        page.keyboard.type("H100 80GB")
        page.get_by_role("option", name=get_device("h100-80gb").name).click()
        wait_for_app_run(page)
        assert "device=h100-80gb" in page.url
        log = server_log(proc)
    assert "Session State API" not in log and "Stack (most recent call last)" not in log, log[-3000:]
