"""How it works, the formulas: the weights per precision, LoRA and QLoRA adapters, gradients, optimizer state,
activations, the logits and the loss, checkpointing, the overhead outside the tensors, sharding over several GPUs and
the host RAM beside the GPU. One section builder per subject; pages/how.py lists them in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from estimator import estimate, fmt_both
from estimator.i18n import _, format_number
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
from estimator.options.checkpointing import CHECKPOINTING
from estimator.options.devices import CATALOG
from estimator.options.losses import LOSS_IMPLS, LOSSES
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import QLORA_PREPS

from .once import table_per_language
from .text import plain

if TYPE_CHECKING:  # annotations only
    from estimator import ModelSpec, TrainingSetup


def weights() -> None:
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


def lora(spec: ModelSpec, setup: TrainingSetup) -> None:
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


def gradients() -> None:
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


def optimizer() -> None:
    """Optimizer state per trainable weight, for each optimizer."""
    st.subheader(_("Optimizer state, per trainable weight"))
    st.dataframe(table_per_language("how.optimizer_table", _optimizer_rows), hide_index=True, key="optimizer_table")
    st.caption(_("Sources: torch.optim (state dtype = weight dtype); bitsandbytes optimizers (block-wise 8-bit, "
                 "paged); Dettmers et al. 2021 (8-bit optimizers); transformers' Adafactor. Full fine-tuning in `mixed` "
                 "precision therefore costs {weight} + {grad} + {state} = {total} bytes per weight, plus the "
                 "{copy}-byte autocast copies.").format(copy=short(HALF), **_adamw_words(FP32)))


def activations() -> None:
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


def logits() -> None:
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


def checkpointing() -> None:
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


def overhead() -> None:
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


def gpu_usable() -> None:
    """Each catalog GPU's usable memory: the total CUDA (ROCm) gives PyTorch, beside nvidia-smi's, with its source."""
    table = table_per_language("how.gpu_usable", lambda: [{  # built once per language (ui/once.py)
        _("Device"): d.name, _("nvidia-smi (MiB)"): format_number(d.reported_mib, 0),
        _("CUDA's total (MiB)"): format_number(d.cuda_total_mib, 0), _("Usable (GB)"): format_number(d.usable_bytes / 1e9),
        _("Where the usable figure comes from"): d.usable_source} for d in CATALOG if d.cuda_total_mib is not None])
    with st.expander(_("GPUs: usable memory (the total CUDA gives PyTorch) and its source")):
        st.dataframe(table, hide_index=True, key="gpu_usable")


def sharding() -> None:
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


def host_ram(spec: ModelSpec, setup: TrainingSetup) -> None:
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
