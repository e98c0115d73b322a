"""Peak memory of one training step: phases, the peak phase, overhead and the low/expected/high band.

peak = max over phases of (weights + gradients + optimizer state + live activations) + overhead
(docs/formulas.md §0). Phases are the moments where the high-water mark can occur in a steady-state step
(step ≥ 2, so optimizer state exists; zero_grad(set_to_none=True), the Trainer default)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from ..i18n import N_, Text
from ..job.stack import attention_impl
from ..job.tower import check_tower
from ..models.config import is_frozen_tower_note
from ..options.backends import MPS_ATTENTION
from ..options.optimizers import OPTIMIZERS
from ..options.stacks import NO_SDPA_FAMILIES, get_stack
from .activations.common import ActivationContext, context
from .activations.depth import (
    backward_extra_per_token,
    checkpoint_alias_per_token,
    checkpoint_per_token,
    final_per_token,
    layer_sizes,
    layers_per_token,
    max_layer_per_token,
    recompute_extra_per_token,
    rope_per_token,
)
from .activations.layers import moe_lora_delta_bytes, moe_lora_delta_grad_bytes
from .activations.loss import LossMemory, loss_memory
from .activations.unsloth import DOUBLE_BUFFER_HEADROOM, UnslothPath
from .adapters import adapted_modules, lora_params
from .allocator import AllocatorConfig, stack_allocator, step_slack
from .host import host_ram
from .litgpt_model import stack_spec
from .mlx_step import check_mlx_model, mlx_estimate, uses_mlx_model
from .overhead import (
    ALLOCATOR_SLACK,
    CUDA_CONTEXT_BYTES,
    CUDA_CONTEXT_HIGH,
    CUDA_CONTEXT_LOW,
    MODEL_ERROR_HIGH,
    MODEL_ERROR_LOW,
    NCCL_BYTES,
)
from .precision import (
    FP32,
    INT64,
    NF4_BYTES,
    NF4_DQ_BYTES,
    compute_bytes,
    optimizer_state_bytes,
    trainable_bytes,
    weight_bytes,
)
from .result import CONTEXT_LABEL, DetailItem, Estimate, Phase
from .result import detail as d
from .towers import tower_activation_bytes, tower_learns, tower_lora_params, tower_notes
from .unsloth_model import (
    Allocations,
    allocator_for,
    embedding_offloaded,
    host_offload_bytes,
    host_terms,
    not_modelled_note,
    phase_requests,
    unsloth_moments,
    unsloth_path,
    uses_unsloth_model,
    without_double_buffer,
)

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec


# --------------------------------------------------------------------------------------------


def _weights(spec: ModelSpec, setup: TrainingSetup, lora: int) -> tuple[float, float, str]:
    """(frozen bytes, trainable bytes, formula). QLoRA: decoder linears in NF4 + double quant; the rest
    (embeddings, head, norms) 16-bit, or fp32 after prepare_model_for_kbit_training (docs/formulas.md §2.1)."""
    wb = weight_bytes(setup)
    if setup.method == "full":
        if spec.params_tower and not tower_learns(setup):  # the towers stay frozen; the language model trains
            lm = spec.params_total - spec.params_tower
            return (float(spec.params_tower * wb), float(lm * wb),
                    f"{wb} B × {lm:,} language-model params + {wb} B × {spec.params_tower:,} frozen tower params")
        return 0.0, float(spec.params_total * wb), f"{wb} B × {spec.params_total:,} params"
    adapters = float(lora * trainable_bytes(setup))  # fp32 adapters (PEFT autocast_adapter_dtype)
    if setup.method == "lora":
        return float(spec.params_total * wb), adapters, f"{wb} B × base + 4 B × {lora:,} adapter params"
    # Routed experts are fused 3-D parameters in transformers 5, which bitsandbytes does not quantise (ModelSpec.
    # params_routed_experts); a stack that swaps every nn.Linear itself (LitGPT, Stack.quantize_head) has per-expert
    # nn.Linear modules and quantises them.
    fused = 0 if _quantizes_every_linear(setup) else spec.params_routed_experts
    four_bit = spec.params_quantizable - fused
    other = spec.params_total - four_bit
    other_bytes = FP32 if (setup.qlora_fp32_upcast or setup.precision in ("mixed", "fp32")) else 2
    nf4 = NF4_DQ_BYTES if setup.nf4_double_quant else NF4_BYTES
    frozen = four_bit * nf4 + other * other_bytes
    experts = f" (incl. {fused:,} routed-expert params bitsandbytes leaves unquantised)" if fused else ""
    return frozen, adapters, f"{nf4:.4f} B × {four_bit:,} 4-bit + {other_bytes} B × {other:,} other{experts}"


def _quantizes_every_linear(setup: TrainingSetup) -> bool:
    """LitGPT's bitsandbytes plugin replaces every nn.Linear (Stack.quantize_head's source), experts included."""
    return bool(setup.stack) and get_stack(setup.stack).quantize_head


def _adafactor_state(spec: ModelSpec, setup: TrainingSetup) -> float:
    """Adafactor (HF, beta1=None) keeps fp32 row and column factors per matrix, 4·(R + C) bytes, and a full
    fp32 second moment for 1-D tensors (transformers optimization.py)."""
    if setup.method != "full":
        r = setup.lora_rank
        targets = adapted_modules(spec, setup)
        tower = sum(FP32 * ((r + i) + (o + r)) * n for i, o, n in spec.tower_linears) if tower_learns(setup) else 0
        return tower + sum(FP32 * ((r + m.in_features) + (m.out_features + r)) * m.count * (m.layers or spec.num_layers)
                           for m in spec.linears if m.name in targets)
    total = 0.0
    for m in spec.linears:
        per = FP32 * (m.in_features + m.out_features) + (FP32 * m.out_features if m.bias else 0)
        total += per * m.count * (m.layers or spec.num_layers)
    heads = 1 if spec.tie_embeddings else 2
    total += heads * FP32 * (spec.vocab_size + spec.hidden_size)
    norms = spec.params_total - spec.params_quantizable - spec.params_embedding - spec.params_tower
    if tower_learns(setup):  # the trained tower: row + column factors per linear, a full second moment for the rest
        tower_linear = sum(i * o * n for i, o, n in spec.tower_linears)
        total += sum(FP32 * (i + o) * n for i, o, n in spec.tower_linears)
        norms += spec.params_tower - tower_linear
    return total + FP32 * norms


def _casts(spec: ModelSpec, setup: TrainingSetup, lora: int, head_module: bool = True) -> tuple[float, float, float]:
    """bf16 copies of fp32 weights that autocast makes and autograd keeps until each layer's backward:
    (all layers + head, one layer, the head alone). Mixed precision casts every linear weight (§3.3 M: + 2 B × P); fp32
    LoRA adapters under autocast are cast too (§3.3 R: + 2 B × LoRA params)."""
    if not setup.autocast:
        return 0.0, 0.0, 0.0
    per_layer = 0.0
    head = 0.0
    if setup.precision == "mixed" and setup.method != "qlora":
        per_layer += 2 * spec.layer_linear_params  # every decoder linear weight
        if head_module:  # fused/chunked heads cast one vocabulary slice at a time (counted with the loss)
            head += 2 * spec.vocab_size * spec.hidden_size  # lm_head (or the tied embedding used as head)
    if trainable_bytes(setup) == FP32 and setup.method != "full":
        per_layer += 2 * lora / spec.num_layers  # fp32 adapters → bf16 under autocast
    return per_layer * spec.num_layers + head, per_layer, head


def _shard(setup: TrainingSetup, spec: ModelSpec, weights: float, grads: float, opt: float
           ) -> tuple[float, float, float, float, str]:
    """Per-GPU model states under data parallelism (ZeRO paper §5, Fig. 1; FSDP docs). Returns
    (weights, grads, optimizer, cpu_bytes, note)."""
    n = setup.gpus
    cpu = 0.0
    note = ""
    if setup.sharding in ("zero1", "zero2", "zero3"):
        opt = opt / n  # P_os: optimizer state partitioned over N
    if setup.sharding in ("zero2", "zero3"):
        grads = grads / n  # P_g: gradients reduce-scattered to their owner
    if setup.sharding == "zero3" and (n > 1 or setup.offload_params):
        layer_params = spec.layer_linear_params  # one FSDP unit = one decoder layer
        unit = max(layer_params, spec.vocab_size * spec.hidden_size)
        # P_p: parameters partitioned; the current and the prefetched FSDP unit are gathered (FSDP docs).
        gathered = (unit + layer_params) * weight_bytes(setup)
        # offload_param: the partitions live in CPU RAM (deepspeed 0.18.2 runtime/zero/stage3.py:664-674); the GPU
        # holds only the units it gathers (memory/host.py counts the partitions on the host)
        weights = (0.0 if setup.offload_params else weights / n) + gathered
        note = (N_("ZeRO-3 parameter offload: the parameters live in CPU RAM; two units gathered on the GPU at a "
                   "time") if setup.offload_params else N_("ZeRO-3: two FSDP units gathered at a time"))
    if setup.sharding == "none" and n > 1:
        grads = grads * 2  # DDP gradient buckets (torch DDP: gradient_as_bucket_view=False doubles grads)
        note = N_("DDP keeps a bucket copy of the gradients")
    if setup.offload_optimizer:
        cpu = opt * (n if setup.sharding != "none" else 1)
        opt = 0.0  # optimizer state lives in CPU RAM (ZeRO-Offload)
    return weights, grads, opt, cpu, note


def _optimizer(spec: ModelSpec, setup: TrainingSetup, trainable: int, gb: float) -> tuple[float, float]:
    """(optimizer state, optimizer-step temporaries) before sharding, bytes."""
    factored = OPTIMIZERS[setup.optimizer].state_dtype == "factored"  # Adafactor
    if factored:
        opt = _adafactor_state(spec, setup)
    else:
        opt = trainable * optimizer_state_bytes(setup.optimizer, gb)
    # Optimizer-step temporaries: fused AdamW and bnb 8-bit kernels allocate none; torch's foreach path
    # allocates about one parameter-sized buffer (torch/optim/optimizer.py _foreach_doc); Adafactor makes
    # fp32 copies of the current tensor's param, grad and update.
    if factored:
        largest = max(spec.largest_linear_params, spec.vocab_size * spec.hidden_size) if setup.method == "full" else 0
        opt_temp = 3.0 * FP32 * largest
    elif setup.fused_optimizer:  # options.OPTIMIZERS[...].step_temporaries is False
        opt_temp = 0.0
    else:
        opt_temp = float(trainable * gb)
    return opt, opt_temp


class _Gradients(NamedTuple):
    """The gradients alive at each moment of backward, bytes per GPU."""

    head: float  # the head's (or tied embedding's) gradient, made first
    persist: float  # accumulated gradients living through the next forward
    first: float  # at the first layer's backward
    end: float  # at the end of backward (tied embeddings)
    step: float  # at the optimizer step


def _gradient_moments(spec: ModelSpec, setup: TrainingSetup, grads: float, gb: float) -> _Gradients:
    """The gradients alive at each moment of backward, from all of them (`grads`, sharded)."""
    head_params = spec.vocab_size * spec.hidden_size
    g_head = head_params * gb if setup.method == "full" else 0.0  # lm_head (or tied embedding) grad, first
    g_embed_last = head_params * gb if (setup.method == "full" and not spec.tie_embeddings) else 0.0
    # At the first layer's worst moment (its MLP backward starts) its own weight gradients do not exist yet
    # except the one being produced (the largest matrix): full FT holds one layer's gradients fewer (traces:
    # gpt_neox/qwen3 full mixed + checkpointing, measured gradient bytes at the peak).
    g_first_missing = 0.0
    if setup.method == "full" and not spec.moe_layers:
        g_first_missing = (spec.layer_linear_params - spec.largest_linear_params) * gb
    if setup.sharding in ("zero2", "zero3"):
        g_head /= setup.gpus
        g_embed_last /= setup.gpus
        g_first_missing /= setup.gpus
    g_persist = grads if setup.grad_accum > 1 else 0.0  # accumulated grads live through the next forward
    g_first = max(grads - g_embed_last - g_first_missing, g_persist)  # at the first layer's backward
    g_end, g_step = max(grads, g_persist), grads  # end of backward (tied embeddings), optimizer step
    if setup.optimizer_in_bwd:
        # torchtune training/memory.py register_optim_in_bwd_hooks (0.6.1): a post-accumulate-grad hook steps and
        # zeroes each parameter, so only the gradient being applied exists (the largest is one decoder matrix or
        # the V × H head); a tied weight's head gradient waits until the embedding's part is added.
        tied_wait = head_params * gb if spec.tie_embeddings else 0.0
        g_first = tied_wait + max(spec.largest_linear_params, head_params) * gb
        g_end, g_step = tied_wait, 0.0  # the tied weight's summed gradient, applied in its hook; no step phase
    return _Gradients(g_head, g_persist, g_first, g_end, g_step)


def _notes(spec: ModelSpec, setup: TrainingSetup, learns: bool, shard_note: str) -> list[str]:
    """What the user should know about this estimate, in plain words (marked for translation)."""
    notes = list(spec.notes)
    if learns:  # the wrapper's note says the tower is frozen (models.config.FROZEN_TOWER_NOTES); the
        notes = [n for n in notes if not is_frozen_tower_note(n)]  # trained tower's own note follows
    if shard_note:
        notes.append(shard_note)
    if OPTIMIZERS[setup.optimizer].paged:
        notes.append(N_("Paged optimizer state is counted on the GPU; under memory pressure bitsandbytes pages it "
                     "to CPU RAM, so a run slightly over the limit may still run, slower."))
    if setup.backend == "metal" and setup.attention == "sdpa":
        notes.append(MPS_ATTENTION)  # options.backends: MPS's SDPA runs the math path under grad
    elif attention_impl(setup, spec.family) != setup.attention:  # SDPA asked, transformers runs eager
        notes.append(Text(N_("{family}: transformers cannot run this model with SDPA ({source}), so it falls back "
                             "to eager attention, which keeps s²-sized attention scores per head: estimated as "
                             "eager. flash_attention_2 (on a GPU with flash-attn) avoids them."),
                          family=spec.family, source=NO_SDPA_FAMILIES[spec.family]))  # cached: translated when shown
    elif setup.attention == "eager":
        notes.append(N_("Eager attention stores s²-sized attention scores per head; SDPA/flash does not."))
    notes.extend(tower_notes(spec, setup))
    if setup.method == "qlora" and not uses_unsloth_model(spec, setup):  # Unsloth's QLoRA path is traced
        notes.append(N_("QLoRA cannot be traced on CPU; its storage follows bitsandbytes' NF4 layout."))
    if setup.lora_layers and setup.lora_layers < spec.num_layers and setup.method != "full":
        notes.append(Text(N_("Adapters on the last {n} of {layers} layers (layers_to_transform); the layers before them "
                             "keep {what}."), n=setup.lora_layers, layers=spec.num_layers,
                          what=Text(N_("their saved tensors: the input requires grad (checkpointing or PEFT's QLoRA "
                                       "preparation calls enable_input_require_grads)")) if input_requires_grad(setup)
                          else Text(N_("no activations: no gradient reaches them"))))
    return notes


def _peak_and_band(setup: TrainingSetup, phases: list[Phase], requests: Callable[[Phase], Allocations] | None = None,
                   allocator: AllocatorConfig | None = None
                   ) -> tuple[Phase, dict[str, float], tuple[DetailItem, ...], float, float]:
    """The peak phase, its components with the overhead (runtime context + allocator slack), its details and the
    low/high band. The slack follows the allocator the stack runs under (memory/allocator.py step_slack; `allocator`
    overrides it) and, with expandable segments, the peak's requests (`requests`, when the model knows them)."""
    peak = max(phases, key=lambda p: p.total)
    tensor_peak = peak.total
    # PyTorch on MPS has no CUDA context (torch/mps: the Metal device and MPSAllocator); its caching allocator's
    # slack stays. NCCL is CUDA's.
    mps = setup.backend == "metal"
    ctx_bytes = 0.0 if mps else CUDA_CONTEXT_BYTES + (NCCL_BYTES if setup.gpus > 1 else 0)
    cfg = allocator or stack_allocator(setup.stack)
    # the high band's stranded blocks are bounded by one backward's gradients, whenever the peak comes
    gradients = max(p.gradients for p in phases)
    slack = step_slack(cfg, tensor_peak, requests(peak) if requests else (), gradients)
    overhead = ctx_bytes + slack.expected
    components = {
        "weights": peak.weights, "gradients": peak.gradients, "optimizer": peak.optimizer,
        "activations": peak.activations, "overhead": overhead,
    }
    details = tuple(x for x in peak.details if x.bytes > 0) + (
        d("overhead.cuda_context", CONTEXT_LABEL, ctx_bytes,
          "none on MPS (no CUDA context)" if mps else "0.3–1.0 GB (lazy module loading)"),
        d("overhead.allocator_slack", N_("Allocator slack"), slack.expected, slack.formula),
    )
    nccl = 0.0 if mps else (NCCL_BYTES if setup.gpus > 1 else 0)
    low = tensor_peak * (1 - MODEL_ERROR_LOW) + (0.0 if mps else CUDA_CONTEXT_LOW) + nccl
    context_high = 0.0 if mps else CUDA_CONTEXT_HIGH
    if cfg.expandable:  # the slack's own high bound, on the tensors' high
        high = (tensor_peak + slack.high) * (1 + MODEL_ERROR_HIGH) + context_high + nccl
    else:
        high = tensor_peak * (1 + MODEL_ERROR_HIGH) * (1 + ALLOCATOR_SLACK) + context_high + nccl
    return peak, components, details, low, high


