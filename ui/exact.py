"""The "Trace exactly" section of the calculator and the Compare page: PyTorch's own count next to the fast estimate.

The trace runs in the server's worker pool (estimator/exact/__init__.py: one trace at a time per server, others queue and
see their place; results cached by (config, setup)). A fragment polls the pool every POLL_S seconds while a trace
is queued or running, so the rest of the page stays responsive. The chart builder `exact_bar` is a pure function.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from estimator import Device, Estimate, estimate, to_gb
from estimator import exact as ex
from estimator.i18n import _, format_number, localised_error, ngettext
from estimator.models.hub import HubConfigRefused, HubError, fetch_model, is_model_id
from estimator.models.presets import preset_ids

from .charts import USABLE_COLOR, both_units, separators
from .text import plain

POLL_S = 2.0
EXACT_COLOR = "#332288"  # indigo (Tol's palette): not one of the component colours
FAST_COLOR = "#0072B2"
SECONDS_PER_LAYER = 15.0  # for the progress bar only: a 16-layer 1B LoRA trace took ~240 s on 2 busy cores
SHALLOW_LAYERS = 6  # the layers of the two shallow traces (2 and 4)
BASE_SECONDS = 20.0  # starting the worker and importing torch


@dataclass(frozen=True)
class ExactSource:
    """The config dict to trace, or why there is none; `fast_missing` when the fast estimator refused it."""

    config: dict[str, Any] | None
    reason: str = ""
    fast_missing: str = ""


def exact_source(model_choice: str, spec_source: str, upload: Any = None, hub_token: str | None = None) -> ExactSource:
    """The config.json behind the model picker's choice: a preset's, the uploaded file's, or the Hub's."""
    if model_choice in preset_ids():
        return ExactSource(ex.preset_config(model_choice))
    if model_choice == "upload":
        if upload is None:
            return ExactSource(None, _("Upload a config.json to trace it."))
        try:
            cfg = json.loads(upload.getvalue().decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
            return ExactSource(None, _("The uploaded file is not JSON."))
        missing = "" if spec_source == "config.json" else _("the fast estimator could not read this config.json")
        return ExactSource(cfg, fast_missing=missing)
    if is_model_id(model_choice):
        try:
            _spec, hub = fetch_model(model_choice, token=hub_token)
            return ExactSource(ex.hub_config(hub))
        except HubError as exc:
            if isinstance(exc, HubConfigRefused):  # read, but the fast estimator refused it: the trace may answer
                try:
                    return ExactSource(ex.hub_config_cached(model_choice), fast_missing=localised_error(exc))
                except ex.ExactRefused:
                    pass
            return ExactSource(None, localised_error(exc))
        except ex.ExactRefused as exc:
            return ExactSource(None, localised_error(exc))
    return ExactSource(None, _("A model given by size has no architecture to trace: pick a preset, upload a "
                               "config.json or give a Hugging Face model id."))


def expected_seconds(cfg: dict[str, Any]) -> float:
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    layers = text.get("num_hidden_layers", cfg.get("num_hidden_layers", 16))
    layers = layers if isinstance(layers, int) and layers > 0 else 16
    # a model deeper than its shallow copies is traced at two depths (2 + 4 layers when the layers are identical,
    # exact/worker.py plan_depths); a layer pattern or a fallback to the full depth takes longer
    return BASE_SECONDS + SECONDS_PER_LAYER * min(layers, SHALLOW_LAYERS)


def exact_bar(fast: Estimate | None, result: ex.ExactResult, device: Device | None = None) -> go.Figure:
    """Two bars: the fast estimate and the exact trace (traced part + what was added), with the usable limit."""
    fig = go.Figure()
    exact_row, fast_row = _("Exact trace"), _("Fast estimate")
    rows = [exact_row] + ([fast_row] if fast is not None else [])
    traced_gb = to_gb(result.peak_bytes)
    added_gb = to_gb(result.total_bytes - result.peak_bytes)
    fig.add_bar(y=[exact_row], x=[traced_gb], orientation="h", name=_("Traced by PyTorch"), marker_color=EXACT_COLOR,
                hovertemplate=_("Traced: {amount}").format(amount=both_units(result.peak_bytes, 2))
                + "<extra></extra>")
    fig.add_bar(y=[exact_row], x=[added_gb], orientation="h", name=_("Added (CUDA context, slack, …)"),
                marker_color="#AA99DD",
                hovertemplate="<br>".join(f"{_(a.label)}: {'+' if a.bytes >= 0 else ''}{format_number(to_gb(a.bytes), 2)} GB" for a in result.added) + "<extra></extra>")
    if fast is not None:
        fig.add_bar(y=[fast_row], x=[to_gb(fast.total_bytes)], orientation="h", name=fast_row,
                    marker_color=FAST_COLOR,
                    hovertemplate=f"{fast_row}: {both_units(fast.total_bytes, 2)}<extra></extra>")
    if device is not None:
        fig.add_vline(x=to_gb(device.usable_bytes), line_color=USABLE_COLOR, line_dash="dash",
                      annotation_text=_("usable {gb} GB").format(gb=format_number(to_gb(device.usable_bytes))),
                      annotation_position="top")
    fig.update_layout(barmode="stack", height=120 + 40 * len(rows), margin={"l": 10, "r": 10, "t": 30, "b": 30},
                      xaxis_title=_("GB (10⁹ bytes)"), separators=separators(), legend={"orientation": "h", "y": -0.5},
                      yaxis={"categoryorder": "array", "categoryarray": rows[::-1]})
    return fig


def difference_line(fast: Estimate | None, result: ex.ExactResult) -> str:
    if fast is None:
        return _("Exact: {amount}. The fast estimate is missing for this model.").format(
            amount=both_units(result.total_bytes, 2))
    diff = fast.total_bytes - result.total_bytes
    pct = 100.0 * diff / result.total_bytes
    template = (_("Exact: {exact}; the fast estimate ({fast}) is {diff} above it ({pct} %).") if diff >= 0 else
                _("Exact: {exact}; the fast estimate ({fast}) is {diff} below it ({pct} %)."))
    return template.format(exact=both_units(result.total_bytes, 2), fast=both_units(fast.total_bytes, 2),
                           diff=both_units(abs(diff), 2), pct=("+" if pct >= 0 else "") + format_number(pct))


def _submit(key: str, payload: dict[str, Any]) -> None:
    try:
        ex.get_pool().submit(payload, key)
    except ex.ExactUnavailable as exc:  # the install went away between the render and the click
        st.session_state["_exact_error"] = str(exc)


def render_exact_choice(choices: Sequence[tuple[str, Any]], spec: Any, model_choice: str, device: Device | None,
                        upload: Any = None, hub_token: str | None = None) -> None:
    """The Compare page: one of its bars (label, setup), chosen in a select box, traced like the calculator's setup
    and set against that bar's detailed estimate (in rule mode too: the trace checks the detailed figure)."""
    if not choices:
        return
    st.subheader(_("Trace it exactly"), anchor=False)
    setups = dict(choices)
    label = st.selectbox(_("Bar to trace"), list(setups), key="exact_pick",
                         help=_("The exact trace runs one setup at a time (minutes on the server's CPU); each result "
                                "is kept, so switching back shows it at once."))
    chosen = setups.get(label, choices[0][1])
    render_exact(model_choice, spec.source, chosen, estimate(spec, chosen), device, upload=upload,
                 hub_token=hub_token, header=False)


