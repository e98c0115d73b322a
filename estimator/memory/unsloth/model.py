"""Unsloth's model as the estimate sees it: when Unsloth's own code runs (FastLlamaModel and its Mistral / Qwen2
variants), the code path it takes for a setup, and the activations alive at each moment of its step
(docs/formulas.md §3.8; the per-token terms are in estimator/memory/unsloth/kernels.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_
from ...job.stack import loss_impl_id, with_versions
from ...job.versions import resolve_versions
from ...models.spec import LM_HEAD
from ...options.optimizers import BNB_8BIT_BLOCKSIZE, OPTIMIZERS
from ...options.stacks import get_stack
from ...options.versions import UNSLOTH_PUBLISHED, in_range
from ..adapters import adapted_modules
from ..allocator import Allocations, AllocatorConfig, stack_allocator
from ..allocator import config as allocator_config
from ..precision import optimizer_state_bytes, trainable_bytes, weight_bytes
from ..result import DetailItem, Phase
from ..result import detail as d
from .kernels import (
    CHUNK_GB,
    FLASH_MIN_ROWS_LARGE,
    INITIAL_CPU_BUFFER,
    INITIAL_CPU_BUFFERS,
    MINIMUM_SIZE,
    PLAIN_CKPT_BELOW,
    RELEASE_2024,
    SMALL_CARD,
    C,
    GiB,
    UnslothPath,
    cce_2024_backward,
    cce_2024_tensors,
    dequant_scratch_bytes,
    ids_per_token,
    ids_tensors,
    layer_backward_peak,
    layer_backward_peak_tensors,
    layer_saved,
    layer_tensors,
    loss_kept_per_token,
    loss_kept_tensors,
    loss_pass_bytes,
    loss_pass_tensors,
    reserve_bytes,
    rope_cache_bytes,
    rope_cache_tensors,
    staging_bytes,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

# The allocator settings the 2024.12.4 release set when imported: PYTORCH_CUDA_ALLOC_CONF (unsloth/__init__.py:58),
# read by the torch 2.5 of its day (CUDAAllocatorConfig's parser: ">" fills from the last limit's interval). The
# current release's are the stack's (options.stacks: Stack.allocator_conf).
ALLOCATOR_2024 = allocator_config(
    "unsloth_2024.12.4", "expandable_segments:True,roundup_power2_divisions:[64:128,256:64,>:32]",
    "unsloth/__init__.py:58 (2024.12.4), torch 2.5", parser="torch2.5")


def kernels_apply(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """Unsloth's own kernels run this job (its stack's Stack.families: the FastLlamaModel families): LoRA or QLoRA
    (full fine-tuning loads through FastModel, loader.py:1330-1339), a dense Llama-like decoder without a sliding
    window (packed SDPA then builds a dense mask per run, attention_dispatch.py:968-974), text only, no LoRA on the
    head (the fused loss reads lm_head.weight, llama.py:2064-2067), no ZeRO/FSDP sharding (FSDP1 declines the fused
    kernels, llama.py:5330-5333)."""
    families = get_stack(setup.stack).families or {} if setup.stack else {}
    return (setup.method in ("lora", "qlora") and spec.family in families
            and not spec.moe_layers and not spec.qk_norm and not spec.parallel_block and spec.gated_mlp
            and spec.norm_kind == "rms" and not (spec.sliding_window and spec.sliding_layers)
            and not spec.layer_pattern and not spec.tower_kind and setup.image_tokens == 0
            and setup.sharding == "none" and LM_HEAD not in setup.lora_targets)


def not_modelled_note(setup: TrainingSetup) -> str:
    """Why an Unsloth setup is estimated with transformers' modules instead (its kernels do not apply)."""
    if setup.method == "full":
        return N_("Unsloth runs full fine-tuning through FastModel (transformers' modules, compiled; loader.py: "
                  "full_finetuning → FastModel): estimated with transformers' modules, offloaded checkpointing and "
                  "Unsloth's fused loss.")
    return N_("Unsloth's own kernels are modelled for dense Llama, Mistral and Qwen2 decoders (FastLlamaModel); this "
              "model or setup loads through FastModel (transformers' modules), estimated with transformers' "
              "modules, offloaded checkpointing and Unsloth's fused loss.")


