"""One description per option: optimizers, losses, precision recipes, QLoRA preparation and activation
checkpointing. The estimate, the training snippets, the How-it-works page and validation all read these
entries; none of them states the fact again. Pure data: no Streamlit, Plotly or torch."""

from __future__ import annotations

from dataclasses import dataclass

from .i18n import N_


@dataclass(frozen=True)
class OptimizerOption:
    """An optimizer as the estimate counts it and as the frameworks name it."""

    id: str
    label: str
    hf_optim: str  # transformers TrainingArguments.optim (OptimizerNames)
    states: int  # state tensors per trainable parameter (exp_avg, exp_avg_sq, momentum…)
    state_dtype: str  # "param" (same dtype as the parameter), "fp32", "8bit" (bnb blockwise) or "factored"
    step_temporaries: bool  # does the step allocate a parameter-sized buffer (torch's foreach path)?
    summary: str
    source: str
    # The option as a torch / bitsandbytes class, for the stacks that build the optimizer themselves (torchtune
    # configs, LitGPT's --optimizer, a plain loop): class path and the keyword arguments the option needs.
    torch_class: str = ""
    torch_kwargs: tuple[tuple[str, object], ...] = ()

    @property
    def torch_init_kwargs(self) -> dict[str, object]:
        return dict(self.torch_kwargs)


SGD_MOMENTUM = 0.9  # the estimate counts one momentum buffer; transformers' optim="sgd" has momentum 0 otherwise


OPTIMIZERS: dict[str, OptimizerOption] = {o.id: o for o in (
    OptimizerOption("adamw", N_("AdamW (fused)"), "adamw_torch_fused", 2, "param", False,
                    N_("Two states (exp_avg, exp_avg_sq) in the parameter's dtype; the fused kernel updates in place."),
                    "torch/optim/adamw.py (fused=True); transformers 5.24 training_args.py default_optim "
                    "'adamw_torch_fused' with torch ≥ 2.8",
                    torch_class="torch.optim.AdamW", torch_kwargs=(("fused", True),)),
    OptimizerOption("adamw_foreach", N_("AdamW (torch default, foreach)"), "adamw_torch", 2, "param", True,
                    N_("Two states like fused AdamW, plus one parameter-sized temporary per step (foreach path)."),
                    "torch/optim/adamw.py: foreach is the CUDA default when fused is not requested; "
                    "torch/optim/optimizer.py _foreach_doc",
                    torch_class="torch.optim.AdamW", torch_kwargs=(("foreach", True),)),
    OptimizerOption("adamw_8bit", N_("8-bit AdamW (bitsandbytes)"), "adamw_bnb_8bit", 2, "8bit", False,
                    N_("Two uint8 blockwise states + one fp32 absmax per 256 elements."),
                    "bitsandbytes optim/optimizer.py (blocksize 256); Dettmers et al. 2110.02861",
                    torch_class="bitsandbytes.optim.AdamW8bit"),
    OptimizerOption("paged_adamw", N_("Paged AdamW 32-bit"), "paged_adamw_32bit", 2, "fp32", False,
                    N_("Two fp32 states in paged (unified) memory; counted on the GPU."),
                    "bitsandbytes optim/adamw.py PagedAdamW32bit",
                    torch_class="bitsandbytes.optim.PagedAdamW32bit"),
    OptimizerOption("paged_adamw_8bit", N_("Paged AdamW 8-bit"), "paged_adamw_8bit", 2, "8bit", False,
                    N_("Two 8-bit blockwise states in paged memory; counted on the GPU."),
                    "bitsandbytes optim/adamw.py PagedAdamW8bit",
                    torch_class="bitsandbytes.optim.PagedAdamW8bit"),
    OptimizerOption("sgd", N_("SGD with momentum"), "sgd", 1, "param", False,
                    N_("One momentum buffer in the parameter's dtype."),
                    "torch/optim/sgd.py (momentum_buffer)",
                    torch_class="torch.optim.SGD", torch_kwargs=(("momentum", SGD_MOMENTUM),)),
    OptimizerOption("adafactor", N_("Adafactor"), "adafactor", 1, "factored", False,
                    N_("fp32 row and column factors per matrix; a full fp32 second moment for 1-D tensors."),
                    "transformers optimization.py Adafactor (beta1=None)",
                    torch_class="transformers.optimization.Adafactor",
                    torch_kwargs=(("scale_parameter", False), ("relative_step", False), ("warmup_init", False))),
    OptimizerOption("lion", N_("Lion"), "lion_32bit", 1, "fp32", False,
                    N_("One fp32 exp_avg (bitsandbytes lion_32bit)."),
                    "bitsandbytes optim/lion.py Lion32bit",
                    torch_class="bitsandbytes.optim.Lion32bit"),
)}
OPTIMIZER_IDS: tuple[str, ...] = tuple(OPTIMIZERS)
OPTIMIZER_LABELS = {k: o.label for k, o in OPTIMIZERS.items()}


