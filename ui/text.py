"""Text helpers every page and sidebar part uses: Markdown-escaped text (`plain`), notes shown as literal
warnings, and presentation mode's CSS and static tables. Nothing from the URL or an uploaded file is ever
rendered as HTML or Markdown: it goes through `plain` first. Imports nothing from ui/."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import streamlit as st

_MD_SPECIAL = set("\\`*_{}[]()#+-.!|<>~$:")


def plain(text: str, limit: int = 300) -> str:
    """Escape Markdown so user-supplied text shows literally (st.warning renders Markdown; HTML is off)."""
    text = " ".join(str(text).split())[:limit]
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def warn_notes(notes: Iterable[str]) -> None:
    """Plain-text notes (they may quote the URL or an uploaded file) as literal warnings, one each."""
    for note in notes:
        st.warning(plain(note), icon=":material/info:")


def show_notes(inputs) -> None:  # noqa: ANN001 - anything with .notes (ui.values.Inputs)
    """Render the input notes as literal text: they may quote the URL or an uploaded file."""
    warn_notes(inputs.notes)


# Presentation mode at 1920×1080: body text, notes, remedies, metric labels and tables at 20 px or more (the
# browser's 16 px root), so the room can read them; headings keep Streamlit's own sizes.
PRESENT_CSS = """<style>
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.375rem; }
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.25rem; }
[data-testid="stMain"] [data-testid="stMetricLabel"] p { font-size: 1.25rem; }
[data-testid="stMain"] [data-testid="stTable"] th,
[data-testid="stMain"] [data-testid="stTable"] td { font-size: 1.25rem; }
</style>"""


def present_table(frame: pd.DataFrame, digits: int = 1) -> None:
    """A table in presentation mode: a static HTML table (st.table), which the presentation fonts reach (the
    interactive grid draws on a canvas at its own size); numbers rounded for the room, labels whole."""
    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = [f"{v:,.{digits}f}" for v in shown[column]]
    st.table(shown, hide_index=True, border="horizontal")
