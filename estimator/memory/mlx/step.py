"""Peak memory of one `mlx_lm lora` training step (mlx 0.32.4, mlx-lm 0.32.2): the MLX-LM stack's own model.

MLX evaluates the whole step (forward, value_and_grad, the optimizer update) as one lazy graph compiled with
mx.compile (mlx_lm/tuner/trainer.py:245-261) and frees an array as soon as its last consumer has run. Its phases are
not PyTorch's: the graph is scheduled breadth-first from the outputs with a width limit (mlx/transforms.cpp eval_impl,
MLX_BFS_MAX_WIDTH 20), so weight gradients and optimizer updates run interleaved with the backward, not after it.
What is alive at the peak was measured, not assumed (calibration/mlx_trace.py, validation/data/mlx_fixtures.json;
docs/formulas.md §12):

* between steps only the weights and the optimizer state are resident (the allocator cache is emptied by
  `_clear_cache(0)` after every step, trainer.py:80-85, :332);
* blocks before the first trained block keep nothing (no gradient flows into them);
* each trained block keeps its saved tensors (§12.2) and its attention probabilities, B×H×L×L per block: training
  attention is unfused on Metal and the CPU (mlx/backend/metal/scaled_dot_product_attention.cpp:739-743);
* the peak is the larger of the loss backward (logits, the cross-entropy's buffers) and one block's backward, with
  those saved tensors; full fine-tuning adds the gradients and updates in flight (§12.4).

The estimate prices the backend in `setup.backend`: "metal" (a Mac: the app's default on Apple devices), "cpu" (how
the fixtures were measured) or "cuda" (MLX's CUDA backend, cuDNN attention). Every difference between them is a term
below, named where it applies. The model itself (which models it trains, the block's widths, the resident weights,
adapters and optimizer state) is memory/mlx/model.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_, Text
from ...models.spec import LM_HEAD
from ..host import host_ram
from ..overhead import CUDA_CONTEXT_BYTES, RuntimeContext
from ..parts import StepParts
from ..precision import FP32
from ..result import Phase
from ..result import detail as d
from .model import (
    Dims,
    Resident,
    adapted_roles,
    base_quant,
    dims,
    float_bytes,
    fused_mlp,
    positions,
    quant_label,
    resident,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..result import DetailItem


# --- measured coefficients (calibration/mlx_fit.py re-derives each from validation/data/mlx_fixtures.json) ------
# Cross-entropy: the loss backward holds 4 copies of the [T, V] logits in their dtype (the logits, the max-shifted
# copy, softmax/exp and the logits' gradient; mlx/nn/losses.py:110-119 unfused path). Fixtures loss-V*-S*: exactly
# 16.0 B per logit in fp32 and 8.3 B in bf16 over V = 16k-64k.
LOSS_LOGIT_COPIES = 4
# The rest of the loss-backward moment, per token (adapter-dtype bytes for LoRA, model dtype for full): the final
# norm, the head's input and its gradient, and the last trained block's cotangents. Least squares over the fixtures
# whose peak is the loss backward, relative to their peak − resident; calibration probes only (calibration/mlx_fit.py).
LOSS_REST_H = 11.9  # × h
LOSS_REST_I = 5.1  # × intermediate size
# One block's backward (the peak when the vocabulary is small): its cotangents and temporaries, per token, plus the
# attention backward's score-sized buffers. Least squares over the fixtures whose peak is a block's backward.
BLOCK_REST_H = 12.0  # × h
BLOCK_REST_I = 5.35  # × intermediate size
BLOCK_REST_Q = 8.25  # × query width (heads × head_dim)
BLOCK_REST_PROBS = 1.94  # × one block's B·H·L² probabilities (softmax's and the matmul's gradients)
# With exactly two trained blocks the breadth-first schedule (width 20) overlaps less of a block's backward: its
# rest is 0.64-0.93 of the one- and four-block value (w-*-n2 vs w-*-n1/-n4; n = 1 and 4 agree), lower the larger
# the probabilities' share. Least squares over the two-block probes (w-*-n2), relative:
BLOCK_REST_TWO_BLOCKS = 0.87  # × the per-token part
BLOCK_REST_TWO_BLOCKS_PROBS = 0.43  # × the probabilities' part
# On a 16-bit base with fp32 adapters the rest terms are part fp32 (adapter-side) and part the model dtype: 0.68 of
# them fp32 (bf16-h512-n1/n4: 0.63, llama_a-lora-...-bfloat16: 0.74).
LORA_REST_FP32_SHARE = 0.68
# Full fine-tuning: weight gradients and updates in flight during the backward, in a block's trainable bytes.
# At the loss backward ~2.0 of them whatever the number of trained blocks (full − LoRA twins: llama_a, qwen2_gqa,
# gemma_mqa, llama_vocab, llama32_1b 1.9-2.5; calibration/mlx_fit.py); at a block's backward (small vocabularies)
# ~0.92 per trained block, at most two (full-h512-n1: 0.68, -n4: 1.17).
FULL_GRAD_LOSS = 2.0
FULL_GRAD_BLOCK = 0.92
# The update itself (fixtures upd-*: T = 32, activations negligible): per parameter the gradient and the optimizer's
# new arrays for about two blocks at once (Adam: g, m', v', θ' = 4.2 × a block's trainable bytes), then 0.07 of
# that per further block (upd-h256-n4..n16: MLX frees most updates as the graph goes on).
UPDATE_BLOCKS = 2
UPDATE_PER_EXTRA_BLOCK = 0.07
# Arrays an optimizer update holds per block's trainable bytes (fixtures upd-h256-n2, upd-h256-n8-sgd,
# wide-full-T32-adafactor and -muon).
UPDATE_ARRAYS = {"adam": 4.2, "adamw": 4.2, "muon": 3.7, "sgd": 1.4, "adafactor": 2.4}  # sgd: n2 1.14, n8 1.71
# A quantised base: quantized_matmul changes the schedule; at the loss backward its peak keeps more of the trained
# blocks' probabilities (q4lora vs lora twins: 0.5-0.75 of each trained block's B·H·L² at L = 128-512;
# calibration/mlx_fit.py). Full fine-tuning's dense weight gradients do the same: full − LoRA twins without
# checkpointing keep 0.68 (L = 512) and 0.59 (L = 1,024) of the trained blocks' B·H·L² more beyond the weight
# gradients (validation/data/mlx_fixtures_long.json: llama_a, qwen2_gqa; gemma_mqa 1.0), which is why the full steps
# at 1,024 tokens were priced 10-18 % low without the term.
QUANT_EXTRA_PROBS = 0.6
# DoRA: each adapted linear keeps its pre-scale output (T × out, model dtype) for the magnitude's gradient
# (mlx_lm/tuner/dora.py:123: (m / denom) * out), and builds its adapted weight w + scale·Bᵀ·Aᵀ in fp32 for the norm
# (:120); the largest of those is in flight at the peak, 0.6 of it measured (llama32_1b-dora, where the weight
# term is visible; the tiny llama_a/qwen2_gqa-dora twins are within 3 % of pa with it).
DORA_ADAPTED_COPIES = 0.6
# A fused gate_up projection (Phi-3: one 2I-wide linear split into gate and up, mlx_lm/models/phi3.py) keeps
# more: 1.04 × I per token per trained block and 1.75 × I per token in the backward's rest (phi3-h512-n1/-n4 against
# their Llama twins w-h512-I1408-H8-S512-n1/-n4; calibration/mlx_fit.py).
FUSED_MLP_SAVED = 1.04
FUSED_MLP_REST = 1.75
# The measured error of this model against the validation fixtures (validation/mlx.py; worst +4.9 %, −3.7 %): the
# band's low/high edges.
MLX_ERROR_LOW = 0.05
MLX_ERROR_HIGH = 0.05


def _saved_per_token(spec: ModelSpec, setup: TrainingSetup, dm: Dims, roles: frozenset[str], b: int) -> float:
    """What one trained block keeps per token (fixtures w-*, gqa-*, qdim1024-*, bf16-*: n = 4 vs n = 1 blocks,
    calibration/mlx_fit.py): in the model dtype b the block input, the residual after attention, the scaled query,
    one more query-sized copy, the keys and values, and the MLP's gate, sigmoid, SiLU and up; each linear's input
    kept for a weight or adapter gradient (the normed input for q/k/v, the attention output for o, the normed
    residual for gate/up, the product for down) in the adapter dtype (fp32: x is promoted by `x @ lora_a`,
    tuner/lora.py:96) or, for full fine-tuning, in b; and x @ lora_a (r, fp32) per adapter."""
    h, q, kv, inter = dm.h, dm.q, dm.kv, dm.inter
    full = setup.method == "full"
    ab = b if full else FP32

    def kept(role_group: tuple[str, ...], width: int) -> float:
        if full or roles & set(role_group):
            return width * ab
        return 0.0

    base = b * (2 * h + 2 * q + 2 * kv + 4 * inter)  # x, residual, q·scale, q copy, k, v, gate, σ, SiLU, up
    if fused_mlp(spec):
        base += ab * FUSED_MLP_SAVED * inter  # the 2I output the gate and up views keep alive (phi3 probes)
    if spec.qk_norm:
        base += b * (q + kv)  # q_norm/k_norm inputs (RMSNorm per head: its vjp reads its input)
    if spec.norms_per_layer >= 4:
        base += b * 2 * h  # Gemma 2/3 post-attention and post-MLP norms read the sublayer outputs
    inputs = kept(("attn_in",), h) + kept(("attn_out",), q) + kept(("mlp_in",), h) + kept(("mlp_out",), inter)
    r_terms = sum(FP32 * setup.lora_rank * m.count for m in spec.linears if m.role in roles)
    return base + inputs + r_terms



def _probs_per_block(spec: ModelSpec, setup: TrainingSetup, dm: Dims, b: int) -> float:
    """The B×H×L×L attention probabilities one block keeps for the backward (softmax's vjp reads its output): MLX's
    training attention is unfused on Metal (scaled_dot_product_attention.cpp:739-743, 'faster for training on Metal
    to use the unfused SDPA') and on the CPU (no_gpu/primitives.cpp), so fast.cpp's fallback builds scores and
    probabilities. On CUDA, cuDNN's fused attention with a fused VJP keeps none (cuda/scaled_dot_product_attention.cpp:
    has_fused_kernel needs fp16/bf16 and head_dim ≤ 128 with head_dim % 8 == 0; the VJP falls back when L % 128 ≠ 0:
    then the scores are rebuilt one block at a time in backward, counted with BLOCK_REST_PROBS). Gemma 2's
    soft-capped attention is written out in mlx_lm/models/gemma2.py:92-103 and keeps tanh's output too."""
    L = positions(setup)
    if _fused_forward(spec, setup):
        return 0.0  # a fused forward keeps q, k, v, the output (cuDNN: and a logsumexp per row): no probabilities
    copies = 2 if spec.attn_softcap else 1
    return float(copies * setup.batch * dm.heads * L * L * b)


def _cudnn_attention(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """MLX-CUDA's forward attention is cuDNN's for 16-bit models whose head_dim is a multiple of 8 up to 128
    (supports_sdpa_cudnn, Ampere or newer): no probabilities are saved (Gemma 2 writes its soft-capped attention
    out, so it never reaches SDPA)."""
    return (setup.precision in ("bf16", "fp16") and spec.head_dim % 8 == 0 and spec.head_dim <= 128
            and not spec.attn_softcap)


def _cudnn_vjp(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """…and its VJP too when the length is a multiple of 128 (ScaledDotProductAttentionVJP::use_fallback); otherwise
    the VJP differentiates the unfused fallback, rebuilding one block's scores and probabilities in its backward."""
    return _cudnn_attention(spec, setup) and positions(setup) % 128 == 0


# mlx 0.24.x ran masked attention through the fused Metal kernel in training too (version forks mlx_sdpa_fused_masked,
# mlx_no_sdpa_in_grad): mlx/fast.cpp (0.24.0) supports_sdpa_full, :724-733 for a query length ≥ the threshold of
# :659 and these head dims, on the GPU
METAL_SDPA_HEAD_DIMS = frozenset({64, 80, 128})
METAL_SDPA_MIN_LENGTH = 32


def _fused_forward(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """Does training attention run a fused kernel forward, keeping no probabilities? On CUDA, cuDNN's
    (_cudnn_attention) from mlx 0.30 (fork mlx_cuda_cudnn_attention: commits 3b2ffcefc, 6f35017d1; before, the CUDA
    backend trained through the unfused fallback); on Metal only on mlx 0.24.x (fork mlx_sdpa_fused_masked: 0.24.0 took
    causal masks, fast.cpp:724-733; fork mlx_no_sdpa_in_grad: 0.25.0 stopped under a gradient, fast.cpp:773), whose
    VJP differentiates the fallback one block at a time (Custom::vjp, fast.cpp:15-28, 0.24.2). Gemma 2 writes its
    soft-capped attention out (never SDPA)."""
    if setup.backend == "cuda":
        return _cudnn_attention(spec, setup) and not setup.older("mlx_cuda_cudnn_attention")
    return (setup.backend == "metal" and setup.older("mlx_no_sdpa_in_grad")
            and not setup.older("mlx_sdpa_fused_masked") and spec.head_dim in METAL_SDPA_HEAD_DIMS
            and positions(setup) >= METAL_SDPA_MIN_LENGTH and not spec.attn_softcap)


def _fused_vjp(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """…and a fused VJP (cuDNN's, _cudnn_vjp; Metal's fused kernel has none)."""
    return setup.backend == "cuda" and _fused_forward(spec, setup) and _cudnn_vjp(spec, setup)



class _Shape(NamedTuple):
    """One step's sizes, as every stage below reads them."""

    dm: Dims
    roles: frozenset[str]  # the roles of the adapted linears
    b: int  # the model's float bytes
    rb: float  # the rest terms' bytes: the model dtype for full fine-tuning (full bf16 halves), mostly fp32 for LoRA
    L: int  # positions
    n: int  # trained blocks
    T: int  # tokens
    full: bool
    quant: tuple[str, int, int] | None


def _shape(spec: ModelSpec, setup: TrainingSetup) -> _Shape:
    dm = dims(spec, setup)
    b = float_bytes(setup)
    L, full = positions(setup), setup.method == "full"
    return _Shape(dm, adapted_roles(spec, setup), b, b if full else b + LORA_REST_FP32_SHARE * (FP32 - b), L,
                  dm.trained, setup.batch * L, full, base_quant(spec, setup))


class _Acts(NamedTuple):
    """The activation terms of the step's moments, bytes (docs/formulas.md §12.2, §12.3)."""

    saved_tok: float  # one trained block's saved tensors per token
    probs: float  # one trained block's kept B·H·L² probabilities
    kept_blocks: float  # what the trained blocks keep (with checkpointing: their inputs)
    recomputed: float  # the block being recomputed (checkpointing)
    ckpt_formula: str
    q_extra: float  # a quantised base's schedule: more probabilities held at the loss backward
    dora: float
    loss: float  # the logits' copies
    loss_rest: float
    block_rest: float


def _kept(spec: ModelSpec, setup: TrainingSetup, s: _Shape) -> tuple[float, float, float, float, str]:
    """What the trained blocks keep for the backward: (saved per token, one block's probabilities, the blocks' kept
    bytes, the recomputed block's, the formula)."""
    saved_tok = _saved_per_token(spec, setup, s.dm, s.roles, s.b)
    probs = _probs_per_block(spec, setup, s.dm, s.b)
    if setup.grad_ckpt:
        # mx.checkpoint per block (trainer.py:27-40): only the block input survives the forward; the block being
        # differentiated is recomputed, so one block's saved tensors exist at a time. The last block's recompute is
        # already there at the loss backward (fixtures *-gc: loss + inputs + one block's saved tensors).
        return (saved_tok, probs, s.n * s.T * h_bytes(s.dm, s.b), s.T * saved_tok + probs,
                "trained blocks × T × h (block inputs)")
    return (saved_tok, probs, s.n * (s.T * saved_tok + probs), 0.0,
            "trained blocks × (T × saved per token + B·H·L² probabilities)")


def _extras(spec: ModelSpec, setup: TrainingSetup, s: _Shape, probs: float) -> tuple[float, float]:
    """A quantised base's (or full fine-tuning's) extra probabilities at the loss backward and DoRA's outputs and
    adapted weights."""
    # at the loss backward only (a block's backward with a quantised base measured as without: llama_wide q4lora);
    # full fine-tuning's dense weight gradients change the schedule the same way (full − LoRA twins at L = 512-1024)
    q_extra = QUANT_EXTRA_PROBS * s.n * probs if (s.quant is not None or s.full) and not setup.grad_ckpt else 0.0
    dora = 0.0
    if setup.dora:
        outs = sum(m.out_features * m.count for m in spec.linears if m.role in s.roles)
        largest = max((m.in_features * m.out_features for m in spec.linears if m.role in s.roles), default=0)
        dora = s.n * s.T * outs * s.b + DORA_ADAPTED_COPIES * FP32 * largest
        if s.quant is not None:  # one dequantised weight in flight (tuner/dora.py:113-114; llama_a-q4dora − q4lora:
            dora += s.b * largest  # 25 MB = the outputs' 22 + one weight, not all 12.9 MB of them)
    return q_extra, dora


def _rests(spec: ModelSpec, setup: TrainingSetup, s: _Shape) -> tuple[float, float, float]:
    """(the loss's logit copies, the rest of the loss backward, one block's backward buffers)."""
    T, dm = s.T, s.dm
    one_probs = float(setup.batch * dm.heads * s.L * s.L * s.b)  # one block's probabilities (its backward's buffers)
    logits = float(T * spec.vocab_size * s.b)
    loss = LOSS_LOGIT_COPIES * logits
    fused = FUSED_MLP_REST * dm.inter if fused_mlp(spec) else 0.0
    loss_rest = T * s.rb * (LOSS_REST_H * dm.h + LOSS_REST_I * dm.inter + fused)
    token_rest = T * s.rb * (BLOCK_REST_H * dm.h + BLOCK_REST_I * dm.inter + BLOCK_REST_Q * dm.q + fused)
    probs_rest = BLOCK_REST_PROBS * one_probs
    if _fused_vjp(spec, setup):
        probs_rest = 0.0  # cuDNN's VJP computes the score gradients tile by tile
    elif _fused_forward(spec, setup):
        probs_rest += one_probs  # the fallback VJP rebuilds this block's probabilities (fast.cpp Custom::vjp)
    if s.n == 2 and not s.full and not setup.grad_ckpt:  # measured on LoRA without checkpointing
        token_rest *= BLOCK_REST_TWO_BLOCKS
        probs_rest *= BLOCK_REST_TWO_BLOCKS_PROBS
    return loss, loss_rest, token_rest + probs_rest


def _activations(spec: ModelSpec, setup: TrainingSetup, s: _Shape) -> _Acts:
    saved_tok, probs, kept_blocks, recomputed, ckpt_formula = _kept(spec, setup, s)
    return _Acts(saved_tok, probs, kept_blocks, recomputed, ckpt_formula, *_extras(spec, setup, s, probs),
                 *_rests(spec, setup, s))


def _in_flight(setup: TrainingSetup, s: _Shape, res: Resident) -> tuple[float, float, float, float]:
    """Full fine-tuning's gradients and updates in flight: (at the loss backward, at a block's backward, the
    update's arrays per block's trainable bytes, the update's bytes); none for LoRA."""
    n, full = s.n, s.full
    # with checkpointing the recompute comes first and no gradient is in flight yet at the loss backward (fixtures
    # llama_a/qwen2_gqa full-gc peak with their LoRA-gc twins)
    g_loss = FULL_GRAD_LOSS * res.block_trainable_bytes if full and not setup.grad_ckpt else 0.0
    g_block = FULL_GRAD_BLOCK * res.block_trainable_bytes * min(n, 2) if full else 0.0
    upd_arrays = UPDATE_ARRAYS.get(setup.optimizer, 4.2)
    update = (upd_arrays * res.block_trainable_bytes * (min(n, UPDATE_BLOCKS) + UPDATE_PER_EXTRA_BLOCK *
                                                           max(n - UPDATE_BLOCKS, 0))) if full else 0.0
    return g_loss, g_block, upd_arrays, update


def _items(spec: ModelSpec, setup: TrainingSetup, s: _Shape, a: _Acts
           ) -> tuple[list[DetailItem], list[DetailItem], list[DetailItem], list[DetailItem]]:
    """The activation items: (the trained blocks', the extras, the loss's, a block's backward's)."""
    n, T, b, rb = s.n, s.T, s.b, s.rb
    if setup.grad_ckpt:
        acts_common = [d("activations.checkpoints", N_("Checkpointed block inputs"), a.kept_blocks, a.ckpt_formula)]
    else:
        acts_common = [
            d("activations.layers", N_("Trained blocks' saved tensors"), n * T * a.saved_tok,
              "trained blocks × T × saved per token (§12.2)"),
            d("activations.attention_scores", N_("Attention probabilities (B·H·L² per trained block, unfused)"),
              n * a.probs, f"{n} × B × H × L² × {b} B" + (" × 2 (soft-capping)" if spec.attn_softcap else "")),
        ]
    extras = []
    if a.q_extra:
        label = (N_("Quantised base: more probabilities held") if s.quant is not None
                 else N_("Full fine-tuning: more probabilities held"))
        extras.append(d("activations.quantized_schedule", label, a.q_extra,
                        f"{QUANT_EXTRA_PROBS} × trained blocks × B·H·L² (fixtures q4lora and full vs lora)"))
    if a.dora:
        extras.append(d("activations.dora_weights", N_("DoRA outputs and adapted weights"), a.dora,
                        f"blocks × T × Σ out × {b} B + {DORA_ADAPTED_COPIES} × 4 B × the largest adapted weight "
                        "(tuner/dora.py:120-123)"
                        + (" + dequantised weights" if s.quant is not None else "")))
    loss_items = [
        d("activations.loss", N_("Logits and cross-entropy buffers"), a.loss,
          f"{LOSS_LOGIT_COPIES} × T × V × {b} B ({'unfused, measured' if setup.backend == 'cpu' else 'see docs/formulas.md §12.3'})"),
        d("activations.loss_backward", N_("Head and last block's backward buffers"), a.loss_rest,
          f"T × {rb} B × ({LOSS_REST_H}·h + {LOSS_REST_I}·I)"),
    ]
    block_items = [
        d("activations.recomputed_layer", N_("Recomputed block"), a.recomputed, "T × saved per token + B·H·L²"),
        d("activations.backward_temporaries", N_("One block's backward buffers"), a.block_rest,
          f"T × {rb} B × ({BLOCK_REST_H}·h + {BLOCK_REST_I}·I) + {BLOCK_REST_PROBS} × B·H·L² × {b} B"),
    ]
    return acts_common, extras, loss_items, block_items


def _phases(spec: ModelSpec, setup: TrainingSetup, s: _Shape, res: Resident, a: _Acts) -> list[Phase]:
    """The loss backward, one block's backward and (full fine-tuning) the optimizer update (§12.3, §12.4)."""
    g_loss, g_block, upd_arrays, update = _in_flight(setup, s, res)
    acts_common, extras, loss_items, block_items = _items(spec, setup, s, a)

    def phase(key: str, name: str, grads: float, acts: list[DetailItem], grad_label: str, temp: float = 0.0) -> Phase:
        items = list(res.items)
        items.append(d("gradients.in_flight", grad_label, grads, "blocks' trainable bytes × measured factor"))
        if temp:
            items.append(d("optimizer.update_arrays", N_("Optimizer update's new arrays"), temp,
                           f"{upd_arrays} × a block's trainable bytes × ({UPDATE_BLOCKS} + {UPDATE_PER_EXTRA_BLOCK} "
                           f"per further block)"))
        items.extend(acts)
        return Phase(key, name, res.weights, grads + res.grad_accum, res.opt + temp,
                     sum(x.bytes for x in acts), tuple(items))

    recompute_at_loss = [block_items[0]] if setup.grad_ckpt else []
    block_extras = [x for x in extras if x.key != "activations.quantized_schedule"]
    phases = [
        phase("loss_backward", N_("loss backward"), g_loss, [*acts_common, *recompute_at_loss, *extras, *loss_items],
              N_("Gradients in flight")),
        phase("backward.block", N_("backward, one block"), g_block, [*acts_common, *block_extras, *block_items],
              N_("Gradients in flight")),
    ]
    if s.full:
        phases.append(phase("optimizer_step", N_("optimizer update"), 0.0, [], N_("Gradients in flight"), update))
    return phases


def mlx_parts(spec: ModelSpec, setup: TrainingSetup) -> StepParts:
    """The parts of one steady-state mlx-lm training step (docs/formulas.md §12): the resident part
    (memory/mlx/model.py), what the trained blocks keep and the backward's buffers, the moments priced. The
    runtime (memory/mlx/runtime.py) has checked the job."""
    s = _shape(spec, setup)
    res = resident(spec, setup, s.dm, s.roles)
    return _finish(spec, setup, res, _phases(spec, setup, s, res, _activations(spec, setup, s)))


def h_bytes(dm: Dims, b: int) -> float:
    """One block input per token (what mx.checkpoint keeps)."""
    return float(dm.h * b)


def _finish(spec: ModelSpec, setup: TrainingSetup, res: Resident, phases: list[Phase]) -> StepParts:
    """The parts with the runtime's context (CUDA's on MLX-CUDA; Metal and the CPU have none to count: MLX's peak is
    its allocator's active bytes, mx.get_peak_memory, so no allocator slack), the band and the notes."""
    ctx = CUDA_CONTEXT_BYTES if setup.backend == "cuda" else 0.0
    context = RuntimeContext(ctx, ctx, ctx, 0, "CUDA context (MLX-CUDA)" if ctx else "none: Metal/CPU")
    notes = list(spec.notes)
    if setup.backend == "cuda" and _fused_forward(spec, setup):
        notes.append(N_("MLX-CUDA trains attention with cuDNN's fused kernels here: no L² probabilities are kept."))
    elif _fused_forward(spec, setup):
        notes.append(N_("mlx 0.24 trains attention through its fused Metal kernel here: no L² probabilities are kept "
                        "in the forward; its backward rebuilds one block's at a time."))
    else:
        notes.append(N_("MLX trains attention unfused: each trained block keeps B × heads × L² attention "
                        "probabilities (checkpointing recomputes them one block at a time)."))
    if setup.backend == "cuda":
        notes.append(N_("MLX's CUDA backend is modelled from its source, not measured: the MLX fixtures are CPU runs."))
    if setup.method != "full" and LM_HEAD in setup.lora_targets:
        notes.append(Text(N_("mlx-lm adds adapters inside the trained blocks only: the '{head}' target gets none."),
                          head=LM_HEAD))
    if spec.quantization:
        notes.append(Text(N_("The checkpoint is already quantised ({quant}): LoRA trains on that base."),
                          quant=quant_label(*spec.quantization)))
    if setup.lora_layers and setup.lora_layers < spec.num_layers:
        notes.append(Text(N_("Only the last {n} of {layers} blocks train; the blocks before them keep no activations."),
                          n=setup.lora_layers, layers=spec.num_layers))
    elif setup.lora_layers > spec.num_layers:  # the stack's default (16) on a shallower model
        notes.append(Text(N_("mlx-lm's default of {n} trained blocks is more than {model}'s {layers}; mlx_lm lora "
                             "refuses that (lora.py:234-238), so pass --num-layers {layers} (or -1): priced with all "
                             "{layers} blocks."), n=setup.lora_layers, model=spec.name, layers=spec.num_layers))
    return StepParts(
        model=spec, setup=setup, phases=tuple(phases), context=context, allocator=None,
        params_total=spec.params_total - spec.params_tower, params_trainable=res.trainable_params,
        error=(MLX_ERROR_LOW, MLX_ERROR_HIGH), notes=tuple(notes),
        # the host's side (memory/host.py): the mlx-lm process and mlx_lm.load's one-tensor-at-a-time read; on a
        # Mac it adds up with the arrays above in one pool (host_verdict)
        host=host_ram(spec, setup, trainable=res.trainable_params, weights_bytes=res.weights,
                      optimizer_cpu_bytes=0.0, checkpoint_cpu_bytes=0.0),
        weights_full_bytes=res.weights,
    )
