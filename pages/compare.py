"""Compare methods: full fine-tuning, LoRA and QLoRA (and other precisions or optimizers) for the same model
and setup, side by side on one memory axis against the device, like the seed's 7B figure."""

import streamlit as st

from estimator import estimate, verdict
from estimator.training import METHOD_LABELS, METHODS
from ui.charts import stacked_bars
from ui.grids import (
    FIGURE_ORDER,
    VARIANT_OPTIONS,
    compare_setups,
    components_table,
    seed_figure_rows,
    seed_figure_table,
    setup_summary,
)
from ui.inputs import plain, render_inputs, show_notes
from ui.page_charts import seed_figure_chart

inputs = render_inputs()
show_notes(inputs)
spec, setup, device = inputs.model, inputs.setup, inputs.device
font_size = 18 if inputs.presentation else None

st.title("Compare methods")
st.caption(plain(setup_summary(spec, setup, device)))

options = st.expander("Options", expanded=False) if inputs.presentation else st.container()
with options:
    left, right = st.columns(2)
    methods = left.multiselect("Methods", list(METHODS), default=list(METHODS), key="methods", bind="query-params",
                               help="full = every weight trains; lora = frozen 16-bit base + adapters; "
                                    "qlora = frozen 4-bit base + adapters.")
    variants = right.multiselect("Also compare with precision or optimizer", list(VARIANT_OPTIONS), default=[],
                                 key="variants", bind="query-params", disabled=inputs.rule == "seed",
                                 help="Adds a bar per chosen method with this precision or optimizer instead of "
                                      "the sidebar's.")
if not methods:
    st.info("Choose at least one method.", icon=":material/info:")
    st.stop()


def headline(gb: float) -> str:
    """≈ 112 GB, ≈ 15 GB, ≈ 4.2 GB: as the seed rounds."""
    return f"≈ {gb:,.0f} GB" if gb >= 10 else f"≈ {gb:,.1f} GB"


if inputs.rule == "seed":
    st.subheader("The seed's figure: GPU memory before activations")
    figures = seed_figure_rows(spec, methods, setup.lora_rank)
    columns = st.columns(len(figures))
    for col, (label, segs) in zip(columns, figures, strict=True):
        col.metric(label, headline(sum(segs.values())), border=True)
    st.plotly_chart(seed_figure_chart(figures, device, font_size=font_size), key="seed_figure",
                    config={"displayModeBar": False},
                    alt="Stacked bars of memory before activations per method: "
                        + ", ".join(f"{label} {sum(segs.values()):,.1f} GB" for label, segs in figures))
    st.caption("Full fine-tuning: 16-bit weights and gradients plus Adam's two fp32 moments and an fp32 master "
               "copy, 16 bytes per weight. LoRA and QLoRA: the frozen base (2 bytes or about half a byte per "
               "weight) plus the adapter's weights, gradients and Adam state, 16 bytes per adapter weight "
               f"(rank {setup.lora_rank}, all linear layers). The rule of thumb's total adds a working margin "
               "for activations at moderate lengths and the framework, and counts full fine-tuning at 12 bytes "
               "per weight (no master copy) unless precision is 'mixed'.")
    if not inputs.presentation:
        seed_table = seed_figure_table(spec, methods, setup.lora_rank, setup.precision == "mixed")
        st.dataframe(seed_table, hide_index=True, key="seed_table",
                     column_config={c: st.column_config.NumberColumn(format="%.2f")
                                    for c in seed_table.columns if c != "Segment"})
    st.stop()

rows = [(label, estimate(spec, s)) for label, s in compare_setups(setup, methods, variants)]
# One verdict per bar; with many bars, only the plain methods get a headline (the table has the rest).
headlines = rows if len(rows) <= 4 else [r for r in rows if r[0] in METHOD_LABELS.values()]
columns = st.columns(len(headlines))
for col, (label, est) in zip(columns, headlines, strict=True):
    v = verdict(est.total_bytes, device, est.high_bytes)
    col.metric(label, headline(est.total_bytes / 1e9), delta="fits" if v.fits else "too big",
               delta_color="normal" if v.fits else "inverse", delta_arrow="off", border=True,
               help=plain(v.headline))

orientation = "v" if len(rows) <= 6 else "h"
st.plotly_chart(stacked_bars(rows, device, orientation=orientation, font_size=font_size), key="compare_chart",
                config={"displayModeBar": False},
                alt="Stacked bars of peak memory per method: "
                    + ", ".join(f"{label} {est.total_bytes / 1e9:,.1f} GB" for label, est in rows))
st.caption(f"Each bar is the peak of one training step on one GPU, by component, against {plain(device.name)}'s "
           "usable memory. The whisker is the likely range. Methods appear in the seed figure's order: "
           + ", ".join(m for m in FIGURE_ORDER if m in methods) + ".")

table = components_table(rows)
if inputs.presentation:
    table = table[[c for c in table.columns if not c.endswith("(GiB)")]]
st.dataframe(table, hide_index=True, key="compare_table",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in table.columns
                            if c != "Component"})