@dataclass(frozen=True)
class LossOption:
    """How the logits and the cross-entropy are computed: the largest single term at long lengths."""

    id: str
    label: str
    summary: str
    default_impl: str  # the LOSS_IMPLS id counted when no stack says which implementation runs


LOSSES: dict[str, LossOption] = {o.id: o for o in (
    LossOption("standard", N_("Standard (full logits)"),
               N_("The whole [tokens × vocabulary] logits tensor is built, then cross-entropy runs on it."), "hf"),
    LossOption("chunked", N_("Chunked (no full logits)"),
               N_("The stack's chunked loss: the head and cross-entropy run a slice of tokens or vocabulary at a "
               "time, so the full logits never exist at once."), "trl"),
    LossOption("fused", N_("Fused linear + cross-entropy kernel"),
               N_("A fused kernel (Liger, Cut Cross-Entropy) computes head, loss and gradients chunk by chunk "
               "in forward and keeps only the gradients."), "liger"),
)}
LOSS_IDS: tuple[str, ...] = tuple(LOSSES)


@dataclass(frozen=True)
class LossImpl:
    """One framework's implementation of a loss kind: what the estimate counts (activations.loss_memory)."""

    id: str
    kind: str  # a LOSSES id
    label: str
    summary: str
    source: str


LOSS_IMPLS: dict[str, LossImpl] = {o.id: o for o in (
    LossImpl("hf", "standard", N_("HF ForCausalLMLoss"),
             N_("logits.float() then cross_entropy: the fp32 log-softmax is kept for backward (4 B × T × V) and its "
             "backward adds grad-out and grad-in (8 B × T × V): 12 B × T × V at the loss backward."),
             "transformers 5.24 loss/loss_utils.py ForCausalLMLoss; traced (calibration/README.md)"),
    LossImpl("torchtune_full", "standard", N_("torchtune cross-entropy on fp32 logits"),
             N_("Without output chunks the model itself upcasts: TransformerDecoder.unembed returns "
             "self.output(h).float(), so CrossEntropyLoss keeps the fp32 log-softmax (4 B × T × V) and its backward "
             "adds grad-out and grad-in (8 B × T × V): 12 B × T × V, as transformers' loss."),
             "torchtune 0.6.1 torchtune/modules/transformer.py unembed (num_output_chunks = 0); recipes/"
             "full_finetune_single_device.py with loss=torch.nn.CrossEntropyLoss (del logits after the loss)"),
    LossImpl("litgpt", "chunked", N_("LitGPT chunked cross-entropy (bf16)"),
             N_("LoRA: the head runs in chunks of 128 tokens and cross-entropy per chunk on the bf16 logits, no fp32 "
             "upcast: the logits chunks and their 16-bit log-softmax are kept (2 × c × T × V), and backward works "
             "one chunk at a time (2 × c × B × 128 × V). Full fine-tuning (no head chunks): 3 × c × T × V in all."),
             "litgpt 0.5.13 litgpt/finetune/lora.py (lm_head_chunk_size=128), litgpt/finetune/full.py, "
             "litgpt/utils.py chunked_cross_entropy; traced on LitGPT's model (calibration/litgpt_trace.py)"),
    LossImpl("trl", "chunked", N_("TRL fused chunked LM head"),
             N_("Only the positions with a label are projected, in tiles of 4,096 tokens × 32,768 vocabulary; forward "
             "keeps the gathered hidden states [T, H]; backward builds an fp32 [T, H] input gradient (plus an fp32 "
             "[V, H] weight gradient and its cast when the head trains) and one tile."),
             "TRL 1.16.0 trl/trainer/utils.py add_fused_lm_head; trl/kernels/chunked_logprob.py "
             "ChunkedLogProbFunction (TOKEN_CHUNK_SIZE 4096, _CHUNKED_LOGPROB_CHUNK_SIZE 32768); "
             "trl/trainer/sft_trainer.py calls it for every SFT loss"),
    LossImpl("torchtune", "chunked", N_("torchtune CEWithChunkedOutputLoss"),
             N_("The head's output comes in 8 chunks; each is upcast to fp32 for cross-entropy, so the fp32 "
             "log-softmax (4 B × T × V) is still kept, but the loss backward works one chunk at a time. With "
             "compile=True the compiled cross-entropy keeps the 16-bit chunks instead (2 B × T × V)."),
             "torchtune 0.6.1 torchtune/modules/loss/ce_chunked_output_loss.py (num_output_chunks=8), "
             "torchtune/training/_compile.py compile_loss"),
    LossImpl("liger", "fused", N_("Liger fused linear cross-entropy"),
             N_("Head, softmax and gradients are computed in forward, one [chunk × V] tile at a time "
             "(chunk = next_pow2(T / ⌈V / H⌉)); forward keeps grad_input [T, H] (and grad_weight [V, H] when the "
             "head trains) until backward."),
             "liger_kernel 0.8.5 liger_kernel/ops/fused_linear_cross_entropy.py"),
    LossImpl("cce", "fused", N_("Unsloth fused cross-entropy"),
             N_("Unsloth computes head and loss chunk by chunk (its fused CE; Cut Cross-Entropy where enabled): no "
             "logits tensor; counted like Liger's fused kernel (one tile + the input gradient)."),
             "unsloth_zoo 2026.10 fused_losses/cross_entropy_loss.py (unsloth_fused_ce_loss); compiler.py "
             "UNSLOTH_ENABLE_CCE, off on torch ≥ 2.8 (__init__.py)"),
)}


