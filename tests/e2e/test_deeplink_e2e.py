"""A deep link on a freshly started server: the page opens with the app's own navigation (st.navigation's titles),
not Streamlit's legacy file-name navigation of the pages/ folder, and keeps the link's state."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from bench.common import streamlit_server

pytestmark = pytest.mark.e2e


def test_a_deep_link_on_a_fresh_server_gets_the_apps_navigation(browser: Browser):
    with streamlit_server() as (url, _proc, _started):  # a server no session has visited yet
        page = browser.new_page()
        page.goto(url + "/compare?model=qwen2.5-7b&method=qlora")
        expect(page.get_by_role("heading", name="Compare methods")).to_be_visible(timeout=90_000)
        expect(page.get_by_role("link", name=re.compile("What fits"))).to_be_visible()
        # the legacy navigation names pages by file: app, calculator, compare, fits, …
        expect(page.get_by_role("link", name="fits", exact=True)).to_have_count(0)
        expect(page.get_by_role("link", name="app", exact=True)).to_have_count(0)
        assert "/compare" in page.url and "model=qwen2.5-7b" in page.url and "method=qlora" in page.url
        page.close()
