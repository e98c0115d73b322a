"""Finding a device by name or nickname: the sidebar's 'Find a device' box and the CLI's --device."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from estimator import CATALOG, estimate, find_devices, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.report.cli import main


@pytest.mark.parametrize(("query", "device_id"), [("4080", "rtx-4080"), ("A6000", "rtx-a6000"), ("T4", "t4"),
                                                  ("h200", "h200")])
def test_find_box_points_the_device_picker_at_the_match(query, device_id):
    at = AppTest.from_file("../app.py", default_timeout=30).run()
    at.sidebar.text_input(key="device_find").set_value(query).run()
    assert not at.exception
    assert at.sidebar.selectbox(key="device").value == device_id
    est = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl"))
    headline = verdict(est.total_bytes, get_device(device_id), est.high_bytes).headline
    assert any(headline in str(h.value) for h in at.header)
    assert any(f"Found {get_device(device_id).name}" in str(c.value).replace("\\", "") for c in at.sidebar.caption)


def test_find_box_says_when_nothing_matches_and_keeps_the_device():
    at = AppTest.from_file("../app.py", default_timeout=30).run()
    at.sidebar.text_input(key="device_find").set_value("zz-no-such-card").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="device").value == "rtx-4090"
    assert any("No device matches" in str(c.value) for c in at.sidebar.caption)


def test_cli_device_accepts_a_name(capsys):
    assert main(["--json", "--device", "A6000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"]["id"] == "rtx-a6000"
    assert doc["device"]["capacity_bytes"] == 49_140 * 2**20


# What people type for the seed's 36 GB MacBook, and the same habits for other devices: brand and model words in
# any order, the memory with or without a space or unit, Apple's chip names.
TYPED = [("36 GB MacBook", "laptop-36gb"), ("MacBook Pro 36GB", "laptop-36gb"), ("M4 Pro 36", "laptop-36gb"),
         ("apple 36gb", "laptop-36gb"), ("my 36gb macbook", "laptop-36gb"), ("Mac Studio 192GB", "mac-192gb"),
         ("mac mini 16 gb", "mac-16gb"), ("RTX 4090 24GB", "rtx-4090"), ("nvidia 24 gb", "rtx-3090"),
         ("H100 80 GB SXM", "h100-80gb")]


@pytest.mark.parametrize(("query", "device_id"), TYPED)
def test_brand_model_and_memory_words_find_the_device(query, device_id):
    assert find_devices(query)[0].id == device_id


@pytest.mark.parametrize("query", ["rtx 9999", "m9 max 36gb", "macbook 37gb", "tpu v5"])
def test_words_that_name_no_device_still_find_nothing(query):
    assert find_devices(query) == ()


@pytest.mark.parametrize("query", [q for q, d in TYPED if d == "laptop-36gb"])
def test_find_box_finds_the_36gb_macbook_as_people_type_it(query):
    at = AppTest.from_file("../app.py", default_timeout=30).run()
    at.sidebar.text_input(key="device_find").set_value(query).run()
    assert not at.exception
    assert at.sidebar.selectbox(key="device").value == "laptop-36gb"
    assert any(f"Found {get_device('laptop-36gb').name}" in str(c.value).replace("\\", "")
               for c in at.sidebar.caption)


def test_the_device_picker_shows_names_and_sits_under_the_model():
    """The picker a visitor sees lists names; its value and the link's `device` stay the catalog id, and choosing a
    name moves the page's device; it sits right under the model, before the training settings."""
    at = AppTest.from_file("../app.py", default_timeout=30).run()
    picker = at.sidebar.selectbox(key="device_pick")
    assert picker.options == [d.name for d in CATALOG] + ["Custom capacity"]  # names, not ids
    assert picker.value == "rtx-4090" == at.sidebar.selectbox(key="device").value
    order = [w.key for w in at.sidebar.get("selectbox")]
    assert order.index("model") < order.index("device_pick") < order.index("stack")
    picker.select("h100-80gb").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="device").value == "h100-80gb"  # the link's widget followed
    assert at.query_params["device"] == "h100-80gb"  # the link carries the id
    est = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl"))
    headline = verdict(est.total_bytes, get_device("h100-80gb"), est.high_bytes).headline
    assert any(headline in str(h.value) for h in at.header)
    at.sidebar.text_input(key="device_find").set_value("T4").run()  # the find box moves the picker too
    assert at.sidebar.selectbox(key="device_pick").value == "t4"
