"""How it works, the accuracy: the tracer's, the published runs' and MLX-LM's errors (overall, by method, run by
run; validation/ re-estimates them and stores the report, ui/accuracy.py reads it), the real-run check (verdicts on
published runs: false fits first), then the exact trace for when the fast estimate is not enough: what it is, what it
leaves out, how to install it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from estimator import exact as exact_doc
from estimator.i18n import N_, _, format_number
from estimator.memory.overhead import ALLOCATOR_SLACK

from .accuracy import accuracy_report, real_runs_report
from .lang import localised, number_columns
from .once import arrow_table, once, table_per_language


def accuracy() -> tuple[dict, dict]:
    """How accurate it is: the tracer's and the published runs' errors, overall and by method."""
    st.header(_("How accurate is it?"))
    report = accuracy_report()
    tracer, published = report["tracer"], report["published"]
    st.markdown(
        _("Two checks, re-run on every test run (`validation/`):\n\n"
        "- **Tracer**: real training steps of small Llama/Qwen/Gemma/Phi/MoE models run on CPU with fake "
        "tensors, every allocation counted (`calibration/`). Checks the tensor-level formulas exactly.\n"
        "- **Published measurements**: peak memory reported by LitGPT, torchtune and PEFT benchmarks on real "
        "GPUs, each with its source.")
    )
    st.markdown(_("- **MLX-LM**: real `mlx_lm lora` training steps (mlx 0.32.4, CPU backend) measured with "
                  "`mx.get_peak_memory()`, at real widths and vocabularies and on small probes "
                  "(`calibration/mlx_trace.py`); the probes fix the model's measured constants "
                  "(`calibration/mlx_fit.py`), the other runs check it."))
    mlx = report["mlx"]
    left, right, third = st.columns(3)
    for col, name, part in ((left, _("Tracer runs"), tracer), (right, _("Published runs"), published),
                            (third, _("MLX-LM runs"), mlx)):
        with col:
            if part["n"]:
                n = format_number
                st.metric(_("{name}: median error").format(name=name), f"{n(part['median_abs_pct'])} %", border=True,
                          help=_("{runs} runs; 90 % within {p90} %, worst {worst} %.").format(
                              runs=part["n"], p90=n(part["p90_abs_pct"]), worst=n(part["worst_abs_pct"])))
                st.caption(_("{runs} runs · 90 % within {p90} % · worst {worst} %").format(
                    runs=part["n"], p90=n(part["p90_abs_pct"]), worst=n(part["worst_abs_pct"])))
            else:
                st.metric(_("{name}: median error").format(name=name), "–", border=True)
                st.caption(_("No runs recorded yet."))

    by_method = [{"Set": name, "Method": method, "Runs": s["n"], "Median |error| %": s["median_abs_pct"],
                  "Worst |error| %": s["worst_abs_pct"]}
                 for name, part in (("tracer", tracer), ("published", published))
                 for method, s in part.get("by_method", {}).items()]
    if by_method:
        errors = {"Median |error| %": (1, ""), "Worst |error| %": (1, "")}
        st.dataframe(table_per_language("how.accuracy_by_method", lambda: localised(pd.DataFrame(by_method), errors)),
                     hide_index=True, key="accuracy_by_method",
                     column_config={"Set": st.column_config.TextColumn(_("Set")),
                                    "Method": st.column_config.TextColumn(_("Method")),
                                    "Runs": st.column_config.NumberColumn(_("Runs"))}
                     | number_columns(errors, {"Median |error| %": _("Median |error| %"),
                                               "Worst |error| %": _("Worst |error| %")}))
    return tracer, published


def _published_frame(published: dict) -> pd.DataFrame:
    """The published runs' table: ids, settings, measured and estimated GB, the error and its explanation."""
    pub = pd.DataFrame(published["rows"])
    pub_columns = ["id", "model", "stack", "method", "precision", "batch", "seq_len", "grad_ckpt", "measure", "measured_gb",
                   "estimated_gb", "error_pct", "explanation", "source"]
    return pub[[c for c in pub_columns if c in pub.columns]]


def _tracer_frame(tracer: dict) -> pd.DataFrame:
    """The tracer runs' table: ids, settings, measured and estimated GB and the error."""
    tr = pd.DataFrame(tracer["rows"])
    tr["measured_gb"] = tr["measured_bytes"] / 1e9
    tr["estimated_gb"] = tr["estimated_bytes"] / 1e9
    tr_columns = ["id", "family", "method", "precision", "batch", "seq_len", "grad_ckpt", "attention",
                  "measured_gb", "estimated_gb", "error_pct"]
    return tr[[c for c in tr_columns if c in tr.columns]]


