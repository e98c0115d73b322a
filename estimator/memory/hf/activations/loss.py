"""The loss: the logits, log-softmax and what each loss implementation keeps (full logits, TRL's chunked
log-probs, torchtune's chunked cross-entropy, fused kernels), per the stack's code."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ....job.stack import loss_impl_id
from ...precision import FP32, INT64
from .common import LossMemory

if TYPE_CHECKING:
    from ....job.setup import TrainingSetup
    from ....models.spec import ModelSpec
    from .common import ActivationContext


TRL_TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE (TRL 1.16.0)
TRL_VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE (TRL 1.16.0)
TORCHTUNE_CHUNKS = 8  # torchtune 0.6.1 CEWithChunkedOutputLoss(num_output_chunks=8)
LITGPT_HEAD_CHUNK = 128  # litgpt/finetune/lora.py (0.5.13): model(input_ids, lm_head_chunk_size=128)


def loss_memory(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """The loss of the setup's stack (options.LOSS_IMPLS; docs/formulas.md §4). T = tokens, V = vocabulary,
    H = hidden size, c = compute dtype bytes."""
    impl = loss_impl_id(setup)
    if impl == "litgpt":
        return _litgpt_loss(spec, setup, ctx)
    if impl == "trl":
        return _trl_loss(spec, setup, ctx)
    if impl in ("liger", "cce"):
        return _fused_linear_loss(spec, setup, ctx, impl)
    if impl == "torchtune":
        return _torchtune_chunked_loss(spec, setup, ctx)
    return _full_logits_loss(spec, setup, ctx, impl)


def _trl_loss(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """TRL's fused chunked head: gathered hidden states and per-token statistics, one logits tile in backward."""
    tokens = ctx.tokens
    vocab, hidden = spec.vocab_size, spec.hidden_size
    # TRL 1.16 fused chunked head (trl/kernels/chunked_logprob.py). Positions with a label: all but the last
    # of each sequence (labels shifted by one; the estimate assumes every token counts).
    # Image tokens carry no label (the collator masks them): TRL gathers only the labelled positions.
    scored = max(tokens - setup.batch - setup.batch * setup.image_tokens, 0)
    # Forward keeps the gathered hidden states hidden_states[mask] (c·N·H) and per-token fp32 log_z,
    # entropy and int64 targets for its backward.
    kept = ctx.resid * scored * hidden + (2 * FP32 + INT64) * scored
    # Backward: an fp32 grad_hidden [N, H] zeros, its cast back to the hidden dtype on return, one
    # [min(N, 4096), 32768] tile in the compute dtype, grad_logprobs.float() (4·N).
    tile = ctx.c * min(scored, TRL_TOKEN_TILE) * min(vocab, TRL_VOCAB_TILE)
    cast_back = ctx.resid if ctx.resid != FP32 else 0  # grad_hidden.to(hidden.dtype): no copy for fp32
    transient = (FP32 + cast_back) * scored * hidden + tile + FP32 * scored
    if ctx.base_trainable:
        # The head trains: an fp32 grad_weight [V, H] zeros, then .to(weight dtype) on return: a copy unless
        # the weight is fp32, alive next to the fp32 one at that moment (real-width trace rw-qwen3-0.6b full).
        transient += (FP32 + (ctx.resid if ctx.resid != FP32 else 0)) * vocab * hidden
    if ctx.resid == FP32 and ctx.c != FP32:
        transient += ctx.c * min(vocab, TRL_VOCAB_TILE) * hidden  # weight[start:end].to(bf16) per tile
    return LossMemory(kept, transient, "trl", "c·N·H gathered hidden states + per-token fp32 stats",
                      "fp32 grad_hidden + its cast + one 4096 × 32768 tile" + (
                          " + fp32 grad of the head" if ctx.base_trainable else ""))


def _fused_linear_loss(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, impl: str) -> LossMemory:
    """Liger's / Cut Cross-Entropy's fused linear cross-entropy: gradients in forward, one logits tile at a time."""
    tokens = ctx.tokens
    vocab, hidden = spec.vocab_size, spec.hidden_size
    # Liger FLCE (liger_kernel 0.8.5 ops/fused_linear_cross_entropy.py): the gradients are computed in
    # forward, one [chunk, V] tile at a time, chunk = next_pow2(ceil(T / ceil(V / H))); grad_input [T, H]
    # is kept until backward (and grad_weight [V, H] when the head trains: counted with the gradients).
    # The Triton CE kernel works in fp32 registers and writes the logits gradient into the tile in place.
    chunk = min(tokens, 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(vocab / hidden))))))
    tile = chunk * vocab * ctx.c  # one [chunk, V] logits tile in the compute dtype
    if ctx.resid == FP32 and ctx.c != FP32:
        # Under autocast (fp32 weights) every chunk's matmul casts the whole head to 16-bit first
        # (amp_custom_fwd keeps autocast on): one c·V·H copy at a time (real-width trace, mixed precision).
        # A trainable head is cast twice, weight.t() for the logits and weight for grad_input, and both copies
        # stay alive to the end of the loss forward (tracer: rw-llama3.1-8b full mixed fused, forward head).
        tile += (2 if ctx.base_trainable else 1) * ctx.c * vocab * hidden
    if impl == "liger" and ctx.base_trainable and ctx.c == FP32:
        # fp32 logits (fp32 training, no autocast) take the legacy fallback, grad_weight += mm(...).float():
        # a [V, H] fp32 product per chunk next to the fp32 grad_weight (ops/fused_linear_cross_entropy.py:370-375)
        tile += FP32 * vocab * hidden
    kept = ctx.resid * tokens * hidden + FP32 * tokens  # grad_input in the input's dtype + fp32 loss_1d
    return LossMemory(kept, float(tile), impl, "grad_input [T, H] from forward",
                      "one [chunk × V] logits tile")


