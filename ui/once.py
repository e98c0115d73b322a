"""What a page builds once. A rerun should only do the work its inputs change: text and tables that depend on no
input are built once per process (once per language where they hold text) and handed to Streamlit as they are;
what depends on the inputs is cached by them where that pays (docs/performance.md, "What a page may do per
rerun").

Page scripts run again on every rerun, so a cache defined inside a page would be a new, empty one each time:
the caches live here, in a module imported once, keyed by a name that is unique in the app ("how.stack_table":
the page and what it builds). What they return is shared by every session: read it, never change it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa

from estimator.i18n import get_language

T = TypeVar("T")

_BUILT: dict[tuple[Hashable, ...], Any] = {}
_LOCK = threading.Lock()
_REMEMBERED: dict[str, OrderedDict[tuple[Hashable, ...], tuple[object, Any]]] = {}


def once(name: str, build: Callable[[], T], *key: Hashable) -> T:
    """build() the first time (name, *key) is asked for in this process, the same object every time after.
    `key` holds what build() reads besides constants (the language, for per_language); it must come from a
    small fixed set (a language, an option id), never from free input, since nothing is ever dropped. Two
    sessions asking at once may both build; the first result stored is the one kept."""
    k = (name, *key)
    try:
        return _BUILT[k]
    except KeyError:
        pass
    value = build()
    with _LOCK:
        return _BUILT.setdefault(k, value)


def per_language(name: str, build: Callable[[], T]) -> T:
    """once() per language: for what holds translated text (_() and format_number() read the page's
    language, which build() runs under)."""
    return once(name, build, get_language())


def arrow_table(rows: list[dict[str, Any]] | pd.DataFrame) -> pa.Table:
    """Rows (dicts) or a DataFrame as the Arrow table st.dataframe makes of a DataFrame itself
    (pyarrow.Table.from_pandas, streamlit/dataframe_util.py convert_pandas_df_to_arrow_table): the same bytes
    reach the browser, and a table built once is not converted again on every rerun."""
    return pa.Table.from_pandas(rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows))


def table_per_language(name: str, rows: Callable[[], list[dict[str, Any]] | pd.DataFrame]) -> pa.Table:
    """A table whose rows depend only on the language, built once per language and process: pass the result
    to st.dataframe as a DataFrame would be passed."""
    return per_language(name, lambda: arrow_table(rows()))


def remembered(name: str, subject: object, build: Callable[[], T], *key: Hashable, size: int = 32) -> T:
    """build() for this subject, remembered for the last `size` subjects of this name. The subject is an object
    the estimator hands back again for the same inputs (an Estimate: estimator.memory.price.detailed_estimate keeps an
    lru_cache), so a rerun that changed nothing the result shows gets the one built before. Keyed on the
    subject's identity, held with the result so that its id is not reused while remembered, and on `key` (what
    else build() reads: the device, the language, a host verdict)."""
    k = (id(subject), *key)
    with _LOCK:
        cache = _REMEMBERED.setdefault(name, OrderedDict())
        hit = cache.get(k)
        if hit is not None and hit[0] is subject:
            cache.move_to_end(k)
            return hit[1]
    value = build()
    with _LOCK:
        cache[k] = (subject, value)
        while len(cache) > size:
            cache.popitem(last=False)
    return value
