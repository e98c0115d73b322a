"""Calculator: will this fine-tuning run fit? The verdict, the memory bar against the device, what to
change, the breakdown with downloads, and a share link. Thin: inputs → estimator → ui builders → render."""

import json

import streamlit as st

from estimator import estimate, to_gb, verdict
from estimator.advice import advise
from estimator.cli import estimate_json
from estimator.stacks import setup_summary
from estimator.trainer_snippets import trainer_snippet
from estimator.trainers import TRL_VERSION
from estimator.training import METHOD_LABELS
from ui.charts import both_units, chart_alt, memory_bar_spec
from ui.exact import render_exact
from ui.inputs import BATCH_MAX, MAX_LEN_MAX, hub_token, plain, render_inputs, share_box, show_notes
from ui.live_chart import live_plotly_chart
from ui.report import (
    NEGLIGIBLE_BYTES,
    RuleGap,
    band_warning,
    breakdown_csv,
    breakdown_frame,
    limit_text,
    remedy_line,
    verdict_detail,
)
from ui.trainer_inputs import render_trainer_inputs

inputs = render_inputs()
spec, setup, device = inputs.model, inputs.setup, inputs.device
present = inputs.presentation
trainer_in = render_trainer_inputs(setup)  # SFT unless the Trainer box says otherwise (ui/trainer_inputs.py)
setup, trainer = trainer_in.setup, trainer_in.trainer
rule = inputs.rule if trainer.trainer == "sft" else None  # the seed's rule covers SFT only
est = estimate(spec, setup, rule=rule, trainer=trainer, device_capacity=device.capacity_bytes)
detailed = estimate(spec, setup) if rule else est
v = verdict(est.total_bytes, device, est.high_bytes)


def text(value: str) -> str:
    """Markdown-escaped text: names can come from an uploaded config.json."""
    return plain(value, limit=2000)


show_notes(inputs)
for note in trainer_in.notes + (("The rule of thumb covers SFT only; showing the detailed estimate.",)
                                if inputs.rule and not rule else ()):
    st.warning(plain(note), icon=":material/info:")

# ---- The verdict, first and big -------------------------------------------------------------------------
mode = "rule of thumb" if rule else "detailed estimate"
length = (f"({trainer.prompt_length:,} + {trainer.completion_length:,}) tokens" if trainer.option.generates
          else f"{setup.seq_len:,} tokens")
trainer_label = "" if trainer.trainer == "sft" else f" · {trainer.option.label}"
if present:  # what is being judged, as readable as the verdict from the back of the room
    st.header(text(f"{spec.name} · {METHOD_LABELS[setup.method]} · {device.name}"), anchor=False)
    st.caption(text(f"{setup.precision} · batch {setup.batch} × {length} · {mode}{trainer_label}"))
else:
    st.caption(text(f"{spec.name} · {METHOD_LABELS[setup.method]} · {setup.precision} · batch {setup.batch} × "
                    f"{length} · {mode}{trainer_label}"))
    st.caption(text(setup_summary(setup)))
color, icon = ("green", ":material/check_circle:") if v.fits else ("red", ":material/cancel:")
(st.title if present else st.header)(f":{color}[{v.headline}]", icon=icon, anchor=False)
estimate_line, device_line = verdict_detail(est, device, v)
if present:
    st.subheader(text(estimate_line), anchor=False)
else:
    st.markdown(text(estimate_line))
st.caption(text(device_line))
caution = band_warning(est, v)
if caution:
    st.warning(text(caution), icon=":material/warning:")

if rule:
    gap = RuleGap(est.total_bytes, detailed.total_bytes)
    dv = verdict(detailed.total_bytes, device, detailed.high_bytes)
    st.info(text(gap.sentence()) + "  \n" + text(f"Detailed verdict on this device: {dv.headline}."),
            icon=":material/compare_arrows:")

# Updated in place (ui/live_chart.py): the bars glide to their new values instead of the chart being redrawn.
live_plotly_chart(memory_bar_spec(est, device, font_size=18 if present else None), key="memory_bar",
                  config={"displayModeBar": False}, alt=chart_alt(est, device))
if not present:
    for note in est.notes:
        st.caption(text(note))
    if trainer.trainer == "sft":  # the exact trace runs a supervised step (ui/exact.py)
        render_exact(inputs.model_choice, spec.source, setup, detailed, device,
                     upload=st.session_state.get("upload"), hub_token=hub_token())

