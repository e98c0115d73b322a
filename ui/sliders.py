"""The sidebar's sliders: model size, batch and max length, each with its twin number box. They are the live
part of every page (ui.inputs.live_page): their values are read from Session State first, so the page's answer
is drawn before them, then they are drawn into the slots the sidebar kept for them."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from estimator import MAX_SIZE_B, MIN_SIZE_B
from estimator.i18n import _
from ui.params import BY_SIZE, TABLE, widget
from ui.trainer_inputs import GENERATES_NOTE, trainer_generates
from ui.url_state import typed_number

# The size slider: a log-like ladder from 0.1B to 1000B (integral values as ints so the URL reads size=7).
SIZE_STEPS: tuple[float, ...] = (
    0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9, 10, 12,
    14, 16, 20, 24, 27, 32, 40, 48, 56, 70, 80, 100, 120, 140, 175, 200, 235, 280, 340, 405, 500, 700, 1000,
)
assert SIZE_STEPS[0] == MIN_SIZE_B and SIZE_STEPS[-1] == MAX_SIZE_B
MAX_LEN_MAX = int(TABLE["max_len"].high)  # type: ignore[arg-type]
# The max-length slider: powers of two (the exact value, up to MAX_LEN_MAX, goes in the number input).
POW2_LENGTHS: tuple[int, ...] = tuple(2**k for k in range(7, 18))  # 128 … 131072
assert POW2_LENGTHS[-1] <= MAX_LEN_MAX


def typed_size() -> float:
    """The model size the size box holds (or is about to), within the estimator's limits."""
    return min(max(typed_number("size"), MIN_SIZE_B), MAX_SIZE_B)


def slider_values() -> tuple[float, int, int]:
    """The sliders' settled values (size, batch, max length) before they are drawn this run: what their widgets
    will return (Session State, or on a link's first run the link's value, or the default)."""
    return typed_number("size"), int(typed_number("batch")), int(typed_number("max_len"))


def _sync_length_slider() -> None:
    """Before the slider renders: point it at the power of two nearest the typed max length."""
    value = int(typed_number("max_len"))
    st.session_state["max_len_pow2"] = min(POW2_LENGTHS, key=lambda p: abs(math.log2(max(value, 1)) - math.log2(p)))


def _sync_size_slider() -> None:
    """Before the size slider renders: point it at the ladder step nearest the typed size (log scale)."""
    value = typed_size()
    st.session_state["size_step"] = min(SIZE_STEPS, key=lambda p: abs(math.log(value) - math.log(p)))


def _size_from_slider() -> None:
    st.session_state["size"] = float(st.session_state["size_step"])


def _length_from_slider() -> None:
    st.session_state["max_len"] = int(st.session_state["max_len_pow2"])


def draw_size(slot: Any, choice: str) -> float:
    """The size slider and its number box (used when Model is 'by-size'); returns the size."""
    _sync_size_slider()
    slot.select_slider(_("Model size (billions of parameters)"), options=list(SIZE_STEPS), key="size_step",
                       on_change=_size_from_slider, disabled=choice != BY_SIZE,
                       help=_("Used when Model is 'by-size': a Llama-style decoder of this size. Type any size "
                              "below."))
    return widget("size", slot, disabled=choice != BY_SIZE)


def draw_batch_and_length(slot: Any, default_batch: int | None = None) -> tuple[int, int]:
    """The batch slider (its default the run's, estimator.job.stack.default_settings), the max-length slider and
    its number box (off for GRPO: the Trainer box sets its length); returns batch and max length."""
    batch = widget("batch", slot, default=default_batch)
    _sync_length_slider()
    generates = trainer_generates()  # GRPO: the length is prompt + completion, set in the Trainer box
    slot.select_slider(_("Max length (tokens)"), options=list(POW2_LENGTHS), key="max_len_pow2",
                       on_change=_length_from_slider, disabled=generates,
                       help=_("Powers of two; type an exact length below."))
    max_len = widget("max_len", slot, disabled=generates)
    if generates:
        slot.caption(_(GENERATES_NOTE))
    return int(batch), int(max_len)
