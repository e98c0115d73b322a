"""The model states of one training step, per GPU: the weights (frozen and trainable), one gradient per trainable
weight and the gradients alive at each moment of backward, the optimizer's state and step temporaries, and how
data parallelism and ZeRO shard them (docs/formulas.md §2, §5). memory/hf/runtime.py prices the phases with them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ...i18n import N_
from ...options.optimizers import OPTIMIZERS
from ...options.stacks import get_stack
from ...options.versions import MOE_UNFUSED_IN_4
from ..adapters import lora_params
from ..precision import (
    FP32,
    NF4_BYTES,
    NF4_DQ_BYTES,
    optimizer_state_bytes,
    trainable_bytes,
    weight_bytes,
)
from ..result import DetailItem
from ..result import detail as d
from ..towers import tower_learns, tower_lora_params

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _weights(spec: ModelSpec, setup: TrainingSetup, lora: int, fused: int) -> tuple[float, float, str]:
    """(frozen bytes, trainable bytes, formula). QLoRA: decoder linears in NF4 + double quant; the rest
    (embeddings, head, norms, and the `fused` routed-expert parameters left unquantised) 16-bit, or fp32 after
    prepare_model_for_kbit_training (docs/formulas.md §2.1)."""
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
    four_bit = spec.params_quantizable - fused
    other = spec.params_total - four_bit
    other_bytes = FP32 if (setup.qlora_fp32_upcast or setup.precision in ("mixed", "fp32")) else 2
    nf4 = NF4_DQ_BYTES if setup.nf4_double_quant else NF4_BYTES
    frozen = four_bit * nf4 + other * other_bytes
    experts = f" (incl. {fused:,} routed-expert params bitsandbytes leaves unquantised)" if fused else ""
    return frozen, adapters, f"{nf4:.4f} B × {four_bit:,} 4-bit + {other_bytes} B × {other:,} other{experts}"


def unquantised_experts(spec: ModelSpec, setup: TrainingSetup) -> int:
    """Routed-expert parameters a 4-bit base keeps in 16 bits. transformers 5 stores them as fused 3-D parameters,
    which bitsandbytes does not quantise (ModelSpec.params_routed_experts; bitsandbytes issue #1849); on transformers 4
    the families of MOE_UNFUSED_IN_4 built each expert from nn.Linear modules, which it quantises (version fork
    transformers_fused_moe_experts: models/mixtral/modeling_mixtral.py:57-65, 4.57.6); a stack that swaps every
    nn.Linear itself (LitGPT, Stack.quantize_head) has per-expert nn.Linear modules and quantises them."""
    if quantizes_every_linear(setup):
        return 0
    if spec.family in MOE_UNFUSED_IN_4 and setup.older("transformers_fused_moe_experts"):
        return 0
    return spec.params_routed_experts


def quantizes_every_linear(setup: TrainingSetup) -> bool:
    """LitGPT's bitsandbytes plugin replaces every nn.Linear (Stack.quantize_head's source), experts included."""
    return bool(setup.stack) and get_stack(setup.stack).quantize_head


def _adafactor_state(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str]) -> float:
    """Adafactor (HF, beta1=None) keeps fp32 row and column factors per matrix, 4·(R + C) bytes, and a full
    fp32 second moment for 1-D tensors (transformers optimization.py). `adapted`: the linears with adapters."""
    if setup.method != "full":
        r = setup.lora_rank
        targets = adapted
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


def _optimizer(spec: ModelSpec, setup: TrainingSetup, trainable: int, gb: float, adapted: frozenset[str]
               ) -> tuple[float, float]:
    """(optimizer state, optimizer-step temporaries) before sharding, bytes."""
    factored = OPTIMIZERS[setup.optimizer].state_dtype == "factored"  # Adafactor
    if factored:
        opt = _adafactor_state(spec, setup, adapted)
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


class Gradients(NamedTuple):
    """The gradients alive at each moment of backward, bytes per GPU."""

    head: float  # the head's (or tied embedding's) gradient, made first
    persist: float  # accumulated gradients living through the next forward
    first: float  # at the first layer's backward
    end: float  # at the end of backward (tied embeddings)
    step: float  # at the optimizer step


def _gradient_moments(spec: ModelSpec, setup: TrainingSetup, grads: float, gb: float) -> Gradients:
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
    return Gradients(g_head, g_persist, g_first, g_end, g_step)


class States(NamedTuple):
    """The model states per GPU (sharded) and the detail items every phase lists."""

    weights: float  # stored weights
    opt: float  # optimizer state
    opt_temp: float  # optimizer step temporaries
    gb: float  # bytes of one gradient
    grads: Gradients
    weight_items: tuple[DetailItem, ...]
    opt_items: tuple[DetailItem, ...]
    lora: int  # trainable adapter parameters (the tower's when it learns)
    trainable: int
    learns: bool
    cpu_bytes: float
    shard_note: str
    weights_full: float  # every weight as loaded, before sharding (the host's model load and parameter offload)


def model_states(spec: ModelSpec, setup: TrainingSetup, adapted: frozenset[str], lora: int | None = None,
                 experts_16bit: int | None = None) -> States:
    """The weights, gradients and optimizer state per GPU, from the trainable parameters: `lora` adapter parameters
    as the runtime builds them (PEFT's count of the `adapted` linears by default); `experts_16bit`: the routed-expert
    parameters a 4-bit base keeps unquantised, as the runtime loads them (unquantised_experts by default)."""
    if lora is None:
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

    fused = unquantised_experts(spec, setup) if experts_16bit is None else experts_16bit
    w_frozen, w_train, w_formula = _weights(spec, setup, stored_lora, fused)
    gb = trainable_bytes(setup)
    grads = float(trainable * gb)  # one gradient per trainable parameter, in its dtype
    opt, opt_temp = _optimizer(spec, setup, trainable, gb, adapted)

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
    return States(weights, opt, opt_temp, gb, moments, weight_items, opt_items, lora, trainable, learns, cpu_bytes,
                  shard_note, w_frozen + w_train)