def unsloth_path(spec: ModelSpec, setup: TrainingSetup, capacity: float | None = None, *,
                 embedding_on_gpu: bool = True, double_buffer: bool = True) -> UnslothPath:
    """The path Unsloth takes (docs/formulas.md §3.8). `capacity` (the card's total memory as torch reads it,
    torch.cuda.get_device_properties(device).total_memory at fused_linear.py:102: Device.runtime_total_bytes, bytes)
    picks the loss pass (fused_linear.py:90-105) and its budget; without it the tiled pass and a 256 MiB tile (the
    largest)."""
    adapted = adapted_modules(spec, setup)
    biased = {m.name for m in spec.linears if m.bias}
    fused_qkv = {"q_proj", "k_proj", "v_proj"} <= adapted and not ({"q_proj", "k_proj", "v_proj"} & biased)
    fused_mlp = {"gate_proj", "up_proj", "down_proj"} <= adapted and not (
        {"gate_proj", "up_proj", "down_proj"} & biased)
    fused_o = "o_proj" in adapted and "o_proj" not in biased
    if not setup.grad_ckpt:
        ckpt = "none"  # use_gradient_checkpointing=False
    elif not setup.offload_activations or setup.seq_len < PLAIN_CKPT_BELOW:
        ckpt = "plain"  # True, or "unsloth" below max_seq_length 512 (_utils.py:502-511): the layer inputs stay
    elif setup.older("unsloth_zoo_pinned_offload"):
        ckpt = "reload"  # unsloth_zoo < 2025.1.1: each input to pageable CPU RAM, a new GPU copy in its backward
    else:
        ckpt = "offload"
    offloaded = ckpt == "offload" and C * spec.hidden_size * setup.tokens > MINIMUM_SIZE
    published = published_line(setup)
    rows = labelled_rows(setup)
    # The loss pass: cards ≤ 24.5 GiB take the tiled pass at any length, larger ones from 4,096 labelled rows on
    # (fused_linear.py:90-105, :1322-1324). Without a card: the tiled pass when it is taken on every card, else the
    # larger of the two (the chunked pass's [512, V] fp32 buffer for Llama-3's vocabulary).
    big_card_pass = "tiled" if rows >= FLASH_MIN_ROWS_LARGE else "chunked"
    loss_pass = big_card_pass if (capacity is None or capacity > SMALL_CARD) else "tiled"
    # The budget is min(2 GiB, half the free memory at the first loss call) (:118-127, cached per device): counted
    # as 2 GiB. It only binds below 4 GiB free at step 1's loss (the tile's cap is 256 MiB, the chunk's rows are at
    # most 4,096), and a card that full at the loss has no room for step 2's layer backward anyway.
    budget = float(CHUNK_GB * GiB)
    path = UnslothPath(
        fused_qkv=fused_qkv, fused_o=fused_o, fused_mlp=fused_mlp, adapted=adapted, rank=setup.lora_rank,
        four_bit=setup.method == "qlora", attention="xformers" if published else "sdpa",
        padding_free=not published, checkpointing=ckpt, offloaded=offloaded,
        double_buffer=double_buffer and offloaded, embedding_on_gpu=embedding_on_gpu or published,
        loss_pass=loss_pass, loss_budget=budget,
        fresh_dequant=setup.older("unsloth_dequant_scratch"), lora_out_of_place=setup.older("unsloth_lora_inplace"),
        cut_cross_entropy=setup.older("unsloth_fused_ce"), layer_rope_caches=setup.older(
            "transformers_model_level_rope"), published_2024=published)
    if capacity is None and loss_pass == "chunked":  # no card: the larger of the two passes
        tiled = replace(path, loss_pass="tiled")
        if loss_pass_bytes(spec, tiled, rows)[0] > loss_pass_bytes(spec, path, rows)[0]:
            path = tiled
    return path


