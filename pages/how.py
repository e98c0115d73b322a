"""How it works: what the estimate counts, each formula and where it comes from, the assumptions and units,
how accurate it has been against measured runs, what it does not model, and a training script that runs
the setup being estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from estimator import estimate, fmt_both, load_preset
from estimator import exact as exact_doc
from estimator.i18n import _, format_number
from estimator.job.stack import resolve_setup, setup_summary
from estimator.memory.allocator import LARGE_SEGMENT, SMALL_BUFFER
from estimator.memory.overhead import (
    ALLOCATOR_SLACK,
    CUDA_CONTEXT_BYTES,
    CUDA_CONTEXT_HIGH,
    CUDA_CONTEXT_LOW,
    MODEL_ERROR_HIGH,
    MODEL_ERROR_LOW,
    NCCL_BYTES,
)
from estimator.memory.precision import FP32, HALF, NF4_DQ_BYTES, optimizer_state_bytes
from estimator.memory.rule import rule_sentence
from estimator.memory.unsloth_model import per_token_terms, unsloth_path, uses_unsloth_model
from estimator.options.checkpointing import CHECKPOINTING
from estimator.options.devices import CATALOG, UNIFIED_USABLE_FRACTION
from estimator.options.losses import LOSS_IMPLS, LOSSES
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import QLORA_PREPS
from estimator.options.stacks import MLX_STACK, STACK_FACTS, STACK_FIELDS, STACKS
from estimator.report.snippets import training_snippet
from estimator.report.snippets.common import snippet_language
from ui.inputs import live_page
from ui.lang import localised, number_columns
from ui.live_chart import live_plotly_chart
from ui.once import arrow_table, once, table_per_language
from ui.page_charts import attention_share_chart_spec
from ui.text import plain, show_notes
from ui.trainer_inputs import how_section_markdown, page_trainer
from ui.url_state import share_box
from ui.values import Inputs
from validation import accuracy_report as _accuracy_report

if TYPE_CHECKING:  # annotations only
    from estimator import ModelSpec, TrainingSetup


def _intro() -> None:
    """The title and what the estimate is: the peak of one training step."""
    st.title(_("How it works"))
    st.markdown(
        _("The app estimates the **peak GPU memory of one training step** on one GPU: the most memory in use at "
        "any moment while a batch goes forward, backward and through the optimizer. If that peak is below what the "
        "device can give to training, the run fits. Everything is computed from the model's `config.json` (its "
        "layers and matrix shapes), not from its download size. The numbers below are what the code in "
        "`estimator/` does; each names its source so you can check it.")
    )


def _peak() -> None:
    """The five components and the four phases whose largest is the peak."""
    st.header(_("What goes into the peak"))
    st.markdown(
        _("Five components, the same colours on every chart:\n\n"
        "- **Weights**: the model, in the precision it is loaded in (plus the frozen base and small adapters for "
        "LoRA/QLoRA).\n"
        "- **Gradients**: one per *trainable* weight.\n"
        "- **Optimizer state**: what the optimizer keeps per trainable weight (Adam keeps two moving averages).\n"
        "- **Activations**: the tensors the forward pass saves for the backward pass; they grow with "
        "batch size × max length.\n"
        "- **Overhead**: the GPU runtime's context (CUDA on NVIDIA, ROCm on AMD, Metal on a Mac) and the "
        "allocator's rounding, which PyTorch does not report as tensors.")
    )

    st.subheader(_("Phases and the peak"))
    st.markdown(
        _("Memory is not at its highest all the time. The estimate walks through four moments of a steady-state step "
        "(step 2 onwards, so optimizer state exists; gradients are freed between steps, the Trainer default) and "
        "takes the largest:\n\n"
        "1. **Loss backward**: every activation is still held, plus the logits and the cross-entropy's backward "
        "buffers.\n"
        "2. **Backward, output layer**: the head's gradient appears while most activations are still held.\n"
        "3. **Backward, first layer**: almost every gradient exists, activations are nearly all freed.\n"
        "4. **Optimizer step**: weights + all gradients + optimizer state (+ step temporaries for non-fused "
        "optimizers).\n\n"
        "Long examples peak at 1–2 (activations), full fine-tuning of big models at 4 (optimizer). Source: the "
        "phase analysis in `docs/formulas.md` §0, checked by the tracer. Full fine-tuning of a model with tied "
        "embeddings has one more moment at the very end of backward: the head's and the embedding's gradients of "
        "the shared matrix and their sum exist at once.")
    )
    st.latex(r"\text{peak} = \max_{\text{phase}} \big(W + G + O + A\big)_{\text{phase}} + \text{overhead}")


def _weights() -> None:
    """The formulas, first the weights per precision and the QLoRA preparations."""
    st.header(_("The formulas"))
    st.subheader(_("Weights, per precision"))
    st.markdown(
        _("| Setting | Bytes per weight | Gradients (full FT) | Source |\n"
          "|---|---|---|---|\n"
          "| `bf16` / `fp16` (model loaded in 16 bits) | 2 | 2 | PyTorch dtypes |\n"
          "| `mixed` (fp32 weights, bf16 autocast) | 4, plus 2-byte copies of the weights during forward/backward "
          "| 4 | HF docs *Model memory anatomy* (\"18 bytes per parameter\") |\n"
          "| `fp32` | 4 | 4 | PyTorch dtypes |\n"
          "| QLoRA base: decoder linears in NF4 + double quantisation | {nf4} | – | bitsandbytes "
          "`quantize_4bit` (64-weight blocks, 8-bit scales per 256 blocks); QLoRA paper §3 |\n"
          "| QLoRA base: embeddings, head, norms | 2, or 4 where the stack's QLoRA preparation upcasts them "
          "(table below) | – | the stack's preparation |").format(nf4=format_number(NF4_DQ_BYTES, 4))
    )
    st.dataframe(table_per_language("how.qlora_prep_table", lambda: [
        {_("QLoRA preparation"): _(o.label), _("What it does"): _(o.summary), _("Source"): o.source}
        for o in QLORA_PREPS.values()]), hide_index=True, key="qlora_prep_table")


def _adamw_bytes(weight: int) -> dict[str, float]:
    """Bytes per trainable weight of a given dtype with AdamW: the weight, its gradient, AdamW's state
    (options.OPTIMIZERS["adamw"]) and their sum, as the formulas below quote them."""
    state = optimizer_state_bytes("adamw", weight)
    return {"weight": weight, "grad": weight, "state": state, "total": 2 * weight + state}


def _adamw_words(weight: int) -> dict[str, str]:
    """_adamw_bytes as the text writes the numbers."""
    return {k: short(v) for k, v in _adamw_bytes(weight).items()}


def _lora(spec: ModelSpec, setup: TrainingSetup) -> None:
    """LoRA and QLoRA adapters, with this model's adapter count when the method has adapters."""
    st.subheader(_("LoRA and QLoRA"))
    st.markdown(
        _("The base is frozen; each adapted matrix of shape in × out gets two small ones, A (r × in) and B (out × r). "
        "Adapters are kept in fp32 (PEFT casts them up by default), so each adapter weight costs {weight} bytes, its "
        "gradient {grad} and AdamW's state {state}: **{total} bytes per adapter weight**. Under bf16 autocast each "
        "adapter is also cast to bf16 while it is used. Source: LoRA paper §4; PEFT "
        "`get_peft_model(autocast_adapter_dtype=True)`.").format(**_adamw_words(FP32))
    )
    st.latex(r"P_{\text{LoRA}} = r \sum_{\text{adapted matrices}} (\text{in} + \text{out})")
    if setup.method != "full":
        adapters = estimate(spec, setup).params_trainable
        st.caption(plain(_("{model}, rank {rank}, targets {targets}: {millions} million adapter weights, {amount} with "
                           "AdamW.").format(model=spec.name, rank=setup.lora_rank, targets=", ".join(setup.lora_targets),
                                            millions=format_number(adapters / 1e6), amount=fmt_both(_adamw_bytes(FP32)["total"] * adapters))))