class _States(NamedTuple):
    """The model states per GPU (sharded) and the detail items every phase lists."""

    weights: float  # stored weights
    opt: float  # optimizer state
    opt_temp: float  # optimizer step temporaries
    gb: float  # bytes of one gradient
    grads: _Gradients
    weight_items: tuple[DetailItem, ...]
    opt_items: tuple[DetailItem, ...]
    lora: int  # trainable adapter parameters (the tower's when it learns)
    trainable: int
    learns: bool
    cpu_bytes: float
    shard_note: str
    weights_full: float  # every weight as loaded, before sharding (the host's model load and parameter offload)


def _states(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str]) -> _States:
    """The weights, gradients and optimizer state per GPU, from the trainable parameters."""
    lora = lora_params(spec, setup, adapted)
    # adapters on the tower's and projector's linears: stored whenever the tower is trained, but they get gradients
    # and optimizer state only when images run through it (towers.tower_learns)
    lora_tower = tower_lora_params(spec, setup.lora_rank) if setup.train_tower and setup.method != "full" else 0
    learns = tower_learns(setup)
    stored_lora = lora + lora_tower
    lora += lora_tower if learns else 0
    # full fine-tuning trains everything but a multimodal wrapper's frozen towers (unless it learns) and the
    # parameters the model itself creates with requires_grad=False (ERNIE 4.5 MoE's e_score_correction_bias)
    frozen_tower = 0 if learns else spec.params_tower
    trainable = spec.params_total - frozen_tower - spec.params_frozen if setup.method == "full" else lora

    w_frozen, w_train, w_formula = _weights(spec, setup, stored_lora)
    gb = trainable_bytes(setup)
    grads = float(trainable * gb)  # one gradient per trainable parameter, in its dtype
    opt, opt_temp = _optimizer(spec, setup, trainable, gb)

    weights, grads, opt, cpu_bytes, shard_note = _shard(setup, spec, w_frozen + w_train, grads, opt)
    opt_temp = opt_temp / (setup.gpus if setup.sharding != "none" else 1)
    if setup.offload_optimizer:
        opt_temp = 0.0
    moments = _gradient_moments(spec, setup, grads, gb)
    if setup.optimizer_in_bwd:
        opt_temp = 0.0  # torchtune steps each parameter in its backward hook: no step phase, no temporaries
    weight_items = (
        d("weights.base", N_("Frozen base weights"), weights - w_train if setup.method != "full" else 0.0, w_formula),
        d("weights.trainable", N_("Trainable weights"), w_train if setup.method != "full" else weights, w_formula),
    )
    opt_items = (d("optimizer.state", N_("Optimizer state"), opt, f"{setup.optimizer} state × {trainable:,} trainable params"),)
    return _States(weights, opt, opt_temp, gb, moments, weight_items, opt_items, lora, trainable, learns, cpu_bytes,
                   shard_note, w_frozen + w_train)