# ---- What to change -------------------------------------------------------------------------------------
st.subheader("What to change", anchor=False)
usable = device.usable_bytes
if rule:  # the rule's own numbers: the changes it counts are priced with it, the others are named
    st.caption("Priced with the rule of thumb, like the verdict above. It ignores max length, batch and "
               "checkpointing; switch it off to price those.")
elif est.total_bytes <= usable:
    st.caption("It fits; each change frees this much headroom. In the order to try them: the first ones cost "
               "least.")
else:
    st.caption("In the order to try them when a run runs out of memory: the first ones cost least.")
try:  # the remedies and solvers, priced like the verdict (estimator.advice.advise; estimates are cached)
    advice = advise(spec, setup, device, trainer, rule, batch_limit=BATCH_MAX, length_limit=MAX_LEN_MAX)
    options, best_batch, best_len, smallest = (list(advice.remedies), advice.max_batch, advice.max_length,
                                               advice.smallest_device)
except ValueError as exc:  # the estimator could not build the comparison setup
    st.warning(text(f"The changes could not be priced for this model: {exc}"), icon=":material/info:")
    options, best_batch, best_len, smallest = [], None, None, None
numbered, aside = [], []
for r in options:
    if not r.applicable:
        aside.append(f"{text(r.title)} ({text(r.reason)})" if r.reason else text(r.title))
    elif abs(r.saves_bytes) < NEGLIGIBLE_BYTES:  # no numbered slot for a change that changes nothing here
        aside.append(f"{text(r.title)} (" + ("the rule of thumb does not count it" if rule else
                                             f"saves nothing here: {to_gb(r.new_total_bytes):,.1f} GB after") + ")")
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
    st.caption("Not available or no help here: " + "; ".join(aside) + ".")

long_name = "max completion length" if trainer.option.generates else "max length"
at_length = length if trainer.option.generates else f"max length {setup.seq_len:,}"
# The rule has no batch or length: those two answers are the detailed estimate's, and say so.
detailed_note = " (detailed estimate: the rule of thumb ignores it)" if rule else ""
fit_lines = [
    f"- Largest batch that fits on this device (at {at_length}){detailed_note}: "
    f"**{text(limit_text(best_batch, BATCH_MAX, 'example'))}**",
    f"- Longest {long_name} that fits (at batch {setup.batch}){detailed_note}: "
    f"**{text(limit_text(best_len, MAX_LEN_MAX, 'token'))}**" + (" tokens" if best_len else ""),
    "- Smallest catalog device that fits: " + (
        f"**{text(smallest.name)}** ({text(both_units(smallest.usable_bytes))} usable)" if smallest else
        "**none in the catalog**: try QLoRA, checkpointing, or sharding over several GPUs"),
]
st.markdown("\n".join(fit_lines))

# ---- Breakdown and downloads ----------------------------------------------------------------------------
if not present:
    st.subheader("Breakdown at the peak", anchor=False)
    table = breakdown_frame(est, device)
    st.dataframe(
        table, hide_index=True, width="stretch", key="breakdown", height=35 * (len(table) + 1) + 3,  # no scroll
        column_config={
            "component": st.column_config.TextColumn("Component", width="medium"),
            "item": st.column_config.TextColumn("Item", width="medium"),
            "bytes": st.column_config.NumberColumn("Bytes", format="localized"),
            "gb": st.column_config.NumberColumn("GB", format="%.2f GB", help="Decimal: 1 GB = 10⁹ bytes"),
            "gib": st.column_config.NumberColumn("GiB", format="%.2f GiB", help="Binary: 1 GiB = 2³⁰ bytes"),
            "share": st.column_config.ProgressColumn("Share", format="percent", min_value=0.0, max_value=1.0),
        },
        alt=f"Memory by item at the peak ({est.peak_phase}); total {to_gb(est.total_bytes):,.1f} GB.",
    )
    with st.container(horizontal=True):
        st.download_button("Download CSV", breakdown_csv(est, device), "will-it-fit.csv", "text/csv", key="download_csv",
                           on_click="ignore", icon=":material/download:")
        st.download_button("Download JSON", json.dumps(estimate_json(est, device), indent=2), "will-it-fit.json",
                           "application/json", key="download_json", on_click="ignore", icon=":material/download:")

# ---- The trainer's TRL script (estimator/trainer_snippets.py) -------------------------------------------
if trainer.trainer != "sft" and not present:
    with st.expander(f"{trainer.option.config_class} script for this estimate ({TRL_VERSION})"):
        st.code(trainer_snippet(spec, setup, trainer), language="python")

# ---- Share ----------------------------------------------------------------------------------------------
share_box()