def _gradients() -> None:
    """One gradient per trainable weight."""
    st.subheader(_("Gradients"))
    st.markdown(_("One gradient per trainable weight, in that weight's dtype: every weight for full fine-tuning, "
                  "only the adapters for LoRA/QLoRA. Frozen weights get none."))
    st.latex(r"G = P_{\text{trainable}} \times \text{bytes(trainable dtype)}")


def short(value: float) -> str:
    """'8', '2.03125' (as Python's :g writes it), with the language's decimal sign."""
    return format_number(value, 0) if float(value).is_integer() else format_number(value, len(f"{value:g}".split(".")[1]))


def _optimizer_rows() -> list[dict[str, str]]:
    """One row per optimizer: its state per trainable weight, step temporaries and sources."""
    optim_rows = []
    for name, option in OPTIMIZERS.items():
        per_fp32 = optimizer_state_bytes(name, 4)
        per_bf16 = optimizer_state_bytes(name, 2)
        optim_rows.append({_("Optimizer"): _(option.label), _("Trainer optim"): option.hf_optim,
                           _("fp32 weights (B)"): "≈ 0" if option.state_dtype == "factored" else short(per_fp32),
                           _("bf16 weights (B)"): "≈ 0" if option.state_dtype == "factored" else short(per_bf16),
                           _("Step temporaries"): _("one parameter-sized buffer") if option.step_temporaries else _("none"),
                           _("Why"): _(option.summary), _("Source"): option.source})
    return optim_rows