def _unavailable(why: str) -> None:
    """No exact trace on this server: a disabled button and how to install it."""
    st.button(_("Trace exactly"), key="exact_button", disabled=True, icon=":material/memory:")
    st.caption(_("PyTorch's own count of this training step runs on the server's CPU, without a GPU, once the "
                 "optional install is there: `pip install -r requirements-exact.txt` (CPU torch, transformers, "
                 "peft), or set `{env}` to a Python that has it.").format(env=ex.PYTHON_ENV)
               + ("" if why == ex.INSTALL_HINT else f" ({plain(why.split('; ', 1)[-1])})"))


def _progress(stt: Any, config: Any) -> None:
    """A queued or running trace: its place in the queue, or its time so far against the expected time."""
    if stt.state == "queued":
        ahead = stt.position
        st.progress(0.0, text=ngettext("Queued: {n} trace ahead of yours (one trace at a time per server).",
                                       "Queued: {n} traces ahead of yours (one trace at a time per server).",
                                       ahead).format(n=ahead))
        return
    frac = min(0.95, stt.elapsed_s / expected_seconds(config))
    st.progress(frac, text=_("Tracing with PyTorch… {elapsed} s (about {expected} s expected; time "
                             "limit {limit} s). You can keep using the page.").format(
        elapsed=f"{stt.elapsed_s:.0f}", expected=f"{expected_seconds(config):.0f}",
        limit=f"{stt.time_limit_s:.0f}"))