class _Casts(NamedTuple):
    """Autocast weight copies alive at each moment, and the trained tower's activations."""

    all: float  # every layer's copy (kept from forward to backward)
    layer: float  # one layer's copy
    head: float  # the head's copy
    tower_acts: float
    tower_formula: str


def _weight_casts(spec: ModelSpec, setup: TrainingSetup, lora: int, head_module: bool) -> _Casts:
    """The autocast weight copies (one unit at a time under ZeRO-3) and the trained tower's activations."""
    casts_all, casts_layer, head_casts = _casts(spec, setup, lora, head_module)
    if setup.sharding == "zero3" and (setup.gpus > 1 or setup.offload_params):
        casts_all = casts_layer  # FSDP/ZeRO-3 gathers and casts one unit at a time, then frees it
    tower_acts, tower_formula = tower_activation_bytes(spec, setup)
    if tower_acts and setup.precision == "mixed" and setup.method == "full" and not setup.grad_ckpt:
        # the trained tower's fp32 linear weights are cast to bf16 in its forward and kept until its backward,
        # which runs last (§3.3 M: + 2 B × P, for the tower's linears)
        tower_casts = 2.0 * sum(i * o * n for i, o, n in spec.tower_linears)
        casts_all += tower_casts
        casts_layer += tower_casts
    return _Casts(casts_all, casts_layer, head_casts, tower_acts, tower_formula)


