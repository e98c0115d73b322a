"""A Plotly chart that updates in place: the calculator's memory bar keeps one plot across reruns and its bars
glide to their new values.

st.plotly_chart (Streamlit 1.67) cannot: its element id hashes the figure's JSON even when a key is given
(streamlit/elements/plotly_chart.py: compute_and_register_element_id(..., key_as_main_identity=False,
plotly_spec=...)), so every change mounts a new chart (verified in a browser: a marker set on the plot is gone
after a slider change). This is a small Streamlit component (st.components.v2: keyed, so its identity stays)
that draws the same figure with plotly.js's own `Plotly.react`, which diffs the figure into the existing plot
and, with `layout.transition`, animates the bars. plotly.js is the copy bundled with the installed plotly
package (plotly/package_data/plotly.min.js), served by the Streamlit server itself: no CDN, no network.

The plot follows its container's width (a ResizeObserver: the window, the sidebar opening or collapsing), and
grows when a narrow container wraps the legend into more rows than the builder's height leaves room for.

The element lives in the page (no iframe, no shadow root), so the plot is the same `.js-plotly-plot` div that
st.plotly_chart draws: the browser tests read it the same way."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import plotly
import streamlit as st
import streamlit.components.v1 as components_v1
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

TRANSITION_MS = 400  # the bars' glide between values: long enough to follow, short enough not to wait for
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

# The component's code: called with the new data on every rerun. The first call loads plotly.js (once per
# browser tab) and plots; later calls update the same plot in place. Colours and font follow the app's theme
# (read from the page, so light and dark both work), on the app's own background as with st.plotly_chart.
_JS = """
function loadPlotly(src) {
  if (!window.__wifPlotly) {
    window.__wifPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window.__wifPlotly = null; reject(new Error("plotly.js did not load")); };
      document.head.appendChild(script);
    });
  }
  return window.__wifPlotly;
}

function background(el) {  // the first opaque background up the tree: the app's, light or dark
  for (; el; el = el.parentElement) {
    const bg = getComputedStyle(el).backgroundColor;
    if (bg && bg !== "transparent" && !/^rgba\\(.*,\\s*0\\)$/.test(bg)) return bg;
  }
  return "#ffffff";
}

function themed(layout, host) {
  const style = getComputedStyle(host);
  const text = style.color || "#31333f";
  const grid = text.replace(/^rgb\\((.*)\\)$/, "rgba($1, 0.15)");
  const axis = (spec) => Object.assign({gridcolor: grid, linecolor: grid, zerolinecolor: grid}, spec || {});
  return Object.assign({}, layout, {
    paper_bgcolor: background(host), plot_bgcolor: background(host),
    font: Object.assign({family: style.fontFamily, color: text}, layout.font || {}),
    xaxis: axis(layout.xaxis), yaxis: axis(layout.yaxis),
  });
}

// The plot follows its container's width: a ResizeObserver on the host (the window resized, the sidebar
// opened or collapsed, a phone turned) relayouts the plot to the host's width, debounced over the sidebar's slide; then
// settle() makes room for the legend. The builders' heights (ui/charts.py) leave room for a legend of up to
// two rows above the plot; a narrow plot wraps it into more, which plotly.js (4.1) does not add to the figure's
// height (it caps the margin it pushes and the legend covers the plot and the "usable" label), so the plot
// grows by the extra rows. And plotly.js places a legend that sits in the margin from the margins it had
// before a resize pushed them again (a legend that went from two rows to one lands on the plot): a relayout of
// the legend's own position, once the margins have settled, puts it back above the plot.
function legendRows(legend) {
  const rows = new Set();
  for (const item of legend.querySelectorAll("g.traces")) {
    const m = /translate\\(\\s*[-0-9.e]+[ ,]+([-0-9.e]+)/.exec(item.getAttribute("transform") || "");
    if (m) rows.add(Math.round(parseFloat(m[1])));
  }
  return rows.size;
}

function settle(host, baseHeight) {
  const Plotly = window.Plotly;
  const full = host._fullLayout;
  const legend = host.querySelector("g.legend");
  if (!Plotly || !full || !legend || !host.isConnected) return;
  const update = {};
  const rows = legendRows(legend);
  const box = legend.getBoundingClientRect();
  if (rows > 2) {
    const height = Math.round(baseHeight + (rows - 2) * box.height / rows);  // the extra rows' height
    if (Math.abs(height - full.height) > 1) update.height = height;
  } else if (Math.abs(baseHeight - full.height) > 1) {
    update.height = baseHeight;
  }
  const plotTop = host.getBoundingClientRect().top + full._size.t;
  if (update.height || box.bottom > plotTop + 1) update["legend.y"] = host.layout.legend.y;
  // The device's two labels on one row (ui/charts.py overlay_items) that a narrow plot makes touch: the total's
  // goes one row down, as the builder does when the lines are close.
  const notes = host.layout.annotations || [];
  const usable = notes.findIndex((a) => a.name === "usable-label");
  const total = notes.findIndex((a) => a.name === "capacity-label");
  const drawn = host.querySelectorAll("g.annotation");
  if (usable >= 0 && total >= 0 && drawn.length === notes.length && !notes[total].yshift) {
    const a = drawn[usable].getBoundingClientRect();
    const b = drawn[total].getBoundingClientRect();
    if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
      update["annotations[" + total + "].yshift"] = -Math.round(a.height);
    }
  }
  if (!Object.keys(update).length) return;
  if (update.height) {
    host.__wifExtra = update.height - baseHeight;  // kept for the next redraw at this width
    host.style.height = update.height + "px";
  }
  return Plotly.relayout(host, update);
}

