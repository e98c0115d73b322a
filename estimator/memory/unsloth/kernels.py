"""Unsloth's own model code (unsloth / unsloth_zoo 2026.10.9): what its fused LoRA kernels, its attention dispatch,
its offloaded checkpointing and its fused loss keep on the GPU, per token or per step (docs/formulas.md §3.8).

Every term cites the wheel's file and line (paths inside the unsloth / unsloth_zoo wheels, version 2026.10.9). The
byte counts were checked against traces of Unsloth's own autograd functions (calibration/unsloth_trace.py,
validation/data/unsloth_traces.json). Notation: c = 2 (bf16 activations), h hidden, i intermediate, q = heads × head
dim, kv = KV heads × head dim, nh heads, r LoRA rank, V vocabulary, T tokens of the micro-batch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..hf.activations.common import LayerActivations
from ..precision import FP32, INT64

if TYPE_CHECKING:
    from ...models.spec import ModelSpec

C = 2  # bf16 activations and dequantised weights (bnb_4bit_compute_dtype = bf16 on sm ≥ 80, llama.py:4015-4021)
INT32 = 4
GiB = 1 << 30

# unsloth_zoo/gradient_checkpointing.py
MINIMUM_SIZE = 2 * 1024 * 1024  # :1326 — a layer input of ≤ 2 MiB is not offloaded (:1408)
INITIAL_GPU_BUFFER = 2 * 256 * 2048 * C  # :65 — a staging buffer before its first resize (bf16)
INITIAL_CPU_BUFFERS = 200  # :66 — pinned host slots made when checkpointing is patched (:1296-1298)
INITIAL_CPU_BUFFER = 128 * 1024 * C  # :64 — bytes of one initial slot (bf16)
DOUBLE_BUFFER_HEADROOM = 512 * 1024 * 1024  # :67 — a second staging buffer when more than this is free (:1443)
PLAIN_CKPT_BELOW = 512  # unsloth/models/_utils.py:506 — max_seq_length < 512: plain checkpointing, no offload

# unsloth_zoo/fused_losses/fused_linear.py
CHUNK_GB = 2.0  # :69 — the loss budget: min(2 GiB, half the free memory at the first call) (:118-127)
SPLIT_COLS = 16384  # :75 — vocabulary columns per split of the tiled pass
MAX_ROWS = 4096  # :73 _MAX_ROWS and :79 _BWD_ROWS (rows per chunk or tile)
TILE_BYTES = 256 * 1024 * 1024  # :80 _BWD_TILE_BYTES — the tiled pass's logits budget
MIN_LOGITS = 512 * 151936  # :71 — a chunk holds at least this many logits (a power of two of rows, ≥ 512)
SMALL_CARD = 24.5 * GiB  # :87 — cards up to this take the tiled pass at any length (_flash_min_rows = 0, :98-105)
FLASH_MIN_ROWS_LARGE = 4096  # :98-105 — larger cards take it from 4,096 labelled rows on

# unsloth_zoo/block_swap.py: the reserve that offload_embedding="auto" compares with the free memory
# (unsloth/models/_utils.py:10268-10289, run by get_peft_model, llama.py:5125)
RESERVE_PER_TOKEN_HIDDEN = 48  # :570 _ACTIVATION_BYTES_PER_TOKEN_HIDDEN ("measured 42 on Llama-3.1-8B, rounded up")
RESERVE_LOGIT_ROWS = 2048  # :573 logit_rows
RESERVE_SAFETY = 256 << 20  # :573 safety_bytes
RESERVE_FRAGMENTATION = 1 / 16  # :573 fragmentation
RESERVE_PER_TRAINABLE = 12  # unsloth/models/_utils.py:10040-10046: + element size per trainable parameter

# unsloth/models/llama.py RoPE cache (LlamaRotaryEmbedding)
ROPE_START = 4 * 8192  # :2609 current_rope_size = min(4 * 8192, max_position_embeddings)
ROPE_STEP = 8192  # :2398-2399 _round_rope_size

ATTENTION_BACKENDS = ("sdpa", "xformers", "flash")
RELEASE = "2026.10.9"  # the release the estimate models by default
# The release Unsloth's published context-length tables measured (Llama 3.3 blog, 2024-12-10): unsloth 2024.12.4,
# unsloth_zoo 2024.12.1, cut_cross_entropy 24.12.1, transformers 4.46-4.47 (options.versions.UNSLOTH_PUBLISHED and
# COMPANIONS). A run installed at it (TrainingSetup.versions) takes the 2024 pieces of UnslothPath below, each from
# its version fork (estimator/memory/unsloth/model.py unsloth_path); validation/unsloth.py checks the tables so.
RELEASE_2024 = "2024.12.4"


@dataclass(frozen=True)
class UnslothPath:
    """The code path Unsloth takes for one setup (resolved in estimator/memory/unsloth/model.py): which fused kernels
    run, the attention backend, how the layer inputs are checkpointed and which loss pass runs."""

    fused_qkv: bool  # LoRA_QKV: q, k and v all adapted, no base bias (llama.py:5376-5390)
    fused_o: bool  # LoRA_W on o_proj (llama.py:5398-5410)
    fused_mlp: bool  # LoRA_MLP: gate, up and down adapted, no base bias (llama.py:5347-5374)
    adapted: frozenset[str]  # the LoRA targets (PEFT's modules run a group that is not fused)
    rank: int
    four_bit: bool  # NF4 base (load_in_4bit=True, the default, loader.py:1245): dequantisation buffers
    attention: str  # "sdpa" (packed rows, torch's flash kernel), "xformers" (K/V expanded) or "flash" (flash-attn)
    padding_free: bool  # position_ids passed (Unsloth's padding-free SFT batches, unsloth/utils/padding_choice.py)
    checkpointing: str  # "offload" (use_gradient_checkpointing="unsloth"), "plain" (True) or "none" (False)
    offloaded: bool  # "offload" and each layer input is above MINIMUM_SIZE: the inputs live in host RAM
    double_buffer: bool  # the second staging buffer (after step 1, when more than 512 MiB is free)
    embedding_on_gpu: bool  # False when offload_embedding="auto" moved the frozen input embedding to host RAM
    loss_pass: str  # "tiled" (flash-style, no [rows, V] buffer) or "chunked" (one [rows, V] fp32 buffer)
    loss_budget: float  # bytes: min(2 GiB, half the free memory at the first loss call)
    # The older releases' pieces (docs/versions.md "Unsloth"; each True on the old side of its version fork):
    fresh_dequant: bool = False  # unsloth < 2025.2.2: a fresh dequantised weight per forward matmul, no scratch
    lora_out_of_place: bool = False  # unsloth < 2025.3.1: matmul_lora adds the LoRA term out of place
    cut_cross_entropy: bool = False  # unsloth < 2025.8.5: Apple's Cut Cross-Entropy instead of the fused loss
    layer_rope_caches: bool = False  # transformers < 4.48: Unsloth's RoPE cache per attention layer
    # the 2024.12 release line's install and allocator settings (options.versions.UNSLOTH_PUBLISHED): ALLOCATOR_2024
    published_2024: bool = False


# ---------------------------------------------------------------------------------------------------------------
# One decoder layer
# ---------------------------------------------------------------------------------------------------------------
def layer_saved(spec: ModelSpec, p: UnslothPath) -> LayerActivations:
    """What one decoder layer (LlamaDecoderLayer_fast_forward, llama.py:1211-1236) saves for its backward, bytes per
    token, its input excluded (the staging buffer, a kept input or the previous layer's output: the caller counts
    it)."""
    norms, attention, o_input, mlp = layer_tensors(spec, p)
    return LayerActivations(norms=float(sum(norms)), attention=float(sum(attention) + sum(o_input)),
                            mlp=float(sum(mlp)))


def layer_tensors(spec: ModelSpec, p: UnslothPath) -> tuple[tuple[int, ...], ...]:
    """layer_saved's tensors one by one, bytes per token (each is one request to the caching allocator): (norms,
    q/k/v and attention, o_proj's input, MLP)."""
    h, i, q = spec.hidden_size, spec.intermediate_size, spec.q_dim
    # Fast_RMS_Layernorm saves its input X and the fp32 1/rms r (rms_layernorm.py:981, r made at :711): the input
    # norm's X is the layer input; the post-attention norm's X is the residual sum h1 (llama.py:1228); each norm makes
    # a new output Y (:710) that the next kernel saves.
    norms = (FP32, FP32, C * h)
    attention = _qkv_saved(spec, p) + _attention_saved(spec, p)
    # LoRA_W saves its input X (fast_lora.py:1073): the packed-SDPA concat (a new tensor, attention_dispatch.py:995);
    # xformers' and flash-attn's outputs are viewed (llama.py:1156), so X shares their saved output.
    o_input: tuple[int, ...] = ()
    if p.fused_o:
        o_input = (C * q,) if p.attention == "sdpa" else ()
    elif "o_proj" in p.adapted:
        o_input = _peft_lora(p, q)  # PEFT o_proj: its own bf16 copy of x (the concat/view is freed)
    if p.fused_mlp:
        mlp: tuple[int, ...] = (C * h, C * i, C * i)  # LoRA_MLP saves X, e = gate(X), g = up(X) (fast_lora.py:448)
    else:
        # transformers LlamaMLP on PEFT modules: SiLU keeps e, the product keeps silu(e) and g (3 × c·i); every
        # adapted module keeps its own bf16 copy of its input and lora_A's output
        mlp = (C * i,) * 3
        for n in ("gate_proj", "up_proj"):
            mlp += _peft_lora(p, h) if n in p.adapted else ()
        mlp += _peft_lora(p, i) if "down_proj" in p.adapted else ()
    return norms, attention, o_input, mlp


