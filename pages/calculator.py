"""Calculator: will this fine-tuning run fit? The verdict, the memory bar against the device, what to
change, the breakdown with downloads, and a share link. Thin: inputs → estimator → ui builders → render."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import streamlit as st

from estimator import estimate, to_gb, verdict
from estimator.advice.advise import advise
from estimator.i18n import N_, _, format_int, format_number, get_language, localised_error
from estimator.job.stack import setup_summary
from estimator.options.methods import METHOD_LABELS
from estimator.options.trainers import TRL_VERSION
from estimator.report.document import estimate_host, estimate_json
from estimator.report.snippets.trainers import trainer_snippet
from ui.answers import CalculatorAnswer as Answer
from ui.charts import both_units, chart_alt, memory_bar_spec
from ui.config_box import export_section
from ui.exact import render_exact
from ui.inputs import BATCH_MAX, MAX_LEN_MAX, live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.model_box import hub_token
from ui.once import arrow_table, remembered
from ui.report import (
    BREAKDOWN_WIDTHS,
    NEGLIGIBLE_BYTES,
    RuleGap,
    band_warning,
    breakdown_csv,
    breakdown_frame,
    host_frame,
    host_line,
    limit_text,
    remedy_line,
    verdict_detail,
)
from ui.text import plain, show_notes, warn_notes
from ui.trainer_inputs import resolve_box
from ui.url_state import share_box
from ui.values import Inputs
from ui.versions_box import show_release_notes

if TYPE_CHECKING:  # annotations only
    from estimator import Device, Estimate
    from estimator.memory.host import HostVerdict


def text(value: str) -> str:
    """Markdown-escaped text: names can come from an uploaded config.json."""
    return plain(value, limit=2000)


def answer(inputs: Inputs) -> Answer:
    """The page's answer, drawn first on every run (a slider's rerun sends it before anything else): the notes,
    the verdict and the memory chart."""
    setup, device = inputs.setup, inputs.device
    trainer_in = resolve_box(setup, inputs.trainer_box)  # SFT unless the Trainer box says otherwise
    setup, trainer = trainer_in.setup, trainer_in.trainer
    rule = inputs.rule if trainer.trainer == "sft" else None  # the seed's rule covers SFT only
    est = estimate(inputs.model, setup, rule=rule, trainer=trainer, device_capacity=device.runtime_total_bytes)
    detailed = estimate(inputs.model, setup) if rule else est
    show_notes(inputs)
    warn_notes(trainer_in.notes + ((_("The rule of thumb covers SFT only; showing the detailed estimate."),)
                                   if inputs.rule and not rule else ()))
    length = (_("({prompt} + {completion}) tokens").format(prompt=format_int(trainer.prompt_length),
                                                          completion=format_int(trainer.completion_length))
              if trainer.option.generates else _("{n} tokens").format(n=format_int(setup.seq_len)))
    host = estimate_host(est, device, inputs.host_ram_bytes, None if est.host is not None else detailed.host)
    shown = Answer(setup, trainer, rule, est, detailed, length, host)
    _verdict(inputs, shown)
    # Updated in place (ui/live_chart.py): the bars glide to their new values instead of the chart being redrawn.
    live_plotly_chart(memory_bar_spec(est, device, font_size=18 if inputs.presentation else None), key="memory_bar",
                      config={"displayModeBar": False}, alt=chart_alt(est, device))
    return shown


def _verdict(inputs: Inputs, a: Answer) -> None:
    """The verdict, first and big: what is judged, the headline, the estimate and device lines, a close call's
    caution and, with the rule of thumb, how far the detailed estimate is from it."""
    spec, setup, device, est, present = inputs.model, a.setup, inputs.device, a.est, inputs.presentation
    v = verdict(est.total_bytes, device, est.high_bytes)
    mode = _("rule of thumb") if a.rule else _("detailed estimate")
    trainer_label = "" if a.trainer.trainer == "sft" else f" · {a.trainer.option.label}"
    if present:  # what is being judged, as readable as the verdict from the back of the room
        st.header(text(f"{spec.name} · {_(METHOD_LABELS[setup.method])} · {device.name}"), anchor=False)
        st.caption(text(f"{setup.precision} · " + _("batch {batch} × {length}").format(batch=setup.batch, length=a.length)
                        + f" · {mode}{trainer_label}"))
    else:
        st.caption(text(f"{spec.name} · {_(METHOD_LABELS[setup.method])} · {setup.precision} · "
                        + _("batch {batch} × {length}").format(batch=setup.batch, length=a.length)
                        + f" · {mode}{trainer_label}"))
        st.caption(text(setup_summary(setup)))
    color, icon = ("green", ":material/check_circle:") if v.fits else ("red", ":material/cancel:")
    (st.title if present else st.header)(f":{color}[{v.headline}]", icon=icon, anchor=False)
    estimate_line, device_line = verdict_detail(est, device, v)
    if present:
        st.subheader(text(estimate_line), anchor=False)
    else:
        st.markdown(text(estimate_line))
    st.caption(text(device_line))
    _host_verdict(a.host)
    caution = band_warning(est, v)
    if caution:
        st.warning(text(caution), icon=":material/warning:")
    if a.rule:
        gap = RuleGap(est.total_bytes, a.detailed.total_bytes)
        dv = verdict(a.detailed.total_bytes, device, a.detailed.high_bytes)
        st.info(text(gap.sentence()) + "  \n" + text(_("Detailed verdict on this device: {headline}.").format(headline=dv.headline)),
                icon=":material/compare_arrows:")


def _host_verdict(hv: HostVerdict | None) -> None:
    """The host RAM's verdict beside the GPU's: against the machine's RAM, or on unified memory the two sides
    together against the device (estimator/memory/host.py)."""
    if hv is None:
        return
    if not hv.known:
        st.markdown(text(hv.headline) + " · " + text(_("give the machine's RAM in the sidebar for a verdict")))
    else:
        color, icon = ("green", "✓") if hv.fits else ("red", "✗")
        st.markdown(f":{color}[**{icon} {text(hv.headline)}**]")
    st.caption(text(host_line(hv)))


def rest(inputs: Inputs, a: Answer) -> None:
    """The rest of the page, after the answer and the sidebar's sliders: the estimate's notes and the exact
    trace, what to change, the breakdown and downloads, the trainer's script and the share link."""
    spec, device, present = inputs.model, inputs.device, inputs.presentation
    if not present:
        for note in a.est.notes:
            st.caption(text(_(note)))  # the estimator's notes are marked N_() where written
        # the releases given and the version forks that move this estimate (ui/versions_box.py)
        show_release_notes(spec, a.setup, a.est, a.trainer, device.runtime_total_bytes, a.rule)
        if a.trainer.trainer == "sft":  # the exact trace runs a supervised step (ui/exact.py)
            render_exact(inputs.model_choice, spec.source, a.setup, a.detailed, device,
                         upload=st.session_state.get("upload"), hub_token=hub_token())
    _what_to_change(inputs, a)
    if not present:
        _breakdown(a.est, device, a.host)
        export_section(spec, a.setup, a.trainer)  # the stack's config file (ui/config_box.py)
    # ---- The trainer's TRL script (estimator/report/snippets/trainers.py) -------------------------------------------
    if a.trainer.trainer != "sft" and not present:
        with st.expander(_("{config_class} script for this estimate ({version})").format(
                config_class=a.trainer.option.config_class, version=TRL_VERSION)):
            st.code(trainer_snippet(spec, a.setup, a.trainer), language="python")
    share_box()