def _optimizer() -> None:
    """Optimizer state per trainable weight, for each optimizer."""
    st.subheader(_("Optimizer state, per trainable weight"))
    st.dataframe(table_per_language("how.optimizer_table", _optimizer_rows), hide_index=True, key="optimizer_table")
    st.caption(_("Sources: torch.optim (state dtype = weight dtype); bitsandbytes optimizers (block-wise 8-bit, "
                 "paged); Dettmers et al. 2021 (8-bit optimizers); transformers' Adafactor. Full fine-tuning in `mixed` "
                 "precision therefore costs {weight} + {grad} + {state} = {total} bytes per weight, plus the "
                 "{copy}-byte autocast copies.").format(copy=short(HALF), **_adamw_words(FP32)))


def _activations() -> None:
    """Activations per layer: what autograd saves, term by term."""
    st.subheader(_("Activations, per layer"))
    st.markdown(
        _("Counted tensor by tensor from each layer's modules: what autograd saves for the backward pass. For a "
        "Llama-style layer in bf16 with SDPA attention the code reduces to these bytes per token (h hidden size, "
        "q and kv the query and key/value widths, I the MLP width, a heads, r the LoRA rank):")
    )
    st.latex(r"A_{\text{full}} = 16h + 4q + 4kv + 8I + 4a + 8")
    st.latex(r"A_{\text{LoRA}} = 18h + 6q + 4kv + 8I + 14r + 4a + 8")
    st.latex(r"A_{\text{QLoRA}} = 18h + 6q + 4kv + 14I + 14r + 4a + 8")
    st.markdown(
        _("Multiply by tokens = batch × max length and by the number of layers. Why these terms: RMSNorm keeps an "
        "fp32 copy of its input; SDPA/flash attention keeps Q, K, V, the output and a log-sum-exp, never the "
        "s × s score matrix; SwiGLU keeps four MLP-wide tensors; frozen matrices save nothing for themselves, but "
        "each LoRA adapter keeps its own bf16 copy of its input. QLoRA's MLP runs in fp32 because "
        "`prepare_model_for_kbit_training` makes the residual stream fp32. **Eager attention** adds the s × s "
        "scores: about 6 · a · s bytes per token per layer. Sources: Korthikanti et al. 2022 §4 (the method), "
        "FlashAttention (what is kept), measured per tensor with saved-tensor hooks (`docs/formulas.md` §3.3).")
    )


def _logits() -> None:
    """The logits and the loss, per loss implementation."""
    st.subheader(_("Logits and loss"))
    st.markdown(
        _("The loss is often the single biggest activation, and the training stack decides how it is built. With V "
        "the vocabulary, T the tokens in the batch, H the hidden size and c the compute dtype's bytes:")
    )
    st.dataframe(table_per_language("how.loss_table", lambda: [
        {_("Loss"): _(LOSSES[o.kind].label), _("Implementation"): _(o.label), _("What is counted"): _(o.summary),
         _("Source"): o.source} for o in LOSS_IMPLS.values()]), hide_index=True, key="loss_table")
    st.latex(r"A_{\text{loss, standard}} = \underbrace{4\,T V}_{\text{kept}} + "
             r"\underbrace{8\,T V}_{\text{backward}}")
    st.markdown(_("For Llama-3 (V = {vocab}) at {tokens} tokens the standard loss keeps {kept} GB and adds {backward} GB "
                  "in backward; TRL's chunked head needs about {chunked} GB for the same batch.").format(
        vocab=format_number(128_256, 0), tokens=format_number(2048, 0), kept=format_number(1.05, 2),
        backward=format_number(2.1), chunked=format_number(0.2)))