def _peft_lora(p: UnslothPath, width: int) -> tuple[int, int]:
    """A PEFT LoRA module outside the fused kernels (peft 0.21 tuners/lora/layer.py Linear.forward, under the
    Trainer's bf16 autocast): x is cast to the fp32 adapter dtype and autocast casts it back, so lora_A keeps a bf16
    copy of x (c·in) and lora_B keeps lora_A's output (c·r); the frozen base keeps nothing of x (NF4:
    bitsandbytes 0.45+ MatMul4Bit keeps only the weight; bf16: no weight gradient, nothing saved)."""
    return (C * width, C * p.rank)


def _qkv_saved(spec: ModelSpec, p: UnslothPath) -> tuple[int, ...]:
    """The q/k/v projections: LoRA_QKV keeps only X (fast_lora.py:845-854); PEFT modules keep their copies."""
    if p.fused_qkv:
        return (C * spec.hidden_size,)  # X = the input norm's output
    out: tuple[int, ...] = ()
    for n in ("q_proj", "k_proj", "v_proj"):
        out += _peft_lora(p, spec.hidden_size) if n in p.adapted else ()
    return out


def _attention_saved(spec: ModelSpec, p: UnslothPath) -> tuple[int, ...]:
    """RoPE and the attention kernel. With position_ids (padding-free rows) Fast_RoPE_Embedding_QK writes new Q, K
    buffers (rope_embedding.py:431-432), else it rotates in place (:360-361): either way the rotated Q and K and V
    (c·(q + 2·kv)) are what the kernel keeps; no RoPE tensor is saved (ctx.cos/sin are the shared cache)."""
    q, kv, nh = spec.q_dim, spec.kv_dim, spec.num_heads
    lse = FP32 * nh  # every backend keeps an fp32 logsumexp per head and token
    if p.attention == "xformers":
        # attention_dispatch.py:1474-1481: under grad K and V are expanded and materialised to q width; xformers'
        # memory-efficient attention keeps q, k, v, its output [B, T, H, D] and the logsumexp.
        k_v = (C * q, C * q) if spec.num_kv_heads != spec.num_heads else (C * kv, C * kv)
        return (C * q,) + k_v + (C * q, lse)
    # "sdpa": torch SDPA's flash kernel with enable_gqa (attention_dispatch.py:976-990) and flash-attn
    # (:1360-1383) keep q, k, v as they are (GQA-native), the output and the logsumexp.
    return (C * q, C * kv, C * kv, C * q, lse)


