"""What fits my device: the seed's 36 GB laptop diagram for any device. Model sizes × methods against the
usable line, each marked with the calculator's verdict band (fits, close call, borderline, too big), and the largest
model that fits each way, computed."""

import streamlit as st

from ui.grids import (
    METHOD_ORDER,
    SHORT_METHOD,
    chosen_models,
    fits_grid,
    setup_summary,
)
from ui.inputs import plain, render_inputs, share_box, show_notes
from ui.page_charts import fits_chart
from ui.params import widget
from ui.trainer_inputs import page_trainer, trainer_summary

inputs = render_inputs()
show_notes(inputs)
trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: every model × method priced for its step
spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer
rule = inputs.rule if trainer.trainer == "sft" else None  # the rule of thumb covers SFT only
font_size = 18 if inputs.presentation else None

st.title("What fits my device")
mode = "the rule of thumb" if rule == "seed" else "the detailed estimate"
st.caption(plain(f"{device.name}: {device.usable_bytes / 1e9:,.0f} GB usable of {device.capacity_bytes / 1e9:,.0f} "
                 f"GB · {mode} · {setup_summary(None, setup, None, trainer_summary(trainer))}"))

options = st.expander("Models and methods", expanded=False) if inputs.presentation else st.container()
with options:
    left, right = st.columns([3, 2])
    chosen = widget("models", left)
    methods = widget("methods", right)
if not chosen or not methods:
    st.info("Choose at least one model and one method.", icon=":material/info:")
    share_box()
    st.stop()

grid = fits_grid(chosen_models(chosen), setup, device, rule, [m for m in METHOD_ORDER if m in methods], trainer)

st.subheader("The largest model that fits")
for conclusion in grid.conclusions:
    line = plain(conclusion.text)
    st.markdown(f"### {line}" if inputs.presentation else f"- **{line}**")
st.caption("'Up to about' is the largest generic decoder that fits, solved for this device and setup; the "
           "brackets name the listed models on either side of the line.")

st.plotly_chart(fits_chart(grid, font_size=font_size), key="fits_chart", config={"displayModeBar": False},
                alt="Horizontal bars of peak memory per model and method against the usable memory: "
                    + "; ".join(f"{c.label} {c.estimate.total_bytes / 1e9:,.1f} GB "
                                f"{c.verdict.band}" for c in grid.cells))
if not inputs.presentation:
    st.dataframe(
        [{"Model": c.model_label, "Method": SHORT_METHOD[c.method], "Parameters (B)": c.size_b,
          "Estimate (GB)": c.estimate.total_bytes / 1e9, "Estimate (GiB)": c.estimate.total_bytes / 2**30,
          "Verdict": c.verdict.band,
          "Headroom (GB)": c.verdict.margin_bytes / 1e9} for c in grid.cells],
        hide_index=True, key="fits_table",
        column_config={k: st.column_config.NumberColumn(format="%.1f")
                       for k in ("Estimate (GB)", "Estimate (GiB)", "Headroom (GB)")} | {
            "Parameters (B)": st.column_config.NumberColumn(format="%.2f"),
            "Model": st.column_config.TextColumn(width="medium", pinned=True)})
share_box()