function followWidth(host) {
  if (host.__wifResize) return;
  let width = host.clientWidth;
  let timer = null;
  host.__wifResize = new ResizeObserver(() => {
    if (!host.clientWidth || host.clientWidth === width) return;
    width = host.clientWidth;
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (!window.Plotly || !host.data || !host.isConnected) return;
      // the width itself (Plotly.Plots.resize does nothing once a relayout has set the layout's height)
      window.Plotly.relayout(host, {width: host.clientWidth}).then(() => settle(host, host.__wifHeight));
    }, 80);
  });
  host.__wifResize.observe(host);
}

export default function (component) {
  const data = component.data[0];  // [payload]: see live_plotly_chart
  const parentElement = component.parentElement;
  let host = parentElement.querySelector(":scope > .wif-live-plot");
  if (!host) {
    host = document.createElement("div");
    host.className = "wif-live-plot";
    parentElement.appendChild(host);
  }
  const figure = data.figure;
  host.setAttribute("role", "img");
  host.setAttribute("aria-label", data.alt || "");
  host.style.width = "100%";
  host.__wifHeight = figure.layout.height || 450;  // the builder's height (settle() may add legend rows)
  if (!host.data) host.style.height = host.__wifHeight + "px";
  const draw = (Plotly) => {
    // Same structure as the plot on screen (only the numbers moved): glide the bars there. Plotly.animate
    // moves the existing bars, text and axis range frame by frame without redrawing the plot (a redraw is
    // ~5-7x the work on a 2-core machine); anything else (another model's segments, the language, the
    // device's line) is drawn anew with Plotly.react, in place.
    const glide = host.data && host.__wifKey === data.key && data.transition_ms > 0;
    host.__wifKey = data.key;
    if (glide) {
      const moved = {shapes: figure.layout.shapes || [], annotations: figure.layout.annotations || []};
      for (const axis of ["xaxis", "yaxis"]) {
        if (figure.layout[axis] && figure.layout[axis].range) moved[axis + ".range"] = figure.layout[axis].range;
      }
      const timing = {duration: data.transition_ms, easing: "cubic-in-out"};
      return Plotly.animate(host, {data: figure.data, traces: figure.data.map((_, i) => i), layout: moved},
                            {transition: timing, frame: {duration: data.transition_ms, redraw: false},
                             mode: "immediate"}).then(() => settle(host, host.__wifHeight));
    }
    const layout = themed(figure.layout, host);
    layout.autosize = true;
    layout.height = host.__wifHeight + (host.__wifExtra || 0);
    host.style.height = layout.height + "px";
    // responsive off: plotly.js's own handler follows the window only, not the container (followWidth does both)
    return Plotly.react(host, figure.data, layout, Object.assign({}, data.config || {}, {responsive: false}))
      .then(() => { followWidth(host); return settle(host, host.__wifHeight); });
  };
  if (window.Plotly) {
    draw(window.Plotly);
  } else {
    loadPlotly(data.src).then(draw).catch((err) => { host.textContent = String(err); });
  }
}
"""


@lru_cache(maxsize=1)
def _asset_dir() -> str:
    """A folder holding the installed plotly.js, for the server to serve (copied once per process and plotly
    version: the server serves only files inside a component's folder)."""
    folder = Path(tempfile.gettempdir()) / f"will-it-fit-plotly-{plotly.__version__}"
    target = folder / "plotly.min.js"
    if not target.is_file() or target.stat().st_size != PLOTLY_JS.stat().st_size:
        folder.mkdir(parents=True, exist_ok=True)
        # A partial file of this process's own (several servers on one host may start at once), renamed into
        # place in one step: no process ever serves a half-copied file.
        handle, partial = tempfile.mkstemp(prefix=".plotly.min.js.", dir=folder)
        os.close(handle)
        shutil.copyfile(PLOTLY_JS, partial)
        Path(partial).replace(target)
    return str(folder)


@lru_cache(maxsize=1)
def _renderer():
    return st.components.v2.component("live_plotly", js=_JS, isolate_styles=False)


# declare_component names the component after its caller's module, found with inspect.getmodule(frame)
# (streamlit/components/v1/component_registry.py: _get_module_name). On a miss that fills inspect's module-by-file
# cache without a lock (CPython 3.11 inspect.getmodule), so two sessions' first runs declaring at once can find no
# module and raise "module is None" (the load test's one burst of errors on a fresh server, 4 to 12 sessions
# failing to load). One declaration at a time: the lock.
_DECLARE_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _declare_plotly_js(registry: object) -> None:
    """Register the plotly.js folder once per server (keyed on the runtime's registry), not on every rerun."""
    with _DECLARE_LOCK:
        components_v1.declare_component("plotly_js", path=_asset_dir())  # registers the folder for this server


def _plotly_js_url() -> str:
    """Where the browser fetches plotly.js: a static folder registered as a (v1) component, served by the
    Streamlit server under /component/<module>.<name>/ (honouring server.baseUrlPath)."""
    if get_script_run_ctx() is not None:  # declare_component registers only inside a script run
        _declare_plotly_js(Runtime.instance().component_registry)
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    return ("/" + base if base else "") + f"/component/{__name__}.plotly_js/plotly.min.js"


# What may change while the plot glides (Plotly.animate): the numbers a trace shows, the value axis's range and
# where the device's line and label sit. Everything else is the plot's structure.
_MOVING_TRACE_KEYS = ("x", "y", "text", "hovertext", "error_x", "error_y")
_MOVING_LAYOUT_KEYS = ("shapes", "annotations")


def structure_key(figure: dict[str, Any]) -> str:
    """A digest of everything in the figure but the moving numbers: equal keys → the new figure is the old one
    with its bars, axis range and device line moved, which Plotly.animate can glide to."""
    data = [{k: v for k, v in trace.items() if k not in _MOVING_TRACE_KEYS} for trace in figure["data"]]
    layout = {k: v for k, v in figure["layout"].items() if k not in _MOVING_LAYOUT_KEYS}
    for axis in ("xaxis", "yaxis"):
        if axis in layout:
            layout[axis] = {k: v for k, v in layout[axis].items() if k != "range"}
    labels = [(n.get("text"), n.get("font")) for n in figure["layout"].get("annotations", ())]
    shapes = [(s.get("type"), s.get("line"), s.get("name")) for s in figure["layout"].get("shapes", ())]
    text = json.dumps([data, layout, labels, shapes], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def live_plotly_chart(figure: dict[str, Any], *, key: str, alt: str = "", config: dict[str, Any] | None = None,
                      transition_ms: int = TRANSITION_MS) -> None:
    """Draw a Plotly figure (a plain {"data": [...], "layout": {...}} dict, as the ui.charts builders make)
    that updates in place on every rerun with the same key, its bars animating to their new values.
    layout.uniformtext is left out of a gliding chart: plotly.js (4.1) skips the transition of bars whose layout
    sets it. transition_ms=0 keeps it (and every change is drawn with Plotly.react, in place, without a glide)."""
    if transition_ms > 0:
        figure = {**figure, "layout": {k: v for k, v in figure["layout"].items() if k != "uniformtext"}}
    payload = {"figure": figure, "alt": alt, "config": config or {}, "src": _plotly_js_url(),
               "transition_ms": int(transition_ms), "key": structure_key(figure)}
    # In a one-item list: Streamlit scans a dict's values for dataframes (typing-Protocol isinstance checks,
    # ~20 % of this call) and passes a list straight to json.dumps.
    _renderer()(key=key, data=[payload], height="content")


def sent_payload(element_json: str) -> dict[str, Any]:
    """The payload live_plotly_chart sent, from the element's JSON (tests read the figure back with it)."""
    return json.loads(element_json)[0]
