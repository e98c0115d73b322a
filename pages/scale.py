"""Scale out: per-GPU memory on 1–64 GPUs under data parallel, ZeRO-1/2/3 (FSDP full shard) and optional CPU
offload of the optimizer state, the fewest GPUs (whole nodes where GPUs come several to a node) of each
catalog GPU that fit, the calculator's verdict bands, and what would make it fit when nothing does."""


import pandas as pd
import streamlit as st

from estimator import fmt_both, verdict
from estimator.advice.solvers import best_layout, what_would_fit
from estimator.i18n import _, format_number, ngettext
from estimator.job.stack import resolve_setup
from estimator.options.methods import SHARDING_LABELS, SHARDINGS
from estimator.options.stacks import DEFAULT_STACK, get_stack
from ui.answers import ScaleLayouts as Layouts
from ui.grids import (
    GPU_COUNTS,
    SHORT_SHARDING,
    close_calls,
    min_gpus_table,
    page_estimate_fn,
    scale_out_curves,
    setup_summary,
)
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.page_charts import scale_out_chart_spec
from ui.params import widget
from ui.text import plain, present_table, show_notes
from ui.trainer_inputs import page_trainer, trainer_summary
from ui.url_state import share_box
from ui.values import Inputs


def band_note(est, device) -> str:  # noqa: ANN001 - an Estimate, a Device
    """A line's close-call flag (Markdown-escaped), in the calculator's verdict bands (estimator Verdict.band):
    empty when the upper end of the likely range fits too."""
    v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
    if v.band == "close call":
        return " " + plain(_("(close call: the upper end of the likely range, {high}, is above the usable "
                             "memory)").format(high=fmt_both(est.high_bytes)))
    return ""