def _checkpointing() -> None:
    """Gradient checkpointing and its variants."""
    st.subheader(_("Gradient checkpointing"))
    st.markdown(
        _("Each layer keeps only its input (2·h bytes per token in bf16, 4·h with an fp32 residual stream) and "
        "recomputes the rest during backward, one layer at a time: activations drop from L layers' worth to "
        "L inputs plus one layer. 20–30 % slower. With offloading the L inputs wait in CPU RAM and one comes back "
        "at a time.")
    )
    st.dataframe(table_per_language("how.checkpointing_table", lambda: [
        {_("Checkpointing"): _(o.label), _("What it does"): _(o.summary), _("Source"): o.source}
        for o in CHECKPOINTING.values()]), hide_index=True, key="checkpointing_table")
    st.latex(r"A_{\text{ckpt}} = T\,(L \cdot 2h + A_{\text{one layer}})")


def _stacks(setup: TrainingSetup) -> None:
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


def _unsloth(spec: ModelSpec, setup: TrainingSetup) -> None:
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
    example = spec if uses_unsloth_model(spec, setup) else load_preset("llama-3.1-8b")
    if not uses_unsloth_model(spec, setup):
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
    table = table_per_language("how.unsloth_published", lambda: [{  # built once per language (ui/once.py)
        _("Point"): r["id"], _("GPU (GB)"): r["gpu_gb"], _("Published"): r["published"],
        _("Modelled"): r["modelled"], _("Error %"): r["error_pct"], _("Current release"): r["current"],
        _("Why it differs"): r["explanation"] or (r["note"] if r["check"] == "not_comparable" else ""),
        _("Source"): r["source"]} for r in context["rows"]])
    st.dataframe(table, hide_index=True, key="unsloth_published",
                 column_config={_("Error %"): st.column_config.NumberColumn(format="%+.1f")})


MLX_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)  # the s² figure's max lengths


def _mlx_setup(setup: TrainingSetup, spec: ModelSpec) -> TrainingSetup | None:
    """The sidebar's setup on MLX-LM (its own defaults when another stack is chosen), or None when mlx-lm cannot
    train this model (the section then says why)."""
    from estimator.job.stack import resolve_setup

    if setup.stack == MLX_STACK:
        return setup
    try:
        mlx = resolve_setup(MLX_STACK, method=setup.method, batch=setup.batch, seq_len=setup.seq_len,
                            backend="metal")
        estimate(spec, mlx)
    except ValueError:
        return None
    return mlx


def _mlx(spec: ModelSpec, setup: TrainingSetup, inputs: Inputs) -> None:
    """MLX-LM on a Mac: what mlx_lm lora holds, the s² attention term with a figure, the backends, Apple devices."""
    from dataclasses import replace

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


def _overhead() -> None:
    """The overhead outside the tensors, and the likely range."""
    st.subheader(_("Overhead"))
    st.markdown(
        _("- **CUDA context and cuBLAS workspaces**: {context} GB (range {low}–{high} GB; PyTorch's lazy module "
          "loading, PR #86509). Not visible to `torch.cuda.memory_allocated`, visible in nvidia-smi.\n"
          "- **Allocator slack**: {slack} % of the tensors (PyTorch's caching allocator rounds and fragments; 5–15 % is "
          "typical).\n"
          "- **Several GPUs**: + {nccl} GB of NCCL buffers per GPU.\n"
          "- **The likely range** on every chart: the tensors − {error_low} % / + {error_high} % (the 10th and 90th "
          "percentiles of measured ÷ estimated over the published runs the model covers, `validation.derived_band`), "
          "with the overhead at its low and high ends.").format(
            context=format_number(CUDA_CONTEXT_BYTES / 1e9), low=format_number(CUDA_CONTEXT_LOW / 1e9),
            high=format_number(CUDA_CONTEXT_HIGH / 1e9), slack=format_number(100 * ALLOCATOR_SLACK, 0),
            nccl=format_number(NCCL_BYTES / 1e9, 2), error_low=format_number(100 * MODEL_ERROR_LOW, 0),
            error_high=format_number(100 * MODEL_ERROR_HIGH, 0))
    )
    st.markdown(
        _("- **Unsloth** turns on the allocator's expandable segments when it is imported: before an allocation "
          "fails, every page no tensor uses is given back. Its slack is each request's rounding plus half a page of "
          "each pool ({pages} MiB), not {slack} %; replays of its traced step's allocations needed 0.2–1.8 % above "
          "the tensors (PyTorch's defaults: 1.4–4.9 %). `docs/formulas.md` §5.1.").format(
            pages=format_number((LARGE_SEGMENT + SMALL_BUFFER) / 2 / 2**20, 0),
            slack=format_number(100 * ALLOCATOR_SLACK, 0)))


