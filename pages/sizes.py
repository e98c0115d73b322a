"""Size table: the seed's table of model sizes × methods (its rule of thumb), extended to QLoRA and larger
models, next to the detailed estimate for the current setup. Downloadable as CSV."""

import pandas as pd
import streamlit as st

from estimator.i18n import N_, _
from estimator.memory.rule import rule_sentence
from ui.grids import SHORT_METHOD, TABLE_METHODS, setup_summary, size_table
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.params import BY_SIZE
from ui.text import plain, present_table, show_notes
from ui.trainer_inputs import page_trainer, trainer_summary
from ui.url_state import share_box
from ui.values import Inputs


def heading(column: str) -> str:
    """A short heading on screen (values carry the unit), translated: 'LoRA · rule (GB)' → 'LoRA rule'."""
    if column == "Model":
        return _("Model")
    short = column.replace(" (GB)", "")
    for kind in (N_("rule"), N_("detailed")):
        if short.endswith(f" · {kind}"):
            method = short[: -len(f" · {kind}")]
            return f"{_(method)} {_(kind)}"
    return short


def answer(inputs: Inputs) -> pd.DataFrame:
    """The page's answer, drawn first on every run: the notes and the table of sizes × methods."""
    show_notes(inputs)
    trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: the detailed columns price its step
    spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer

    st.title(_("Size table"))
    st.caption(plain(_("Detailed columns for: {setup}").format(
        setup=setup_summary(None, setup, None, trainer_summary(trainer)))))
    if trainer.trainer != "sft":
        st.caption(plain(_("The rule columns are the rule of thumb for supervised fine-tuning; the detailed columns "
                           "price a {trainer} step.").format(trainer=trainer.option.label)))

    # The sidebar's model joins the table when it is a real architecture (a preset or an uploaded config).
    extra = [(_("{model} (yours)").format(model=spec.name), spec)] if inputs.model_choice != BY_SIZE else []
    table = size_table(setup, extra=extra, trainer=trainer, device_capacity=device.runtime_total_bytes)

    gb_columns = [c for c in table.columns if c.endswith("(GB)")]
    shown = ["Model", *gb_columns] if not inputs.presentation else [
        "Model", *(f"{SHORT_METHOD[m]} · {kind} (GB)" for m in TABLE_METHODS for kind in ("rule", "detailed"))]
    # Short headings on screen; the CSV keeps the full column names.
    numbers = {c: (1, " GB") for c in gb_columns}
    config = number_columns(numbers, {c: heading(c) for c in gb_columns}, {c: c for c in gb_columns})
    config["Model"] = st.column_config.TextColumn(_("Model"), pinned=True, width="medium")
    if inputs.presentation:
        present_table(table[shown].rename(columns=heading))
    else:
        st.dataframe(localised(table, numbers), hide_index=True, key="size_table", column_order=shown,
                     column_config=config, height=38 + 35 * len(table))
    return table


def rest(inputs: Inputs, table: pd.DataFrame) -> None:
    """After the answer and the sliders: the CSV download, what the columns mean, the share link."""
    st.download_button(_("Download CSV (GB and GiB)"), table.to_csv(index=False, float_format="%.3f"),
                       file_name="will-it-fit-size-table.csv", mime="text/csv", on_click="ignore",
                       icon=":material/download:", key="size_csv")

    st.markdown(
        _("**Rule** columns are the rule of thumb: {rule}. They ignore batch size, length and optimizer.").format(
            rule=_(rule_sentence()))
        + "\n\n"
        + _("**Detailed** columns are this app's estimate of the peak of one training step for the sidebar's setup "
            "(batch, max length, precision, optimizer, checkpointing, attention), for a Llama-style decoder of that "
            "size. GB = 10⁹ bytes; the CSV adds GiB (2³⁰ bytes, what PyTorch and nvidia-smi report).")
    )
    if inputs.rule == "seed":
        st.caption(_("The rule-of-thumb toggle does not change this table: it always shows both."))
    share_box()


live_page(answer, rest)  # the sidebar, then in a fragment: the table, the sliders, the rest