def gpus_text(n: int, device, per_node: int) -> str:  # noqa: ANN001 - a Device
    """'16 × NVIDIA H100 80GB HBM3 (81,559 MiB), 2 nodes of 8,'."""
    nodes = ", " + ngettext("{nodes} node of {per_node}", "{nodes} nodes of {per_node}", n // per_node).format(
        nodes=n // per_node, per_node=per_node) + "," if per_node > 1 else ""
    return f"{n} × {device.name}{nodes}"


def answer(inputs: Inputs) -> Layouts:
    """The page's answer, drawn first on every run: the notes, the search's options, the fewest GPUs of this
    device that fit (or what would make it fit) and the per-GPU memory lines."""
    show_notes(inputs)
    trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: every GPU count priced for its step
    spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer
    offload = setup.offload_optimizer  # the sidebar's "Optimizer state in CPU RAM" (GPUs and sharding)
    st.title(_("Scale out"))
    if not get_stack(setup.stack).multi_gpu:  # mlx-lm is priced on one device: the lines are a PyTorch run's
        st.info(_("MLX-LM is priced on one device; the lines show the same job under TRL on GPUs."),
                icon=":material/info:")
        setup = resolve_setup(DEFAULT_STACK, method=setup.method, batch=setup.batch, seq_len=setup.seq_len,
                              lora_rank=setup.lora_rank, lora_targets=setup.lora_targets)
    st.caption(plain(setup_summary(spec, setup, device, trainer_summary(trainer))))
    if inputs.rule == "seed":
        st.info(_("The rule of thumb has no notion of GPUs or sharding: this page always shows the detailed estimate."),
                icon=":material/info:")
    options = st.expander(_("Options"), expanded=False) if inputs.presentation else st.container()
    with options:
        left, right = st.columns(2)
        max_gpus = widget("maxgpus", left)
        per_node = widget("pernode", right)
        st.caption(_("Optimizer state in CPU RAM: on, for the ZeRO/FSDP lines (the sidebar's setting, under GPUs and "
                     "sharding).") if offload else
                   _("Optimizer state in CPU RAM: off (the sidebar's setting, under GPUs and sharding)."))
    lay = Layouts(spec, setup, device, trainer, offload, max_gpus, int(per_node or 1),
                  page_estimate_fn(trainer, None, device.runtime_total_bytes))
    counts = [n for n in GPU_COUNTS if lay.per_node <= n <= max_gpus] or [max_gpus]
    curves = scale_out_curves(spec, setup, counts, SHARDINGS, offload, trainer, device.runtime_total_bytes)
    if device.kind != "discrete":
        st.info(plain(_("{device} is a unified-memory machine: it does not scale out. The lines show what each GPU "
                        "would need; pick a GPU in the sidebar to compare.").format(device=device.name)),
                icon=":material/info:")
    else:
        _verdict(lay)
    # Updated in place (ui/live_chart.py): a plain spec, no Figure built and validated on every rerun.
    live_plotly_chart(scale_out_chart_spec(curves, counts, device, font_size=18 if inputs.presentation else None),
                      key="scale_chart", config={"displayModeBar": False},
                      alt=_("Lines of peak memory per GPU against the GPU count for each sharding: {lines}").format(
                          lines="; ".join(_("{sharding} from {first} GB on {first_n} GPU(s) to {last} GB on {last_n}").format(
                              sharding=_(SHARDING_LABELS[s]), first=format_number(ests[0].total_bytes / 1e9, 0),
                              first_n=counts[0], last=format_number(ests[-1].total_bytes / 1e9, 0), last_n=counts[-1])
                              for s, ests in curves.items())))
    return lay


def _verdict(lay: Layouts) -> None:
    """The fewest GPUs of this device that fit, as the calculator's verdict bands say it; when none does, what
    would make it fit."""
    spec, setup, device, max_gpus, per_node = lay.spec, lay.setup, lay.device, lay.max_gpus, lay.per_node
    best = best_layout(spec, setup, device, SHARDINGS, lay.offload, max_gpus, per_node, lay.estimate_fn)
    if best is None:
        _nothing_fits(lay)
        return
    est = best.estimate
    v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
    line = _("{gpus} with {sharding}: {amount} per GPU of {usable} usable").format(
        gpus=gpus_text(best.gpus, device, per_node), sharding=_(SHARDING_LABELS[best.sharding]),
        amount=fmt_both(est.total_bytes), usable=fmt_both(device.usable_bytes))
    if v.band == "fits":
        st.success(plain(_("Fits on {layout}").format(layout=line), limit=1000), icon=":material/check_circle:")
    else:  # the calculator's close call: the expected peak fits, the upper end of its likely range does not
        # no sharding fits with its upper end on this many GPUs: the fewest that do, with any sharding
        safe = best_layout(spec, setup, device, SHARDINGS, lay.offload, max_gpus, per_node, lay.estimate_fn,
                           likely_high=True)
        if safe is None:
            then = " " + _("Even {n} GPUs leave the upper end above the usable memory: leave headroom "
                           "(checkpointing, a shorter max length).").format(n=max_gpus)
        elif safe.sharding == best.sharding:
            then = " " + _("With {gpus} the upper end fits too.").format(gpus=gpus_text(safe.gpus, device, per_node))
        else:
            then = " " + _("With {gpus} and {sharding} the upper end fits too.").format(
                gpus=gpus_text(safe.gpus, device, per_node), sharding=_(SHARDING_LABELS[safe.sharding]))
        st.warning(plain(_("Close call: fits on {layout}, but the upper end of the likely range ({high}) is "
                           "above it.").format(layout=line, high=fmt_both(est.high_bytes)) + then, limit=1000),
                   icon=":material/warning:")
    if est.cpu_offload_bytes:
        st.caption(plain(_("Kept in CPU RAM while training (offloaded state, checkpoints, pinned buffers), all GPUs together: {amount}.").format(
            amount=fmt_both(est.cpu_offload_bytes))))


def _nothing_fits(lay: Layouts) -> None:
    """No layout fits: say so, then what would (checkpointing, optimizer offload, more GPUs)."""
    device, max_gpus = lay.device, lay.max_gpus
    st.error(plain(_("No layout up to {n} × {device} fits this setup.").format(n=max_gpus, device=device.name)),
             icon=":material/block:")
    found = what_would_fit(lay.spec, lay.setup, device, SHARDINGS, lay.offload, max_gpus, lay.per_node,
                           lay.estimate_fn)
    if found:
        st.markdown("**" + _("What would make it fit:") + "**\n" + "\n".join(
            f"- {plain(label)}: " + _("{gpus} with {sharding}, {amount} per GPU").format(
                gpus=plain(gpus_text(layout.gpus, device, lay.per_node)),
                sharding=plain(_(SHARDING_LABELS[layout.sharding])),
                amount=plain(fmt_both(layout.estimate.total_bytes))) + band_note(layout.estimate, device)
            for label, layout in found))  # each part ≤ 300
    else:
        st.markdown(_("Not even checkpointing, optimizer offload or 16 times the GPUs make it fit: try LoRA, "
                      "QLoRA or a shorter max length on the calculator."))


def rest(inputs: Inputs, lay: Layouts) -> None:
    """After the answer and the sliders: the smallest GPU count of every catalog GPU, what the shardings are,
    the share link."""
    max_gpus, per_node = lay.max_gpus, lay.per_node
    table = min_gpus_table(lay.spec, lay.setup, shardings=SHARDINGS, offload=lay.offload, max_gpus=max_gpus,
                           per_node=per_node, trainer=lay.trainer)
    st.subheader(_("Smallest GPU count that fits"), anchor=False)
    st.caption(_("Per GPU in the catalog and sharding; '> {n}' where even {n} GPUs are not enough").format(n=max_gpus)
               + ("; " + _("whole nodes of {per_node}").format(per_node=per_node) if per_node > 1 else "")
               + "; " + _("'close call' where the upper end of the likely range does not fit at that count.")
               + " " + _("Activations are not sharded: each GPU keeps its own micro-batch's."))
    shown = table.copy()
    close = close_calls(lay.spec, lay.setup, table, SHARDINGS, lay.offload)
    for sharding in SHARDINGS:
        column = SHORT_SHARDING[sharding]
        shown[column] = [f"> {max_gpus}" if n is pd.NA else _("{n} (close call)").format(n=f"{n:d}")
                         if (name, sharding) in close
                         else f"{n:d}" for name, n in zip(table["Device"], table[column], strict=True)]
    if inputs.presentation:
        present_table(shown.rename(columns={"Device": _("Device"), "Memory (GB)": _("Memory (GB)")}), digits=0)
    else:
        numbers = {"Memory (GB)": (0, " GB")}
        st.dataframe(localised(shown, numbers), hide_index=True, key="min_gpus_table", height=38 + 35 * len(shown),
                     column_config={"Device": st.column_config.TextColumn(_("Device"), width="large", pinned=True)}
                     | number_columns(numbers, {"Memory (GB)": _("Memory (GB)")})
                     | {SHORT_SHARDING[s]: st.column_config.TextColumn(SHORT_SHARDING[s], help=_(SHARDING_LABELS[s]))
                        for s in SHARDINGS})
        st.markdown(
            "- " + _("**Data parallel (DDP)**: every GPU holds the whole model, gradients and optimizer state, plus a "
                     "bucket copy of the gradients for the all-reduce. More GPUs make it faster, never smaller.") + "\n"
            "- " + _("**ZeRO-1** shards the optimizer state over the GPUs; **ZeRO-2** the gradients too; **ZeRO-3 / "
                     "FSDP full shard** the weights as well, gathering two layers' weights at a time.") + "\n"
            "- " + _("**Offload** moves the optimizer state to CPU RAM (ZeRO-Offload), at the cost of slower steps.")
        )
    share_box()


live_page(answer, rest)  # the sidebar, then in a fragment: the fewest GPUs and the chart, the sliders, the rest
