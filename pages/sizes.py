"""Size table: the seed's table of model sizes × methods (its rule of thumb), extended to QLoRA and larger
models, next to the detailed estimate for the current setup. Downloadable as CSV."""

import streamlit as st

from ui.grids import SHORT_METHOD, TABLE_METHODS, setup_summary, size_table
from ui.inputs import BY_SIZE, plain, present_table, render_inputs, share_box, show_notes
from ui.trainer_inputs import page_trainer, trainer_summary

inputs = render_inputs()
show_notes(inputs)
trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: the detailed columns price its step
spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer

st.title("Size table")
st.caption(plain("Detailed columns for: " + setup_summary(None, setup, None, trainer_summary(trainer))))
if trainer.trainer != "sft":
    st.caption(plain(f"The rule columns are the rule of thumb for supervised fine-tuning; the detailed columns "
                     f"price a {trainer.option.label} step."))

# The sidebar's model joins the table when it is a real architecture (a preset or an uploaded config).
extra = [(f"{spec.name} (yours)", spec)] if inputs.model_choice != BY_SIZE else []
table = size_table(setup, extra=extra, trainer=trainer, device_capacity=device.capacity_bytes)

gb_columns = [c for c in table.columns if c.endswith("(GB)")]
shown = ["Model", *gb_columns] if not inputs.presentation else [
    "Model", *(f"{SHORT_METHOD[m]} · {kind} (GB)" for m in TABLE_METHODS for kind in ("rule", "detailed"))]
# Short headings on screen (values carry the unit); the CSV keeps the full column names.
config = {c: st.column_config.NumberColumn(c.replace(" (GB)", "").replace(" · ", " "), format="%.1f GB",
                                           help=c) for c in gb_columns}
config["Model"] = st.column_config.TextColumn("Model", pinned=True, width="medium")
if inputs.presentation:
    present_table(table[shown].rename(columns=lambda c: c.replace(" (GB)", "").replace(" · ", " ")))
else:
    st.dataframe(table, hide_index=True, key="size_table", column_order=shown, column_config=config,
                 height=38 + 35 * len(table))

st.download_button("Download CSV (GB and GiB)", table.to_csv(index=False, float_format="%.3f"),
                   file_name="will-it-fit-size-table.csv", mime="text/csv", on_click="ignore",
                   icon=":material/download:", key="size_csv")

st.markdown(
    "**Rule** columns are the rule of thumb: LoRA ≈ 2 GB per billion parameters + 3 GB, full "
    "fine-tuning ≈ 12 GB per billion + 4 GB (16 GB per billion with precision 'mixed', the fp32 master copy), "
    "QLoRA ≈ a third of LoRA + 3 GB, never above LoRA. They ignore batch size, length and optimizer.\n\n"
    "**Detailed** columns are this app's estimate of the peak of one training step for the sidebar's setup "
    "(batch, max length, precision, optimizer, checkpointing, attention), for a Llama-style decoder of that "
    "size. GB = 10⁹ bytes; the CSV adds GiB (2³⁰ bytes, what PyTorch and nvidia-smi report)."
)
if inputs.rule == "seed":
    st.caption("The rule-of-thumb toggle does not change this table: it always shows both.")
share_box()
