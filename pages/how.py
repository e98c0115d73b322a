"""How it works: what the estimate counts, each formula and where it comes from, the assumptions and units,
how accurate it has been against measured runs, what it does not model, and a training script that runs
the setup being estimated."""

import pandas as pd
import streamlit as st

from estimator import GB, estimate, fmt_both
from estimator import memory as mem
from estimator.devices import UNIFIED_USABLE_FRACTION
from estimator.precision import BNB_8BIT_STATE, NF4_DQ_BYTES, optimizer_state_bytes
from estimator.snippets import OPTIM_NAMES, training_snippet
from estimator.training import OPTIMIZER_LABELS, OPTIMIZERS
from ui.inputs import plain, render_inputs, show_notes
from validation import accuracy_report

inputs = render_inputs()
show_notes(inputs)
spec, setup = inputs.model, inputs.setup

st.title("How it works")
st.markdown(
    "The app estimates the **peak GPU memory of one training step** on one GPU: the most memory in use at "
    "any moment while a batch goes forward, backward and through the optimizer. If that peak is below what the "
    "device can give to training, the run fits. Everything is computed from the model's `config.json` (its "
    "layers and matrix shapes), not from its download size. The numbers below are what the code in "
    "`estimator/` does; each names its source so you can check it."
)

st.header("What goes into the peak")
st.markdown(
    "Five components, the same colours on every chart:\n\n"
    "- **Weights**: the model, in the precision it is loaded in (plus the frozen base and small adapters for "
    "LoRA/QLoRA).\n"
    "- **Gradients**: one per *trainable* weight.\n"
    "- **Optimizer state**: what the optimizer keeps per trainable weight (Adam keeps two moving averages).\n"
    "- **Activations**: the tensors the forward pass saves for the backward pass; they grow with "
    "batch size × max length.\n"
    "- **Overhead**: the CUDA context and the allocator's rounding, which PyTorch does not report as tensors."
)

st.subheader("Phases and the peak")
st.markdown(
    "Memory is not at its highest all the time. The estimate walks through four moments of a steady-state step "
    "(step 2 onwards, so optimizer state exists; gradients are freed between steps, the Trainer default) and "
    "takes the largest:\n\n"
    "1. **Loss backward**: every activation is still held, plus the logits and the cross-entropy's backward "
    "buffers.\n"
    "2. **Backward, output layer**: the head's gradient appears while most activations are still held.\n"
    "3. **Backward, first layer**: almost every gradient exists, activations are nearly all freed.\n"
    "4. **Optimizer step**: weights + all gradients + optimizer state (+ step temporaries for non-fused "
    "optimizers).\n\n"
    "Long examples peak at 1–2 (activations), full fine-tuning of big models at 4 (optimizer). Source: the "
    "phase analysis in the research notes (`formulas.md` §0), checked by the tracer."
)
st.latex(r"\text{peak} = \max_{\text{phase}} \big(W + G + O + A\big)_{\text{phase}} + \text{overhead}")

st.header("The formulas")
st.subheader("Weights, per precision")
st.markdown(
    "| Setting | Bytes per weight | Gradients (full FT) | Source |\n"
    "|---|---|---|---|\n"
    "| `bf16` / `fp16` (model loaded in 16 bits) | 2 | 2 | PyTorch dtypes |\n"
    "| `mixed` (fp32 weights, bf16 autocast) | 4, plus 2-byte copies of the weights during forward/backward "
    "| 4 | HF docs *Model memory anatomy* (\"18 bytes per parameter\") |\n"
    "| `fp32` | 4 | 4 | PyTorch dtypes |\n"
    f"| QLoRA base: decoder linears in NF4 + double quantisation | {NF4_DQ_BYTES:.4f} | – | bitsandbytes "
    "`quantize_4bit` (64-weight blocks, 8-bit scales per 256 blocks); QLoRA paper §3 |\n"
    "| QLoRA base: embeddings, head, norms | 4 (upcast to fp32) | – | PEFT "
    "`prepare_model_for_kbit_training` (older TRL ran it for 4-bit models; the script below calls it) |"
)
st.subheader("LoRA and QLoRA")
st.markdown(
    "The base is frozen; each adapted matrix of shape in × out gets two small ones, A (r × in) and B (out × r). "
    "Adapters are kept in fp32 (PEFT casts them up by default), so each adapter weight costs 4 bytes, its "
    "gradient 4 and AdamW's state 8: **16 bytes per adapter weight**. Under bf16 autocast each adapter is "
    "also cast to bf16 while it is used. Source: LoRA paper §4; PEFT `get_peft_model(autocast_adapter_dtype=True)`."
)
st.latex(r"P_{\text{LoRA}} = r \sum_{\text{adapted matrices}} (\text{in} + \text{out})")
if setup.method != "full":
    adapters = estimate(spec, setup).params_trainable
    st.caption(plain(f"{spec.name}, rank {setup.lora_rank}, targets {', '.join(setup.lora_targets)}: "
                     f"{adapters / 1e6:,.1f} million adapter weights, {fmt_both(16 * adapters)} with AdamW."))