def published_line(setup: TrainingSetup) -> bool:
    """Is the run installed at the Unsloth release line its published tables measured (options.versions.
    UNSLOTH_PUBLISHED)? That line's install ran attention through xformers with K/V expanded (llama.py
    2024.12.4:391-410; flash-attn was not installed) on padded batches (position_ids not passed), never moved the input
    embedding to CPU RAM (no offload_embedding) and set the allocator of ALLOCATOR_2024."""
    v = setup.versions
    return v is not None and "unsloth" in v and in_range(v["unsloth"], UNSLOTH_PUBLISHED)


def published_setup(setup: TrainingSetup) -> TrainingSetup:
    """The setup installed as Unsloth's published context-length tables ran it: unsloth 2024.12.4 with the releases
    it ran with (options.versions.COMPANIONS: unsloth_zoo 2024.12.1, transformers 4.46.3, torch 2.5.1), what
    `--installed unsloth==2024.12.4` gives."""
    return with_versions(setup, resolve_versions("unsloth", pins=(f"unsloth=={RELEASE_2024}",)))


def published_tables_path(spec: ModelSpec, setup: TrainingSetup) -> UnslothPath:
    """The path of the code Unsloth's published context-length tables measured (published_setup): the same fused LoRA
    kernels and saved tensors, xformers attention with K/V expanded, every layer input offloaded and copied back per
    layer, per-layer RoPE caches, fresh dequantisations, out-of-place LoRA, Cut Cross-Entropy, padded batches, no
    embedding offload or double buffering (each from its version fork: unsloth_path)."""
    return unsloth_path(spec, published_setup(setup))


def labelled_rows(setup: TrainingSetup) -> int:
    """Rows the fused loss scores: every token but the last of each sequence (labels shifted by one,
    chunked_logprob.py _ce_targets)."""
    return max(setup.tokens - setup.batch, 0)


def embedding_offloaded(spec: ModelSpec, setup: TrainingSetup, usable_after_load: float, trainable: int) -> bool:
    """offload_embedding="auto" (the default, loader.py:1262 → llama.py:4357-4366, 5125): get_peft_model moves the
    frozen, untied input embedding to host RAM when the memory still usable after loading is below Unsloth's own
    reserve for a max_seq_length step (unsloth/models/_utils.py:10268-10289)."""
    if spec.tie_embeddings:
        return False  # a tied input embedding stays (vision.py:1247 _embeddings_are_tied)
    return usable_after_load < reserve_bytes(spec, setup.seq_len, trainable)


class Moment(NamedTuple):
    """One moment of Unsloth's step: which gradients exist (a Gradients field name of estimator/memory/hf/states.py, or
    "all_but_first"), the activation items alive and the same bytes as the allocator's requests (each tensor, for
    the per-request rounding of estimator/memory/allocator.py)."""

    key: str
    label: str
    grads: str
    acts: tuple[DetailItem, ...]
    allocations: Allocations = ()


def _per_token(tokens: int, widths) -> list[tuple[float, int]]:
    """Tensors of `widths` bytes per token, one request each."""
    return [(float(tokens * w), 1) for w in widths]


class _Inputs(NamedTuple):
    """The layer inputs Unsloth's checkpointing keeps on the GPU (at the loss and the last layer's backward; at the
    first layer's), the recomputed output a checkpoint's backward holds, and the same as the allocator's requests."""

    kept: float  # at the loss and at the last layer's backward
    label: str
    formula: str
    first: float  # at the first layer's backward
    recompute_output: float
    kept_allocs: list[tuple[float, int]]
    first_allocs: list[tuple[float, int]]
    loss_kept_allocs: list[tuple[float, int]]  # at the loss (without checkpointing: every layer's saved tensors too)


