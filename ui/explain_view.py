"""Why this number, on the calculator (issue 29 items 1–4): the verdict's condition and its way out, the assumptions
that move the number most as chips that change them, the rule of thumb reconciled as a waterfall, and the closest
published measured runs. All from one estimator.advice.explain.explain() per estimate shown (remembered:
ui.once.remembered), drawn here so the page stays thin. The waterfall and the measured runs sit in expanders that
run their contents only when open (Streamlit's stateful expander), so a closed one costs the page one element."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import streamlit as st

from estimator import to_gb
from estimator.advice.assumptions import apply_change
from estimator.advice.explain import explain
from estimator.advice.measured import METRIC_LABELS, closest_measured
from estimator.i18n import _, format_number
from estimator.memory.why import why_not_rule
from ui.apply import apply, rerun_if_applied, widget_updates
from ui.charts import both_units
from ui.live_chart import live_plotly_chart
from ui.once import remembered
from ui.page_charts import WHY_OURS_NAME, WHY_RULE_NAME, WHY_STEP_NAMES, why_bars, why_waterfall_spec
from ui.text import plain

if TYPE_CHECKING:
    from estimator import Device, Estimate, ModelSpec, TrainingSetup
    from estimator.advice.assumptions import Assumption
    from estimator.advice.explain import Explanation
    from estimator.advice.measured import Comparison
    from estimator.memory.why import Why

CHIPS_KEY = "assumption_chips"  # the chips (st.pills: one element for all of them)
# A chip's label wraps inside its pill rather than ending in "…" (st.pills keeps one line per option, which on a
# phone cut the bytes the chip is about). Drawn once per full run, outside the live fragment (ui/inputs.py).
CHIPS_CSS = f"""<style>
.st-key-{CHIPS_KEY} button, .st-key-{CHIPS_KEY} button * {{
  white-space: normal !important; text-overflow: clip !important; height: auto !important; }}