class _Sizes(NamedTuple):
    """The activation sizes of one step, bytes per GPU."""

    layers: float  # every layer's saved tensors
    ckpt: float  # checkpointed layer inputs on the device
    offloaded: float  # checkpointed layer inputs in CPU RAM
    final: float
    one_layer: float
    loss: LossMemory
    bwd_temp: float
    dequant: float


def input_requires_grad(setup: TrainingSetup) -> bool:
    """Does the embedding output require grad, so that frozen layers before the first adapted one keep their saved
    tensors? With checkpointing, yes: transformers 5.24 modeling_utils.py:3190-3198 (activation_checkpointing_enable
    calls enable_input_require_grads for input_ids models), TRL 1.16 sft_trainer.py:898-900 and PEFT 0.21
    peft_model.py:184-185; PEFT's QLoRA preparation does it too (peft/utils/other.py:222-233,
    use_gradient_checkpointing=True by default). Otherwise no gradient reaches them (docs/formulas.md §3.9)."""
    return setup.grad_ckpt or (setup.method == "qlora" and setup.qlora_prep == "peft")


def _frozen_prefix_bytes(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, per_layer_adapted: float
                         ) -> float:
    """With adapters on the last N layers only (setup.lora_layers): the saved tensors of the layers, per token. The
    last N keep what an adapted layer keeps; the ones before keep nothing unless the input requires grad, and then
    what a layer without adapters keeps (the frozen linears need no inputs for a weight gradient)."""
    n = setup.lora_layers
    frozen = spec.num_layers - n
    kept = per_layer_adapted * n / spec.num_layers
    if input_requires_grad(setup):
        from dataclasses import replace

        bare = replace(ctx, adapted=frozenset())
        kept += layers_per_token(spec, bare, layer_sizes(spec, bare)) * frozen / spec.num_layers
    return kept


