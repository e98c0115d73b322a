"""Slow + browser: the "Trace exactly" button of the calculator and of the Compare page against a real
`streamlit run` server whose exact interpreter is the calibration venv (CI installs requirements-exact.txt into it). A small uploaded config traces
in well under a minute: the page shows the progress, stays usable, then the second bar, the difference and the
traced versions."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from bench.common import streamlit_server
from estimator import exact as ex
from tests.e2e.helpers import VERDICT, chart_bars, open_app, open_box, open_select, wait_for_app_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXACT_PY = os.environ.get(ex.PYTHON_ENV) or str(ROOT / ".venv-cal" / "bin" / "python")
UPLOADER = ".st-key-upload [data-testid='stFileUploaderDropzoneInput']"  # the config.json box
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2000, "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def exact_app_url() -> Iterator[str]:
    if isinstance(ex._probe(EXACT_PY), str):
        pytest.skip("no exact interpreter (requirements-exact.txt)")
    old = os.environ.get(ex.PYTHON_ENV)
    os.environ[ex.PYTHON_ENV] = EXACT_PY  # the server inherits it
    try:
        with streamlit_server() as (url, _proc, _started):
            yield url
    finally:
        if old is None:
            os.environ.pop(ex.PYTHON_ENV, None)
        else:
            os.environ[ex.PYTHON_ENV] = old


def test_trace_exactly_button_shows_progress_then_the_second_bar(page: Page, exact_app_url: str):
    open_app(page, exact_app_url + "/?model=upload&device=rtx-4090")
    page.locator(UPLOADER).set_input_files({"name": "tiny.json", "mimeType": "application/json",
                                            "buffer": json.dumps(TINY).encode()})
    wait_for_app_run(page)
    open_box(page, "calc_details")  # the calculator's exact trace is in its details, one click away
    button = page.get_by_role("button", name="Trace exactly")
    expect(button).to_be_enabled(timeout=60_000)
    button.click()
    expect(page.get_by_text("Tracing with PyTorch").or_(page.get_by_text("Queued:")).first).to_be_visible(
        timeout=30_000)
    # the page is not held by the trace: its runs finish (the fragment only polls) and the verdict stays shown
    wait_for_app_run(page)
    expect(page.locator("h1, h2").filter(has_text=VERDICT).first).to_be_visible()
    page.get_by_text("traced with torch").first.wait_for(timeout=300_000)
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    expect(page.get_by_text("Exact:").first).to_be_visible()
    names = {b["name"] for b in chart_bars(page, "exact_bar")}
    assert {"Traced by PyTorch", "Added (CUDA context, slack, …)", "Fast estimate"} <= names
    expect(page.get_by_text("transformers 5.24.0, peft 0.21.2").first).to_be_visible()


def test_compare_page_traces_the_bar_picked_in_its_select_box(page: Page, exact_app_url: str):
    for url in (exact_app_url, exact_app_url + "/compare?model=upload&device=rtx-4090&methods=full&methods=qlora"):
        page.goto(url)  # the entrypoint first: Streamlit serves /compare from st.navigation once a session ran it
        wait_for_app_run(page, timeout=120_000)
    page.locator(UPLOADER).set_input_files({"name": "tiny.json", "mimeType": "application/json",
                                            "buffer": json.dumps(TINY).encode()})
    wait_for_app_run(page)
    open_select(page.get_by_test_id("stSelectbox").filter(has_text="Bar to trace"))
    page.get_by_role("option", name="QLoRA").click()
    wait_for_app_run(page)
    button = page.get_by_role("button", name="Trace exactly")
    expect(button).to_be_enabled(timeout=60_000)
    button.click()
    page.get_by_text("traced with torch").first.wait_for(timeout=300_000)
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    expect(page.get_by_text("4-bit kernels need CUDA").first).to_be_visible()  # the QLoRA bar was traced
    names = {b["name"] for b in chart_bars(page, "exact_bar")}
    assert {"Traced by PyTorch", "Fast estimate"} <= names
    expect(page.get_by_test_id("stMetricLabel")).to_have_count(2)  # the page's own bars are still there