def _sharding() -> None:
    """Data parallel and the ZeRO stages."""
    st.subheader(_("Sharding over several GPUs"))
    st.markdown(
        _("With N GPUs, plain data parallel (DDP) keeps everything on every GPU, plus a bucket copy of the gradients. "
        "ZeRO shards the model states (Rajbhandari et al. 2020, §5 and Fig. 1):")
    )
    st.latex(r"\text{ZeRO-1: } W + G + \tfrac{O}{N} \qquad \text{ZeRO-2: } W + \tfrac{G + O}{N} "
             r"\qquad \text{ZeRO-3 / FSDP: } \tfrac{W + G + O}{N} + \text{two gathered layers}")
    st.markdown(_("Activations are **not** sharded: each GPU keeps its own micro-batch's. CPU offload moves the "
                  "optimizer state to CPU RAM (ZeRO-Offload). See the *Scale out* page."))


def _host_ram(spec: ModelSpec, setup: TrainingSetup) -> None:
    """The host RAM terms (estimator/memory/host.py), each with its source, for the sidebar's job."""
    st.subheader(_("Host RAM"))
    st.markdown(_(
        "Beside the GPU, the setup needs CPU RAM on the machine, for all its training processes (one per GPU): the "
        "processes themselves, the model while it loads, and whatever the setup keeps in CPU RAM while it trains. "
        "Loading and training never overlap, so the host's peak is the larger of the two. On unified memory (a Mac) "
        "the device's RAM is the machine's: the GPU's peak and the host's training terms add up against it."))
    try:
        host = estimate(spec, setup).host
    except ValueError:  # a setup the estimator refuses (the calculator says why)
        host = None
    if host is not None:
        rows = [{_("Term"): _(x.label), _("Key"): x.key, _("Formula"): x.formula, "GB": round(x.bytes / 1e9, 2)}
                for x in host.details]
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="host_terms")
    st.caption(_("Sources: the processes' import peak measured by calibration/host_baseline.py; the CUDA runtime's "
                 "host side from pytorch/pytorch#106511; the model load per stack (the stack table's host_load row); "
                 "ZeRO-Offload's CPU state from DeepSpeed 0.18.2 runtime/zero/stage_1_and_2.py; parameter offload "
                 "from its stage3.py; offloaded checkpoints from transformers' save_on_cpu; the pinned rounding from "
                 "torch's CachingHostAllocator. Every term and line: docs/formulas.md §10. The Out of memory? page "
                 "reads a failed run's message (§11)."))


def _preference() -> None:
    """Preference & RL trainers (read from estimator/memory/trainers.py)."""
    st.header(_("Preference & RL"))
    st.markdown(how_section_markdown())  # ui/trainer_inputs.py: read from estimator/memory/trainers.py


def _assumptions() -> None:
    """What the stack does not decide."""
    st.header(_("Assumptions"))
    st.markdown(
        _("What the stack does not decide:\n\n"
          "- `zero_grad(set_to_none=True)`, no gradient accumulation buffers unless you accumulate.\n"
          "- **SDPA attention** (`attn_implementation=\"sdpa\"`): flash or memory-efficient kernels, no s² memory.\n"
          "- **LoRA**: no dropout, all linear layers unless you name them.\n"
          "- **QLoRA**: NF4 with double quantisation (LitGPT's `bnb.nf4`: without), 16-bit compute.\n"
          "- **Every example is max-length tokens** (padding to max length; the worst batch you can get), and every "
          "token counts in the loss.\n"
          "- **Usable memory**: a discrete GPU's whole memory as its driver reports it (nvidia-smi's MiB); a "
          "unified-memory laptop (Apple silicon) about {unified} % of its RAM, the rest being the OS and apps' (Apple's "
          "`recommendedMaxWorkingSetSize`; the product page says the same).\n"
          "- **The rule of thumb** (sidebar toggle) is the product page's rule as written: {rule}. It ignores "
          "batch, length, optimizer and stack.").format(unified=format_number(100 * UNIFIED_USABLE_FRACTION, 0),
                                                        rule=_(rule_sentence()))
    )