def _activation_sizes(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext) -> _Sizes:
    """The saved and transient activation sizes (docs/formulas.md §3, §4)."""
    tokens = setup.tokens
    moe_delta = moe_lora_delta_bytes(spec, ctx)  # per MoE layer
    sizes = layer_sizes(spec, ctx)  # each layer kind computed once
    per_token = layers_per_token(spec, ctx, sizes)
    if setup.lora_layers and setup.lora_layers < spec.num_layers and setup.method != "full":
        per_token = _frozen_prefix_bytes(spec, setup, ctx, per_token)
    layers = tokens * per_token + moe_delta * spec.moe_layers
    ckpt = tokens * checkpoint_per_token(spec, ctx)
    offloaded = 0.0
    if setup.offload_activations:
        # Offloaded checkpointing (transformers activation_checkpointing_enable(offload=True): save_on_cpu;
        # Unsloth's 'unsloth' mode): every layer input is copied to pinned CPU RAM in forward and one layer's
        # input at a time comes back for its recompute in backward.
        # Two layer inputs stay on the device: the one being recomputed and the next one brought back
        # (real-width traces with offload: +1 × T·h over the one-layer count).
        offloaded = ckpt
        ckpt = min(2, spec.num_layers) * tokens * ctx.resid * spec.hidden_size
    final = tokens * (final_per_token(spec, ctx) + rope_per_token(spec, ctx))
    one_layer = tokens * max_layer_per_token(spec, ctx, sizes) + moe_delta + moe_lora_delta_grad_bytes(spec, ctx)
    loss = loss_memory(spec, setup, ctx)
    # Backward temporaries of the layer being differentiated, net of what it has freed (activations.py).
    bwd_temp = tokens * backward_extra_per_token(spec, ctx, sizes)
    # QLoRA: each 4-bit matmul dequantises its whole weight to the compute dtype (bnb _dequant_linear_fallback).
    c = compute_bytes(setup)
    dequant = float(spec.largest_dense_linear_params * c) if setup.method == "qlora" else 0.0
    if setup.method == "qlora" and _quantizes_every_linear(setup):
        dequant = float(max(spec.largest_linear_params, spec.vocab_size * spec.hidden_size) * c)  # the 4-bit head
    return _Sizes(layers, ckpt, offloaded, final, one_layer, loss, bwd_temp, dequant)


class _Items(NamedTuple):
    """The activation detail items both phase lists pick from."""

    final: DetailItem
    ids: DetailItem
    loss_kept: DetailItem
    loss_tr: DetailItem
    temp: DetailItem
    one: DetailItem
    deq_tower: tuple[DetailItem, DetailItem]


