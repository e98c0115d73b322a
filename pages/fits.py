"""What fits my device: the seed's 36 GB laptop diagram for any device. Model sizes × methods against the
usable line, each marked with the calculator's verdict band (fits, close call, borderline, too big), and the largest
model that fits each way, computed."""

import pandas as pd
import streamlit as st

from estimator.i18n import _, format_number
from ui.grids import (
    METHOD_ORDER,
    SHORT_METHOD,
    FitsGrid,
    chosen_models,
    fits_grid,
    setup_summary,
)
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.page_charts import fits_chart_spec
from ui.params import widget
from ui.text import plain, show_notes
from ui.trainer_inputs import page_trainer, trainer_summary
from ui.url_state import share_box
from ui.values import Inputs


def answer(inputs: Inputs) -> FitsGrid | None:
    """The page's answer, drawn first on every run: the notes, the models and methods, the largest model that
    fits each way and the chart (None when no model or method is chosen)."""
    show_notes(inputs)
    trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: every model × method priced for its step
    setup, device, trainer = trainer_in.setup, inputs.device, trainer_in.trainer
    rule = inputs.rule if trainer.trainer == "sft" else None  # the rule of thumb covers SFT only

    st.title(_("What fits my device"))
    mode = _("the rule of thumb") if rule == "seed" else _("the detailed estimate")
    # One decimal, as the calculator's verdict writes them ("Fits: 19.2 GB of 25.2 GB usable"): not 26 GB here.
    st.caption(plain(_("{device}: {usable} GB usable of {capacity} GB").format(
        device=device.name, usable=format_number(device.usable_bytes / 1e9, 1),
        capacity=format_number(device.capacity_bytes / 1e9, 1))
        + f" · {mode} · {setup_summary(None, setup, None, trainer_summary(trainer))}"))

    options = st.expander(_("Models and methods"), expanded=False) if inputs.presentation else st.container()
    with options:
        left, right = st.columns([3, 2])
        chosen = widget("models", left)
        methods = widget("methods", right)
    if not chosen or not methods:
        st.info(_("Choose at least one model and one method."), icon=":material/info:")
        return None

    grid = fits_grid(chosen_models(chosen), setup, device, rule, [m for m in METHOD_ORDER if m in methods], trainer)
    st.subheader(_("The largest model that fits"))
    for conclusion in grid.conclusions:
        line = plain(conclusion.text)
        st.markdown(f"### {line}" if inputs.presentation else f"- **{line}**")
    st.caption(_("'Up to about' is the largest generic decoder that fits, solved for this device and setup; the "
                 "brackets name the listed models on either side of the line."))
    # Updated in place (ui/live_chart.py): a plain spec, no Figure built and validated on every rerun.
    live_plotly_chart(fits_chart_spec(grid, font_size=18 if inputs.presentation else None), key="fits_chart",
                      config={"displayModeBar": False},
                      alt=_("Horizontal bars of peak memory per model and method against the usable memory: {bars}").format(
                          bars="; ".join(f"{c.label} {format_number(c.estimate.total_bytes / 1e9)} GB "
                                         f"{_(c.verdict.band)}" for c in grid.cells)))
    return grid


def rest(inputs: Inputs, grid: FitsGrid | None) -> None:
    """After the answer and the sliders: every cell in a table (not in presentation mode), the share link."""
    if grid is not None and not inputs.presentation:
        numbers = {"Parameters (B)": (2, ""), "Estimate (GB)": (1, ""), "Estimate (GiB)": (1, ""), "Headroom (GB)": (1, "")}
        st.dataframe(
            localised(pd.DataFrame(
                [{"Model": c.model_label, "Method": _(SHORT_METHOD[c.method]), "Parameters (B)": c.size_b,
                  "Estimate (GB)": c.estimate.total_bytes / 1e9, "Estimate (GiB)": c.estimate.total_bytes / 2**30,
                  "Verdict": _(c.verdict.band),
                  "Headroom (GB)": c.verdict.margin_bytes / 1e9} for c in grid.cells]), numbers),
            hide_index=True, key="fits_table",
            column_config=number_columns(numbers, {
                "Parameters (B)": _("Parameters (B)"), "Estimate (GB)": _("Estimate (GB)"),
                "Estimate (GiB)": _("Estimate (GiB)"), "Headroom (GB)": _("Headroom (GB)")}) | {
                "Model": st.column_config.TextColumn(_("Model"), width="medium", pinned=True),
                "Method": st.column_config.TextColumn(_("Method")), "Verdict": st.column_config.TextColumn(_("Verdict"))})
    share_box()


live_page(answer, rest)  # the sidebar, then in a fragment: the largest fits and the chart, the sliders, the rest