def _units() -> None:
    """GB and GiB."""
    st.header(_("Units"))
    st.markdown(
        _("**GB = 10⁹ bytes** (what the product page prints) and **GiB = 2³⁰ bytes = {gib_in_gb} GB** (what PyTorch "
          "prints; nvidia-smi's MiB are 2²⁰ bytes). An \"80 GB\" H100 is what nvidia-smi reports, {mib} MiB = "
          "{amount}: more than 80 × 10⁹ bytes, less than 80 GiB. Charts are in GB; hovers and tables add GiB.").format(
            gib_in_gb=format_number(2**30 / 1e9, 3), mib=format_number(81_559, 0), amount=plain(fmt_both(81_559 * 2**20)))
    )


def accuracy_report() -> dict:
    """The accuracy report re-estimates every fixture and published run (~25 ms): it depends on no input and no
    language (its rows hold ids, numbers and English source notes), so it is computed once per process (ui/once.py:
    shared, read only)."""
    return once("how.accuracy_report", _accuracy_report)


def _accuracy() -> tuple[dict, dict]:
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


def _run_tables(tracer: dict, published: dict) -> None:
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


def _exact_trace() -> None:
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


def _known_limits() -> None:
    """What is not modelled."""
    st.header(_("Known limits"))
    st.markdown(
        _("- **Not modelled**: tensor and pipeline parallelism, torch.compile (usually lowers activations), "
        "sequence packing and padding-free batches (both lower activations), "
        "optimizer-in-backward, evaluation and generation during training (can peak higher than training).\n"
        "- **Fused kernels**: Liger's fused linear + cross-entropy is modelled (the *fused* loss); Liger's fused "
        "RMSNorm and SwiGLU would lower activations further. Unsloth's kernels are modelled from its own code (see "
        "*Unsloth, as Unsloth runs*).\n"
        "- **Mixture-of-experts** activations (routing buffers, per-expert copies) are estimated, then checked by "
        "the tracer on small MoE models only.\n"
        "- **Padding masks**: with a padding mask on older PyTorch, SDPA repeats K and V to full width; not counted.\n"
        "- **QLoRA** cannot be traced on CPU: its storage follows bitsandbytes' layout, its activations the "
        "rules above. Compare its published errors with the other methods' in the table by method.\n"
        "- **Apple silicon**: PyTorch MPS and MLX allocate differently from CUDA; past the usable line a "
        "unified-memory machine swaps and slows down rather than failing cleanly.\n"
        "- **CPU RAM** for offloaded optimizer state is reported, not checked against your machine's RAM.\n"
        "- **Fragmentation** beyond the allocator slack: long runs with varying lengths can need 10–15 % more; "
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` helps.")
    )


def _script(spec: ModelSpec, setup: TrainingSetup) -> None:
    """A training script for the sidebar's setup, in the chosen stack's terms."""
    st.header(_("A training script for this setup"))
    st.markdown(_("The sidebar's setup in the chosen stack's own terms, with exactly the assumptions of the estimate "
                  "(batch, max length, checkpointing, dtypes, optimizer, loss, attention, LoRA rank and targets). Fill "
                  "in your data and run it."))
    st.code(training_snippet(spec, setup), language=snippet_language(setup))


def how(inputs: Inputs, _answer: None = None) -> None:
    """The page, section by section, after the sliders (it has no verdict to draw first)."""
    show_notes(inputs)
    page_trainer(inputs)  # the sidebar's Trainer box, as on every page (the setup travels with page switches)
    spec, setup = inputs.model, inputs.setup
    _intro()
    _peak()
    _weights()
    _lora(spec, setup)
    _gradients()
    _optimizer()
    _activations()
    _logits()
    _checkpointing()
    _stacks(setup)
    _unsloth(spec, setup)
    _mlx(spec, setup, inputs)
    _overhead()
    _sharding()
    _host_ram(spec, setup)
    _preference()
    _assumptions()
    _units()
    tracer, published = _accuracy()
    _run_tables(tracer, published)
    _exact_trace()
    _known_limits()
    _script(spec, setup)
    share_box()


live_page(rest=how)  # the sidebar, then in a fragment: the sliders, then the page