def _persistent(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath
                ) -> tuple[list[DetailItem], list[tuple[float, int]]]:
    """What every moment holds: the token ids and Unsloth's RoPE cache, QLoRA's kept dequantisation scratch and the
    offload staging buffers; as items and as the allocator's requests."""
    tokens = setup.tokens
    scratch, staging = dequant_scratch_bytes(spec, p), staging_bytes(spec, p, tokens)
    items = [
        d("activations.ids_rope", N_("Token ids, RoPE cos/sin cache"),
          tokens * ids_per_token(p) + rope_cache_bytes(spec, p, setup.lm_seq_len),
          "T × (8 + 8 + 4) + 2 × rows × d (Unsloth's RoPE cache)"),
        d("activations.qlora_dequant", N_("QLoRA dequantisation scratch"), scratch,
          "largest 4-bit matrix in bf16 (kept)"),
        d("activations.offload_staging", N_("Offload staging buffers"), staging,
          f"{2 if p.double_buffer else 1} × c × T × h"),
    ]
    allocs = _per_token(tokens, ids_tensors(p)) + [
        (float(b), n) for b, n in rope_cache_tensors(spec, p, setup.lm_seq_len)]
    allocs += [(scratch, 1)] if scratch else []
    allocs += [(staging / (2 if p.double_buffer else 1), 2 if p.double_buffer else 1)] if staging else []
    return items, allocs


def _layer_inputs(spec: ModelSpec, p: UnslothPath, tokens: int, saved: float) -> _Inputs:
    """The layer inputs kept under the path's checkpointing (`saved`: one layer's saved bytes per token)."""
    h, L = spec.hidden_size, spec.num_layers
    x = float(tokens * C * h)  # one [T, h] bf16 tensor: a layer input, the embedding output, a gradient
    # enable_input_require_grads makes the embedding output a leaf that requires grad (unsloth_zoo
    # training_utils.py:512-520): its AccumulateGrad node holds it until the first layer's backward.
    embed_out = tokens * C * h
    if p.checkpointing == "none":
        per_layer = saved + C * h  # a layer's saved tensors and its own input, when the layers are not recomputed
        saved_tensors = [w for group in layer_tensors(spec, p) for w in group]
        # every layer but the one in its backward keeps its saved tensors and input; that one its moment's tensors
        return _Inputs(spec.num_layers * tokens * per_layer, N_("Layer activations"),
                       "L × T × (one layer's saved tensors + its input)", tokens * per_layer, 0.0,
                       [(b, n * (L - 1)) for b, n in _per_token(tokens, saved_tensors)] + [(x, L)], [(x, 1)],
                       [(b, n * L) for b, n in _per_token(tokens, saved_tensors)] + [(x, L)])
    if p.checkpointing == "reload":
        # 2024.12.4 Unsloth_Offloaded_Gradient_Checkpointer (unsloth_zoo 2024.12.1 gradient_checkpointing.py:145-174):
        # every input .to("cpu"); the backward copies it back to a new GPU tensor (:167) and holds the output (:170)
        return _Inputs(embed_out + tokens * C * h, N_("Embedding output, reloaded layer input"), "2 × c × T × h",
                       embed_out + tokens * C * h, tokens * C * h, [(x, 2)], [(x, 2)], [(x, 2)])
    if p.offloaded:
        # the embedding output + the last layer's input (LAST_GC_INDEX); the recomputed layer's output is held by the
        # checkpoint's backward
        return _Inputs(embed_out + tokens * C * h, N_("Embedding output, last layer's input"), "2 × c × T × h",
                       embed_out, tokens * C * h, [(x, 2)], [(x, 1)], [(x, 2)])
    if p.checkpointing == "plain":
        # use_gradient_checkpointing=True: transformers' non-reentrant checkpoint (5.17 gradient_checkpointing_enable
        # default use_reentrant=False) keeps every layer's input; its recompute stops after the last tensor the
        # backward needs (torch.utils.checkpoint early stop), so no recomputed output is held.
        return _Inputs(spec.num_layers * tokens * C * h, N_("Checkpointed layer inputs"), "L × c × T × h",
                       tokens * C * h, 0.0, [(x, L)], [(x, 1)], [(x, L)])
    # "unsloth" with inputs ≤ 2 MiB: UnslothCheckpointFunction keeps every input on the GPU
    # (gradient_checkpointing.py:1529-1540) and holds the recomputed output through the layer's backward
    return _Inputs(spec.num_layers * tokens * C * h, N_("Checkpointed layer inputs"), "L × c × T × h",
                   tokens * C * h, tokens * C * h, [(x, L)], [(x, 1)], [(x, L)])