def _result(res: Any, fast: Estimate | None, device: Device | None) -> None:
    """A finished trace: how far the fast estimate is from it, both bars, and what was added to the trace."""
    st.markdown(difference_line(fast, res))
    st.plotly_chart(exact_bar(fast, res, device), key="exact_bar", width="stretch",
                    config={"displayModeBar": False})
    st.caption(_("{versions}, in {seconds} s; peak at {phase}/{region} ({op}). Added from the estimator: "
                 "{added}.").format(
        versions=_(res.versions_label), seconds=f"{res.seconds:.0f}", phase=res.peak_phase,
        region=res.peak_region, op=res.peak_op,
        added="; ".join(f"{_(a.label)} {'+' if a.bytes >= 0 else ''}{format_number(to_gb(a.bytes), 2)} GB"
                        for a in res.added)))
    if res.depth_line:
        st.caption(_("Depth: {line}.").format(line=res.depth_line))  # our own worker's line (no user text)
    for note in res.notes:
        st.caption(plain(_(note), limit=1000))


def _trace_button(stt: Any, src: ExactSource, job: tuple[str, Any], python: str, pool: Any) -> None:
    """No result yet (or a failed one): the button that queues the trace, with what it will cost."""
    if stt.state == "failed":
        st.warning(plain(_("The trace did not finish: {error}").format(error=stt.error)), icon=":material/warning:")
    if src.fast_missing:
        st.caption(_("The fast estimate is missing: {why}. The exact trace can still answer.").format(
            why=src.fast_missing))
    st.button(_("Trace exactly"), key="exact_button", icon=":material/memory:", on_click=_submit,
              args=job,
              help=_("Runs two real Hugging Face training steps of this model and setup under PyTorch's "
                     "FakeTensorMode on the server's CPU and counts every tensor (minutes)."))
    expected = expected_seconds(src.config)
    st.caption(_("Uses {python}. Takes about {seconds} s; the result is kept for everyone who asks for the same "
                 "model and setup.").format(python=python, seconds=f"{expected:.0f}")
               + (" " + _("This deep model may need longer than the server's time limit ({limit} s).").format(
                   limit=f"{pool.time_limit_s:.0f}") if expected > pool.time_limit_s else ""))
    if st.session_state.get("_exact_error"):
        st.caption(plain(str(st.session_state.pop("_exact_error"))))


def render_exact(model_choice: str, spec_source: str, setup, fast: Estimate | None, device: Device | None,
                 upload: Any = None, hub_token: str | None = None, header: bool = True) -> None:
    """The section: availability, the button, the queue/progress while it runs, the result chart."""
    if header:
        st.subheader(_("Trace it exactly"), anchor=False)
    ok, why = ex.available()
    if not ok:
        _unavailable(why)
        return
    src = exact_source(model_choice, spec_source, upload, hub_token)
    if src.config is None:
        st.caption(plain(src.reason))
        return
    if src.fast_missing:
        fast = None
    try:
        key, payload, notes = ex.make_job(src.config, setup)
    except ex.ExactRefused as exc:
        st.info(plain(_("This cannot be traced: {error}").format(error=localised_error(exc))), icon=":material/info:")
        return
    pool = ex.get_pool()
    pending = pool.status(key).state in ("queued", "running")

    @st.fragment(run_every=POLL_S if pending else None)
    def _live() -> None:
        stt = pool.status(key)
        running = stt.state in ("queued", "running")
        if running != pending:  # just submitted (redraw once, with polling) or just finished (once, without)
            st.rerun()
        if running:
            _progress(stt, src.config)
        elif stt.state == "done" and stt.result is not None:
            _result(ex.combine(stt.result, setup, fast, notes), fast, device)
        else:
            _trace_button(stt, src, (key, payload), ok and why, pool)

    _live()
