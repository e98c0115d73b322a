"""The page language: `lang=es|en` in the address, else the language chosen earlier in this session, else the
browser's (st.context.locale), else English. Set once per rerun, before any text is drawn (app.py for the
navigation's titles, then ui.inputs.live_page for the page), and shown as a switch at the top of the
sidebar.

`lang` is not a bound widget parameter: the switch writes it into the address itself, so the address keeps it
whichever language is chosen (a bound widget would drop it whenever it equals the browser's default, and a
copied link would then open in the reader's browser language), and puts it back after a page switch."""

from __future__ import annotations

import streamlit as st

from estimator.i18n import (
    DEFAULT_LANGUAGE,
    LANGUAGES,
    N_,
    _,
    format_number,
    get_language,
    normalise_language,
    set_language,
)

PARAM = "lang"
_CHOSEN = "_lang_chosen"  # the language the address or the switch chose in this session
SWITCH = "lang_switch"
BAD_LANG_NOTE = N_("The link's value for 'lang' was not valid; using {language}.")
# The switch's translate icon, drawn before its label by CSS: a label written ":material/translate: Language" is
# what Streamlit puts in the aria-labels ("Help for :material/translate: Language"), so the label stays plain text
# and the icon, decoration only, has an empty alternative text (CSS content "…" / "").
_ICON_CSS = (f"<style>.st-key-{SWITCH} [data-testid='stWidgetLabel'] p::before {{ content: 'translate' / ''; "
             "font-family: 'Material Symbols Rounded'; font-weight: 400; margin-right: 0.25rem; "
             "vertical-align: bottom; }</style>")


def browser_language() -> str:
    """The browser's language when the app has it, else English."""
    try:
        locale = st.context.locale
    except Exception:  # no browser context (bare script run)
        locale = None
    return normalise_language(locale) or DEFAULT_LANGUAGE


def choose_language() -> str:
    """Decide this rerun's language and set it for every _() and format_number() that follows."""
    raw = st.query_params.get(PARAM)
    code = normalise_language(raw) if raw is not None else None
    if code is not None:
        st.session_state[_CHOSEN] = code
        if raw != code:  # ?lang=ES or es-MX: write the canonical code
            st.query_params[PARAM] = code
    else:
        code = st.session_state.get(_CHOSEN)
        if code is not None:  # a page switch dropped it from the address: put it back
            st.query_params[PARAM] = code
        else:
            code = browser_language()
    set_language(code)
    return code


def language_note() -> str | None:
    """A note for an address whose `lang` is not a language the app speaks (in the language used instead)."""
    raw = st.query_params.get(PARAM)
    if raw is not None and normalise_language(raw) is None:
        return _(BAD_LANG_NOTE).format(language=LANGUAGES[choose_language()])
    return None


def _switched() -> None:
    code = st.session_state.get(SWITCH)
    if code in LANGUAGES:
        st.session_state[_CHOSEN] = code
        st.query_params[PARAM] = code


def language_switch() -> str:
    """The switch at the top of the sidebar (English | Español); returns the language in use."""
    code = choose_language()
    st.session_state[SWITCH] = code
    st.sidebar.html(_ICON_CSS)
    st.sidebar.segmented_control(
        _("Language"), list(LANGUAGES), key=SWITCH, format_func=LANGUAGES.__getitem__,
        on_change=_switched, required=True, help=_("The page's language; the link keeps it (lang=es or lang=en)."))
    return code


def localised(frame, formats: dict[str, tuple[int, str]]):  # noqa: ANN001, ANN201 - pandas frame in and out
    """A table's number columns for the page's language: {column: (decimals, unit suffix)}. English keeps
    numbers (sortable; number_columns gives their printf format); another language gets the numbers as text
    formatted by Babel ("17,00 GB"), since a table's printf formats know only the decimal point."""
    if get_language() == DEFAULT_LANGUAGE:
        return frame
    shown = frame.copy()
    for column, (digits, suffix) in formats.items():
        if column in shown.columns:
            shown[column] = [format_number(float(v), digits) + suffix if v == v else "" for v in shown[column]]
    return shown


def number_columns(formats: dict[str, tuple[int, str]], labels: dict[str, str] | None = None,
                   helps: dict[str, str] | None = None) -> dict:
    """Column settings for the columns localised() formats: printf numbers in English, right-aligned text
    otherwise. labels and helps: optional (translated) header and tooltip per column."""
    labels, helps = labels or {}, helps or {}
    english = get_language() == DEFAULT_LANGUAGE
    config = {}
    for column, (digits, suffix) in formats.items():
        label, help_ = labels.get(column), helps.get(column)
        config[column] = (st.column_config.NumberColumn(label, format=f"%.{digits}f{suffix}", help=help_) if english
                          else st.column_config.TextColumn(label, help=help_, alignment="right"))
    return config