def mlp_backward_moments(spec: ModelSpec, p: UnslothPath) -> list[tuple[float, float, str]]:
    """The MLP backward's candidate peaks, (bytes per token over the layer's saved tensors, fixed bytes, name)
    (mlp_backward_tensors, summed)."""
    return [(float(sum(t)), fixed, name) for t, fixed, name in mlp_backward_tensors(spec, p)]


def mlp_backward_tensors(spec: ModelSpec, p: UnslothPath) -> list[tuple[tuple[int, ...], float, str]]:
    """The MLP backward's candidate peaks, (its new tensors one by one in bytes per token, fixed bytes, name).
    Fused (LoRA_MLP.backward): at the first fresh dequantised weight (fast_lora.py:563) DW = dY @ downW.t()
    (:507-515, a new [T, i]; the SwiGLU backward then writes h, df, de into DW, e, g in place, swiglu.py:102-104) and
    the two [T, r] products up_dB, gate_dB (:538-539) are alive; dX is written into X (:565). PEFT MLP (transformers
    LlamaMLP): at the product's backward the down projection's input gradient and the two operand gradients
    (3 × c·i); at the down projection's backward its input gradient and, on a 4-bit base, bitsandbytes' fresh
    dequantised weight (bitsandbytes 0.45+ MatMul4Bit.backward)."""
    i = spec.intermediate_size
    weight = dequant_fresh_bytes(spec, p)
    if p.fused_mlp and p.lora_out_of_place:
        # 2024.12.4 matmul_lora adds the LoRA term out of place (kernels/utils.py:400-421: out += (X @ A) @ (s·B)):
        # computing DW leaves DW and a [T, i] product alive, its fresh weight already freed (:413)
        return [((C * i, C * i, C * p.rank), 0.0, "mlp"), ((C * i, C * p.rank, C * p.rank), weight, "mlp")]
    if p.fused_mlp:
        return [((C * i, C * p.rank, C * p.rank), weight, "mlp")]
    return [((C * i,) * 3, 0.0, "mlp"), ((C * i,), weight, "mlp")]