st.subheader("Gradients")
st.markdown("One gradient per trainable weight, in that weight's dtype: every weight for full fine-tuning, "
            "only the adapters for LoRA/QLoRA. Frozen weights get none.")
st.latex(r"G = P_{\text{trainable}} \times \text{bytes(trainable dtype)}")

st.subheader("Optimizer state, per trainable weight")
optim_rows = []
for name in OPTIMIZERS:
    note = {
        "adamw": "two moments in the weight's dtype (torch.optim); fused: no step temporaries",
        "adamw_8bit": f"two 8-bit states + an fp32 scale per 256 values = {2 * BNB_8BIT_STATE:.3f} B (bitsandbytes)",
        "paged_adamw": "fp32 states whatever the weight dtype; paged to CPU only under memory pressure",
        "paged_adamw_8bit": "as 8-bit AdamW, paged",
        "sgd": "one momentum buffer",
        "adafactor": "factored second moment: 4·(rows + columns) bytes per matrix, ≈ 0 per weight",
        "lion": "one momentum buffer",
    }[name]
    per_fp32 = optimizer_state_bytes(name, 4)
    per_bf16 = optimizer_state_bytes(name, 2)
    optim_rows.append({"Optimizer": OPTIMIZER_LABELS[name], "Trainer optim": OPTIM_NAMES[name],
                       "fp32 weights (B)": "≈ 0" if name == "adafactor" else f"{per_fp32:g}",
                       "bf16 weights (B)": "≈ 0" if name == "adafactor" else f"{per_bf16:g}", "Why": note})
st.dataframe(pd.DataFrame(optim_rows), hide_index=True, key="optimizer_table")
st.caption("Sources: torch.optim (state dtype = weight dtype); bitsandbytes optimizers (block-wise 8-bit, "
           "paged); Dettmers et al. 2021 (8-bit optimizers); transformers' Adafactor. Full fine-tuning in `mixed` "
           "precision therefore costs 4 + 4 + 8 = 16 bytes per weight, plus the 2-byte autocast copies.")

st.subheader("Activations, per layer")
st.markdown(
    "Counted tensor by tensor from each layer's modules: what autograd saves for the backward pass. For a "
    "Llama-style layer in bf16 with SDPA attention the code reduces to these bytes per token (h hidden size, "
    "q and kv the query and key/value widths, I the MLP width, a heads, r the LoRA rank):"
)
st.latex(r"A_{\text{full}} = 16h + 4q + 4kv + 8I + 4a + 8")
st.latex(r"A_{\text{LoRA}} = 18h + 6q + 4kv + 8I + 14r + 4a + 8")
st.latex(r"A_{\text{QLoRA}} = 18h + 6q + 4kv + 14I + 14r + 4a + 8")
st.markdown(
    "Multiply by tokens = batch × max length and by the number of layers. Why these terms: RMSNorm keeps an "
    "fp32 copy of its input; SDPA/flash attention keeps Q, K, V, the output and a log-sum-exp, never the "
    "s × s score matrix; SwiGLU keeps four MLP-wide tensors; frozen matrices save nothing for themselves, but "
    "each LoRA adapter keeps its own bf16 copy of its input. QLoRA's MLP runs in fp32 because "
    "`prepare_model_for_kbit_training` makes the residual stream fp32. **Eager attention** adds the s × s "
    "scores: about 6 · a · s bytes per token per layer. Sources: Korthikanti et al. 2022 §4 (the method), "
    "FlashAttention (what is kept), measured per tensor with saved-tensor hooks (`formulas.md` §3.3)."
)