def _loss_moment(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath, inp: _Inputs
                 ) -> tuple[str, str, list[DetailItem], list[tuple[float, int]]]:
    """The loss's moment as the release and the loss implementation run it: (key, label, items, requests)."""
    tokens, h = setup.tokens, spec.hidden_size
    x = float(tokens * C * h)
    kept = d("activations.checkpoints", inp.label, inp.kept, inp.formula)
    if p.cut_cross_entropy:
        per_token, fixed = cce_2024_backward(spec, tokens)
        cce_tokens, cce_fixed = cce_2024_tensors(spec)
        loss = [
            d("activations.checkpoints", inp.label, inp.kept - (tokens * C * h if p.checkpointing == "reload"
                                                                 else 0.0), inp.formula),
            d("activations.loss", N_("Cut Cross-Entropy: final norm, saved input, gradient"), tokens * per_token,
              "T × (3·c·h + 16)"),
            d("activations.loss_backward", N_("Cut Cross-Entropy head gradient buffer"), fixed, "c·V·h zeros + V stats"),
        ]
        allocs = ([(x, 1)] if p.checkpointing == "reload" else inp.loss_kept_allocs) + _per_token(
            tokens, cce_tokens) + [(float(b), 1) for b in cce_fixed]
        return "loss_backward", N_("loss backward"), loss, allocs
    if loss_impl_id(setup) == "unsloth_ce":
        # UNSLOTH_RETURN_LOGITS=1 (llama.py:2141-2178): lm_head's bf16 logits [T, V] and the final norm's input are
        # kept; Fast_CrossEntropyLoss keeps the logits, an fp32 logsumexp and losses and the labels
        # (cross_entropy_loss.py:482) and its backward writes a new bf16 [T, V] gradient (:494).
        v = spec.vocab_size
        loss = [
            kept,
            d("activations.loss", N_("Logits and loss (saved)"), tokens * (C * v + C * h + 2 * 4 + 2 * 8),
              "T × (c·V logits + c·h final norm input + fp32 logsumexp and loss + labels)"),
            d("activations.loss_backward", N_("Loss backward buffers"), tokens * C * v, "c·T·V logits gradient"),
        ]
        return "loss_backward", N_("loss backward"), loss, inp.loss_kept_allocs + _per_token(
            tokens, (C * v, C * h, 4, 4, 8, 8, C * v))
    loss_bytes, loss_formula = loss_pass_bytes(spec, p, labelled_rows(setup))
    loss = [
        kept,
        d("activations.loss", N_("Fused loss: final norm, input gradient, log-probs"),
          tokens * loss_kept_per_token(spec), "T × (3·c·h + 12 + 16)"),
        d("activations.loss_backward", N_("Fused loss buffers"), loss_bytes, loss_formula),
    ]
    allocs = inp.loss_kept_allocs + _per_token(tokens, loss_kept_tensors(spec)) + [
        (float(b), 1) for b in loss_pass_tensors(spec, p, labelled_rows(setup))[0]]
    return "loss", N_("loss forward"), loss, allocs


