"""The calculator's memory chart updates in place (ui/live_chart.py): a slider change keeps the same plot
element (no remount, no flash), the bars take the estimator's new values and glide there (a Plotly layout
transition: the bar's drawn edge passes through the values between), and plotly.js comes from the app's own
server."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from estimator import estimate, load_preset, to_gb
from estimator.job.stack import resolve_setup
from tests.e2e.helpers import chart_bars, open_app, wait_for_app_run
from ui.live_chart import TRANSITION_MS

pytestmark = pytest.mark.e2e

PLOT = ".st-key-memory_bar .js-plotly-plot"


def activations_gb(batch: int) -> float:
    est = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl", batch=batch))
    return to_gb(est.components_bytes["activations"])


def test_a_slider_change_updates_the_same_plot_and_the_bars_glide(page: Page, app_url: str):
    scripts: list[str] = []
    page.on("request", lambda r: scripts.append(r.url) if "plotly" in r.url else None)
    open_app(page, app_url + "/?device=rtx-4090")
    before = {t["name"]: t["x"][0] for t in chart_bars(page)}
    range_before = page.locator(PLOT).evaluate("el => el.layout.xaxis.range")
    assert before["Activations"] == pytest.approx(activations_gb(1), abs=1e-9)
    # Mark the plot element, and note if it ever leaves the page.
    page.evaluate("""(sel) => {
        const plot = document.querySelector(sel);
        plot.dataset.wifMarker = 'kept';
        window.__wifRemoved = false;
        new MutationObserver(() => { if (!plot.isConnected) window.__wifRemoved = true; })
            .observe(document.body, {childList: true, subtree: true});
    }""", PLOT)
    # Record the Activations bar's right edge (its SVG path's H command) on every animation frame.
    page.evaluate("""(sel) => {
        window.__wifEdges = [];
        const edge = () => {
            const bar = [...document.querySelectorAll(sel + ' g.trace.bars')]
                .find(g => g.__data__ && g.__data__[0] && g.__data__[0].trace.name === 'Activations');
            const m = bar && /H([0-9.]+)/.exec(bar.querySelector('path').getAttribute('d'));
            if (m) window.__wifEdges.push(parseFloat(m[1]));
            requestAnimationFrame(edge);
        };
        edge();
    }""", PLOT)
    slider = page.locator(".st-key-batch input[type=range]")
    slider.focus()
    page.keyboard.press("ArrowRight")  # batch 1 → 2
    wait_for_app_run(page)
    page.wait_for_function("(sel) => document.querySelector(sel).data.some(t => t.name === 'Activations' && "
                           "t.x[0] > %r)" % (activations_gb(1) + 0.1), arg=PLOT)
    after = {t["name"]: t["x"][0] for t in chart_bars(page)}
    assert after["Activations"] == pytest.approx(activations_gb(2), abs=1e-9) != before["Activations"]
    assert after["Weights (frozen base)"] == before["Weights (frozen base)"]
    assert page.locator(PLOT).evaluate("el => el.dataset.wifMarker") == "kept"  # the same element
    assert page.evaluate("() => window.__wifRemoved") is False
    assert page.locator(PLOT).count() == 1
    page.wait_for_timeout(2 * TRANSITION_MS)
    edges = page.evaluate("() => window.__wifEdges")
    start, end = edges[0], edges[-1]
    assert end > start  # batch 2 holds more activations: the bar grew...
    assert any(start < x < end for x in edges)  # ...through the values between (a glide, not a jump)
    # The scale kept still (a round axis end, ui.charts.axis_top): only the bars moved.
    assert page.locator(PLOT).evaluate("el => el.layout.xaxis.range") == range_before
    # plotly.js is the installed plotly package's copy, served by the app's server (no CDN).
    assert scripts and all(url.startswith(app_url) for url in scripts)
    assert any(url.endswith("/component/ui.live_chart.plotly_js/plotly.min.js") for url in scripts)


# The plot's geometry in the page: its host's width, the drawn SVG's width, the legend's box, the plot area's
# top and the "usable" label's box (client pixels).
_GEOMETRY = """(sel) => {
    const plot = document.querySelector(sel);
    const box = (el) => { const b = el.getBoundingClientRect();
                          return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
    const usable = [...plot.querySelectorAll('g.annotation')].find(a => a.textContent.includes('usable'));
    return {host: plot.clientWidth, svg: plot.querySelector('.main-svg').getBoundingClientRect().width,
            legend: box(plot.querySelector('g.legend')), usable: box(usable),
            plotTop: plot.getBoundingClientRect().top + plot._fullLayout._size.t};
}"""


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _settled_geometry(page: Page, before: int | None) -> dict:
    """The geometry once the container has changed width from `before` and the plot has followed it (or after
    5 s, to report what it kept)."""
    page.wait_for_function("([sel, before]) => document.querySelector(sel).clientWidth !== before",
                           arg=[PLOT, before])
    ok = ("(sel) => { const g = (" + _GEOMETRY + ")(sel); "
          "return Math.abs(g.svg - g.host) < 2 && g.legend.bottom <= g.plotTop + 1; }")
    try:
        page.wait_for_function(ok, arg=PLOT, timeout=5_000)
    except Exception:  # noqa: BLE001 - the assertions below say what is wrong
        pass
    page.wait_for_timeout(300)
    return page.locator(PLOT).evaluate(f"(el, sel) => ({_GEOMETRY})(sel)", PLOT)


def test_the_chart_follows_its_container_and_keeps_legend_and_usable_label_apart(page: Page, app_url: str):
    """Widened window, collapsed sidebar, a phone: the plot takes its container's width each time, the legend
    stays above the plot and off the "usable" label (plotly.js's own resize follows the window only and places
    a legend that changed rows from the old margins)."""
    page.set_viewport_size({"width": 1440, "height": 900})
    open_app(page, app_url + "/?device=laptop-36gb")
    seen: dict[str, dict] = {}
    previous = ""
    for name, resize in (("1440", None), ("1920", {"width": 1920, "height": 1000}), ("1920 sidebar collapsed", "collapse"),
                         ("390", {"width": 390, "height": 844}), ("1440 again", {"width": 1440, "height": 900})):
        if resize == "collapse":
            page.hover("[data-testid=stSidebar]")
            page.get_by_test_id("stSidebarCollapseButton").locator("button").click()
        elif resize:
            page.set_viewport_size(resize)
        seen[name] = g = _settled_geometry(page, seen[previous]["host"] if seen else None)
        previous = name
        assert abs(g["svg"] - g["host"]) < 2, (name, g)  # the plot follows its container's width
        assert g["legend"]["bottom"] <= g["plotTop"] + 1, (name, g)  # the legend above the plot area
        assert not _overlap(g["legend"], g["usable"]), (name, g)
    assert seen["1920 sidebar collapsed"]["host"] > seen["1920"]["host"] + 100  # the sidebar's width came back
    assert seen["390"]["host"] < 400 < seen["1440 again"]["host"]