def _what_to_change(inputs: Inputs, a: Answer) -> None:
    """The remedies in the order to try them, priced like the verdict, then the largest batch, the longest
    length and the smallest catalog device that fit."""
    spec, setup, device, rule = inputs.model, a.setup, inputs.device, a.rule
    st.subheader(_("What to change"), anchor=False)
    if rule:  # the rule's own numbers: the changes it counts are priced with it, the others are named
        st.caption(_("Priced with the rule of thumb, like the verdict above. It ignores max length, batch and "
                     "checkpointing; switch it off to price those."))
    elif a.est.total_bytes <= device.usable_bytes:
        st.caption(_("It fits; each change frees this much headroom. In the order to try them: the first ones cost "
                     "least."))
    else:
        st.caption(_("In the order to try them when a run runs out of memory: the first ones cost least."))
    try:  # the remedies and solvers, priced like the verdict (estimator.advice.advise; estimates are cached)
        advice = advise(spec, setup, device, a.trainer, rule, batch_limit=BATCH_MAX, length_limit=MAX_LEN_MAX)
        options, limits = list(advice.remedies), (advice.max_batch, advice.max_length, advice.smallest_device)
    except ValueError as exc:  # the estimator could not build the comparison setup
        st.warning(text(_("The changes could not be priced for this model: {error}").format(error=localised_error(exc))), icon=":material/info:")
        options, limits = [], (None, None, None)
    _remedies(options, device.usable_bytes, rule, inputs.presentation)
    _fit_limits(a, *limits)


def _remedies(options: list, usable: float, rule: str | None, present: bool) -> None:
    """The changes that help, numbered; the ones that do not apply or save nothing here, named in one line."""
    numbered, aside = [], []
    for r in options:
        if not r.applicable:
            aside.append(f"{text(r.title)} ({text(r.reason)})" if r.reason else text(r.title))
        elif abs(r.saves_bytes) < NEGLIGIBLE_BYTES:  # no numbered slot for a change that changes nothing here
            aside.append(f"{text(r.title)} (" + (_("the rule of thumb does not count it") if rule else
                                                 _("saves nothing here: {after} GB after").format(
                                                     after=format_number(to_gb(r.new_total_bytes)))) + ")")
        else:
            numbered.append(r)
    lines = []
    for i, r in enumerate(numbered, 1):
        line = f"{i}. **{text(r.title)}** ({text(r.change)}): {text(remedy_line(r, usable))}"
        if r.caveat and not present:
            line += f"  \n   :gray[{text(r.caveat)}]"
        lines.append(line)
    if lines:
        st.markdown("\n".join(lines))
    if aside:
        st.caption(_("Not available or no help here: {changes}.").format(changes="; ".join(aside)))