def run_tables(tracer: dict, published: dict) -> None:
    """Every published and tracer run, with its error."""
    # Column headings shared by both run tables.
    RUN_COLUMNS = {
        "id": st.column_config.TextColumn(_("Run"), pinned=True), "model": st.column_config.TextColumn(_("Model")),
        "method": st.column_config.TextColumn(_("Method")), "precision": st.column_config.TextColumn(_("Precision")),
        "batch": st.column_config.NumberColumn(_("Batch")), "seq_len": st.column_config.NumberColumn(_("Length")),
        "grad_ckpt": st.column_config.CheckboxColumn(_("Checkpointing")),
        "error_pct": st.column_config.NumberColumn(_("Error %"), format="%+.1f"),
    }
    if published["rows"]:
        st.subheader(_("Published runs"))
        st.dataframe(once("how.published_runs", lambda: arrow_table(_published_frame(published))), hide_index=True,
                     key="published_runs",
                     column_config=RUN_COLUMNS | {
                         "measured_gb": st.column_config.NumberColumn(_("Measured (GB)"), format="%.2f"),
                         "estimated_gb": st.column_config.NumberColumn(_("Estimated (GB)"), format="%.2f"),
                         "measure": st.column_config.TextColumn(_("Measure")),
                         "explanation": st.column_config.TextColumn(_("Why it differs")),
                         "source": st.column_config.TextColumn(_("Source"))})
        st.caption(_("Error = (estimated − measured) / measured. Rows with an explanation used a technique the estimate "
                     "does not model (torch.compile, optimizer-in-backward, validation peaks). Each run is estimated "
                     "with its own framework's stack."))
    if tracer["rows"]:
        st.subheader(_("Tracer runs"))
        st.dataframe(once("how.tracer_runs", lambda: arrow_table(_tracer_frame(tracer))), hide_index=True,
                     key="tracer_runs",
                     column_config=RUN_COLUMNS | {
                         "measured_gb": st.column_config.NumberColumn(_("Measured (GB)"), format="%.4f"),
                         "estimated_gb": st.column_config.NumberColumn(_("Estimated (GB)"), format="%.4f"),
                         "family": st.column_config.TextColumn(_("Family")),
                         "attention": st.column_config.TextColumn(_("Attention"))})


def exact_trace() -> None:
    """What the exact trace is, what it leaves out, how to install it."""
    st.header(_("The exact trace"))
    st.markdown(_(exact_doc.WHAT_EXACT_MEANS))
    st.markdown(_("What it leaves out, and what is added for it:") + "\n\n"
                + "\n".join("- " + _(item).format(slack=format_number(100 * ALLOCATOR_SLACK, 0))
                            for item in exact_doc.WHAT_EXACT_LEAVES_OUT))
    st.caption(_("Optional install: `pip install -r requirements-exact.txt` (CPU torch, transformers, peft, trl), or "
                 "`{env}` pointing at a Python that has it. Tracing costs CPU time per operation (about 15 s per decoder "
                 "layer on two busy cores); configs over {max_layers} layers are refused, and each trace has a time "
                 "limit and a host-memory cap (`{memory_env}`); a trace that fails or passes either ends with a one-line "
                 "note. The button is on the calculator and, for the bar you pick, on the Compare page.").format(
        env=exact_doc.PYTHON_ENV, max_layers=exact_doc.MAX_TRACE_LAYERS, memory_env=exact_doc.HOST_MEMORY_ENV))


# The real-run check's verdicts, as the page names them (validation/real_runs.py writes the ids).
VERDICTS = {"false fit": N_("false fit"), "false alarm": N_("false alarm"), "right": N_("right")}
OUTCOMES = {"fits": N_("ran"), "oom": N_("out of memory")}
METRIC_NAMES = {"max_allocated": N_("max allocated (the tensors' peak)"),
                "reserved / nvidia-smi": N_("reserved or nvidia-smi (the process)"),
                "mx.get_peak_memory": N_("MLX peak memory"), "unknown": N_("not stated by the source")}


def metric_name(group: str) -> str:
    """What measured a published peak, as the page names it (marked N_, translated where shown)."""
    return METRIC_NAMES.get(group, group)


