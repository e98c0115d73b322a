"""Browser tests (marker e2e): one real `streamlit run app.py` server per session, driven by Playwright.

The browser is a system Chromium when there is one (CHROMIUM_PATH, /usr/bin/chromium, chromium or
chromium-browser on PATH), else Playwright's own download; with neither, every test here is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import LAUNCH_ARGS, streamlit_server, system_chromium


def _playwright_chromium() -> bool:
    """Is Playwright's own Chromium installed? (Checked without launching it.)"""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            return Path(p.chromium.executable_path).is_file()
    except Exception:  # noqa: BLE001 - no driver, no browser: either way, no browser tests
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    ours = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in ours:
        item.add_marker(pytest.mark.e2e)
    if ours and system_chromium() is None and not _playwright_chromium():
        skip = pytest.mark.skip(reason="no Chromium: set CHROMIUM_PATH, install chromium, or "
                                       "`python -m playwright install chromium`")
        for item in ours:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's launch options plus a system Chromium and the flags this sandbox needs."""
    args = {**browser_type_launch_args, "args": [*browser_type_launch_args.get("args", []), *LAUNCH_ARGS]}
    exe = system_chromium()
    if exe:
        args["executable_path"] = exe
    return args


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    """A real `streamlit run app.py` for the whole session (bench/common.py; its log is in the error if it
    fails to start)."""
    try:
        with streamlit_server() as (url, _proc, _started):
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))