def _fit_limits(a: Answer, best_batch: int | None, best_len: int | None, smallest: Device | None) -> None:
    """The solvers' answers: the largest batch, the longest length and the smallest catalog device that fit."""
    setup, trainer = a.setup, a.trainer
    at_length = a.length if trainer.option.generates else _("max length {n}").format(n=format_int(setup.seq_len))
    # The rule has no batch or length: those two answers are the detailed estimate's, and say so.
    detailed_note = _(" (detailed estimate: the rule of thumb ignores it)") if a.rule else ""
    longest = (_("Longest max completion length that fits (at batch {batch}){note}:") if trainer.option.generates
               else _("Longest max length that fits (at batch {batch}){note}:"))
    EXAMPLE, TOKEN = N_("example"), N_("token")  # the solvers' units (limit_text translates them)
    fit_lines = [
        "- " + _("Largest batch that fits on this device (at {length}){note}:").format(length=at_length,
                                                                                       note=detailed_note)
        + f" **{text(limit_text(best_batch, BATCH_MAX, EXAMPLE))}**",
        "- " + longest.format(batch=setup.batch, note=detailed_note)
        + f" **{text(limit_text(best_len, MAX_LEN_MAX, TOKEN))}**" + (" " + _("tokens") if best_len else ""),
        "- " + _("Smallest catalog device that fits:") + " " + (
            f"**{text(smallest.name)}** (" + text(_("{amount} usable").format(amount=both_units(smallest.usable_bytes)))
            + ")" if smallest else
            _("**none in the catalog**: try QLoRA, checkpointing, or sharding over several GPUs")),
    ]
    st.markdown("\n".join(fit_lines))


def _breakdown(est: Estimate, device: Device, host: HostVerdict | None = None) -> None:
    """The breakdown at the peak, one row per item, and its CSV and JSON downloads."""
    st.subheader(_("Breakdown at the peak"), anchor=False)
    numbers = {"bytes": (0, ""), "gb": (2, " GB"), "gib": (2, " GiB")}  # English: numbers; Spanish: "17,00 GB"
    # Built once per estimate shown (ui.once.remembered: a rerun that changed nothing it shows reuses it).
    table = remembered("calculator.breakdown", est, lambda: arrow_table(localised(breakdown_frame(est, device), numbers)),
                       device, get_language())
    st.dataframe(
        table, hide_index=True, width="stretch", key="breakdown",
        height="content",  # every row, the Total included, without a scroll
        column_config={
            "component": st.column_config.TextColumn(_("Component"), width=BREAKDOWN_WIDTHS["component"]),
            "item": st.column_config.TextColumn(_("Item"), width=BREAKDOWN_WIDTHS["item"]),
            "share": st.column_config.ProgressColumn(_("Share"), format="percent", min_value=0.0, max_value=1.0),
        } | number_columns(numbers, {"bytes": _("Bytes"), "gb": "GB", "gib": "GiB"},
                           {"gb": _("Decimal: 1 GB = 10⁹ bytes"), "gib": _("Binary: 1 GiB = 2³⁰ bytes")}),
        alt=_("Memory by item at the peak ({phase}); total {total} GB.").format(
            phase=_(est.peak_phase), total=format_number(to_gb(est.total_bytes))),
    )
    with st.container(horizontal=True):
        st.download_button(_("Download CSV"), breakdown_csv(est, device), "will-it-fit.csv", "text/csv", key="download_csv",
                           on_click="ignore", icon=":material/download:")
        document = remembered("calculator.json", est, lambda: json.dumps(estimate_json(est, device, host), indent=2),
                              device, host)
        st.download_button(_("Download JSON"), document, "will-it-fit.json",
                           "application/json", key="download_json", on_click="ignore", icon=":material/download:")
    if host is not None:
        with st.expander(_("Host RAM: what the setup needs in CPU RAM")):
            numbers = {"bytes": (0, ""), "gb": (2, " GB"), "gib": (2, " GiB")}
            hosted = remembered("calculator.host_table", est, lambda: arrow_table(localised(host_frame(host), numbers)),
                                host, get_language())
            st.dataframe(hosted, hide_index=True, width="stretch", key="host_table",
                         column_config={"item": st.column_config.TextColumn(_("Item"), width="large"),
                                        "when": st.column_config.TextColumn(_("When"))}
                         | number_columns(numbers, {"bytes": _("Bytes"), "gb": "GB", "gib": "GiB"}))
            st.caption(_("All the training processes on this machine (one per GPU). The model load and the training "
                         "steps never overlap; the peak is the larger. Sources: How it works, host RAM."))


live_page(answer, rest)  # the sidebar, then in a fragment: the verdict and chart, the sliders, the rest
