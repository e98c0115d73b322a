"""The performance tools' own logic (bench/common.py): what they count must be what happened."""

from __future__ import annotations

from bench.common import error_blocks

LOG = """\
  You can now view your Streamlit app in your browser.
2026-12-01 23:14:01.123 Uncaught app execution
Traceback (most recent call last):
  File "/app/ui/live_chart.py", line 144, in _plotly_js_url
    _declare_plotly_js(Runtime.instance().component_registry)
RuntimeError: module is None. This should never happen.
2026-12-01 23:14:02.000 a line about something else
Traceback (most recent call last):
  File "b.py", line 2, in f
    y
KeyError: 'k'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "c.py", line 3, in g
    z
RuntimeError: again
  Stopping...
"""


def test_each_logged_error_is_one_block_with_its_traceback():
    """Streamlit logs 'Uncaught app execution' and then the traceback: one error, counted once (the load test
    counted such an error twice, one per matching line), its exception line included."""
    blocks = error_blocks(LOG)
    assert len(blocks) == 2
    assert blocks[0].splitlines()[0].endswith("Uncaught app execution")
    assert blocks[0].splitlines()[-1] == "RuntimeError: module is None. This should never happen."
    assert blocks[1].startswith("Traceback") and "During handling" in blocks[1]
    assert blocks[1].splitlines()[-1] == "RuntimeError: again"


def test_a_clean_log_has_no_error_blocks():
    assert error_blocks("  You can now view your Streamlit app in your browser.\n  Stopping...\n") == []