@dataclass(frozen=True)
class PrecisionOption:
    """A precision recipe: the dtype the model is loaded in and the Trainer flags that go with it."""

    id: str
    label: str
    model_dtype: str  # torch dtype name the weights are loaded in
    bf16_flag: bool  # TrainingArguments.bf16 (autocast)
    fp16_flag: bool  # TrainingArguments.fp16
    compute_dtype: str  # dtype of matmul outputs (and of QLoRA's 4-bit matmuls)
    summary: str


PRECISIONS: dict[str, PrecisionOption] = {o.id: o for o in (
    PrecisionOption("bf16", N_("bf16 (pure 16-bit)"), "bfloat16", True, False, "bfloat16",
                    N_("Weights, gradients and optimizer states in bf16 (2 B each).")),
    PrecisionOption("fp16", N_("fp16 (pure 16-bit)"), "float16", False, True, "float16",
                    N_("Like bf16 with fp16 storage (a loss scaler adds nothing measurable).")),
    PrecisionOption("mixed", N_("Mixed (fp32 master + bf16 compute)"), "float32", True, False, "bfloat16",
                    N_("fp32 weights, gradients and states; bf16 autocast copies of each weight while it is used.")),
    PrecisionOption("fp32", N_("fp32"), "float32", False, False, "float32", N_("Everything in fp32 (4 B each).")),
)}
PRECISION_IDS: tuple[str, ...] = tuple(PRECISIONS)
PRECISION_LABELS = {k: o.label for k, o in PRECISIONS.items()}


@dataclass(frozen=True)
class QLoRAPrep:
    """What happens to the non-4-bit weights (embeddings, head, norms) of a QLoRA model before training."""

    id: str
    label: str
    upcast_embeddings: bool  # embeddings and head become fp32
    fp32_residual: bool  # fp32 norms make the residual stream and MLP intermediates fp32
    summary: str
    source: str


QLORA_PREPS: dict[str, QLoRAPrep] = {o.id: o for o in (
    QLoRAPrep("none", N_("No upcast (16-bit non-4-bit weights)"), False, False,
              N_("Embeddings, head and norms stay in 16-bit; nothing is cast to fp32."),
              "TRL 1.16 no longer calls prepare_model_for_kbit_training (trl PRs #4577, #4704)"),
    QLoRAPrep("peft", N_("prepare_model_for_kbit_training (fp32 upcast)"), True, True,
              N_("Every non-4-bit weight is cast to fp32: embeddings, head and norms; the residual stream, MLP "
              "intermediates and logits follow in fp32."),
              "peft 0.21 peft/utils/other.py prepare_model_for_kbit_training; PEFT's QLoRA guide"),
    QLoRAPrep("norms", N_("Norms upcast, embeddings and head 16-bit"), False, True,
              N_("Axolotl patches PEFT's preparation to leave embed_tokens and lm_head in 16-bit: the norms become "
              "fp32, so the residual stream still turns fp32."),
              "axolotl 0.19.0 axolotl/monkeypatch/peft/utils.py (PATCHED_PREPARE_CODE)"),
)}
QLORA_PREP_IDS: tuple[str, ...] = tuple(QLORA_PREPS)


@dataclass(frozen=True)
class CheckpointingOption:
    """Activation (gradient) checkpointing and where the checkpointed layer inputs live."""

    id: str
    label: str
    summary: str
    source: str


CHECKPOINTING: dict[str, CheckpointingOption] = {o.id: o for o in (
    CheckpointingOption("off", N_("Off"), N_("Every layer keeps its saved tensors until its backward."), "—"),
    CheckpointingOption("on", N_("On"), N_("Each decoder layer keeps only its input and recomputes the rest in backward."),
                        "torch.utils.checkpoint (non-reentrant); Korthikanti et al. 2205.05198 §5"),
    CheckpointingOption("offload", N_("On, inputs offloaded to CPU"),
                        N_("Checkpointing whose saved layer inputs are moved to pinned CPU memory in forward and "
                        "brought back one layer at a time in backward."),
                        "transformers 5.24 modeling_utils.py activation_checkpointing_enable(offload=True) "
                        "(save_on_cpu); Unsloth use_gradient_checkpointing='unsloth'"),
)}
