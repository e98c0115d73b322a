"""Compare methods: full fine-tuning, LoRA and QLoRA (and other precisions or optimizers) for the same model
and setup, side by side on one memory axis against the device; in rule mode, the rule of thumb's numbers
(the calculator's, for the same setup). Then setups side by side: the sidebar's setup pinned (up to four) and
compared for memory, time and cost, all in one link (ui/pins_view.py)."""

import streamlit as st

from estimator import verdict
from estimator.i18n import _, format_number
from estimator.memory.rule import rule_sentence
from estimator.options.methods import METHOD_LABELS
from ui.answers import CompareAnswer as Answer
from ui.charts import stacked_bars_spec
from ui.exact import render_exact_choice
from ui.grids import FIGURE_ORDER, compare_setups, components_table, page_estimate_fn, setup_summary
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.model_box import hub_token
from ui.params import widget
from ui.pins_view import pins_section
from ui.text import plain, present_table, show_notes
from ui.trainer_inputs import page_trainer, resolve_box, trainer_summary
from ui.url_state import share_box
from ui.values import Inputs


def headline(total_bytes: float) -> str:
    """The same figure the calculator shows for this setup: GB with one decimal."""
    return f"{format_number(total_bytes / 1e9)} GB"


def answer(inputs: Inputs) -> Answer | None:
    """The page's answer, drawn first on every run: the notes, the methods to compare, one verdict per bar and
    the stacked bars (None when no method is chosen)."""
    show_notes(inputs)
    trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: DPO, GRPO… priced for every method
    spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer
    rule = inputs.rule if trainer.trainer == "sft" else None  # the rule of thumb covers SFT only
    estimate_fn = page_estimate_fn(trainer, rule, device.runtime_total_bytes)

    st.title(_("Compare methods"))
    st.caption(plain(setup_summary(spec, setup, device, trainer_summary(trainer))))
    options = st.expander(_("Options"), expanded=False) if inputs.presentation else st.container()
    with options:
        left, right = st.columns(2)
        methods = widget("methods", left)
        variants = widget("variants", right, disabled=rule == "seed")
    if not methods:
        st.info(_("Choose at least one method."), icon=":material/info:")
        return None
    if rule == "seed":
        st.caption(_("Rule of thumb: {rule}. The same numbers as on the calculator; the rule ignores batch, length "
                     "and optimizer.").format(rule=_(rule_sentence())))
    setups = compare_setups(setup, methods, variants if rule != "seed" else ())
    rows = [(label, estimate_fn(spec, s)) for label, s in setups]
    _headlines(rows, device)
    _chart(rows, device, methods, inputs.presentation)
    return Answer(rows, setups, trainer, trainer_in)


def _headlines(rows: list, device) -> None:  # noqa: ANN001 - a Device
    """One verdict per bar; with many bars, only the plain methods get a headline (the table has the rest)."""
    headlines = rows if len(rows) <= 4 else [r for r in rows if r[0] in {_(x) for x in METHOD_LABELS.values()}]
    columns = st.columns(len(headlines))
    for col, (label, est) in zip(columns, headlines, strict=True):
        v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
        col.metric(label, headline(est.total_bytes), delta=_(v.band),  # the calculator's bands: a close call is no "fits"
                   delta_color={"fits": "normal", "close call": "off"}.get(v.band, "inverse"), delta_arrow="off",
                   border=True,
                   help=plain(v.headline))


def _chart(rows: list, device, methods: list, present: bool) -> None:  # noqa: ANN001 - a Device
    """The stacked bars on one memory axis against the device, and what they show."""
    orientation = "v" if len(rows) <= 6 else "h"
    # Updated in place (ui/live_chart.py): a plain spec, no Figure built and validated on every rerun; no glide,
    # so the in-bar values keep layout.uniformtext (hidden where too small, as on every chart).
    live_plotly_chart(stacked_bars_spec(rows, device, orientation=orientation, font_size=18 if present else None),
                      key="compare_chart", config={"displayModeBar": False}, transition_ms=0,
                      alt=_("Stacked bars of peak memory per method: {bars}").format(
                          bars=", ".join(f"{label} {headline(est.total_bytes)}" for label, est in rows)))
    st.caption(_("Each bar is the peak of one training step on one GPU, by component, against {device}'s usable "
                 "memory. The whisker is the likely range. Methods in this order: {methods}.").format(
        device=plain(device.name), methods=", ".join(m for m in FIGURE_ORDER if m in methods)))


def rest(inputs: Inputs, a: Answer | None) -> None:
    """After the answer and the sliders: the components table, the exact trace of a bar, the pinned setups, the share
    link."""
    if a is not None:
        table = components_table(a.rows, inputs.device)
        if inputs.presentation:
            present_table(table[[c for c in table.columns if not c.endswith("(GiB)")]].rename(
                columns={"Component": _("Component")}))
        else:
            numbers = {c: (2, "") for c in table.columns if c != "Component"}
            st.dataframe(localised(table, numbers), hide_index=True, key="compare_table",
                         column_config={"Component": st.column_config.TextColumn(_("Component"), width="medium")}
                         | number_columns(numbers))
            if a.trainer.trainer == "sft":  # the exact trace runs a supervised step (ui/exact.py)
                render_exact_choice(a.setups, inputs.model, inputs.model_choice, inputs.device,
                                    upload=st.session_state.get("upload"), hub_token=hub_token())
    pins_section(inputs, a.trainer_in if a is not None else resolve_box(inputs.setup, inputs.trainer_box))
    share_box()


live_page(answer, rest)  # the sidebar, then in a fragment: the verdicts and chart, the sliders, the rest