def _layer_backwards(spec: ModelSpec, p: UnslothPath, tokens: int, inp: _Inputs
                     ) -> tuple[list[DetailItem], list[DetailItem], list[DetailItem], list[tuple[float, int]]]:
    """The last and the first decoder layer's backward: (the last's items, the first's, the items both add, the
    requests both add)."""
    layer_peak, layer_fixed, saved, where = layer_backward_peak(spec, p, tokens)
    peak_tensors = layer_backward_peak_tensors(spec, p, tokens)[0]
    h = spec.hidden_size
    x = float(tokens * C * h)
    fresh = d("activations.qlora_dequant_backward", N_("QLoRA weight dequantised in backward"), layer_fixed,
              "one [i, h] bf16 weight at a time")
    grad_in = d("activations.backward_temporaries", N_("Backward temporaries"), tokens * (C * h) + inp.recompute_output,
                "incoming gradient c·T·h + the recomputed output c·T·h")
    allocs = [(x, 1)] + ([(inp.recompute_output, 1)] if inp.recompute_output else []) + (
        [(layer_fixed, 1)] if layer_fixed else []) + _per_token(tokens, peak_tensors)
    kept = d("activations.checkpoints", inp.label, inp.kept, inp.formula)
    if p.checkpointing == "none":
        last_layer = [kept, d("activations.recomputed_layer", N_("Last layer's backward buffers"),
                              tokens * (layer_peak - saved), "T × the backward's extra buffers")]
        first_layer = [d("activations.first_layer", N_("First layer's activations"), inp.first, "T × one layer"),
                       d("activations.recomputed_layer", N_("First layer's backward buffers"),
                         tokens * (layer_peak - saved), "T × the backward's extra buffers")]
    else:
        layer_label = N_("Recomputed layer (at its MLP backward)") if where == "mlp" else N_(
            "Recomputed layer (at its attention backward)")
        one = d("activations.recomputed_layer", layer_label, tokens * layer_peak,
                "T × the layer's saved tensors and its backward buffers (§3.8)")
        last_layer = [kept, one]
        first_layer = [d("activations.checkpoints", N_("Embedding output"), inp.first, "c × T × h"), one]
    return last_layer, first_layer, [grad_in, fresh], allocs


def unsloth_moments(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath) -> list[Moment]:
    """The moments where Unsloth's step can peak: the loss forward, the last decoder layer's backward (its input kept
    on the GPU) and the first layer's backward (every later layer's LoRA gradients made)."""
    persistent, persistent_allocs = _persistent(spec, setup, p)
    inp = _layer_inputs(spec, p, setup.tokens, layer_saved(spec, p).total)
    loss_key, loss_label, loss, loss_allocs = _loss_moment(spec, setup, p, inp)
    last_layer, first_layer, backward, backward_allocs = _layer_backwards(spec, p, setup.tokens, inp)
    return [
        Moment(loss_key, loss_label, "persist", tuple(persistent + loss), tuple(persistent_allocs + loss_allocs)),
        Moment("backward.last_layer", N_("backward, last layer"), "persist",
               tuple(persistent + last_layer + backward),
               tuple(persistent_allocs + inp.kept_allocs + backward_allocs)),
        Moment("backward.first_layer", N_("backward, first layer"), "all_but_first",
               tuple(persistent + first_layer + backward),
               tuple(persistent_allocs + inp.first_allocs + backward_allocs)),
    ]


# bitsandbytes optim/optimizer.py (0.45): tensors under min_8bit_size = 4096 elements keep 32-bit states
MIN_8BIT_SIZE = 4096