.st-key-{CHIPS_KEY} button {{ text-align: left; padding-top: 0.25rem; padding-bottom: 0.25rem; }}
</style>"""
WHY_KEY = "why_rule"  # the "Why not the rule of thumb?" expander (stateful: its contents run only when open)
MEASURED_KEY = "measured_runs"


def explained(spec: ModelSpec, est: Estimate, detailed: Estimate, device: Device, rule: str | None) -> Explanation:
    """explain() for the estimate shown, remembered per estimate (the estimator hands back the same Estimate for the
    same inputs). Under the rule of thumb the chips are priced with the rule, as the verdict is, and the waterfall
    reconciles the rule with the detailed estimate (the rule's own estimate has no steps); the subject is then the
    detailed estimate (the rule's is built anew on every run)."""
    def build() -> Explanation:
        x = explain(spec, est, device, measured=0)  # the measured runs: when their expander opens (measured_runs)
        return replace(x, why=why_not_rule(spec, detailed, device.runtime_total_bytes)) if rule else x

    return remembered("calculator.explain", detailed if rule else est, build, spec, device, rule)


def measured_runs(spec: ModelSpec, est: Estimate) -> tuple[Comparison, ...]:
    """The closest published measured runs (explain()'s `measured`), remembered per estimate: ranking every run
    costs a few ms, so the page asks only when its expander is open."""
    return remembered("calculator.measured", est, lambda: closest_measured(spec, est.setup, est.trainer), spec)


def _sentence(text: str) -> str:
    """A clause as a sentence: its first letter up ('fits up to …' → 'Fits up to …'), in any language."""
    return text[:1].upper() + text[1:]


def condition_markdown(x: Explanation, rule: str | None) -> str:
    """The verdict's way out and its condition, as one Markdown line: '**Fits up to 12,334 tokens per example at
    batch 1.** Holds at batch 1 × 2,048 tokens per example, every example padded to the max length; …'."""
    parts = []
    if x.longest is not None:
        way_out = _sentence(_(x.longest.sentence()))
        if rule:  # the rule has no length: the detailed estimate answers (advice/condition.py)
            way_out += " " + _("(detailed estimate: the rule of thumb ignores the length)")
        parts.append(f"**{plain(way_out, 400)}.**")
    parts.append(":gray[" + plain(_("Holds at {condition}.").format(condition=_(x.condition)), 600) + "]")
    return " ".join(parts)


def signed_gb(n_bytes: float) -> str:
    """'+14.0 GB', '−3.1 GB' (the language's decimal sign)."""
    return ("+" if n_bytes >= 0 else "−") + format_number(abs(to_gb(n_bytes))) + " GB"


def chip_text(a: Assumption) -> str:
    """A chip: the setting and where it came from, what clicking changes it to, and what that moves the total by
    ('checkpointing on · TRL default → checkpointing off: +14.0 GB')."""
    return f"{_(a.label)} → {_(a.change_label)}: {signed_gb(a.delta_bytes)}"


def chip_updates(spec: ModelSpec, setup: TrainingSetup, a: Assumption) -> dict[str, object]:
    """The sidebar's control values a chip sets (ui.apply.widget_updates of the setup with its change applied)."""
    return widget_updates(spec, apply_change(setup, a.change), a.change)


def _chip_chosen(updates: dict[str, dict[str, object]]) -> None:
    choice = st.session_state.get(CHIPS_KEY)
    # a chip is an action, not a selection: it never stays chosen (the widget's state dropped, not set to None, so
    # Streamlit does not warn of a widget whose default is also set through Session State)
    del st.session_state[CHIPS_KEY]
    if choice in updates:
        apply(updates[choice])


def draw_chips(spec: ModelSpec, setup: TrainingSetup, x: Explanation) -> None:
    """The assumptions that move the number most, as chips (one st.pills): a click applies its change to the
    sidebar's settings, so the verdict, the address and the share link follow."""
    chips = {a.key: a for a in x.assumptions}
    updates = {k: chip_updates(spec, setup, a) for k, a in chips.items()}
    options = [k for k in chips if updates[k]]  # a change the sidebar cannot make is not offered
    if not options:
        return
    labels = {k: chip_text(chips[k]) for k in options}
    st.pills(_("What this number assumes, and what each change would do (click one to apply it)"), options,
             format_func=labels.__getitem__, key=CHIPS_KEY, on_change=_chip_chosen, args=(updates,),
             help=_("Each chip is a setting the estimate rests on, where its value came from, and the total after "
                    "the change. Clicking it changes that setting in the sidebar."))
    rerun_if_applied()


def why_alt(why: Why) -> str:
    """The waterfall for screen readers: the rule's number, each step, ours."""
    steps = ", ".join(f"{_(WHY_STEP_NAMES.get(key, key))} {signed_gb(b)}" for key, m, b in why_bars(why)
                      if m == "relative")
    return _("Waterfall from the rule of thumb's {rule} GB to this estimate's {total} GB: {steps}.").format(
        rule=format_number(to_gb(why.rule_bytes)), total=format_number(to_gb(why.total_bytes)), steps=steps or "—")


def why_markdown(why: Why) -> str:
    """The waterfall's bars in words (for a phone, a projector, a screen reader): the rule, each step with its
    whole label, ours."""
    lines = [f"- **{plain(_(WHY_RULE_NAME))}** {format_number(to_gb(why.rule_bytes))} GB: {plain(_(why.rule_label), 400)}"]
    for s in why.steps:
        if s.bytes:
            lines.append(f"- **{plain(_(WHY_STEP_NAMES.get(s.key, s.key)))}** {plain(signed_gb(s.bytes))}: "
                         f"{plain(_(s.label), 400)}")
    lines.append(f"- **{plain(_(WHY_OURS_NAME))}** {plain(both_units(why.total_bytes))}")
    return "\n".join(lines)


def draw_why(x: Explanation, present: bool) -> None:
    """'Why not the rule of thumb?': one click from the verdict (open in presentation mode), the waterfall from the
    rule's bar to ours and its steps in words. Its contents run only when it is open."""
    box = st.expander(_("Why not the rule of thumb?"), expanded=present, key=WHY_KEY, on_change="rerun",
                      icon=":material/waterfall_chart:")
    if not box.open:
        return
    with box:
        live_plotly_chart(why_waterfall_spec(x.why, font_size=18 if present else None), key="why_waterfall",
                          alt=why_alt(x.why), config={"displayModeBar": False}, transition_ms=0)
        st.markdown(why_markdown(x.why))


def measured_markdown(c: Comparison) -> str:
    """One measured run: the run, its figure and our estimate for it, then what the figure measures and its
    source."""
    what = plain(_(c.sentence()), 600)
    source = _(METRIC_LABELS.get(c.run.metric, c.run.metric)) + " · " + _("source: {source}").format(
        source=c.run.source)
    return f"- {what}  \n  :gray[{plain(source, 600)}]"


def draw_measured(spec: ModelSpec, est: Estimate) -> None:
    """'What people measured': the published runs closest to this setup (from the project's validation data), each
    with its figure, what it measures, its source and our estimate for that run. Runs only when open."""
    box = st.expander(_("What people measured"), key=MEASURED_KEY, on_change="rerun", icon=":material/science:")
    if not box.open:
        return
    runs = measured_runs(spec, est)
    with box:
        if not runs:
            st.caption(_("No published measurement is close to this setup."))
            return
        st.caption(_("The published runs closest to this setup, and our estimate for each run's own settings."))
        st.markdown("\n".join(measured_markdown(c) for c in runs))