def _activation_items(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, sz: _Sizes, casts: _Casts) -> _Items:
    """The activation detail items shared by the stored and the checkpointed step."""
    tokens = setup.tokens
    act_final = d("activations.final", N_("Final norm, head input, token ids"), sz.final, "T × (norm + head input + ids)")
    # Once backward reaches the decoder layers the final norm's and the head's saved tensors are freed: only the
    # token ids and RoPE cos/sin remain (tracer inventories at the last layer's backward).
    ids_rope = tokens * (2 * INT64 + rope_per_token(spec, ctx))
    act_ids = d("activations.ids_rope", N_("Token ids, RoPE cos/sin"), ids_rope, "T × (16 + 2·c·d)")
    if ctx.litgpt is not None:
        act_ids = act_final  # LitGPT's own model: calibrated with the final tensors counted (§3.6)
    loss = sz.loss
    act_loss_kept = d("activations.loss", N_("Logits and loss (saved)"), loss.kept, loss.kept_formula)
    act_loss_tr = d("activations.loss_backward", N_("Loss backward buffers"), loss.transient, loss.transient_formula)
    act_temp = d("activations.backward_temporaries", N_("Backward temporaries"), sz.bwd_temp, "c × T × (2I + 2h), or eager: T × (8 − c) × a × s")
    act_one = d("activations.recomputed_layer", N_("Recomputed layer"), sz.one_layer - tokens * checkpoint_alias_per_token(spec, ctx),
                "T × one layer's saved tensors (less its own checkpointed input)")
    act_deq = d("activations.qlora_dequant", N_("QLoRA dequantisation buffer"), sz.dequant, "largest 4-bit matrix in 16-bit")
    # a trained tower's saved tensors: made first in forward, freed after the language model's backward
    act_tower = d("activations.tower", N_("Vision tower activations (trained)"), casts.tower_acts, casts.tower_formula)
    return _Items(act_final, act_ids, act_loss_kept, act_loss_tr, act_temp, act_one, (act_deq, act_tower))


def _phase(st: _States, key: str, name: str, casts: float, grad: float, grad_key: str, grad_label: str,
           acts: list[DetailItem], temp: float = 0.0) -> Phase:
    """One moment of the step: the model states, the autocast copies, the gradients alive and `acts`."""
    items = list(st.weight_items)
    if casts:
        items.append(d("weights.autocast_copies", N_("Autocast bf16 weight copies"), casts, "2 B × weights used under autocast"))
    items.append(d(grad_key, grad_label, grad, f"{st.gb} B × trainable params"))
    items.extend(st.opt_items)
    if temp:
        items.append(d("optimizer.step_temporaries", N_("Optimizer step temporaries"), temp, "foreach/Adafactor step buffers"))
    items.extend(acts)
    return Phase(key, name, st.weights + casts, grad, st.opt + temp, sum(a.bytes for a in acts), tuple(items))


def _stored_phases(st: _States, casts: _Casts, sz: _Sizes, it: _Items, g_loss: float) -> list[Phase]:
    """Backward without checkpointing: every layer's saved tensors are alive until its backward."""
    g = st.grads
    act_layers = d("activations.layers", N_("Layer activations"), sz.layers, "T × Σ layers' saved tensors")
    return [
        _phase(st, "loss_backward", N_("loss backward"), casts.all, g.persist + g_loss, "gradients.accumulated",
               N_("Gradients (accumulated)"),
               [act_layers, it.final, it.loss_kept, it.loss_tr, *it.deq_tower[1:]]),
        _phase(st, "backward.output_layer", N_("backward, output layer"), casts.all, g.persist + g.head,
               "gradients.head", N_("Gradients (head)"),
               [act_layers, it.ids, it.temp, *it.deq_tower]),
        _phase(st, "backward.first_layer", N_("backward, first layer"), casts.layer, g.first, "gradients.all",
               N_("Gradients"), [d("activations.first_layer", N_("First layer's activations"), sz.one_layer, "T × one layer"), it.temp,
                                 *it.deq_tower]),
    ]


def _checkpointed_phases(spec: ModelSpec, setup: TrainingSetup, ctx: ActivationContext, st: _States, casts: _Casts,
                         sz: _Sizes, it: _Items, g_loss: float) -> list[Phase]:
    """Backward with checkpointing: the layer inputs are kept and each layer is recomputed in its backward."""
    g = st.grads
    act_ckpt = d("activations.checkpoints", N_("Checkpointed layer inputs"), sz.ckpt,
                 "2 × T × h (layer inputs back from CPU)" if sz.offloaded else "T × L × h (layer inputs)")
    recompute = d("activations.recompute", N_("Recompute transients (LoRA)"),
                  setup.tokens * recompute_extra_per_token(spec, ctx, sz.bwd_temp / setup.tokens),
                  "T × (c·I + 4·I + 5·c·h) − backward temporaries")
    return [
        _phase(st, "loss_backward", N_("loss backward"), casts.head, g.persist + g_loss, "gradients.accumulated",
               N_("Gradients (accumulated)"),
               [act_ckpt, it.final, it.loss_kept, it.loss_tr, *it.deq_tower[1:]]),
        _phase(st, "backward.last_layer", N_("backward, recomputing last layer"), casts.head + casts.layer,
               g.persist + g.head, "gradients.head", N_("Gradients (head)"),
               [act_ckpt, it.ids, it.one, it.temp, recompute, *it.deq_tower]),
        _phase(st, "backward.first_layer", N_("backward, recomputing first layer"), casts.layer, g.first,
               "gradients.all", N_("Gradients"), [it.one, it.temp, recompute, *it.deq_tower]),
    ]