st.subheader("Logits and loss")
st.markdown(
    "Hugging Face computes the loss on **fp32 logits**: with V the vocabulary and T the tokens in the batch, "
    "the log-softmax output (4·T·V bytes) is kept for backward, and the backward pass adds its input and "
    "output gradients (8·T·V more). For Llama-3 (V = 128,256) at 2,048 tokens that is 1.05 GB kept and "
    "2.1 GB during backward: often the single biggest activation. QLoRA keeps fp32 logits twice (+4·T·V). "
    "A fused linear + cross-entropy kernel (Liger) never builds the full logits. Source: transformers "
    "`ForCausalLMLoss`; Liger-Kernel `fused_linear_cross_entropy`."
)
st.latex(r"A_{\text{loss}} = \underbrace{4\,T V}_{\text{kept}} + \underbrace{8\,T V}_{\text{backward}}")

st.subheader("Gradient checkpointing")
st.markdown(
    "Each layer keeps only its input (2·h bytes per token in bf16, 4·h with an fp32 residual stream) and "
    "recomputes the rest during backward, one layer at a time: activations drop from L layers' worth to "
    "L inputs plus one layer. 20–30 % slower. Source: Korthikanti et al. 2022 §5 (full recomputation); "
    "Hugging Face `gradient_checkpointing_enable`."
)
st.latex(r"A_{\text{ckpt}} = T\,(L \cdot 2h + A_{\text{one layer}})")

st.subheader("Overhead")
st.markdown(
    f"- **CUDA context and cuBLAS workspaces**: {mem.CUDA_CONTEXT_BYTES / 1e9:.1f} GB "
    f"(range {mem.CUDA_CONTEXT_LOW / 1e9:.1f}–{mem.CUDA_CONTEXT_HIGH / 1e9:.1f} GB; PyTorch's lazy module loading, "
    "PR #86509). Not visible to `torch.cuda.memory_allocated`, visible in nvidia-smi.\n"
    f"- **Allocator slack**: {mem.ALLOCATOR_SLACK:.0%} of the tensors (PyTorch's caching allocator rounds "
    "and fragments; 5–15 % is typical).\n"
    f"- **Several GPUs**: + {mem.NCCL_BYTES / 1e9:.2f} GB of NCCL buffers per GPU.\n"
    f"- **The likely range** on every chart: the tensors − {mem.MODEL_ERROR_LOW:.0%} / + {mem.MODEL_ERROR_HIGH:.0%} "
    "(the 10th and 90th percentiles of measured ÷ estimated over the published runs the model covers, "
    "`validation.derived_band`), with the overhead at its low and high ends."
)

st.subheader("Sharding over several GPUs")
st.markdown(
    "With N GPUs, plain data parallel (DDP) keeps everything on every GPU, plus a bucket copy of the gradients. "
    "ZeRO shards the model states (Rajbhandari et al. 2020, §5 and Fig. 1):"
)
st.latex(r"\text{ZeRO-1: } W + G + \tfrac{O}{N} \qquad \text{ZeRO-2: } W + \tfrac{G + O}{N} "
         r"\qquad \text{ZeRO-3 / FSDP: } \tfrac{W + G + O}{N} + \text{two gathered layers}")
st.markdown("Activations are **not** sharded: each GPU keeps its own micro-batch's. CPU offload moves the "
            "optimizer state to CPU RAM (ZeRO-Offload). See the *Scale out* page.")

