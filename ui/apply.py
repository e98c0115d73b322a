"""A change the page proposes, applied to the sidebar: an assumption's chip (estimator/advice/assumptions.py) or the
fastest setup that fits (estimator/advice/fastest.py) sets the sidebar's controls through Session State, as the
sidebar's own callbacks and the Out-of-memory page's buttons do, so the controls, the address (the controls are bound
to it) and the share link all follow. The controls are found through the settings table
(estimator/job/settings.py: a TrainingSetup field → its link key → the control's value)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st

from estimator.job.settings import BY_KEY, BY_NAME
from estimator.job.settings import widget_value as setting_widget_value
from estimator.options.stacks import get_stack
from ui.params import TABLE, typed, url_value

if TYPE_CHECKING:
    from estimator import ModelSpec, TrainingSetup

APPLIED = "_page_change_applied"  # set by apply(): the page reruns the whole app (the sidebar is outside the fragment)


def widget_updates(spec: ModelSpec, after: TrainingSetup, names: Iterable[str]) -> dict[str, Any]:
    """The sidebar's control values that give `after`'s settings `names` (TrainingSetup fields), by link key: the
    checkpointing control from grad_ckpt and offload_activations together, 'every block' (lora_layers 0) as the
    model's own depth where the stack's 0 means its own count (MLX-LM: 16). A field without a control, or a value its
    control does not take, is left out."""
    out: dict[str, Any] = {}
    for name in names:
        setting = BY_NAME.get(name)
        if setting is None or setting.key is None or setting.key in out:
            continue
        key = setting.key
        fields = {s.name: getattr(after, s.name) for s in BY_KEY[key]}
        value = setting_widget_value(key, fields, TABLE[key].default)
        if name == "lora_layers" and not value and after.stack is not None and get_stack(after.stack).lora_layers:
            value = spec.num_layers  # every block: the sidebar's 0 is the stack's own count
        if value is None or not TABLE[key].accepts(url_value(value)):
            continue
        out[key] = typed(key, value)
    return out


def apply(updates: Mapping[str, Any]) -> None:
    """A button's callback: set the controls (before the next run draws them) and ask for a whole-app rerun."""
    for key, value in updates.items():
        st.session_state[key] = value
    st.session_state[APPLIED] = True


def rerun_if_applied() -> None:
    """After the control that applied a change: draw the whole app again (a control in the live fragment reruns only
    the fragment, and the sidebar, outside it, must show the new settings)."""
    if st.session_state.pop(APPLIED, False):
        st.rerun()
