"""Scale out: per-GPU memory on 1–64 GPUs under data parallel, ZeRO-1/2/3 (FSDP full shard) and optional CPU
offload of the optimizer state, the fewest GPUs (whole nodes where GPUs come several to a node) of each
catalog GPU that fit, the calculator's verdict bands, and what would make it fit when nothing does."""

import pandas as pd
import streamlit as st

from estimator import fmt_both, verdict
from estimator.advice import best_layout, fewest_gpus, sharded, what_would_fit
from estimator.training import SHARDING_LABELS, SHARDINGS
from ui.grids import GPU_COUNTS, SHORT_SHARDING, close_calls, min_gpus_table, scale_out_curves, setup_summary
from ui.inputs import plain, present_table, render_inputs, share_box, show_notes
from ui.page_charts import scale_out_chart
from ui.params import widget
from ui.trainer_inputs import page_estimate_fn, page_trainer, trainer_summary

inputs = render_inputs()
show_notes(inputs)
trainer_in = page_trainer(inputs)  # the sidebar's Trainer box: every GPU count priced for its step
spec, setup, device, trainer = inputs.model, trainer_in.setup, inputs.device, trainer_in.trainer
estimate_fn = page_estimate_fn(trainer, None, device.capacity_bytes)
font_size = 18 if inputs.presentation else None

st.title("Scale out")
st.caption(plain(setup_summary(spec, setup, device, trainer_summary(trainer))))
if inputs.rule == "seed":
    st.info("The rule of thumb has no notion of GPUs or sharding: this page always shows the detailed estimate.",
            icon=":material/info:")

options = st.expander("Options", expanded=False) if inputs.presentation else st.container()
with options:
    left, middle, right = st.columns(3)
    offload = widget("offload", left)
    max_gpus = widget("maxgpus", middle)
    per_node = widget("pernode", right)
per_node = int(per_node or 1)


def band_note(est) -> str:
    """A line's close-call flag (Markdown-escaped), in the calculator's verdict bands (estimator Verdict.band):
    empty when the upper end of the likely range fits too."""
    v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
    if v.band == "close call":
        return " " + plain(f"(close call: the upper end of the likely range, {fmt_both(est.high_bytes)}, is above "
                           "the usable memory)")
    return ""


def gpus_text(n: int) -> str:
    """'16 × NVIDIA H100 80GB HBM3 (81,559 MiB), 2 nodes of 8,'."""
    nodes = f", {n // per_node} node{'s' if n // per_node > 1 else ''} of {per_node}," if per_node > 1 else ""
    return f"{n} × {device.name}{nodes}"


counts = [n for n in GPU_COUNTS if per_node <= n <= max_gpus] or [max_gpus]
curves = scale_out_curves(spec, setup, counts, SHARDINGS, offload, trainer, device.capacity_bytes)
table = min_gpus_table(spec, setup, shardings=SHARDINGS, offload=offload, max_gpus=max_gpus, per_node=per_node,
                       trainer=trainer)

if device.kind != "discrete":
    st.info(plain(f"{device.name} is a unified-memory machine: it does not scale out. The lines show what "
                  "each GPU would need; pick a GPU in the sidebar to compare."), icon=":material/info:")
