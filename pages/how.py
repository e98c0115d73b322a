"""How it works: what the estimate counts, each formula and where it comes from, the assumptions and units,
how accurate it has been against measured runs, what it does not model, and a training script that runs
the setup being estimated. The page is a list of sections: the short ones are here, the long ones are built in
ui/how_formulas.py (the formulas, overhead, sharding, host RAM), ui/how_stacks.py (the stacks, Unsloth, MLX-LM, the
version forks), ui/how_speed.py (the time model and its accuracy) and ui/how_accuracy.py (the accuracy report, its run
tables, the real-run check, the exact trace)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from estimator import fmt_both
from estimator.i18n import _, format_number
from estimator.memory.rule import rule_sentence
from estimator.options.devices import UNIFIED_USABLE_FRACTION
from estimator.report.snippets import training_snippet
from estimator.report.snippets.common import snippet_language
from ui import how_accuracy, how_formulas, how_speed, how_stacks
from ui.inputs import live_page
from ui.text import plain, show_notes
from ui.trainer_inputs import how_section_markdown, page_trainer
from ui.url_state import share_box
from ui.values import Inputs

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
          "- **Usable memory**: a discrete GPU's memory as CUDA reports it to PyTorch "
          "(`torch.cuda.get_device_properties(0).total_memory`, the \"total capacity\" of its out-of-memory "
          "messages), a little below nvidia-smi's MiB, which also count what the driver keeps (an A100 80GB: 79.15 "
          "GiB of 80); the CUDA context is part of the estimate. A unified-memory laptop (Apple silicon) about "
          "{unified} % of its RAM, the rest being the OS and apps' (Apple's `recommendedMaxWorkingSetSize`; the "
          "product page says the same).\n"
          "- **The rule of thumb** (sidebar toggle) is the product page's rule as written: {rule}. It ignores "
          "batch, length, optimizer and stack.").format(unified=format_number(100 * UNIFIED_USABLE_FRACTION, 0),
                                                        rule=_(rule_sentence()))
    )
    how_formulas.gpu_usable()


def _units() -> None:
    """GB and GiB."""
    st.header(_("Units"))
    st.markdown(
        _("**GB = 10⁹ bytes** (what the product page prints) and **GiB = 2³⁰ bytes = {gib_in_gb} GB** (what PyTorch "
          "prints; nvidia-smi's MiB are 2²⁰ bytes). An \"80 GB\" H100 is what nvidia-smi reports, {mib} MiB = "
          "{amount}: more than 80 × 10⁹ bytes, less than 80 GiB. Charts are in GB; hovers and tables add GiB.").format(
            gib_in_gb=format_number(2**30 / 1e9, 3), mib=format_number(81_559, 0), amount=plain(fmt_both(81_559 * 2**20)))
    )


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
    trainer_in = page_trainer(inputs)  # the sidebar's Trainer box, as on every page (the setup travels with page switches)
    spec, setup = inputs.model, inputs.setup
    _intro()
    _peak()
    how_formulas.weights()
    how_formulas.lora(spec, setup)
    how_formulas.gradients()
    how_formulas.optimizer()
    how_formulas.activations()
    how_formulas.logits()
    how_formulas.checkpointing()
    how_stacks.stacks(setup)
    how_stacks.unsloth(spec, setup)
    how_stacks.mlx_lm(spec, setup, inputs)
    how_formulas.overhead()
    how_formulas.sharding()
    how_formulas.host_ram(spec, setup)
    _preference()
    _assumptions()
    _units()
    how_speed.time_model(spec, trainer_in.setup, inputs.device, trainer_in.trainer)
    tracer, published = how_accuracy.accuracy()
    how_accuracy.run_tables(tracer, published)
    how_accuracy.real_runs()
    how_stacks.versions()
    how_accuracy.exact_trace()
    _known_limits()
    _script(spec, setup)
    share_box()


live_page(rest=how)  # the sidebar, then in a fragment: the sliders, then the page
