"""The Compare page's pinned setups (issue 30): pin the sidebar's setup (up to four), see them side by side on one
axis (ui.page_charts.pins_chart_spec: memory, tokens per second, the run's time or cost) with a table, and one link
that opens all of them. The pins live in the address (`pins=`, ui/pins.py), so a reload, a page switch and a shared
link keep them; the dataset size and price are the calculator's run-box inputs (`tokens=`, `epochs=`, `price=`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from estimator.i18n import _, format_number, localised_error
from estimator.models.hub import HubError, fetch_model
from ui.lang import PARAM as LANG_PARAM
from ui.live_chart import live_plotly_chart
from ui.model_box import hub_token
from ui.page_charts import pins_chart_spec
from ui.params import BY_SIZE, widget
from ui.pins import (
    MAX_PINS,
    PARAM,
    PinResult,
    duration,
    encode_pin,
    money,
    pin_setup_line,
    pin_title,
    pin_values,
    price_pin,
    read_pins,
    resolve_pin,
)
from ui.report import share_url
from ui.sliders import typed_size
from ui.text import plain, present_table, warn_notes
from ui.url_state import remember_page_value

if TYPE_CHECKING:
    from ui.trainer_inputs import TrainerInputs
    from ui.values import Inputs


def _pins_now() -> list[str]:
    return list(st.query_params.get_all(PARAM))


def _set_pins(texts: list[str]) -> None:
    """The pins into the address (and Session State, which the page switch reads back: ui.url_state)."""
    if texts:
        st.query_params[PARAM] = texts
    elif PARAM in st.query_params:
        del st.query_params[PARAM]
    st.session_state[PARAM] = list(texts)
    remember_page_value(PARAM, texts)


def _add_pin(text: str) -> None:
    texts = _pins_now()
    if text not in texts:
        _set_pins([*texts, text][-MAX_PINS:])


def _remove_pin(text: str) -> None:
    _set_pins([t for t in _pins_now() if t != text])


def _clear_pins() -> None:
    _set_pins([])


def _read_hub(model: str) -> Any:  # noqa: ANN401 - a ModelSpec
    """A pinned Hub model, read as the sidebar reads it (estimator.models.hub caches it)."""
    try:
        return fetch_model(model, token=hub_token())[0]
    except HubError as exc:
        raise ValueError(localised_error(exc)) from None


def _current_pin(inputs: Inputs, trainer_in: TrainerInputs) -> tuple[str | None, list[str]]:
    """The sidebar's setup as a pin (None when a link cannot hold it: an uploaded config) and its notes."""
    try:
        size = typed_size() if inputs.model_choice == BY_SIZE else None
        values, notes = pin_values(inputs.model_choice, inputs.model, trainer_in.setup, inputs.device,
                                   trainer_in.trainer, inputs.rule, size)
    except ValueError as exc:
        return None, [_("This setup cannot be pinned: {reason}.").format(reason=localised_error(exc))]
    return encode_pin(values), notes


def _dataset_inputs(present: bool) -> tuple[int, float, float]:
    """The dataset's tokens per epoch, the epochs and the price per GPU-hour (0: not given), the calculator's run box's
    rows (one name each, ui/params.py), in an expander in presentation mode."""
    box = st.expander(_("Dataset size and price"), expanded=False) if present else st.container()
    with box:
        left, middle, right = st.columns(3)
        tokens = int(widget("tokens", left) or 0)
        epochs = float(widget("epochs", middle) or 1.0)
        price = float(widget("price", right) or 0.0)
    return tokens, epochs, price


def _priced(texts: list[tuple[str, dict[str, str]]], tokens: int, epochs: float,
            price: float) -> tuple[list[PinResult], list[str]]:
    results: list[PinResult] = []
    notes: list[str] = []
    for i, (text, values) in enumerate(texts, start=1):
        try:
            result = price_pin(resolve_pin(text, values, hub=_read_hub), tokens or None, price or None, epochs)
        except ValueError as exc:
            notes.append(_("Pinned setup {i} could not be priced ({reason}); it is left out.").format(
                i=i, reason=localised_error(exc)))
            continue
        results.append(result)
        notes += [_("Pinned setup {i}: {note}").format(i=i, note=n) for n in result.job.notes]
        if result.time_note:
            notes.append(_("Pinned setup {i}: time unknown ({reason}).").format(i=i, reason=result.time_note))
    return results, notes