def attention_backward_extra(spec: ModelSpec, p: UnslothPath) -> float:
    """Bytes per token at the attention kernel's backward, over what the layer then still keeps
    (attention_backward_tensors, summed)."""
    return float(sum(attention_backward_tensors(spec, p)))


def attention_backward_tensors(spec: ModelSpec, p: UnslothPath) -> tuple[int, ...]:
    """The attention kernel's backward, tensor by tensor (bytes per token), over what the layer then still keeps
    (its q/k/v input copy, Q, K, V, the output and logsumexp): o_proj's input gradient dO (c·q) and the kernel's
    buffers. torch's flash backward (aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp mha_bwd) makes
    dq, dk, dv, an fp32 dq_accum [T, nh, d] and an fp32 softmax_d [nh, T], and for GQA dk/dv expanded to all heads
    before summing; xformers gets K, V already expanded and makes dq, dk, dv of q width."""
    q, kv, nh = spec.q_dim, spec.kv_dim, spec.num_heads
    grads = (C * q,) + ((C * q, C * q) if spec.num_kv_heads != spec.num_heads else ()) + (C * kv, C * kv)
    if p.attention == "xformers":
        grads = (C * q,) * 3
    return (C * q,) + grads + (FP32 * q, FP32 * nh)


def layer_backward_peak(spec: ModelSpec, p: UnslothPath, tokens: int) -> tuple[float, float, float, str]:
    """(bytes per token, fixed bytes) of one layer at its backward's largest moment for `tokens`, the layer's saved
    bytes per token, and which moment ("mlp" or "attention"). The MLP's backward runs first, with everything saved;
    at the attention's backward the MLP's tensors (X, e, g), the residual sum h1 and o_proj's input are gone and the
    residual's gradient waits for the attention branch's."""
    tensors, fixed, where = layer_backward_peak_tensors(spec, p, tokens)
    return float(sum(tensors)), fixed, layer_saved(spec, p).total, where


