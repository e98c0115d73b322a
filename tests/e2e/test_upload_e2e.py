"""Uploading a config.json through the real file uploader: a bad file gets a clear message and the page keeps
working on the fallback model; a real config replaces the model and its numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from estimator import estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import open_app, verdict_text, wait_for_app_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
UPLOADER = ".st-key-upload [data-testid='stFileUploaderDropzoneInput']"  # the config.json box


def _upload(page: Page, name: str, payload: bytes) -> None:
    page.locator(UPLOADER).set_input_files({"name": name, "mimeType": "application/json", "buffer": payload})
    wait_for_app_run(page)


def test_bad_then_good_config(page: Page, app_url: str):
    open_app(page, app_url + "/?model=upload&device=a100-80gb")
    expect(page.get_by_text("No config.json uploaded yet")).to_be_visible()

    _upload(page, "config.json", b'{"model_type": "falcon", "hidden_size": 4096}')
    expect(page.get_by_text("could not be used")).to_be_visible()
    expect(page.get_by_text("not supported")).to_be_visible()
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    fallback = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl"))  # the default stack
    assert verdict_text(page) == verdict(fallback.total_bytes, get_device("a100-80gb"), fallback.high_bytes).headline

    good = (ROOT / "estimator" / "models" / "presets" / "qwen2.5-0.5b.json").read_bytes()
    _upload(page, "qwen-small.json", good)
    expect(page.get_by_text("could not be used")).to_have_count(0)
    small = estimate(load_preset("qwen2.5-0.5b"), resolve_setup("trl"))
    expected = verdict(small.total_bytes, get_device("a100-80gb"), small.high_bytes).headline
    # The rerun after the upload can land after wait_for_app_run on a loaded machine: wait for the new headline.
    expect(page.locator("h1, h2").filter(has_text=expected).first).to_be_visible()
    assert verdict_text(page) == expected
