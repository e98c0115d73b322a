"""The language switch in a real browser: `?lang=es` shows Spanish words and Spanish numbers, the sidebar's
switch turns the page English while the address keeps `lang` and every other setting, a page switch keeps the
language, and a bare address follows the browser's language."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.helpers import wait_for_app_run

pytestmark = pytest.mark.e2e

STATE = {"model": "qwen2.5-7b", "method": "qlora", "device": "rtx-4060-ti"}
SPANISH_VERDICT = re.compile(r"(Cabe: \d+,\d GB de \d+,\d GB utilizables|No cabe: faltan \d+,\d GB)")
ENGLISH_VERDICT = re.compile(r"(Fits: \d+\.\d GB of \d+\.\d GB usable|Too big by \d+\.\d GB)")


SLOW = 120_000  # a busy CI machine can take a minute for a fresh server's first page


def open_app(page: Page, url: str) -> Page:
    page.goto(url, timeout=SLOW)
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=SLOW)
    wait_for_app_run(page, timeout=SLOW)
    return page


def params(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


@pytest.fixture(scope="module", autouse=True)
def entrypoint_first(browser: Browser, app_url: str) -> None:
    """Open the entrypoint once before any deep link (st.navigation must have run on the server)."""
    page = browser.new_page()
    open_app(page, app_url)
    page.close()


def test_spanish_link_then_switch_to_english_keeps_the_state(page: Page, app_url: str):
    open_app(page, app_url + "/?lang=es&" + "&".join(f"{k}={v}" for k, v in STATE.items()))
    expect(page.get_by_role("heading", name="Qué cambiar")).to_be_visible()
    expect(page.locator("h1, h2").filter(has_text=SPANISH_VERDICT).first).to_be_visible()  # "19,2 GB": decimal comma
    expect(page.get_by_text("Expected peak")).to_have_count(0)
    expect(page.get_by_text(re.compile(r"Pico esperado \d+,\d GB")).first).to_be_visible()
    expect(page.get_by_role("link", name="Comparar", exact=True).first).to_be_visible()  # navigation too

    page.get_by_test_id("stSidebar").get_by_text("English", exact=True).click()
    wait_for_app_run(page, timeout=SLOW)
    expect(page.get_by_role("heading", name="What to change")).to_be_visible()
    expect(page.locator("h1, h2").filter(has_text=ENGLISH_VERDICT).first).to_be_visible()
    query = params(page)
    assert query.get("lang") == ["en"], page.url
    assert {k: query.get(k) for k in STATE} == {k: [v] for k, v in STATE.items()}, page.url

    page.reload()  # the copied address opens in English, with the same setup
    wait_for_app_run(page, timeout=SLOW)
    expect(page.get_by_role("heading", name="What to change")).to_be_visible()
    assert params(page).get("model") == ["qwen2.5-7b"]


def test_the_language_survives_a_page_switch(page: Page, app_url: str):
    open_app(page, app_url + "/?lang=es&model=qwen2.5-7b")
    page.get_by_role("link", name="Comparar", exact=True).first.click()
    wait_for_app_run(page, timeout=SLOW)
    expect(page).to_have_url(re.compile(r"/compare\?"))
    expect(page.get_by_role("heading", name="Comparar métodos")).to_be_visible()
    assert params(page).get("lang") == ["es"], page.url
    assert params(page).get("model") == ["qwen2.5-7b"], page.url


def test_a_bare_address_follows_the_browser_language(browser: Browser, app_url: str):
    for locale, heading in (("es-ES", "Qué cambiar"), ("en-US", "What to change"), ("fr-FR", "What to change")):
        context = browser.new_context(locale=locale)
        page = context.new_page()
        try:
            open_app(page, app_url + "/")
            expect(page.get_by_role("heading", name=heading)).to_be_visible()
            assert "lang" not in params(page), page.url  # the browser decides; the address stays bare
        finally:
            context.close()


NAV = {"en": ("Calculator", "Compare", "What fits", "Sizes", "Scale out", "Out of memory?", "How it works"),
       "es": ("Cálculo", "Comparar", "Qué cabe", "Tamaños", "Escalar", "¿Sin memoria?", "Cómo funciona")}


@pytest.mark.parametrize("lang", sorted(NAV))
def test_all_seven_pages_fit_the_top_navigation_at_1280_px(browser: Browser, app_url: str, lang: str):
    """At a laptop's 1,280 px, with the sidebar open and the widest link active (How it works), every page is a
    visible link in the top bar: none folds into Streamlit's "N more" menu, whose label is not translated."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        open_app(page, app_url + f"/how?lang={lang}")
        links = page.get_by_test_id("stTopNavLink")
        expect(links).to_have_count(len(NAV[lang]))
        for title in NAV[lang]:
            expect(page.get_by_role("link", name=title, exact=True).first).to_be_visible()
    finally:
        page.close()