def layer_backward_peak_tensors(spec: ModelSpec, p: UnslothPath, tokens: int
                                ) -> tuple[tuple[int, ...], float, str]:
    """layer_backward_peak's moment tensor by tensor: (the tensors alive, bytes per token each; fixed bytes; which
    moment)."""
    norms, attention, o_input, mlp = layer_tensors(spec, p)
    saved = norms + attention + o_input + mlp
    candidates = [(saved + extra, fixed, where) for extra, fixed, where in mlp_backward_tensors(spec, p)]
    # h1 (c·h) and the MLP's tensors freed, and o_proj's saved input after its backward; the norms' r stay
    kept = attention + norms[:2]
    candidates.append((kept + (C * spec.hidden_size,) + attention_backward_tensors(spec, p), 0.0, "attention"))
    return max(candidates, key=lambda c: sum(c[0]) * tokens + c[1])


# ---------------------------------------------------------------------------------------------------------------
# Around the layers
# ---------------------------------------------------------------------------------------------------------------
def ids_per_token(p: UnslothPath) -> float:
    """The batch's tensors on the GPU, bytes per token (ids_tensors, summed)."""
    return float(sum(ids_tensors(p)))


def ids_tensors(p: UnslothPath) -> tuple[int, ...]:
    """The batch's tensors on the GPU, bytes per token each: input_ids and labels (int64) and, for padding-free rows,
    position_ids (cast to int32 once, llama.py:1385; Fast_RoPE_Embedding_QK reads them in place,
    rope_embedding.py:436), else the collator's int64 attention mask (dropped by the model in training,
    llama.py:1437-1446, but still in the batch)."""
    return (INT64, INT64, INT32 if p.padding_free else INT64)


def staging_bytes(spec: ModelSpec, p: UnslothPath, tokens: int) -> float:
    """The GPU staging buffer(s) the offloaded checkpoints reload into: grown to the layer input's bytes, never
    freed (gradient_checkpointing.py:1469-1471, GPU_BUFFERS); a second one of the same size with double buffering
    (:1485-1494, GPU_BUFFERS_B). None until an input above MINIMUM_SIZE is offloaded (:1408)."""
    if not p.offloaded:
        return 0.0
    one = max(float(C * spec.hidden_size * tokens), INITIAL_GPU_BUFFER)
    return one * (2 if p.double_buffer else 1)


def rope_cache_bytes(spec: ModelSpec, p: UnslothPath, seq_len: int) -> float:
    """RoPE cos and sin caches, bytes (rope_cache_tensors, summed)."""
    return float(sum(b * n for b, n in rope_cache_tensors(spec, p, seq_len)))


def rope_cache_tensors(spec: ModelSpec, p: UnslothPath, seq_len: int) -> tuple[tuple[int, int], ...]:
    """RoPE cos and sin caches [rows, head_dim] as (bytes of one, how many), built once and kept, in the dtype set
    when the model is made (torch.get_default_dtype() inside from_pretrained: the model's bf16).
    2026.10.9: one LlamaRotaryEmbedding (llama.py:2572-2694) that starts at min(32,768, max_position_embeddings) rows
    and grows in steps of 8,192 (:2398-2399, :2551-2569); the model asks for max_position_embeddings rows when
    position_ids are passed (padding-free rows), else max(T, max_seq_length) (llama.py:1576-1590).
    2024.12.4: every attention layer has its own cache (models/_utils.py:854-949 patch_llama_rope_scaling replaces
    transformers 4.46-4.47's per-layer self.rotary_emb), grown to T rounded up to 8,192 rows (llama.py:1168-1185),
    plus the model's own at its starting size."""
    d = spec.head_dim
    mpe = spec.max_position_embeddings or seq_len
    start = min(ROPE_START, mpe)
    if p.layer_rope_caches:
        grown = max(start, math.ceil(seq_len / ROPE_STEP) * ROPE_STEP) if seq_len > start else start
        return ((grown * d * C, 2 * spec.num_layers), (start * d * C, 2))
    wanted = mpe if p.padding_free else max(seq_len, start)
    grown = mpe > start  # the model passes max_position_embeddings as the length (llama.py:1585): grows to it
    rows = max(start, math.ceil(wanted / ROPE_STEP) * ROPE_STEP) if grown else start
    return ((rows * d * C, 2),)