else:
    best = best_layout(spec, setup, device, SHARDINGS, offload, max_gpus, per_node, estimate_fn)
    if best is None:
        st.error(plain(f"No layout up to {max_gpus} × {device.name} fits this setup."), icon=":material/block:")
        found = what_would_fit(spec, setup, device, SHARDINGS, offload, max_gpus, per_node, estimate_fn)
        if found:
            st.markdown("**What would make it fit:**\n" + "\n".join(
                f"- {plain(label)}: {plain(gpus_text(layout.gpus))} with {plain(SHARDING_LABELS[layout.sharding])}, "
                f"{plain(fmt_both(layout.estimate.total_bytes))} per GPU" + band_note(layout.estimate)
                for label, layout in found))  # each part ≤ 300
        else:
            st.markdown("Not even checkpointing, optimizer offload or 16 times the GPUs make it fit: try LoRA, "
                        "QLoRA or a shorter max length on the calculator.")
    else:
        est = best.estimate
        v = verdict(est.total_bytes, device, est.high_bytes, est.low_bytes)
        line = (f"{gpus_text(best.gpus)} with {SHARDING_LABELS[best.sharding]}: {fmt_both(est.total_bytes)} per "
                f"GPU of {fmt_both(device.usable_bytes)} usable")
        if v.band == "fits":
            st.success(plain(f"Fits on {line}", limit=1000), icon=":material/check_circle:")
        else:  # the calculator's close call: the expected peak fits, the upper end of its likely range does not
            safe = fewest_gpus(spec, sharded(setup, best.sharding, offload), device.usable_bytes, max_gpus,
                               per_node, estimate_fn, likely_high=True)
            then = (f" With {gpus_text(safe)} the upper end fits too." if safe else
                    f" Even {max_gpus} GPUs leave the upper end above the usable memory: leave headroom "
                    "(checkpointing, a shorter max length).")
            st.warning(plain(f"Close call: fits on {line}, but the upper end of the likely range "
                             f"({fmt_both(est.high_bytes)}) is above it.{then}", limit=1000), icon=":material/warning:")
        if est.cpu_offload_bytes:
            st.caption(plain(f"Optimizer state in CPU RAM, all GPUs together: {fmt_both(est.cpu_offload_bytes)}."))

st.plotly_chart(scale_out_chart(curves, counts, device, font_size=font_size), key="scale_chart",
                config={"displayModeBar": False},
                alt="Lines of peak memory per GPU against the GPU count for each sharding: "
                    + "; ".join(f"{SHARDING_LABELS[s]} from {ests[0].total_bytes / 1e9:,.0f} GB on {counts[0]} "
                                f"GPU(s) to {ests[-1].total_bytes / 1e9:,.0f} GB on {counts[-1]}"
                                for s, ests in curves.items()))

st.subheader("Smallest GPU count that fits", anchor=False)
st.caption(f"Per GPU in the catalog and sharding; '> {max_gpus}' where even {max_gpus} GPUs are not enough"
           + (f"; whole nodes of {per_node}" if per_node > 1 else "")
           + "; 'close call' where the upper end of the likely range does not fit at that count. Activations are "
             "not sharded: each GPU keeps its own micro-batch's.")
shown = table.copy()
close = close_calls(spec, setup, table, SHARDINGS, offload)
for sharding in SHARDINGS:
    column = SHORT_SHARDING[sharding]
    shown[column] = [f"> {max_gpus}" if n is pd.NA else f"{n:d} (close call)" if (name, sharding) in close
                     else f"{n:d}" for name, n in zip(table["Device"], table[column], strict=True)]
if inputs.presentation:
    present_table(shown, digits=0)
else:
    st.dataframe(shown, hide_index=True, key="min_gpus_table", height=38 + 35 * len(shown),
                 column_config={"Device": st.column_config.TextColumn(width="large", pinned=True),
                                "Memory (GB)": st.column_config.NumberColumn(format="%.0f GB")}
                 | {SHORT_SHARDING[s]: st.column_config.TextColumn(SHORT_SHARDING[s], help=SHARDING_LABELS[s])
                    for s in SHARDINGS})
if not inputs.presentation:
    st.markdown(
        "- **Data parallel (DDP)**: every GPU holds the whole model, gradients and optimizer state, plus a "
        "bucket copy of the gradients for the all-reduce. More GPUs make it faster, never smaller.\n"
        "- **ZeRO-1** shards the optimizer state over the GPUs; **ZeRO-2** the gradients too; **ZeRO-3 / FSDP "
        "full shard** the weights as well, gathering two layers' weights at a time.\n"
        "- **Offload** moves the optimizer state to CPU RAM (ZeRO-Offload), at the cost of slower steps."
    )
share_box()
