"""Calculator: will this fine-tuning run fit? The verdict with its condition, its way out, its time and what it
rests on; why it is not the rule of thumb and what people measured (one click each); the memory bar against the
device; what to change; the details, the breakdown with downloads, and a share link. Thin: inputs → estimator → ui
builders → render."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import streamlit as st

from estimator import estimate, to_gb, verdict
from estimator import exact as ex
from estimator.advice.advise import advise
from estimator.advice.fastest import Constraints
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
from ui.explain_view import CHIPS_CSS, condition_markdown, draw_chips, draw_measured, draw_why, explained
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
from ui.time_view import draw_fastest_button, draw_run_box, draw_time, fastest_markdown, remedy_time
from ui.trainer_inputs import resolve_box
from ui.url_state import share_box
from ui.values import Inputs
from ui.versions_box import show_release_notes

if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable

    from estimator import Device, Estimate, ModelSpec, TrainingSetup
    from estimator.advice.explain import Explanation
    from estimator.memory.host import HostVerdict


def text(value: str) -> str:
    """Markdown-escaped text: names can come from an uploaded config.json."""
    return plain(value, limit=2000)


def answer(inputs: Inputs) -> Answer:
    """The page's answer, drawn first on every run (a slider's rerun sends it before anything else): the notes,
    the verdict with its condition, time and assumptions, why (one click), and the memory chart."""
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
    x, late = _verdict(inputs, shown)
    shown = replace(shown, late=late)
    # Updated in place (ui/live_chart.py): the bars glide to their new values instead of the chart being redrawn.
    live_plotly_chart(memory_bar_spec(est, device, font_size=18 if inputs.presentation else None), key="memory_bar",
                      config={"displayModeBar": False}, alt=chart_alt(est, device))
    if inputs.presentation:  # the room sees the verdict, the chart, why, then what to change
        draw_why(x, present=True)
    return shown


def _verdict(inputs: Inputs, a: Answer) -> tuple[Explanation, Callable[[], None] | None]:
    """The verdict, first and big: what is judged, the headline, the estimate and device lines, a close call's
    caution and, with the rule of thumb, how far the detailed estimate is from it; then the condition it holds at and
    its way out (the longest length that fits), the step time and the run's, the assumptions that move it most as
    chips, and why it is not the rule of thumb and what people measured, one click each."""
    spec, setup, device, est, present = inputs.model, a.setup, inputs.device, a.est, inputs.presentation
    v = verdict(est.total_bytes, device, est.high_bytes)
    mode = _("rule of thumb") if a.rule else _("detailed estimate")
    trainer_label = "" if a.trainer.trainer == "sft" else f" · {a.trainer.option.label}"
    judged = f"{spec.name} · {_(METHOD_LABELS[setup.method])}"
    if present:  # what is being judged, as readable as the verdict from the back of the room
        st.header(text(f"{judged} · {device.name}"), anchor=False)
        st.caption(text(f"{setup.precision} · {mode}{trainer_label}"))
    else:
        st.caption(text(f"{judged} · {setup.precision} · {mode}{trainer_label}"))
    color, icon = ("green", ":material/check_circle:") if v.fits else ("red", ":material/cancel:")
    (st.title if present else st.header)(f":{color}[{v.headline}]", icon=icon, anchor=False)
    estimate_line, device_line = verdict_detail(est, device, v)
    if present:
        st.subheader(text(estimate_line), anchor=False)
        st.caption(text(device_line))
    else:  # one element for the two lines (each element a slider's rerun sends costs the browser time)
        st.markdown(text(estimate_line) + "  \n:gray[" + text(device_line) + "]")
    caution = band_warning(est, v)
    if caution:
        st.warning(text(caution), icon=":material/warning:")
    if a.host is not None and a.host.known and not a.host.fits:  # the host's own verdict, when it is the problem
        st.markdown(f":red[**✗ {text(a.host.headline)}**]  \n:gray[{text(host_line(a.host))}]")
    if a.rule:
        gap = RuleGap(est.total_bytes, a.detailed.total_bytes)
        dv = verdict(a.detailed.total_bytes, device, a.detailed.high_bytes)
        st.info(text(gap.sentence()) + "  \n" + text(_("Detailed verdict on this device: {headline}.").format(headline=dv.headline)),
                icon=":material/compare_arrows:")
    # Why this number (estimator.advice.explain, once per estimate shown: ui/explain_view.py)
    x = explained(spec, est, a.detailed, device, a.rule)
    st.markdown(condition_markdown(x, a.rule))
    page = inputs.page  # the sidebar's run time and cost box (ui/time_view.py)
    draw_time(spec, setup, a.trainer, device, page, present)
    late = None
    if not present:  # presentation mode draws why under the chart (answer)
        # The chips sit here but are drawn last (rest): each slider step changes all their labels, and a browser that
        # renders them with the verdict shows the verdict later (bench/slider_trace.py)
        slot = st.container()
        late = partial(_chips_into, slot, spec, setup, x)
        draw_why(x, present)
        draw_measured(spec, est)
    return x, late


def _chips_into(slot: Any, spec: ModelSpec, setup: TrainingSetup, x: Explanation) -> None:
    with slot:
        draw_chips(spec, setup, x)


def _details(inputs: Inputs, a: Answer) -> None:
    """Below what to change, one click away: the stack's settings line, the estimate's technical notes, the host
    RAM and the exact trace. Its contents run only when it is open."""
    box = st.expander(_("Details: the stack's settings, notes, host RAM and the exact trace"), key="calc_details",
                      on_change="rerun", icon=":material/info:")
    if not box.open:
        return
    with box:
        st.caption(text(setup_summary(a.setup)))
        for note in a.est.notes:
            st.caption(text(_(note)))  # the estimator's notes are marked N_() where written
        _host_verdict(a.host, a.est)
        if a.trainer.trainer == "sft":  # the exact trace runs a supervised step (ui/exact.py)
            if ex.available()[0]:
                render_exact(inputs.model_choice, inputs.model.source, a.setup, a.detailed, inputs.device,
                             upload=st.session_state.get("upload"), hub_token=hub_token())
            else:  # a visitor cannot install it: one line where the button would be
                st.caption(_("The exact trace (PyTorch's own count of this step) is not installed on this server "
                             "(`requirements-exact.txt`)."))


def _host_verdict(hv: HostVerdict | None, est: Estimate) -> None:
    """The host RAM's verdict beside the GPU's: against the machine's RAM, or on unified memory the two sides
    together against the device (estimator/memory/host.py), and its table."""
    if hv is None:
        return
    if not hv.known:
        st.markdown(text(hv.headline) + " · " + text(_("give the machine's RAM in the sidebar for a verdict")))
    else:
        color, icon = ("green", "✓") if hv.fits else ("red", "✗")
        st.markdown(f":{color}[**{icon} {text(hv.headline)}**]")
    st.caption(text(host_line(hv)))
    numbers = {"bytes": (0, ""), "gb": (2, " GB"), "gib": (2, " GiB")}
    hosted = remembered("calculator.host_table", est, lambda: arrow_table(localised(host_frame(hv), numbers)),
                        hv, get_language())
    st.dataframe(hosted, hide_index=True, width="stretch", key="host_table",
                 column_config={"item": st.column_config.TextColumn(_("Item"), width="large"),
                                "when": st.column_config.TextColumn(_("When"))}
                 | number_columns(numbers, {"bytes": _("Bytes"), "gb": "GB", "gib": "GiB"}))
    st.caption(_("All the training processes on this machine (one per GPU). The model load and the training "
                 "steps never overlap; the peak is the larger. Sources: How it works, host RAM."))


def rest(inputs: Inputs, a: Answer) -> None:
    """The rest of the page, after the answer and the sidebar's sliders: what to change, then one click each (their
    contents run only when open): the breakdown with its downloads, the details, the config file and a trainer's
    script; the share link."""
    spec, device, present = inputs.model, inputs.device, inputs.presentation
    if not present:  # the releases given and the version forks that move this estimate (ui/versions_box.py):
        # beside the answer, not in the details, since issue 28 names a fork whenever it matters to the estimate shown
        show_release_notes(spec, a.setup, a.est, a.trainer, device.runtime_total_bytes, a.rule)
    _what_to_change(inputs, a)
    if not present:
        _breakdown(a.est, device, a.host)
        _details(inputs, a)
        export_section(spec, a.setup, a.trainer)  # the stack's config file (ui/config_box.py)
    # ---- The trainer's TRL script (estimator/report/snippets/trainers.py) -------------------------------------------
    if a.trainer.trainer != "sft" and not present:
        box = st.expander(_("{config_class} script for this estimate ({version})").format(
            config_class=a.trainer.option.config_class, version=TRL_VERSION), key="trainer_script", on_change="rerun")
        if box.open:
            box.code(trainer_snippet(spec, a.setup, a.trainer), language="python")
    share_box()
    if a.late is not None:
        a.late()


def _what_to_change(inputs: Inputs, a: Answer) -> None:
    """The remedies in the order to try them, priced like the verdict and timed, the fastest setup that fits, then
    the largest batch, the longest length and the smallest catalog device that fit: one block of text (and the
    fastest setup's button)."""
    spec, setup, device, rule = inputs.model, a.setup, inputs.device, a.rule
    st.subheader(_("What to change"), anchor=False)
    if rule:  # the rule's own numbers: the changes it counts are priced with it, the others are named
        intro = _("Priced with the rule of thumb, like the verdict above. It ignores max length, batch and "
                  "checkpointing; switch it off to price those.")
    elif a.est.total_bytes <= device.usable_bytes:
        intro = _("It fits; each change frees this much headroom. In the order to try them: the first ones cost least.")
    else:
        intro = _("In the order to try them when a run runs out of memory: the first ones cost least.")
    compute = inputs.page.compute if inputs.page is not None else None
    advice = None
    try:  # the remedies and solvers, priced like the verdict (estimator.advice.advise; estimates are cached)
        advice = advise(spec, setup, device, a.trainer, rule, batch_limit=BATCH_MAX, length_limit=MAX_LEN_MAX,
                        compute=compute, fastest=Constraints())
        options, limits = list(advice.remedies), (advice.max_batch, advice.max_length, advice.smallest_device)
    except ValueError as exc:  # the estimator could not build the comparison setup
        st.warning(text(_("The changes could not be priced for this model: {error}").format(error=localised_error(exc))), icon=":material/info:")
        options, limits = [], (None, None, None)
    blocks = [f":gray[{text(intro)}]", *_remedies(options, device.usable_bytes, rule, inputs.presentation, setup.gpus)]
    fits = a.est.total_bytes <= device.usable_bytes
    if advice is not None and advice.fastest_fit is not None:
        blocks.append(fastest_markdown(advice.fastest_fit, device.usable_bytes, fits))
    elif advice is not None and advice.fastest_note and not advice.time_note:
        blocks.append(":gray[" + text(_("Fastest setup that fits: none. {why}").format(why=advice.fastest_note)) + "]")
    blocks.append(_fit_limits(a, *limits))
    st.markdown("\n\n".join(blocks))
    if advice is not None:
        draw_fastest_button(spec, advice)


def _remedies(options: list, usable: float, rule: str | None, present: bool, gpus: int = 1) -> list[str]:
    """The changes that help, numbered, each with the time it costs; the ones that do not apply or save nothing
    here, named in one line (Markdown blocks)."""
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
        line = f"{i}. **{text(r.title)}** ({text(r.change)}): {text(remedy_line(r, usable) + remedy_time(r, gpus))}"
        if r.caveat and not present:
            line += f"  \n   :gray[{text(r.caveat)}]"
        lines.append(line)
    blocks = ["\n".join(lines)] if lines else []
    if aside:
        blocks.append(":gray[" + text(_("Not available or no help here: {changes}.").format(changes="; ".join(aside)))
                      + "]")
    return blocks


def _fit_limits(a: Answer, best_batch: int | None, best_len: int | None, smallest: Device | None) -> str:
    """The solvers' answers, as a Markdown list: the largest batch, the longest length and the smallest catalog
    device that fit."""
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
    return "\n".join(fit_lines)


def _breakdown(est: Estimate, device: Device, host: HostVerdict | None = None) -> None:
    """The breakdown at the peak, one row per item, and its CSV and JSON downloads, one click away (its contents
    run only when it is open)."""
    box = st.expander(_("Breakdown at the peak, with CSV and JSON downloads"), key="breakdown_box", on_change="rerun",
                      icon=":material/table:")
    if not box.open:
        return
    with box:
        _breakdown_table(est, device, host)


def _breakdown_table(est: Estimate, device: Device, host: HostVerdict | None) -> None:
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


def sidebar(sb, device: Device) -> object:  # noqa: ANN001 - Streamlit's sidebar
    """The calculator's own part of the sidebar (full runs only): the run time and cost box, and the chips' style."""
    sb.html(CHIPS_CSS)
    return draw_run_box(sb, device)


live_page(answer, rest, sidebar=sidebar)  # the sidebar (its run time and cost box last), then in a fragment: the
# verdict and chart, the sliders, the rest