def dequant_scratch_bytes(spec: ModelSpec, p: UnslothPath) -> float:
    """4-bit: the per-device scratch the fused kernels' forward dequantisations write into (matmul_lora →
    fast_dequantize(use_global_buffer=True), kernels/utils.py:1863-1890, :974-975), grown only when a larger weight
    comes (:649-656) and kept for the whole run: the largest matrix a fused kernel reads, in bf16. PEFT's modules
    dequantise through bitsandbytes (a fresh tensor per call, freed after it)."""
    if not p.four_bit or p.fresh_dequant:
        return 0.0  # 2024.12.4 fast_dequantize always made a fresh tensor (kernels/utils.py:119-160)
    groups = {"attn_in": p.fused_qkv, "attn_out": p.fused_o, "mlp_in": p.fused_mlp, "mlp_out": p.fused_mlp}
    sizes = [m.in_features * m.out_features for m in spec.linears if groups.get(m.role)]
    return float(C * max(sizes)) if sizes else 0.0


def dequant_fresh_bytes(spec: ModelSpec, p: UnslothPath) -> float:
    """4-bit backward: each LoRA kernel dequantises q, k, v, o, up and gate to a fresh tensor (no global buffer,
    fast_lora.py:563, 569, 934-944, 1107; nf4.py:410), one at a time (del after use): the MLP's [i, h] at its
    backward."""
    if not p.four_bit:
        return 0.0
    mlp = [m.in_features * m.out_features for m in spec.linears if m.role in ("mlp_in",)]
    return float(C * max(mlp or [spec.largest_dense_linear_params]))


def loss_pass_bytes(spec: ModelSpec, p: UnslothPath, rows: int) -> tuple[float, str]:
    """The fused loss's buffers at its forward, bytes (loss_pass_tensors, summed), and their formula."""
    tensors, formula = loss_pass_tensors(spec, p, rows)
    return float(sum(tensors)), formula


