"""Will it fit? — entrypoint: page config and navigation only. Pages live in pages/; every page draws the
shared inputs itself (ui.inputs.live_page), so pages stay testable on their own.

Page files are named after their URL paths. Until a session has run st.navigation, Streamlit serves a deep
link from the legacy pages/ folder by file name; ui.inputs.live_page (called first by every page) then
switches that session to this navigation and reruns, so /compare, /fits, /sizes, /scale, /oom and /how open with the
app's own navigation even on a freshly started server."""

import copy

import streamlit as st

from estimator.i18n import _, get_language
from ui.lang import choose_language
from ui.once import once

# A presentation link (?present=true) opens with the sidebar folded away: the verdict fills the screen.
presenting = st.query_params.get("present", "").lower() == "true"
choose_language()  # lang=es|en, else the browser's language (ui/lang.py): before any text
st.set_page_config(page_title=_("Will it fit?"), page_icon=":material/memory:", layout="wide",
                   initial_sidebar_state="collapsed" if presenting else "auto")


def _page_templates() -> tuple:
    """The page list, built once per process, language and app folder (ui/once.py): each st.Page resolves and
    checks its file (pathlib, a dozen stat calls), which a rerun need not repeat. Titles are text, so the
    language is part of the key; so is this file (the pages' paths resolve against its folder)."""
    return (
        st.Page("pages/calculator.py", title=_("Calculator"), icon=":material/calculate:", default=True),
        st.Page("pages/compare.py", title=_("Compare"), icon=":material/stacked_bar_chart:", url_path="compare"),
        st.Page("pages/fits.py", title=_("What fits"), icon=":material/laptop_mac:", url_path="fits"),
        st.Page("pages/sizes.py", title=_("Sizes"), icon=":material/table:", url_path="sizes"),
        st.Page("pages/scale.py", title=_("Scale out"), icon=":material/hub:", url_path="scale"),
        st.Page("pages/oom.py", title=_("Out of memory?"), icon=":material/error:", url_path="oom"),
        st.Page("pages/how.py", title=_("How it works"), icon=":material/menu_book:", url_path="how"),
    )


# Each run gets its own copies: st.navigation marks the page it returns as the one allowed to run (a flag on the
# object), which sessions running at the same time must not share.
PAGES = [copy.copy(page) for page in once("app.pages", _page_templates, get_language(), __file__)]

st.navigation(PAGES, position="top").run()