def _torchtune_chunked_loss(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """torchtune's CEWithChunkedOutputLoss, eager or compiled: 8 output chunks of the logits."""
    tokens = ctx.tokens
    vocab = spec.vocab_size
    impl = "torchtune"
    if setup.compile:
        # torchtune compile=True compiles compute_cross_entropy (training/_compile.py compile_loss): inductor's
        # partitioner (min-cut, torch 2.13) keeps the 16-bit logits chunk and two fp32 row statistics (max,
        # logsumexp) instead of the fp32 log-softmax; the fused backward writes each chunk's 16-bit gradient.
        kept = ctx.c * tokens * vocab + 2 * FP32 * tokens
        transient = ctx.c * tokens * vocab / TORCHTUNE_CHUNKS
        return LossMemory(kept, transient, impl, "c·T·V 16-bit logits chunks (compiled cross-entropy)",
                          "one chunk's 16-bit gradient")
    # CEWithChunkedOutputLoss: each of the 8 output chunks is upcast (logits.float()) and its fp32
    # log-softmax kept for backward (4·T·V in all); the worst moment is the end of the loss forward, with
    # the 16-bit logits chunks (c·T·V) and the last chunk's fp32 copy (4·T·V / 8) still alive.
    kept = FP32 * tokens * vocab
    transient = ctx.c * tokens * vocab + FP32 * tokens * vocab / TORCHTUNE_CHUNKS
    return LossMemory(kept, transient, impl, "4 B × T × V fp32 log-softmax (8 chunks)",
                      "16-bit logits chunks + one fp32 chunk")


def _full_logits_loss(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, impl: str) -> LossMemory:
    """Full fp32 logits (transformers' ForCausalLMLoss, torchtune without output chunks), eager or compiled."""
    tokens = ctx.tokens
    vocab = spec.vocab_size
    # Full logits: HF ForCausalLMLoss (logits.float() then cross_entropy): log_softmax keeps its fp32 output
    # (4·T·V); its backward adds grad_out and grad_in (8·T·V) → 12·T·V at the peak (§4). torchtune without output
    # chunks upcasts in the model (modules/transformer.py unembed: self.output(h).float()): the same fp32 loss.
    ce = FP32
    kept = ce * tokens * vocab
    if spec.final_softcap:
        kept += ctx.c * tokens * vocab  # Gemma-2 logit soft-capping: tanh keeps its output for backward
    if ctx.qlora_upcast:
        kept += FP32 * tokens * vocab  # prepare_model_for_kbit_training: an fp32 head keeps fp32 logits (§3.3 Qp)
    if impl == "torchtune_full" and setup.compile:
        # compiled nn.CrossEntropyLoss (torchtune compile_loss compiles the whole loss): it keeps its fp32 input
        # (the model's upcast logits) and row statistics; one fused kernel writes the fp32 gradient.
        return LossMemory(float(kept), float(ce * tokens * vocab), impl, "fp32 logits (compiled cross-entropy)",
                          f"{ce} B × T × V gradient (fused backward)")
    if impl == "hf" and ctx.c != FP32 and setup.older("transformers_loss_no_logits_copy"):
        # transformers < 4.49 ForCausalLMLoss upcasts, then copies the shifted fp32 logits (loss/loss_utils.py:36-39,
        # 4.48.0: shift_logits = logits[..., :-1, :].contiguous()): at the cross-entropy call the 16-bit logits, the
        # fp32 upcast, its shifted copy and the log-softmax, 14·T·V with bf16 logits, above the backward's 12·T·V
        # (4.49.0 pads the labels instead, PR #35646). Under fp32 logits .float() makes no copy: no change.
        return LossMemory(float(kept), float((2 * ce + ctx.c) * tokens * vocab), impl,
                          f"{ce} B × T × V log-softmax",
                          f"16-bit logits + fp32 upcast + its shifted copy at the cross-entropy call ((8 + {ctx.c}) B "
                          "× T × V, transformers < 4.49)")
    return LossMemory(float(kept), float(2 * ce * tokens * vocab), impl, f"{ce} B × T × V log-softmax",
                      f"{2 * ce} B × T × V (grad out + grad in)")


def _litgpt_loss(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> LossMemory:
    """LitGPT's chunked_cross_entropy (litgpt/utils.py 0.5.13) on bf16 logits, as each finetune script calls it.

    finetune/lora.py: model(ids, lm_head_chunk_size=128) returns the logits as 128-token chunks; each chunk's
    log-softmax output (16-bit, no upcast) is kept: 2·c·T·V until backward (the end of the forward holds the same:
    the previous step's logits live until model() returns). In backward one chunk's nll grad and log-softmax grad
    are alive at a time: 2·c·B·128·V. finetune/full.py: model(ids) without head chunking, then
    chunked_cross_entropy(logits[..., :-1, :]): logits + the shifted reshape copy (or the log-softmax outputs) kept,
    and in backward the concatenated chunk gradients and slice_backward's zero-filled gradient: 3·c·T·V in all."""
    tokens, vocab, c = ctx.tokens, spec.vocab_size, ctx.c
    kept = 2.0 * c * tokens * vocab
    if setup.method == "full":
        return LossMemory(kept, float(c * tokens * vocab), "litgpt", "2·c·T·V logits + log-softmax (16-bit)",
                          "c·T·V chunk gradients")
    chunk = setup.batch * min(LITGPT_HEAD_CHUNK, setup.seq_len) * vocab
    return LossMemory(kept, float(2 * c * chunk), "litgpt", "2·c·T·V logits chunks + log-softmax (16-bit)",
                      "2·c·B·128·V one chunk's gradients")