def loss_pass_tensors(spec: ModelSpec, p: UnslothPath, rows: int) -> tuple[tuple[int, ...], str]:
    """The fused loss's buffers at its forward (fused_linear.py _ce_impl :1286-1387), one by one, with `rows`
    labelled tokens.

    Tiled ("flash") pass (:1323-1333, _tiled_forward :1100-1186, layout :1088-1097): a logits tile R × tile fp32
    (_Buffers, :919-936), an fp32 accumulator [R, h] and running max [R] (:1116-1118) and fp32 partials
    [8, ⌈V/16384⌉, R]; R = min(4096, rows, budget / (16384·4)), tile = budget / (4·R) floored to 16,384 columns
    (16,384 on cards ≤ 24.5 GiB), budget = min(256 MiB, the loss budget).
    Chunked pass (:1335-1384): one fp32 [R, V rounded to 8] logits buffer reused by every chunk (:919-936) and each
    chunk's fp32 input gradient [R, h] (_dz_w, :962-971); R = fused_linear_rows (:140-154)."""
    h, v = spec.hidden_size, spec.vocab_size
    if rows <= 0:
        return (), "no labelled rows"
    if p.loss_pass == "tiled":
        budget = min(TILE_BYTES, p.loss_budget)
        r = max(min(MAX_ROWS, rows, int(budget // (SPLIT_COLS * FP32))), 1)
        # tile = max(budget // (4·R), 16384) floored to 16,384 columns: exactly 16,384 whenever R is 4,096 or set
        # by the budget, and capped there on cards ≤ 24.5 GiB (the only ones that tile fewer rows, :1093-1095)
        tile = min(SPLIT_COLS, math.ceil(v / SPLIT_COLS) * SPLIT_COLS)
        splits = math.ceil(v / SPLIT_COLS)
        # each tile's rows are gathered with index_select (the last token of a sequence has no label, so the
        # labelled rows are not all rows, :1248-1251): a c·[R, h] copy and its int64 targets
        tensors = (FP32 * r * tile, FP32 * r * h, FP32 * r, FP32 * 8 * splits * r, C * r * h, INT64 * r)
        return tensors, f"tile {r} × {tile} fp32 + fp32 [{r}, h] accumulator"
    r = fused_linear_rows(rows, h, v, p.loss_budget)
    stride = math.ceil(v / 8) * 8
    tensors = (FP32 * r * stride, FP32 * r * h, C * r * h, INT64 * r)
    return tensors, f"chunk {r} × V fp32 + its fp32 [{r}, h] input gradient"


def fused_linear_rows(rows: int, hidden: int, vocab: int, budget: float) -> int:
    """fused_linear.py:140-154: a power of two at or below rows·h/V, at least the rows that hold 512 × 151,936
    logits (rounded down to a power of two, at least 512) and at most 4,096, capped by the budget / (4·V)."""
    def pow2(x: float) -> int:
        return 1 << max(math.ceil(math.log2(max(x, 1))), 0)

    target = rows * hidden / max(vocab, 1)
    r = pow2(target)
    if r > target:
        r //= 2
    floor = pow2(MIN_LOGITS / max(vocab, 1))
    if floor > MIN_LOGITS / max(vocab, 1):
        floor //= 2
    floor = min(max(floor, 512), MAX_ROWS)
    r = min(max(r, floor), MAX_ROWS)
    r = min(r, max(int(budget // max(vocab * FP32, 1)), 2))
    return max(min(r, max(rows, 1)), 1)


def loss_kept_per_token(spec: ModelSpec) -> float:
    """At the loss forward, bytes per token (loss_kept_tensors, summed)."""
    return float(sum(loss_kept_tensors(spec)))


def loss_kept_tensors(spec: ModelSpec) -> tuple[int, ...]:
    """At the loss forward, per token and tensor by tensor: the final norm's input (the last layer's output) and
    output, the input gradient the loss computes in forward (zeros [T, h] in the hidden dtype, fused_linear.py:1294),
    fp32 log-probs and logsumexp and the int64 index of the labelled rows (:1232-1239), and the shifted int64 targets
    (chunked_logprob.py _ce_targets); the final norm's fp32 1/rms (rms_layernorm.py:711)."""
    h = spec.hidden_size
    return (C * h, C * h, C * h, FP32, FP32, FP32, INT64, INT64)


def cce_2024_backward(spec: ModelSpec, tokens: int) -> tuple[float, float]:
    """(bytes per token, fixed bytes) of the 2024.12.4 loss at its backward (cce_2024_tensors, summed)."""
    per_token, fixed = cce_2024_tensors(spec)
    return float(sum(per_token)), float(sum(fixed))


def cce_2024_tensors(spec: ModelSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 2024.12.4 loss at its backward, tensor by tensor: (per-token bytes, fixed bytes). Apple's Cut
    Cross-Entropy (cut_cross_entropy 24.12.1, called by unsloth_zoo 2024.12.1 loss_utils.py:139-163, llama.py
    2024.12.4:996-1005) keeps the final norm's output e, an fp32 logsumexp, the targets and an fp32 logit average [V]
    (cce.py:43-77); its backward makes zeros de [T, h] and dc [V, h] — the head's size, although the head is frozen
    (cce_backward.py:266-267) — and sorts the logit average (int64, then int32). The final norm keeps its input."""
    h, v = spec.hidden_size, spec.vocab_size
    per_token = (C * h, C * h, C * h, FP32, FP32, INT64)  # norm input, e, de, lse, nll, valid index
    return per_token, (C * v * h, FP32 * v, INT64 * v, INT32 * v)


def reserve_bytes(spec: ModelSpec, seq_len: int, trainable: int) -> float:
    """Unsloth's own estimate of a step's needs, which offload_embedding="auto" compares with the free memory after
    loading (unsloth_zoo/block_swap.py:573-585 estimate_training_reserve_bytes, batch 1, at max_seq_length)."""
    tokens = max(1, seq_len)
    base = (tokens * spec.hidden_size * RESERVE_PER_TOKEN_HIDDEN + min(tokens, RESERVE_LOGIT_ROWS)
            * spec.vocab_size * FP32 + trainable * (FP32 + RESERVE_PER_TRAINABLE))
    return base * (1 + RESERVE_FRAGMENTATION) + RESERVE_SAFETY
