"""Scale out: per-GPU memory on 1–64 GPUs under data parallel, ZeRO-1/2/3 (FSDP full shard) and optional CPU
offload of the optimizer state, and the smallest GPU count that fits each GPU in the catalog."""

import pandas as pd
import streamlit as st

from estimator import fmt_both
from estimator.training import SHARDING_LABELS, SHARDINGS
from ui.grids import GPU_COUNTS, SHORT_SHARDING, best_layout, min_gpus_table, scale_out_curves, setup_summary
from ui.inputs import plain, render_inputs, share_box, show_notes
from ui.page_charts import scale_out_chart

MAX_GPU_CHOICES = [8, 16, 32, 64]

inputs = render_inputs()
show_notes(inputs)
spec, setup, device = inputs.model, inputs.setup, inputs.device
font_size = 18 if inputs.presentation else None

st.title("Scale out")
st.caption(plain(setup_summary(spec, setup, device)))
if inputs.rule == "seed":
    st.info("The quick rule has no notion of GPUs or sharding: this page always shows the detailed estimate.",
            icon=":material/info:")

options = st.expander("Options", expanded=False) if inputs.presentation else st.container()
with options:
    left, right = st.columns(2)
    offload = left.toggle("Offload optimizer state to CPU RAM", value=False, key="offload", bind="query-params",
                          help="ZeRO-Offload / FSDP CPU offload: the optimizer state and its step live in CPU "
                               "RAM (slower steps). Applies to the ZeRO/FSDP lines; plain data parallel cannot.")
    max_gpus = right.select_slider("Up to this many GPUs", MAX_GPU_CHOICES, value=64, key="maxgpus",
                                   bind="query-params")
counts = [n for n in GPU_COUNTS if n <= max_gpus]
curves = scale_out_curves(spec, setup, counts, SHARDINGS, offload)
table = min_gpus_table(spec, setup, shardings=SHARDINGS, offload=offload, max_gpus=max_gpus)

best = best_layout(spec, setup, device, SHARDINGS, offload, max_gpus)
if device.kind != "discrete":
    st.info(plain(f"{device.name} is a unified-memory machine: it does not scale out. The lines show what "
                     "each GPU would need; pick a GPU in the sidebar to compare."), icon=":material/info:")
elif best is None:
    st.error(plain(f"No layout up to {max_gpus} × {device.name} fits this setup."), icon=":material/block:")
else:
    sharding, n, est = best
    line = (f"{n} × {device.name} with {SHARDING_LABELS[sharding]}: {fmt_both(est.total_bytes)} per GPU of "
            f"{fmt_both(device.usable_bytes)}")
    st.success(plain(f"Fits on {line}"), icon=":material/check_circle:")
    if est.cpu_offload_bytes:
        st.caption(plain(f"Optimizer state in CPU RAM, all GPUs together: {fmt_both(est.cpu_offload_bytes)}."))

st.plotly_chart(scale_out_chart(curves, counts, device, font_size=font_size), key="scale_chart",
                config={"displayModeBar": False},
                alt="Lines of peak memory per GPU against the GPU count for each sharding: "
                    + "; ".join(f"{SHARDING_LABELS[s]} from {ests[0].total_bytes / 1e9:,.0f} GB on 1 GPU to "
                                f"{ests[-1].total_bytes / 1e9:,.0f} GB on {counts[-1]}" for s, ests in curves.items()))

st.subheader("Smallest GPU count that fits")
st.caption(f"Per GPU in the catalog and sharding; '> {max_gpus}' where even {max_gpus} GPUs are not enough. "
           "Activations are not sharded: each GPU keeps its own micro-batch's.")
shown = table.copy()
for sharding in SHARDINGS:
    column = SHORT_SHARDING[sharding]
    shown[column] = [f"{n:d}" if n is not pd.NA else f"> {max_gpus}" for n in table[column]]
st.dataframe(shown, hide_index=True, key="min_gpus_table", height=38 + 35 * len(shown),
             column_config={"Device": st.column_config.TextColumn(width="medium", pinned=True),
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