def _run_rows(rows: list[dict], reason: bool = False) -> pd.DataFrame:
    """Real runs as a table: what ran, on which card, what happened, what the estimate said."""
    out = []
    for r in rows:
        outcome, judged = OUTCOMES[r["outcome"]], VERDICTS.get(r["verdict"] or "")
        row = {_("Run"): r["id"], _("Model"): r["model"], _("Stack"): r["stack"], _("Method"): r["method"],
               _("Trainer"): r["trainer"], _("Device"): r["device"] or "—", _("Outcome"): _(outcome),
               _("Estimate (GB)"): format_number(r["estimated_bytes"] / 1e9),
               _("Usable (GB)"): format_number(r["usable_bytes"] / 1e9) if r["usable_bytes"] else "—",
               _("Verdict"): _(judged) if judged else "—",
               _("Peak error %"): f"{format_number(r['error_pct'])}" if r["error_pct"] is not None else "—"}
        if reason:
            row[_("Releases")] = r["versions"]
            row[_("Not modelled")] = "; ".join(r["unmodelled"])
        row[_("Source")] = r["source"]
        out.append(row)
    return pd.DataFrame(out)


def real_runs() -> None:
    """The real-run check (validation/real_runs.py, stored with the accuracy report): verdicts right, false fits
    first, false alarms, the peak error by what measured it, and the runs at releases the estimate does not model."""
    st.header(_("Real runs: is the verdict right?"))
    report = real_runs_report()
    modelled, other = report["modelled"], report["not_modelled"]
    st.markdown(_("{n} fine-tuning runs others executed on real hardware and published, with their settings, their "
                  "library releases and what happened: it ran (with the peak they measured, where they printed one) "
                  "or it ran out of memory on a named card. Each is priced as a new user would ask: its stack with "
                  "every setting the run states, and the trainer it ran. A false *fits* is the worst error this "
                  "calculator can make (a team rents the card and the run dies), so it is counted first.").format(
        n=report["n"]))
    v = modelled["verdicts"]
    cols = st.columns(3)
    cols[0].metric(_("False fits"), str(v["false fit"]), border=True,
                   help=_("Runs that ran out of memory where the estimate said it fits."))
    cols[1].metric(_("False alarms"), str(v["false alarm"]), border=True,
                   help=_("Runs that fit where the estimate said too big."))
    cols[2].metric(_("Verdicts right"), _("{right} of {judged}").format(right=v["right"], judged=v["judged"]),
                   border=True, help=_("Runs with a named card; the others have no verdict to check."))
    ov = other["verdicts"]
    st.caption(_("At the releases the estimate models: {n} runs, {unjudged} without a named card. At a release it does "
                 "not model (below): {m} more runs; false fits: {ff}, false alarms: {fa}, right: {right}.").format(
        n=modelled["n"], unjudged=v["not judged"], m=other["n"], ff=ov["false fit"], fa=ov["false alarm"],
        right=ov["right"]))
    errors = [{_("Releases"): _(title), _("Measured as"): _(metric_name(group)), _("Runs"): e["n"],
               _("Median |error| %"): format_number(e["median_abs_pct"]), _("Worst %"): format_number(e["worst_pct"]),
               _("Mean %"): format_number(e["mean_pct"])}
              for part, title in ((modelled, N_("modelled")), (other, N_("not modelled")))
              for group, e in part["errors"].items()]
    if errors:
        st.subheader(_("Peak error by what measured it"))
        st.dataframe(pd.DataFrame(errors), hide_index=True, key="real_run_errors")
        st.caption(_("Error = (estimate − measured) / measured: against the tensors' peak where the run measured "
                     "max allocated, against the whole process (context and allocator included) otherwise."))
    rows = report["rows"]
    for key, title, verdict in (("false_fits", N_("False fits"), "false fit"),
                                ("false_alarms", N_("False alarms"), "false alarm")):
        found = [r for r in rows if r["verdict"] == verdict and not r["unmodelled"]]
        st.subheader(_(title))
        if found:
            st.dataframe(_run_rows(found), hide_index=True, key=f"real_run_{key}")
        else:
            st.caption(_("None at the releases the estimate models."))
    unmodelled = [r for r in rows if r["unmodelled"]]
    if unmodelled:
        st.subheader(_("Runs at a release not modelled"))
        st.caption(_("Each ran a release whose memory behaviour the estimate does not price; they are reported apart "
                     "and priced at the releases the estimate models."))
        st.dataframe(_run_rows(unmodelled, reason=True), hide_index=True, key="real_run_unmodelled")
    with st.expander(_("Every real run")):
        st.dataframe(once("how.real_runs", lambda: arrow_table(_run_rows(rows))), hide_index=True, key="real_runs")