def _table(results: list[PinResult]) -> pd.DataFrame:
    """One row per pin: what it is, its memory against its device, its speed, its run's time and cost."""
    rows = []
    for i, r in enumerate(results, start=1):
        est = r.estimate
        rows.append({  # the numbers first, the long setup line last (a narrow table cuts the last column)
            _("Pin"): str(i), _("Setup"): pin_title(r.job),
            _("Memory (GB)"): _("{total} (likely {low}–{high})").format(
                total=format_number(est.total_bytes / 1e9), low=format_number(est.low_bytes / 1e9),
                high=format_number(est.high_bytes / 1e9)),
            _("Usable (GB)"): format_number(r.usable_bytes / 1e9), _("Verdict"): _(r.band),
            _("Tokens/s"): format_number(r.tokens_per_second, 0) if r.tokens_per_second is not None else "–",
            _("Time per run"): duration(r.run.seconds) if r.run is not None else "–",
            _("Cost per run"): money(r.cost.total) if r.cost is not None else "–",
            _("Stack · batch · device"): pin_setup_line(r.job),
        })
    return pd.DataFrame(rows)


def pins_section(inputs: Inputs, trainer_in: TrainerInputs) -> None:
    """Setups side by side: the pin and clear buttons, the dataset size and price, the chart, the table, a button to
    unpin each, and the link that opens them all."""
    st.header(_("Setups side by side"))
    st.caption(_("Pin the sidebar's setup, change it, pin again: up to {n} setups on one axis (memory against each "
                 "one's device, tokens per second, and with a dataset size the time and cost of a run). The link "
                 "below opens all of them.").format(n=MAX_PINS))
    raws = _pins_now()
    read, notes = read_pins(raws)
    st.session_state[PARAM] = raws  # what the address holds, for the page switch (ui.url_state.remember_inputs)
    current, current_notes = _current_pin(inputs, trainer_in)
    pinned = current is not None and current in [t for t, _v in read]
    full = len(read) >= MAX_PINS
    left, right = st.columns(2)
    left.button(_("Pinned") if pinned else _("Pin this setup"), icon=":material/push_pin:", key="pin_add",
                on_click=_add_pin, args=(current,), disabled=current is None or pinned or full,
                help=_("Up to {n} pins: unpin one to add another.").format(n=MAX_PINS) if full else None,
                type="primary", width="stretch")
    right.button(_("Clear pins"), icon=":material/clear_all:", key="pin_clear", on_click=_clear_pins,
                 disabled=not raws, width="stretch")
    tokens, epochs, price = _dataset_inputs(inputs.presentation)
    results, price_notes = _priced(read, tokens, epochs, price)
    warn_notes(notes + price_notes + (current_notes if not pinned else []))
    if not results:
        st.info(_("No setup pinned yet: set up the sidebar, then press *Pin this setup*."), icon=":material/info:")
        return
    spec = pins_chart_spec(results, font_size=18 if inputs.presentation else None)
    live_plotly_chart(spec, key="pins_chart", config={"displayModeBar": False}, transition_ms=0,
                      alt=_("Pinned setups side by side: {pins}").format(pins="; ".join(
                          f"{i}. {pin_title(r.job)}, {format_number(r.estimate.total_bytes / 1e9)} GB"
                          for i, r in enumerate(results, start=1))))
    if not tokens:
        st.caption(_("Give a dataset size above for each setup's time per run, and a price per GPU-hour for its "
                     "cost."))
    table = _table(results)
    if inputs.presentation:
        present_table(table)
    else:
        st.dataframe(table, hide_index=True, key="pins_table")
    columns = st.columns(MAX_PINS)
    for i, (col, r) in enumerate(zip(columns, results, strict=False), start=1):
        col.button(_("Unpin {i}").format(i=i), key=f"pin_remove_{i}", on_click=_remove_pin, args=(r.job.text,),
                   icon=":material/close:", width="stretch")
    params: dict[str, list[str]] = {PARAM: [r.job.text for r in results]}
    for key in ("tokens", "epochs", "price", LANG_PARAM):
        if key in st.query_params:
            params[key] = st.query_params.get_all(key)
    st.code(share_url(st.context.url, params), language=None)
    st.caption(plain(_("This link opens these {n} setups, with the dataset size and price, on the Compare page.")
                     .format(n=len(results))))