def state_allocations(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath, grads: str) -> Allocations:
    """The model states as the allocator holds them, one request per tensor: the base weights (NF4: the packed codes,
    the 8-bit absmax per 64 and the fp32 second-level absmax per 256 blocks, bitsandbytes quantize_4bit; else the
    16-bit matrix), the embedding (unless offloaded), an untied head, the norms, the LoRA A and B matrices
    (adapters.lora_params' shapes), their gradients (`grads`: "persist", "all_but_first" or "all", as the moment's)
    and the optimizer's state tensors (options.OPTIMIZERS: bitsandbytes 8-bit: uint8 states with an fp32 absmax per
    256 elements)."""
    L, r, h, v = spec.num_layers, setup.lora_rank, spec.hidden_size, spec.vocab_size
    wb, tb = weight_bytes(setup), trainable_bytes(setup)
    out: list[tuple[float, int]] = []
    lora: list[tuple[int, int, int]] = []  # (elements of one LoRA matrix, copies, copies per layer)
    for m in spec.linears:
        n, per_layer = m.in_features * m.out_features, m.count
        copies = per_layer * (m.layers or L)
        if p.four_bit:
            absmax = [(n // 64, copies), (4 * -(-n // (64 * 256)), copies)] if setup.nf4_double_quant else [
                (4 * (n // 64), copies)]
            out += [(n // 2, copies)] + absmax
        else:
            out.append((wb * n, copies))
        if m.name in p.adapted:
            lora += [(r * m.in_features, copies, per_layer), (m.out_features * r, copies, per_layer)]
    out += [(2 * v * h, 1)] if p.embedding_on_gpu else []  # bf16 embedding (training_utils.py:458-463: not upcast)
    out += [] if spec.tie_embeddings else [(2 * v * h, 1)]
    rest = spec.params_total - spec.params_quantizable - spec.params_embedding  # the norms' weights
    out += [(2 * h, rest // h)] + ([(2 * (rest % h), 1)] if rest % h else [])
    alive = {"persist": 1.0 if setup.grad_accum > 1 else 0.0, "all": 1.0}.get(grads)
    option = OPTIMIZERS[setup.optimizer]
    for n, copies, per_layer in lora:
        out.append((tb * n, copies))
        if alive is None:  # all_but_first: every layer's but the first's (unless accumulated ones persist)
            out.append((tb * n, copies if setup.grad_accum > 1 else copies - per_layer))
        elif alive:
            out.append((tb * n, copies))
        if option.state_dtype == "8bit" and n >= MIN_8BIT_SIZE:
            out += [(n, option.states * copies), (4 * -(-n // BNB_8BIT_BLOCKSIZE), option.states * copies)]
        else:
            per_state = optimizer_state_bytes(setup.optimizer, tb) / max(option.states, 1)
            out.append((per_state * n if option.state_dtype != "8bit" else 4 * n, option.states * copies))
    return tuple((float(b), int(c)) for b, c in out if b > 0 and c > 0)


def allocator_for(p: UnslothPath) -> AllocatorConfig:
    """The allocator settings the path's release runs under."""
    return ALLOCATOR_2024 if p.published_2024 else stack_allocator("unsloth")


def phase_requests(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath) -> Callable[[Phase], Allocations]:
    """The allocator's requests alive at each phase of Unsloth's step: the model states and, at a moment of
    unsloth_moments, its activation tensors (the optimizer step: the states and every gradient)."""
    moments = {m.key: m for m in unsloth_moments(spec, setup, p)}

    def requests(phase: Phase) -> Allocations:
        m = moments.get(phase.key)
        if m is None:
            return state_allocations(spec, setup, p, "all")
        return state_allocations(spec, setup, p, m.grads) + m.allocations

    return requests


def host_terms(spec: ModelSpec, setup: TrainingSetup, p: UnslothPath) -> dict[str, float | int]:
    """The offloaded checkpoints for memory/host.py host_ram: the layer inputs (all layers but the last, each in its
    own pinned block, which host_ram rounds up to a power of two) and the 200 initial 256 KiB slots
    (gradient_checkpointing.py:64-66, :1296-1298): torch's caching host allocator rounds each pinned block up to a power
    of two and keeps freed blocks cached (:195-201), so the initial slots stay too. The 2024.12.4 release copied every
    layer's input to pageable host RAM (.to("cpu")): no pinned blocks, no slots."""
    if p.checkpointing == "reload":
        return {"checkpoint_cpu_bytes": float(spec.num_layers * C * spec.hidden_size * setup.tokens),
                "checkpoint_pinned": False}
    if not p.offloaded:
        return {"checkpoint_cpu_bytes": 0.0}
    blocks = spec.num_layers - 1
    return {"checkpoint_cpu_bytes": float(blocks * C * spec.hidden_size * setup.tokens), "checkpoint_blocks": blocks,
            "checkpoint_slots_bytes": float(INITIAL_CPU_BUFFERS * INITIAL_CPU_BUFFER)}


def without_double_buffer(p: UnslothPath) -> UnslothPath:
    return replace(p, double_buffer=False)


def layer_bytes_per_token(spec: ModelSpec, p: UnslothPath) -> float:
    """One layer's saved tensors per token (for the How page and the tests)."""
    return layer_saved(spec, p).total


def per_token_terms(spec: ModelSpec, p: UnslothPath) -> tuple[tuple[str, float, str], ...]:
    """What one recomputed layer and the step around it keep per token on the GPU, for the How page: (label, bytes
    per token, source at unsloth / unsloth_zoo 2026.10.9). The sum of the layer's rows is layer_saved(...).total."""
    h, i, q, kv, nh = spec.hidden_size, spec.intermediate_size, spec.q_dim, spec.kv_dim, spec.num_heads
    saved = layer_saved(spec, p)
    rows: list[tuple[str, float, str]] = [
        (N_("Norms: fp32 1/rms ×2, the residual sum h1 the second norm keeps"), saved.norms,
         "kernels/rms_layernorm.py:981, :710-711; models/llama.py:1228"),
        (N_("q/k/v projections' input (LoRA_QKV keeps only X)") if p.fused_qkv else
         N_("q/k/v: PEFT modules' input copies"), saved.attention - (C * (q + 2 * kv) + C * q + 4 * nh)
         - (C * q if (p.fused_o and p.attention == "sdpa") else 0.0),
         "kernels/fast_lora.py:845-854"),
        (N_("Rotated Q, K and V, attention output and fp32 logsumexp"), float(C * (q + 2 * kv) + C * q + 4 * nh),
         "kernels/rope_embedding.py:431-432; utils/attention_dispatch.py:976-995"),
    ]
    if p.fused_o and p.attention == "sdpa":
        rows.append((N_("o_proj's input: the packed runs concatenated (LoRA_W keeps X)"), float(C * q),
                     "utils/attention_dispatch.py:995; kernels/fast_lora.py:1073"))
    rows.append((N_("MLP: X, gate(X), up(X) (LoRA_MLP recomputes the product)") if p.fused_mlp else
                 N_("MLP: transformers' LlamaMLP on PEFT modules"), saved.mlp, "kernels/fast_lora.py:448"))
    backward = [(N_("MLP backward: DW = dY·downᵀ and two [T, r] products"), float(C * i + 2 * C * p.rank),
                 "kernels/fast_lora.py:507-539"),
                (N_("Incoming gradient and the recomputed output"), float(2 * C * h),
                 "unsloth_zoo/gradient_checkpointing.py:1675-1698")]
    around = [(N_("Offload staging buffers (double buffering)"), float(2 * C * h if p.double_buffer else C * h),
               "unsloth_zoo/gradient_checkpointing.py:1469-1494"),
              (N_("Embedding output (kept by its AccumulateGrad node)"), float(C * h),
               "unsloth_zoo/training_utils.py:512-520"),
              (N_("Last layer's input (not offloaded)"), float(C * h),
               "unsloth_zoo/gradient_checkpointing.py:1390-1408"),
              (N_("Token ids, labels, position ids"), float(ids_per_token(p)), "models/llama.py:1385")]
    return tuple(rows + backward + around)
