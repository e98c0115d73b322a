"""Finding a device by name or nickname: the sidebar's 'Find a device' box and the CLI's --device."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from estimator import estimate, get_device, load_preset, verdict
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