st.header("Assumptions")
st.markdown(
    "The defaults are what a plain Hugging Face run does, so the estimate matches a script you would write:\n\n"
    "- **HF Trainer / TRL SFTTrainer**, `optim=\"adamw_torch_fused\"` (fused AdamW: no step temporaries), "
    "`zero_grad(set_to_none=True)`, no gradient accumulation buffers unless you accumulate.\n"
    "- **SDPA attention** (`attn_implementation=\"sdpa\"`): flash or memory-efficient kernels, no s² memory.\n"
    "- **HF cross-entropy on fp32 logits** (`ForCausalLMLoss`).\n"
    "- **PEFT LoRA with fp32 adapters**, no dropout, all linear layers unless you name them.\n"
    "- **QLoRA**: NF4 with double quantisation, bf16 compute, and PEFT's `prepare_model_for_kbit_training` "
    "(fp32 norms, embeddings and head).\n"
    "- **Recent TRL `SFTConfig` defaults differ**: gradient checkpointing on, `max_length=1024`, and a chunked "
    "loss (`loss_type=\"chunked_nll\"`) in the newest releases; `SFTTrainer` no longer upcasts QLoRA models "
    "and keeps QLoRA adapters in bf16. The script at the bottom sets each of these explicitly, so it runs "
    "what the sidebar describes.\n"
    "- **Every example is max-length tokens** (padding to max length; the worst batch you can get).\n"
    "- **Usable memory**: a discrete GPU's whole memory; a unified-memory laptop "
    f"(Apple silicon) about {UNIFIED_USABLE_FRACTION:.0%} of RAM, the rest being the OS and apps' "
    "(Apple's `recommendedMaxWorkingSetSize`; the seed page says the same).\n"
    "- **The quick rule** (sidebar toggle) is the seed page's rule of thumb as written: LoRA ≈ 2 GB per "
    "billion + 3 GB, full ≈ 12 GB per billion + 4 GB, QLoRA ≈ a third of LoRA + 3 GB. It ignores batch, "
    "length and optimizer."
)

st.header("Units")
st.markdown(
    "**GB = 10⁹ bytes** (what GPU vendors and the seed page print) and **GiB = 2³⁰ bytes = 1.074 GB** (what "
    "PyTorch and nvidia-smi print). An \"80 GB\" H100 is 80 × 10⁹ bytes here; the same memory reads 74.5 GiB "
    "in nvidia-smi. Charts are in GB; hovers and tables add GiB, e.g. " + plain(fmt_both(80 * GB)) + "."
)

st.header("How accurate is it?")
report = accuracy_report()
tracer, published = report["tracer"], report["published"]
st.markdown(
    "Two checks, re-run on every test run (`validation/`):\n\n"
    "- **Tracer**: real training steps of small Llama/Qwen/Gemma/Phi/MoE models run on CPU with fake "
    "tensors, every allocation counted (`calibration/`). Checks the tensor-level formulas exactly.\n"
    "- **Published measurements**: peak memory reported by LitGPT, torchtune and PEFT benchmarks on real "
    "GPUs, each with its source."
)
left, right = st.columns(2)
for col, name, part in ((left, "Tracer runs", tracer), (right, "Published runs", published)):
    with col:
        if part["n"]:
            st.metric(f"{name}: median error", f"{part['median_abs_pct']:.1f} %", border=True,
                      help=f"{part['n']} runs; 90 % within {part['p90_abs_pct']:.1f} %, worst "
                           f"{part['worst_abs_pct']:.1f} %.")
            st.caption(f"{part['n']} runs · 90 % within {part['p90_abs_pct']:.1f} % · worst "
                       f"{part['worst_abs_pct']:.1f} %")
        else:
            st.metric(f"{name}: median error", "–", border=True)
            st.caption("No runs recorded yet.")

by_method = [{"Set": name, "Method": method, "Runs": s["n"], "Median |error| %": s["median_abs_pct"],
              "Worst |error| %": s["worst_abs_pct"]}
             for name, part in (("tracer", tracer), ("published", published))
             for method, s in part.get("by_method", {}).items()]
if by_method:
    st.dataframe(pd.DataFrame(by_method), hide_index=True, key="accuracy_by_method",
                 column_config={c: st.column_config.NumberColumn(format="%.1f")
                                for c in ("Median |error| %", "Worst |error| %")})