def _closing_phases(spec: ModelSpec, setup: TrainingSetup, st: _States) -> list[Phase]:
    """The tied embedding's end of backward, the optimizer step and LitGPT's 16-bit model load."""
    phases: list[Phase] = []
    if setup.method == "full" and spec.tie_embeddings:
        # Tied embeddings: at the end of backward autograd holds the head's gradient of the shared weight (in
        # its input buffer), the embedding's dense gradient and their sum at once (real-width traces:
        # calibration/README.md), each V × H in the gradient dtype.
        head_params = spec.vocab_size * spec.hidden_size
        tied = 2 * head_params * st.gb / (setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
        phases.append(_phase(st, "backward.tied_embedding", N_("backward, tied embedding"), 0.0, st.grads.end + tied,
                             "gradients.tied", N_("Gradients (+ embedding gradient and the tied sum)"), []))
    phases.append(_phase(st, "optimizer_step", N_("optimizer step"), 0.0, st.grads.step, "gradients.all",
                         N_("Gradients"), [], st.opt_temp))
    if setup.method == "qlora" and setup.load_16bit_first:
        # LitGPT's bnb precision plugin loads the bf16 state dict onto the GPU before quantising: the
        # load-time high-water mark is the 16-bit model (measured ≈ 2 B × params in its QLoRA tables).
        load = float(2 * spec.params_total)
        phases.append(Phase("model_load", N_("model load (16-bit before quantising)"), load, 0.0, 0.0, 0.0, (
            d("weights.load_16bit", N_("16-bit checkpoint before quantisation"), load, "2 B × params"),)))
    return phases


def _check_torch_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """What a PyTorch stack cannot do with this model: load an MLX-quantised checkpoint, or adapt more layers
    than it has."""
    if spec.quantization:
        raise ValueError(Text(N_("{model} is an MLX-quantised checkpoint (config.json 'quantization'); only the MLX-LM "
                                 "stack loads it"), model=spec.name))
    if setup.lora_layers > spec.num_layers:
        raise ValueError(Text(N_("--lora-layers {n} is more than {model}'s {layers} decoder layers (PEFT raises for "
                                 "a layers_to_transform index it cannot find)"), n=setup.lora_layers, model=spec.name,
                              layers=spec.num_layers))


def check_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """ValueError with the reason when this stack cannot train this model this way (the checks that need the
    model: MLX-LM's supported families, an MLX-quantised checkpoint on a PyTorch stack, more LoRA layers than the
    model has). estimate() raises the same."""
    if uses_mlx_model(setup):
        check_mlx_model(spec, setup)
    else:
        _check_torch_model(spec, setup)


# Estimates are pure functions of two frozen (hashable) dataclasses, and one calculator rerun asks for the same
# ones again (the page, its remedies and its solvers; the next rerun mostly the same probes): keep the latest
# few thousand (a few kB each). estimate.cache_info().misses counts the estimates actually computed.
ESTIMATE_CACHE_SIZE = 4096


def _unsloth_phases(spec: ModelSpec, setup: TrainingSetup, st: _States, capacity: float | None
                    ) -> tuple[list[Phase], _States, dict[str, float | int], list[str], UnslothPath]:
    """Unsloth's own step (estimator/memory/unsloth_model.py, docs/formulas.md §3.8): its moments priced with the
    model states, the two decisions Unsloth takes from the card's free memory, and the host RAM it uses.
    Returns (phases, the states with the embedding where Unsloth puts it, host_ram's keyword terms, notes, the
    path)."""
    notes: list[str] = []
    on_gpu = True
    if capacity is not None:
        usable_after_load = capacity - CUDA_CONTEXT_BYTES - st.weights
        on_gpu = not embedding_offloaded(spec, setup, usable_after_load, st.trainable)
    embed_host = 0.0
    if not on_gpu:
        embed = float(2 * spec.vocab_size * spec.hidden_size)  # the frozen bf16 input embedding
        base = [x for x in st.weight_items if x.key == "weights.base"][0]
        items = tuple(d(x.key, x.label, x.bytes - embed, x.formula + " − the input embedding (in CPU RAM)")
                      if x.key == "weights.base" else x for x in st.weight_items)
        assert base.bytes >= embed
        st = st._replace(weights=st.weights - embed, weight_items=items)
        embed_host = embed
        notes.append(N_("Unsloth's offload_embedding='auto' moves the frozen input embedding to CPU RAM on this card "
                        "(its own step reserve exceeds the memory left after loading)."))
    path = unsloth_path(spec, setup, capacity, embedding_on_gpu=on_gpu)
    phases = _unsloth_priced(spec, setup, st, path)
    if capacity is not None and path.double_buffer:
        # Double buffering starts after step 1 only when more than 512 MiB is free (unsloth_zoo
        # gradient_checkpointing.py:1425-1446): free ≈ the card less the context and the step's reserved peak (the
        # expandable segment keeps step 1's pages mapped until an allocation fails, release_cached_blocks).
        single = without_double_buffer(path)
        quiet = _unsloth_priced(spec, setup, st, single)
        peak = max(quiet, key=lambda p: p.total)
        slack = step_slack(allocator_for(single), peak.total, phase_requests(spec, setup, single)(peak),
                           peak.gradients)
        if capacity - CUDA_CONTEXT_BYTES - peak.total - slack.expected <= DOUBLE_BUFFER_HEADROOM:
            path, phases = single, quiet
    host = {**host_terms(spec, setup, path), "embedding_cpu_bytes": embed_host}
    if path.offloaded:
        notes.append(N_("Unsloth copies each layer's input to pinned CPU RAM (offloaded checkpointing): the "
                        "host RAM figure counts it."))
    notes.append(N_("Unsloth's attention is counted as its default install runs it on an Ampere or newer GPU: "
                    "padding-free rows through PyTorch's flash kernel (xformers on older GPUs saves expanded K/V)."))
    return phases, st, host, notes, path


def _unsloth_priced(spec: ModelSpec, setup: TrainingSetup, st: _States, path) -> list[Phase]:
    """Unsloth's moments (unsloth_model.unsloth_moments) with the model states and the gradients alive."""
    g = st.grads
    # At the first layer's MLP backward its own LoRA gradients are not made yet (the fused kernels return them at
    # their end, fast_lora.py:584-604): every other layer's are.
    share = (spec.num_layers - 1) / spec.num_layers
    grads = {"persist": g.persist, "all_but_first": max(g.persist, g.first * share)}
    labels = {"persist": N_("Gradients (accumulated)"), "all_but_first": N_("Gradients")}
    keys = {"persist": "gradients.accumulated", "all_but_first": "gradients.all"}
    return [_phase(st, m.key, m.label, 0.0, grads[m.grads], keys[m.grads], labels[m.grads], list(m.acts))
            for m in unsloth_moments(spec, setup, path)]


def estimate_for_path(spec: ModelSpec, setup: TrainingSetup, path) -> Estimate:
    """Unsloth's step on a given path (activations.unsloth.UnslothPath) instead of the one estimate() resolves: the
    tracer fixtures fix the attention backend, double buffering and the loss pass, and the published tables' code
    (unsloth_model.published_tables_path) is checked through the same phases (validation/unsloth.py)."""
    spec = stack_spec(spec, setup)
    st = _states(spec, setup, context(spec, setup).adapted)
    phases = _unsloth_priced(spec, setup, st, path) + _closing_phases(spec, setup, st)
    peak, components, details, low, high = _peak_and_band(setup, phases, phase_requests(spec, setup, path),
                                                          allocator_for(path))
    return Estimate(
        model=spec, setup=setup, mode="detailed", params_total=spec.params_total, params_trainable=st.trainable,
        components_bytes=components, details=details, total_bytes=peak.total + components["overhead"],
        low_bytes=low, high_bytes=high, peak_phase=peak.name, phases=tuple(phases),
        cpu_offload_bytes=st.cpu_bytes + host_offload_bytes(spec, setup, path), notes=(),
    )


@lru_cache(maxsize=ESTIMATE_CACHE_SIZE)
def estimate(spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> Estimate:
    """Peak per-GPU memory of one steady-state training step, broken into components at the peak phase.
    `device_capacity` (bytes) is read only where the stack decides by the card's memory (Unsloth; callers pass it
    when unsloth_model.needs_capacity says so)."""
    if setup.image_tokens and not spec.tower_kind:
        raise ValueError(Text(N_("image tokens per example need a multimodal model; {model} has no vision tower"),
                              model=spec.name))
    check_tower(spec, setup)
    if uses_mlx_model(setup):  # the MLX-LM stack: mlx-lm's own step (memory/mlx_step.py)
        return mlx_estimate(spec, setup)
    _check_torch_model(spec, setup)
    spec = stack_spec(spec, setup)  # the model as the stack builds it (LitGPT: untied, 4-bit head)
    ctx = context(spec, setup)
    st = _states(spec, setup, ctx.adapted)
    extra_notes: list[str] = []
    requests, allocator = None, None  # the stack's allocator; per-request rounding where the model knows the requests
    if uses_unsloth_model(spec, setup):
        phases, st, host_kw, extra_notes, path = _unsloth_phases(spec, setup, st, device_capacity)
        requests, allocator = phase_requests(spec, setup, path), allocator_for(path)
    else:
        casts = _weight_casts(spec, setup, st.lora, ctx.head_module)
        sz = _activation_sizes(spec, setup, ctx)
        # Liger / Cut Cross-Entropy compute the head's weight gradient in forward: it exists from the loss on.
        g_loss = st.grads.head if sz.loss.impl in ("liger", "cce") else 0.0
        it = _activation_items(spec, setup, ctx, sz, casts)
        if not setup.grad_ckpt:
            phases = _stored_phases(st, casts, sz, it, g_loss)
        else:
            phases = _checkpointed_phases(spec, setup, ctx, st, casts, sz, it, g_loss)
        host_kw = {"checkpoint_cpu_bytes": sz.offloaded}
        note = not_modelled_note(spec, setup)
        extra_notes = [note] if note else []
    phases += _closing_phases(spec, setup, st)

    peak, components, details, low, high = _peak_and_band(setup, phases, requests, allocator)
    notes = _notes(spec, setup, st.learns, st.shard_note) + extra_notes
    cpu_params = st.weights_full if setup.offload_params else 0.0
    host = host_ram(spec, setup, trainable=st.trainable, weights_bytes=st.weights_full,
                    optimizer_cpu_bytes=st.cpu_bytes, **host_kw)
    offloaded = host_kw["checkpoint_cpu_bytes"] + host_kw.get("checkpoint_slots_bytes", 0.0) + host_kw.get(
        "embedding_cpu_bytes", 0.0)
    return Estimate(
        model=spec, setup=setup, mode="detailed", params_total=spec.params_total, params_trainable=st.trainable,
        components_bytes=components, details=details, total_bytes=peak.total + components["overhead"],
        low_bytes=low, high_bytes=high, peak_phase=peak.name, phases=tuple(phases),
        cpu_offload_bytes=st.cpu_bytes + offloaded + cpu_params, notes=tuple(notes), host=host,
        weights_full_bytes=st.weights_full,
    )
