"""Presentation mode: a ?present=true link opens with the sidebar folded away and the bigger verdict."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from estimator import estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import open_app

pytestmark = pytest.mark.e2e


def _headline() -> str:
    """8B QLoRA under the default stack (TRL) on the 16 GB GPU: it fits (≈ 8 GB of 17.2 GB)."""
    est = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl", method="qlora"))
    return verdict(est.total_bytes, get_device("gpu-16gb"), est.high_bytes).headline


def test_presentation_link_folds_the_sidebar(page: Page, app_url: str):
    open_app(page, app_url + "/?present=true&method=qlora&device=gpu-16gb")
    expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "true")
    assert _headline().startswith("Fits: ")
    expect(page.locator("h1").filter(has_text=_headline())).to_be_visible()  # st.title in presentation mode


def test_normal_link_keeps_the_sidebar(page: Page, app_url: str):
    open_app(page, app_url + "/?method=qlora&device=gpu-16gb")
    expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "false")
    expect(page.locator("h2").filter(has_text=_headline())).to_be_visible()  # st.header otherwise