# Column headings shared by both run tables.
RUN_COLUMNS = {
    "id": st.column_config.TextColumn("Run", pinned=True), "model": st.column_config.TextColumn("Model"),
    "method": st.column_config.TextColumn("Method"), "precision": st.column_config.TextColumn("Precision"),
    "batch": st.column_config.NumberColumn("Batch"), "seq_len": st.column_config.NumberColumn("Length"),
    "grad_ckpt": st.column_config.CheckboxColumn("Checkpointing"),
    "error_pct": st.column_config.NumberColumn("Error %", format="%+.1f"),
}
if published["rows"]:
    st.subheader("Published runs")
    pub = pd.DataFrame(published["rows"])
    pub_columns = ["id", "model", "method", "precision", "batch", "seq_len", "grad_ckpt", "measure", "measured_gb",
                   "estimated_gb", "error_pct", "explanation", "source"]
    st.dataframe(pub[[c for c in pub_columns if c in pub.columns]], hide_index=True, key="published_runs",
                 column_config=RUN_COLUMNS | {
                     "measured_gb": st.column_config.NumberColumn("Measured (GB)", format="%.2f"),
                     "estimated_gb": st.column_config.NumberColumn("Estimated (GB)", format="%.2f"),
                     "measure": st.column_config.TextColumn("Measure"),
                     "explanation": st.column_config.TextColumn("Why it differs"),
                     "source": st.column_config.TextColumn("Source")})
    st.caption("Error = (estimated − measured) / measured. Rows with an explanation used a technique the estimate "
               "does not model (torch.compile, optimizer-in-backward, offloading, validation peaks).")
if tracer["rows"]:
    st.subheader("Tracer runs")
    tr = pd.DataFrame(tracer["rows"])
    tr["measured_gb"] = tr["measured_bytes"] / 1e9
    tr["estimated_gb"] = tr["estimated_bytes"] / 1e9
    tr_columns = ["id", "family", "method", "precision", "batch", "seq_len", "grad_ckpt", "attention",
                  "measured_gb", "estimated_gb", "error_pct"]
    st.dataframe(tr[[c for c in tr_columns if c in tr.columns]], hide_index=True, key="tracer_runs",
                 column_config=RUN_COLUMNS | {
                     "measured_gb": st.column_config.NumberColumn("Measured (GB)", format="%.4f"),
                     "estimated_gb": st.column_config.NumberColumn("Estimated (GB)", format="%.4f"),
                     "family": st.column_config.TextColumn("Family"),
                     "attention": st.column_config.TextColumn("Attention")})

st.header("Known limits")
st.markdown(
    "- **Not modelled**: tensor and pipeline parallelism, torch.compile (usually lowers activations), "
    "sequence packing and padding-free batches (both lower activations), activation offloading, "
    "optimizer-in-backward, evaluation and generation during training (can peak higher than training).\n"
    "- **Fused kernels**: only Liger's fused linear + cross-entropy is modelled (the *chunked* loss); its "
    "fused RMSNorm and SwiGLU would lower activations further.\n"
    "- **Mixture-of-experts** activations (routing buffers, per-expert copies) are estimated, then checked by "
    "the tracer on small MoE models only.\n"
    "- **Padding masks**: with a padding mask on older PyTorch, SDPA repeats K and V to full width; not counted.\n"
    "- **QLoRA** cannot be traced on CPU: its storage follows bitsandbytes' layout, its activations the "
    "rules above. Compare its published errors with the other methods' in the table by method.\n"
    "- **Apple silicon**: PyTorch MPS and MLX allocate differently from CUDA; past the usable line a "
    "unified-memory machine swaps and slows down rather than failing cleanly.\n"
    "- **CPU RAM** for offloaded optimizer state is reported, not checked against your machine's RAM.\n"
    "- **Fragmentation** beyond the allocator slack: long runs with varying lengths can need 10–15 % more; "
    "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` helps."
)

st.header("A training script for this setup")
st.markdown("The sidebar's setup as a TRL `SFTConfig` + PEFT `LoraConfig` script, with exactly the assumptions "
            "above (batch, max length, checkpointing, dtypes, optimizer, attention, LoRA rank and targets). "
            "Fill in your data and run it.")
st.code(training_snippet(spec, setup), language="python")
