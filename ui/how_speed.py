"""How it works, the time: how the time model (estimator/speed/, docs/speed.md) prices a training step — the FLOPs per
token from the architecture, the roofline per pass at the device's published figures, the efficiency it sustains per
stack and GPU class, offload and collectives — with the sidebar's setup as the worked example, then its accuracy on
held-out published throughputs (stored by validation/ in ui/data/accuracy_report.json) and its sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from estimator.i18n import _, format_number, localised_error
from estimator.options.devices import get_device
from estimator.speed import CALIBRATION, CATEGORY_LABELS, time_of
from estimator.speed.efficiency import (
    COLLECTIVE_EFFICIENCY,
    GPUS_PER_NODE,
    HOST_MEMORY_GBPS,
    MAX_EFFICIENCY,
    NODE_LINK_GBPS,
    UNSLOTH_SPEEDUP,
)
from estimator.speed.step import platform

from .accuracy import accuracy_report
from .lang import localised, number_columns
from .once import table_per_language
from .text import plain

if TYPE_CHECKING:  # annotations only
    from estimator import Device, ModelSpec, TrainingSetup
    from estimator.job.trainer import TrainerSetup

# The stack families the efficiency tells apart (estimator/speed/efficiency.py STACK_FAMILY), with the stacks in each.
_FAMILIES = (("transformers", "TRL, Trainer, Axolotl, plain"), ("torchtune", "torchtune, LitGPT"),
             ("unsloth", "Unsloth"), ("mlx", "MLX-LM"))
# One catalog device per GPU class and generation the efficiency depends on (class, architecture).
_CLASS_DEVICES = ("a100-80gb", "h100-80gb", "b200", "l40s", "rtx-4090", "mac-64gb")


def time_model(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None) -> None:
    """How long a step takes: the FLOPs, the roofline, the efficiency, offload and collectives, the accuracy."""
    st.header(_("How long it takes"))
    st.markdown(_("The time model prices one optimizer step in seconds from the same architecture and setup as the "
                  "memory: the FLOPs of every pass, divided by what the device sustains (its published dense TFLOPS "
                  "and memory bandwidth, times an efficiency fitted on published throughputs), plus what cannot hide "
                  "behind the compute: the optimizer's memory traffic, offload over PCIe, collectives between GPUs, "
                  "and a fixed launch cost per layer. From the step come tokens per second, a run's hours for a "
                  "dataset and its cost at the price per GPU-hour you give (the Compare page's pinned setups, the "
                  "CLI's `--tokens` and `--price-per-gpu-hour`). Every figure and constant is in `docs/speed.md`."))
    _flops()
    _roofline()
    _example(spec, setup, device, trainer)
    _efficiency()
    _offload_and_collectives()
    _accuracy()


def _flops() -> None:
    st.subheader(_("FLOPs per token"))
    st.markdown(_("Forward, per token: 2 × in × out for every matrix multiply a token goes through (N such "
                  "parameters: the decoder's linears, a mixture of experts' *active* experts only, and the head), "
                  "plus the attention over the context (A). Backward: full fine-tuning computes input and weight "
                  "gradients, 2 × forward; a frozen base (LoRA, QLoRA) only the input gradients, 1 × forward, and "
                  "only above the first trained layer; FlashAttention's backward is 2.5 × its forward. Gradient "
                  "checkpointing runs the checkpointed layers' forward once more. A trainer adds its extra "
                  "forwards: DPO's reference, GRPO's generation."))
    # one formula per line: a phone's column holds each
    st.latex(r"\text{full: } 6N + 3.5A \qquad \text{LoRA: } \approx 4N + 3.5A")
    st.latex(r"A = 2 \cdot L_{\text{layers}} \cdot \tfrac{s}{2} \cdot 2 d_{\text{attn}}")
    st.caption(_("Kaplan et al. 2020 (arXiv 2001.08361 §2.1) for 2 × in × out; Dao 2023 (FlashAttention-2, arXiv "
                 "2307.08691 §3.1) for the causal attention's s/2 context and its backward; Chen et al. 2016 (arXiv "
                 "1604.06174) for checkpointing's second forward. Llama 3.1 8B, full, 2,048 tokens: 6N + 3.5A with "
                 "A 4.2 % of 6N."))


def _roofline() -> None:
    st.subheader(_("The roofline"))
    st.markdown(_("Each pass (forward, backward, recompute, a reference forward) takes the longer of its compute and "
                  "its memory traffic: a small micro-batch is bound by reading the weights, a large one by the "
                  "matrix multiplies (Williams et al. 2009, *Roofline*, CACM 52(4)). The kernels between the "
                  "multiplies, the optimizer step, QLoRA's dequantisation and DoRA's weight norm move bytes at the "
                  "memory bandwidth."))
    st.latex(r"t_{\text{pass}} = \max\!\left(\frac{F_{\text{pass}}}{P_{\text{dtype}}\,\eta},\;"
             r"\frac{B_{\text{weights}}}{W\,\beta}\right)")
    st.latex(r"\begin{aligned} t_{\text{step}} &= \sum_{\substack{\text{micro-steps}\\ \text{passes}}} t_{\text{pass}}"
             r" + t_{\text{opt}} \\ &\quad + t_{\text{launch}} + t_{\text{transfer}} \end{aligned}")
    st.caption(_("P: the device's dense TFLOPS for the compute dtype (a card without a figure for it, such as a T4 in "
                 "bf16, gives no time); W: its memory bandwidth; η: the efficiency below; β = {beta} % of the "
                 "bandwidth for elementwise kernels (fitted); t_opt: the optimizer step; t_launch: the launch cost per "
                 "layer and pass; t_transfer: what offload and collectives cannot hide.").format(beta=format_number(100 * CALIBRATION.bandwidth,
                                                                                           0)))


def _example(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None) -> None:
    """The sidebar's setup timed: its FLOPs per token, its speed and where the step's time goes."""
    try:
        step = time_of(spec, setup, device, trainer)
    except ValueError as exc:
        st.caption(plain(_("For the sidebar's setup on {device}: time unknown ({reason}).").format(
            device=device.name, reason=localised_error(exc)), limit=600))
        return
    per_token = step.flops_per_step / step.tokens_per_step
    st.markdown(plain(_("For the sidebar's setup ({model} on {device}): {gflop} GFLOP per trained token, {tps} tokens "
                        "per second, {achieved} TFLOPS achieved of {peak} at an efficiency of {eff} %.").format(
        model=spec.name, device=device.name, gflop=format_number(per_token / 1e9), tps=format_number(
            step.tokens_per_second, 0), achieved=format_number(step.achieved_tflops, 0),
        peak=format_number(step.peak_tflops, 0), eff=format_number(100 * step.efficiency, 0)), limit=600))
    seconds = step.seconds_by_category()
    st.dataframe(pd.DataFrame([{_("Part of the step"): _(CATEGORY_LABELS[k]), _("Share of the step (%)"):
                                format_number(100 * v / step.step_seconds, 1)}
                               for k, v in seconds.items() if v > 0]), hide_index=True, key="time_parts")


def _efficiency_rows() -> list[dict[str, str]]:
    rows = []
    for device_id in _CLASS_DEVICES:
        device = get_device(device_id)
        compute = device.compute
        row = {_("GPU"): device.model or device.name, _("Class"): compute.gpu_class, _("Architecture"): compute.arch}
        for family, stacks in _FAMILIES:
            if family == "unsloth" and platform(compute) == "apple":
                row[stacks] = "—"  # Unsloth runs on NVIDIA and AMD GPUs only (its Stack row refuses Metal)
                continue
            eff = CALIBRATION.efficiency(family, platform(compute), compute.arch, compute.gpu_class)
            row[stacks] = f"{format_number(100 * eff, 0)} %"
        rows.append(row)
    return rows


def _efficiency() -> None:
    st.subheader(_("Efficiency per stack and GPU class"))
    st.markdown(_("The share of the dense peak a stack sustains in its matrix multiplies, fitted on published "
                  "throughputs: one value for the PyTorch stacks (they run the same cuBLAS and SDPA kernels; their "
                  "difference at small batches is the launch cost), one for MLX on an Apple GPU, a factor for a "
                  "data-centre Hopper or Blackwell GPU (which sustains a smaller share of its higher peak), "
                  "torch.compile's speed-up, and Unsloth at {unsloth} × the PyTorch value, capped at {cap} % "
                  "(Unsloth's published \"2x\"; not calibrated on a measured throughput).").format(
        unsloth=format_number(UNSLOTH_SPEEDUP, 0), cap=format_number(100 * MAX_EFFICIENCY, 0)))
    st.dataframe(table_per_language("how.efficiency_table", _efficiency_rows), hide_index=True,
                 key="efficiency_table")
    c = CALIBRATION
    st.caption(_("Fitted constants: PyTorch {pytorch} %, MLX on Apple {mlx} %, Hopper/Blackwell factor {hopper}, "
                 "torch.compile × {compile}, launch {launch_pt} ms per layer per pass (PyTorch) and {launch_mlx} ms "
                 "(MLX), elementwise kernels at {bw} % of the bandwidth. Consumer and workstation cards take the "
                 "data-centre value (no usable consumer-card throughput was found); a PyTorch stack on a Mac (MPS) "
                 "takes MLX's, an optimistic bound.").format(
        pytorch=format_number(100 * c.pytorch, 1), mlx=format_number(100 * c.mlx_apple, 1),
        hopper=format_number(c.hopper, 3), compile=format_number(c.compile_speedup, 3),
        launch_pt=format_number(1e3 * c.launch_pytorch, 2), launch_mlx=format_number(1e3 * c.launch_mlx, 2),
        bw=format_number(100 * c.bandwidth, 1)))


def _offload_and_collectives() -> None:
    st.subheader(_("Offload and collectives"))
    st.markdown(_("- **Optimizer offload** (ZeRO-Offload): the CPU runs Adam at about {host} GB/s of host memory over "
                  "28 bytes per parameter, and the 16-bit parameters come back over PCIe; the gradients' way down "
                  "hides behind the backward (Ren et al. 2021, arXiv 2101.06840 §4.2, §5.1).\n"
                  "- **Parameter offload** (ZeRO-3): every pass fetches its shard over PCIe, hidden behind the pass "
                  "where it can be; **activation offload**: the checkpointed layer inputs each way, hidden behind "
                  "forward and backward (torchtune measured −0.11 % tokens/s).\n"
                  "- **Collectives**: ring volumes per GPU, (n − 1)/n of the buffer for a reduce-scatter or an "
                  "all-gather and twice that for an all-reduce, at {eff} % of the GPU-to-GPU link (NVLink, or PCIe "
                  "between peers; {node} GB/s per GPU between nodes above {per_node} GPUs). DDP all-reduces once per "
                  "optimizer step; ZeRO-1 reduce-scatters once and gathers the updated parameters; ZeRO-2 "
                  "reduce-scatters every micro-step; ZeRO-3 and FSDP also gather the parameters for forward and "
                  "backward. Only what the overlapping pass cannot hide adds to the step (Patarasuk & Yuan 2009; "
                  "NVIDIA nccl-tests; Rajbhandari et al. 2020, ZeRO §5; Zhao et al. 2023, FSDP §3).").format(
        host=format_number(HOST_MEMORY_GBPS, 0), eff=format_number(100 * COLLECTIVE_EFFICIENCY, 0),
        node=format_number(NODE_LINK_GBPS, 0), per_node=GPUS_PER_NODE))


def _speed_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    return frame[["id", "split", "stack", "method", "device", "unit", "measured", "predicted", "error_pct"]]


def _accuracy() -> None:
    """The time model against published throughputs: held-out and fit rows apart (validation/speed.py)."""
    st.subheader(_("How accurate the time is"))
    report = accuracy_report()["speed"]
    held, fit = report["held_out"], report["fit"]
    n = format_number
    left, right = st.columns(2)
    left.metric(_("Held-out runs: median error"), f"{n(held['median_abs_pct'])} %", border=True,
                help=_("{runs} published throughputs the constants were not fit on; target: median within {median} "
                       "%, worst within {worst} %.").format(runs=held["n"], median=n(report["target_median_pct"], 0),
                                                          worst=n(report["target_worst_pct"], 0)))
    left.caption(_("{runs} runs · worst {worst} % · targets {median} % / {target} %").format(
        runs=held["n"], worst=n(held["worst_abs_pct"]), median=n(report["target_median_pct"], 0),
        target=n(report["target_worst_pct"], 0)))
    right.metric(_("Fit runs: median error"), f"{n(fit['median_abs_pct'])} %", border=True)
    right.caption(_("{runs} runs · worst {worst} %").format(runs=fit["n"], worst=n(fit["worst_abs_pct"])))
    errors = {"measured": (1, ""), "predicted": (1, ""), "error_pct": (1, "")}
    with st.expander(_("Every published throughput, measured and predicted")):
        st.dataframe(table_per_language("how.speed_rows", lambda: localised(_speed_frame(report["rows"]), errors)),
                     hide_index=True, key="speed_rows",
                     column_config={"id": st.column_config.TextColumn(_("Run")),
                                    "split": st.column_config.TextColumn(_("Split")),
                                    "stack": st.column_config.TextColumn(_("Stack")),
                                    "method": st.column_config.TextColumn(_("Method")),
                                    "device": st.column_config.TextColumn(_("Device")),
                                    "unit": st.column_config.TextColumn(_("Unit"))}
                     | number_columns(errors, {"measured": _("Measured"), "predicted": _("Predicted"),
                                               "error_pct": _("Error %")}))
    st.caption(_("The held-out rows come from the same tables as fit rows (same GPU, software and model): they test "
                 "what the model does with a technique (compile, chunked loss, 8-bit AdamW, QLoRA, DoRA, another "
                 "Apple chip), not an unseen stack or GPU. No TRL, Axolotl, Unsloth, LitGPT or consumer-card "
                 "throughput with a token count was found, and no DPO/KTO/GRPO one: those follow the FLOP and byte "
                 "counts above, unchecked. Sources and every row: `docs/speed.md`, `validation/data/throughput.csv`."))
