"""Losses: what the user picks (standard, chunked, fused) and what each stack's implementation of it is."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_
from .trainers import TRL_VERSION

FULL_LOGITS_IMPLS = frozenset({"hf", "torchtune_full", "litgpt", "torchtune", "unsloth_ce"})  # options.LOSS_IMPLS that build [T, V] logits


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
             f"{TRL_VERSION} trl/trainer/utils.py add_fused_lm_head; trl/kernels/chunked_logprob.py "
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
    LossImpl("cce", "fused", N_("Unsloth fused linear cross-entropy"),
             N_("Unsloth's fused loss computes the head, the loss and the input gradient in forward, a tile of 4,096 "
             "tokens × 16,384 vocabulary entries at a time (fp32, 256 MiB), and keeps only the input gradient "
             "[T, H] and per-token log-probs: no logits tensor. Larger cards at short lengths use one [512, V] fp32 "
             "chunk instead."),
             "unsloth_zoo 2026.10.9 fused_losses/fused_linear.py _ce_impl, _tiled_forward (:1286-1387, "
             ":1088-1186); unsloth/models/llama.py:2087-2137 (unsloth_fused_ce_loss)"),
    LossImpl("unsloth_ce", "standard", N_("Unsloth cross-entropy on bf16 logits"),
             N_("With UNSLOTH_RETURN_LOGITS=1 Unsloth builds the bf16 logits [T, V] with lm_head and runs its Triton "
             "cross-entropy, which keeps the logits and an fp32 logsumexp; backward writes the logits gradient into a "
             "new bf16 [T, V]: 4 B × T × V at the loss backward."),
             "unsloth 2026.10.9 unsloth/models/llama.py:2141-2178; unsloth/kernels/cross_entropy_loss.py "
             "Fast_CrossEntropyLoss (:392-527)"),
    LossImpl("mlx", "standard", N_("mlx-lm cross-entropy (full logits)"),
             N_("mlx-lm's default_loss builds the [T, V] logits in the model's dtype and calls nn.losses.cross_entropy: "
             "its backward holds four logits-sized buffers (logits, the max-shifted copy, the softmax and the "
             "gradient: 4 × c × T × V, measured on the CPU path; Metal's fused forward, see docs/formulas.md §12.3)."),
             "mlx_lm/tuner/trainer.py:88-101 default_loss; mlx/nn/losses.py:98-119 (mx.fast.cross_entropy on "
             "Metal/CUDA, unfused on the CPU); fixtures loss-V*-S* (validation/data/mlx_fixtures.json)"),
)}
