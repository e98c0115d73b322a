"""How it works, the training stacks: what each stack fills in and where each value was read, then the two stacks
that run their own code: Unsloth (its kernels, what they keep per token, how the model was checked) and MLX-LM on a
Mac (what mlx_lm lora holds, the length² attention term with a figure, the backends, Apple devices' usable memory);
and the version forks modelled (the releases that change a step's memory, estimator/options/versions.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from estimator import estimate, load_preset
from estimator.i18n import _, format_number
from estimator.job.stack import resolve_setup, setup_summary
from estimator.memory.runtimes import RUNTIMES, runtime_for
from estimator.memory.unsloth.model import per_token_terms, unsloth_path
from estimator.options.checkpointing import CHECKPOINTING
from estimator.options.devices import CATALOG, get_device
from estimator.options.losses import LOSS_IMPLS
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import QLORA_PREPS
from estimator.options.stacks import MLX_STACK, STACK_FACTS, STACK_FIELDS, STACKS, get_stack
from estimator.options.versions import FORKS, PACKAGES

from .accuracy import accuracy_report
from .live_chart import live_plotly_chart
from .once import per_language, table_per_language
from .page_charts import attention_share_chart_spec
from .text import plain

if TYPE_CHECKING:  # annotations only
    from estimator import ModelSpec, TrainingSetup

    from .values import Inputs


def stacks(setup: TrainingSetup) -> None:
    """The training stacks: what each fills in, and where each value was read."""
    st.header(_("Training stacks"))
    st.markdown(
        _("The first number you see should be the number of the stack you run. Each stack fills every setting you "
        "leave on *auto*; you can override any of them in the sidebar, and the calculator says which values came "
        "from the stack. Each value below was read in that project's source, at the version named.")
    )
    st.caption(plain(setup_summary(setup)))
    st.dataframe(table_per_language("how.stack_table", _stack_rows), hide_index=True, key="stack_table")
    with st.expander(_("Sources of every stack value")):
        st.dataframe(table_per_language("how.stack_sources", lambda: [
            {_("Stack"): stack.label, _("Setting"): field, _("Source (file, version)"): stack.sources.get(field, "")}
            for stack in STACKS.values() for field in (*STACK_FIELDS, *STACK_FACTS) if field in stack.sources]),
            hide_index=True, key="stack_sources")
    st.caption(_("Gradient clipping (`clip_grad_norm_`) keeps only one norm per tensor: it adds nothing measurable "
                 "at the peak."))


def _stack_rows() -> list[dict[str, str]]:
    """One row per training stack: the defaults it fills in."""
    stack_rows = []
    for stack in STACKS.values():
        stack_rows.append({
            _("Stack"): stack.label, _("Version read"): stack.version,
            _("Checkpointing"): _(CHECKPOINTING["offload" if stack.offload_activations else
                                                ("on" if stack.grad_ckpt else "off")].label),
            _("Loss"): _(LOSS_IMPLS[stack.loss_impls[stack.loss]].label),
            _("Losses offered"): ", ".join(stack.loss_impls),
            _("Optimizer"): _(OPTIMIZERS[stack.optimizer].label),
            _("LoRA adapters"): stack.adapter_dtype, _("QLoRA adapters"): stack.qlora_adapter_dtype,
            _("QLoRA preparation"): _(QLORA_PREPS[stack.qlora_prep].label),
            _("Gradient clipping"): (_("max norm {norm}").format(norm=format_number(stack.max_grad_norm, 1))
                                     if stack.max_grad_norm else _("none")),
            _("In short"): _(stack.summary),
        })
    return stack_rows


def unsloth(spec: ModelSpec, setup: TrainingSetup) -> None:
    """Unsloth as Unsloth runs: what its kernels keep (with sources), and how the model was checked."""
    st.header(_("Unsloth, as Unsloth runs"))
    st.markdown(_(
        "Unsloth runs its own code, read in the unsloth and unsloth_zoo {version} wheels (file and line below; "
        "docs/formulas.md §3.8):\n\n"
        "- **Fused LoRA kernels** (LoRA_MLP, LoRA_QKV, LoRA_W) keep only what their backward needs: the MLP keeps X "
        "and the two projections (the SwiGLU product is recomputed), q/k/v keep only their input, o_proj only its "
        "input. A group with LoRA on only some projections, or a biased base (Qwen2's q/k/v), runs PEFT's modules.\n"
        "- **Attention**: the default install has xformers, not flash-attn; Unsloth's SFT trainer sends long rows "
        "padding-free, so on an Ampere or newer GPU PyTorch's flash kernel runs with K and V at their own width "
        "(xformers, on older GPUs or padded rows, expands them).\n"
        "- **Offloaded checkpointing**: each layer's input goes to pinned CPU RAM; the GPU keeps one or two staging "
        "buffers, the last layer's input and inputs under 2 MiB; one layer is recomputed at a time. Below a "
        "max_seq_length of 512 it is plain checkpointing.\n"
        "- **Fused loss**: the head, the loss and the input gradient in one pass, a 4,096 × 16,384 fp32 tile at a "
        "time: no logits.\n"
        "- **QLoRA**: every forward dequantises into one kept scratch buffer (the largest 4-bit matrix); the "
        "backward dequantises a fresh weight at a time.\n"
        "- **Decided by the card**: the input embedding moves to CPU RAM when Unsloth's own reserve exceeds the "
        "memory left after loading; the second staging buffer only with more than 512 MiB free.\n"
        "- **Defaults**: 8-bit AdamW, fp32 adapters, LoRA dropout 0. Full fine-tuning and families other than "
        "Llama, Mistral and Qwen2 load through FastModel and are estimated with transformers' modules.").format(
        version=STACKS["unsloth"].version.split(" ")[1]))
    kernels = RUNTIMES["unsloth"]  # this section is about Unsloth's runtime: the user's model when it runs there
    own = runtime_for(setup) is kernels and kernels.own_model_code(spec, setup)
    example = spec if own else load_preset("llama-3.1-8b")
    if not own:
        setup = resolve_setup("unsloth", method="qlora", lora_rank=16)
    rows = [{_("Kept per token"): _(label), _("Bytes per token"): round(value), _("Source"): source}
            for label, value, source in per_token_terms(example, unsloth_path(example, setup))]
    st.caption(_("Per token on the GPU, {model}, the recomputed layer and what stays around it:").format(
        model=example.name))
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="unsloth_terms")
    report = accuracy_report()["unsloth"]
    traces, context = report["traces"], report["context"]
    st.markdown(_(
        "**Checked against Unsloth's own code.** Its autograd functions, checkpointing and loss were run from the "
        "wheel on the CPU with the Triton kernels stood in for ({n} traces at real widths): median error {median} %, "
        "worst {worst} %.\n\n"
        "**Checked against its published longest lengths.** Unsloth's tables (December 2024) measured unsloth "
        "2024.12 with Cut Cross-Entropy, which keeps more than the current release (a RoPE cache per layer, a "
        "head-sized gradient buffer, a fresh copy of each offloaded input): the same model on that code path, and "
        "the transformers + FlashAttention 2 columns with the HF Trainer stack, land within {target} % on {ok} of "
        "{checked} points. The current release reaches further; its answers are in the last column.").format(
        n=traces["n"], median=format_number(traces["median_abs_pct"], 2),
        worst=format_number(traces["worst_abs_pct"], 2), target=format_number(context["target_pct"], 0),
        ok=context["within_target"], checked=context["checked"]))
    lines = {line["framework"]: line for line in report["lines"] if line["is_line"] and line["modelled_slope"]}
    if {"unsloth", "hf_fa2"} <= lines.keys():
        u, h = lines["unsloth"], lines["hf_fa2"]
        st.markdown(_(
            "**The published columns are straight lines.** Each gains the same number of tokens per GB between every "
            "pair of card sizes ({model}: {unsloth} for Unsloth from {low} to {high} GB, {hf} for transformers + "
            "FlashAttention 2). Real cards' memory is not proportional to their names (an 8 GB RTX 4060 has "
            "{small_mib} MiB, an 80 GB H100 {large_mib} MiB), so each column is one line drawn through fewer runs: the shape of "
            "Unsloth's April 2024 table, which it says is \"extrapolated based on experiments\". At the small cards a length is the line's "
            "value where almost the whole card is fixed memory, so a few hundred MB where the line was anchored "
            "moves it by tens of percent; the line's slope is the memory per token, and the model's lengths gain "
            "{model_unsloth} and {model_hf} tokens per GB over the same cards.").format(
            model=u["model"], unsloth=format_number(u["slope"], 0), hf=format_number(h["slope"], 0),
            low=u["sizes_gb"][0], high=u["sizes_gb"][-1], model_unsloth=format_number(u["modelled_slope"], 0),
            model_hf=format_number(h["modelled_slope"], 0),
            small_mib=format_number(get_device("rtx-4060").capacity_bytes / 2**20, 0),
            large_mib=format_number(get_device("h100-80gb").capacity_bytes / 2**20, 0)))
    table = table_per_language("how.unsloth_published", lambda: [{  # built once per language (ui/once.py)
        _("Point"): r["id"], _("GPU (GB)"): r["gpu_gb"], _("Published"): format_number(r["published"], 0),
        _("Modelled"): _tokens(r["modelled"]), _("Error %"): _signed(r["error_pct"]),
        _("Current release"): _tokens(r["current"]),
        _("Why it differs"): r["explanation"] or (r["note"] if r["check"] == "not_comparable" else ""),
        _("Source"): r["source"]} for r in context["rows"]])
    st.dataframe(table, hide_index=True, key="unsloth_published")


def _tokens(value: int | None) -> str:
    """A length in tokens, or a dash where the point has none (not comparable, or no current-release answer)."""
    return "—" if value is None else format_number(value, 0)


def _signed(value: float | None) -> str:
    """An error in % with its sign (+ over, − under), or a dash."""
    return "—" if value is None else ("+" if value > 0 else "") + format_number(value, 1)


MLX_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)  # the s² figure's max lengths

def _mlx_setup(setup: TrainingSetup, spec: ModelSpec) -> TrainingSetup | None:
    """The sidebar's setup on MLX-LM (its own defaults when another stack is chosen), or None when mlx-lm cannot
    train this model (the section then says why)."""
    if setup.stack and get_stack(setup.stack).framework == "mlx":
        return setup
    try:
        mlx = resolve_setup(MLX_STACK, method=setup.method, batch=setup.batch, seq_len=setup.seq_len,
                            backend="metal")
        estimate(spec, mlx)
    except ValueError:
        return None
    return mlx


def mlx_lm(spec: ModelSpec, setup: TrainingSetup, inputs: Inputs) -> None:
    """MLX-LM on a Mac: what mlx_lm lora holds, the s² attention term with a figure, the backends, Apple devices."""
    st.header(_("MLX-LM on a Mac"))
    st.markdown(_(
        "On an Apple-silicon Mac the default stack is **MLX-LM** (`mlx_lm lora`, mlx 0.32.4, mlx-lm 0.32.2): LoRA "
        "on the last 16 blocks, rank 8, batch 4, 2,048 tokens, no checkpointing, Adam, fp32 adapters, one compiled "
        "step. MLX trains attention **unfused**: on Metal (and on the CPU) `scaled_dot_product_attention` falls back "
        "to the explicit scores → softmax → values path whenever gradients are traced (mlx "
        "`backend/metal/scaled_dot_product_attention.cpp`: `faster for training on Metal to use the unfused "
        "SDPA`), so each trained block keeps its attention probabilities, **batch × heads × length²** values, "
        "until its backward. That term grows with the square of the length; everything else grows linearly. "
        "Checkpointing (`grad_checkpoint: true`) keeps only each block's input and recomputes one block at a time."))
    mlx = _mlx_setup(setup, spec)
    if mlx is None:
        st.info(_("mlx-lm's model for {model} is not modelled here (see the calculator's note).").format(
            model=spec.name), icon=":material/info:")
    else:
        rows = [(length, estimate(spec, replace(mlx, seq_len=length))) for length in MLX_LENGTHS]
        # Updated in place (ui/live_chart.py): a plain spec, no Figure built and validated on every rerun.
        live_plotly_chart(attention_share_chart_spec(rows, inputs.device), key="mlx_attention_chart",
                          alt=_("Stacked bars per max length: weights, attention probabilities and other "
                                "activations of {model} on MLX-LM").format(model=spec.name))
        st.caption(plain(_("{model}, MLX-LM, batch {batch}, {layers} trained blocks; the vermilion part is the "
                           "B·H·L² probabilities.").format(model=spec.name, batch=mlx.batch,
                                                          layers=mlx.lora_layers or spec.num_layers)))
    st.markdown(_(
        "**What the fixtures measure and how a Mac differs.** The model was measured on MLX's CPU backend "
        "(`calibration/mlx_trace.py`, mlx-lm's own model classes and trainer step). The CPU takes the same unfused "
        "training attention as Metal; Metal fuses RMSNorm and RoPE (the CPU's fallbacks add only length-sized "
        "vectors) and runs the cross-entropy forward in one kernel (its backward is priced as the CPU's). Metal has "
        "no CUDA context: MLX's peak is its allocator's active memory, and `mlx_lm` wires its limit to Metal's "
        "recommended working set, which is the Mac's usable memory here.\n\n"
        "**MLX on NVIDIA (MLX-CUDA)** is modelled, not measured: cuDNN trains attention fused (forward and "
        "backward) for 16-bit models with head_dim ≤ 128 and lengths that are multiples of 128 "
        "(`backend/cuda/scaled_dot_product_attention.cpp`), so no length² term there; otherwise as on Metal; a CUDA "
        "context is added. MLX has no ROCm backend: MLX-LM on an AMD card is refused.\n\n"
        "**PyTorch on a Mac (MPS)** stays selectable: no CUDA context; PyTorch's SDPA uses its Metal kernel only "
        "without gradients, so training is priced as eager attention; bitsandbytes 0.50 runs NF4 on MPS, but not "
        "its 8-bit or paged optimizers; Liger and Cut Cross-Entropy (Triton) are refused; Unsloth on a Mac trains "
        "through MLX."))
    macs = [{_("Device"): d.name, _("RAM (GiB)"): d.capacity_bytes / 2**30, _("Usable (GB)"): d.usable_bytes / 1e9,
             _("Where the usable figure comes from"): d.usable_source} for d in CATALOG if d.kind == "unified"]
    with st.expander(_("Apple devices: usable memory and its source")):
        st.dataframe(pd.DataFrame(macs), hide_index=True, key="mac_usable")


def _fork_lines() -> str:
    """One line per version fork the estimate models (estimator/options/versions.py FORKS): the package and release,
    the stacks it moves, what changes."""
    return "\n".join(
        _("- **{package} {since}** (and later; {before} and earlier differ) · {stacks}: {what}").format(
            package=f.package, since=f.since, before=f.last_without,
            stacks=", ".join(get_stack(s).label for s in f.stacks), what=plain(_(f.description), limit=2000))
        for f in FORKS.values())


def versions() -> None:
    """The version forks modelled: the releases that change what a step keeps, and where to say which you run."""
    st.header(_("Versions modelled"))
    st.markdown(_("Each stack is priced at the newest release of every package under it by default. Some releases "
                  "of the last two years change a step's peak by 5 % or more in some setting; those forks are "
                  "modelled, each dated in the package's own history. Give the releases you run: in the CLI "
                  "`--installed PKG==VERSION` (repeatable) or `--installed-from FILE` (the output of `pip freeze` or "
                  "`pip list`); in the app, the versions input in the sidebar. A note beside the estimate then names "
                  "each fork that moves it by 5 % or more, and a release outside the modelled range is one clear line, "
                  "never a guess. Sources, commits and worked examples: `docs/versions.md`."))
    st.markdown(per_language("how.forks", _fork_lines))
    st.caption(_("Modelled ranges: {ranges}.").format(
        ranges=", ".join(f"{r.package} {r.oldest}–{r.newest}" for r in PACKAGES.values())))
