"""What a screen reader hears and what a 1,440 px screen shows whole: the language switch's labels are plain
words (no icon shortcode), the breakdown shows every row and column with its Total row's text uncut, and the
import box's three lists fit the sidebar's width."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.helpers import fill_text_area, open_app, open_box
from ui.report import BREAKDOWN_WIDTHS

pytestmark = pytest.mark.e2e

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
CELL_PADDING = 2 * 8  # glide-data-grid's cell padding, left and right (Streamlit's theme)


def test_the_language_switch_is_named_in_words(page: Page, app_url: str):
    open_app(page, app_url + "/")
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_role("button", name="Help for Language", exact=True)).to_have_count(1)
    expect(sidebar.get_by_role("radiogroup", name="Language", exact=True)).to_have_count(1)
    labels = sidebar.evaluate("e => [...e.querySelectorAll('[aria-label]')].map(x => x.getAttribute('aria-label'))")
    assert not [label for label in labels if ":material/" in label], labels
    # the icon is still drawn, before the label (CSS, with an empty alternative text)
    icon = page.locator(".st-key-lang_switch [data-testid='stWidgetLabel'] p").evaluate(
        "p => getComputedStyle(p, '::before').fontFamily")
    assert "Material Symbols" in icon


def test_the_breakdown_shows_every_row_and_its_total_whole_at_1440(page: Page, app_url: str):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_app(page, app_url + "/")
    open_box(page, "breakdown_box")
    grid = page.get_by_test_id("stDataFrame").filter(has=page.locator("th", has_text="Share"))
    grid.evaluate("e => e.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(500)
    scroll = grid.evaluate("e => { const s = e.querySelector('.dvn-scroller');"
                           " return [s.scrollWidth, s.clientWidth, s.scrollHeight, s.clientHeight]; }")
    assert scroll[0] <= scroll[1] and scroll[2] <= scroll[3], scroll  # no column or row out of view
    # Every text of the two label columns fits its column (the grid draws on a canvas: measure the text with the
    # grid's own font; the columns are at least their set widths when nothing scrolls).
    widths = grid.evaluate("""(e) => {
        const font = getComputedStyle(e).fontFamily;
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = '14px ' + font;
        const texts = (col) => [...e.querySelectorAll('td[aria-colindex="' + col + '"]')].map(td => td.textContent);
        return {component: texts(1).map(t => [t, ctx.measureText(t).width]),
                item: texts(2).map(t => [t, ctx.measureText(t).width])};
    }""")
    total = [t for t, _w in widths["item"] if t.startswith("peak: ")]
    assert total == ["peak: backward, recomputing last layer"], total
    for column, measured in widths.items():
        for text, width in measured:
            assert width + CELL_PADDING <= BREAKDOWN_WIDTHS[column], (column, text, width)


def test_the_import_boxs_lists_fit_the_sidebar_at_1440(page: Page, app_url: str):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_app(page, app_url + "/")
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Import a training config").click()
    fill_text_area(page, "config_text", (CONFIGS / "axolotl/llama-3/lora-1b.yml").read_text(), then="config_read")
    group = page.locator(".st-key-config_list")
    expect(group).to_be_visible(timeout=60_000)
    group.evaluate("e => e.scrollIntoView({block: 'center'})")
    edge = page.locator(".st-key-config_text").bounding_box()  # the box's content width, as the paste area shows
    options = group.get_by_role("radio")
    expect(options).to_have_count(3)
    for i in range(3):
        box = options.nth(i).bounding_box()
        assert edge["x"] - 0.5 <= box["x"] and box["x"] + box["width"] <= edge["x"] + edge["width"] + 0.5, (i, box)
    assert group.evaluate("e => { const g = e.querySelector('[role=radiogroup]'); "
                          "return g.scrollWidth <= g.clientWidth; }")
    assert options.nth(2).inner_text() == "Not honoured (1)"
