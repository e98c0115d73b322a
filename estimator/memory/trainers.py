"""Preference and RL fine-tuning: one description per trainer and the memory each adds to a training step.

TRL 1.16.0 is modelled (the newest release; sources under trl/trainer/ and trl/experimental/, cited per fact).
A trainer changes three things about the SFT step that memory.estimate prices (docs/formulas.md §9):
- what one forward runs on: chosen + rejected concatenated (2 × batch sequences) for DPO, ORPO, SimPO and
  reward models; prompt + completion for GRPO;
- a reference model: a second frozen copy of the weights for full fine-tuning (none with PEFT, whose
  reference is the base with the adapter switched off; none with precompute_ref_log_probs), and a no_grad
  reference forward while the policy's saved activations are alive;
- generation (GRPO): transformers' generate with the KV cache of every sequence in flight, or vLLM colocated
  (it reserves vllm_gpu_memory_utilization of the device), or a vLLM server on other GPUs.
Pure Python: no Streamlit, Plotly or torch."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from ..i18n import N_, Text, _, format_int
from ..job.trainer import policy_setup, trainer_head
from ..options.trainers import DEFAULT_PROMPT_LEN, GENERATION_MODES, TRL_VERSION
from .allocator import stack_allocator
from .hf.activations.loss import TRL_TOKEN_TILE, TRL_VOCAB_TILE
from .precision import FP32, compute_bytes, trainable_bytes, weight_bytes
from .result import DetailItem, Phase, detail_bytes
from .result import detail as d
from .runtimes import runtime_for

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.trainers import TrainerOption
    from .parts import StepParts


REWARD_SPEC_NOTE = "Reward model: the output head is a 1-output score layer."  # reward_spec's; trainer_notes says it


def reward_spec(spec: ModelSpec) -> ModelSpec:
    """The sequence-classification model (transformers GenericForSequenceClassification): the vocabulary head is
    replaced by a [1, hidden] score head, so the spec's output head has one row (vocab_size 1, untied). The input
    embedding keeps its V × H parameters (and, for full fine-tuning, its dense gradient); an untied model loses
    its V × H lm_head. Traced: calibration/trainer_trace.py (reward rows)."""
    head = spec.vocab_size * spec.hidden_size
    removed = 0 if spec.tie_embeddings else head
    return replace(spec, vocab_size=1, tie_embeddings=False,
                   params_total=spec.params_total - removed + spec.hidden_size,
                   params_embedding=spec.params_embedding - removed + spec.hidden_size,
                   notes=(*spec.notes, REWARD_SPEC_NOTE))


# ORPO / CPO (trl/experimental, TRL 1.16.0) build the logits themselves instead of the fused head. Over
# T = 2 × batch × length tokens (traced: calibration/trainer_trace.py): the [T, V] logits in the compute dtype
# c stay alive (the returned chosen/rejected slices keep them); selective_log_softmax saves each row's
# log-softmax and ORPO's cross-entropy on the chosen half saves its log-softmax (CPO's NLL term is off with
# cpo_alpha=0, pure SimPO): in fp32 under autocast (log_softmax autocasts to fp32), else in c. In backward the
# logits gradient (c·T·V) meets the logits, the chosen-half log-softmax and, for full fine-tuning, the head's
# weight gradient.
ORPO_NLL_SHARE = {"orpo": 0.5, "simpo": 0.0}  # the chosen half's cross-entropy log-softmax, × T·V


def reference_bytes(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> float:
    """The reference model's weights on this GPU: a full copy in the policy's load dtype for full fine-tuning
    (create_model_from_path with the policy's dtype); none with PEFT (adapter switched off) or when
    precomputed. ZeRO-3 shards it like the policy (prepare_deepspeed / prepare_fsdp)."""
    if setup.method != "full" or not tr.uses_reference():
        return 0.0
    copy = float(spec.params_total * weight_bytes(setup))
    if setup.sharding == "zero3" and setup.gpus > 1:
        copy /= setup.gpus
    return copy


def nograd_layer_per_token(spec: ModelSpec, setup: TrainingSetup) -> float:
    """Peak working set of one decoder layer in a no_grad forward, bytes per token: the residual input and
    output plus the larger of the attention block (normed input, q, k, v, attention output) and the MLP block
    (normed input, gate, up and their product). Nothing is saved for backward."""
    c = compute_bytes(setup)
    resid = FP32 if setup.precision in ("mixed", "fp32") else c
    h = spec.hidden_size
    attn = c * (h + 2 * spec.q_dim + 2 * spec.kv_dim)
    if spec.moe_layers:
        inter = max(spec.intermediate_size if spec.num_layers > spec.moe_layers else 0,
                    spec.moe_intermediate_size * max(spec.experts_per_token, 1))
    else:
        inter = spec.intermediate_size
    mlp = c * (h + (3 if spec.gated_mlp else 2) * inter)
    return 2 * resid * h + max(attn, mlp)


def scoring_forward_bytes(spec: ModelSpec, setup: TrainingSetup, tokens: int, fused: bool,
                          logits: float | None = None) -> float:
    """A no_grad forward that scores `tokens` tokens (a reference or old-policy forward): one layer's working
    set, one autocast copy of a layer's weights under mixed precision, and the head: TRL's fused head keeps
    the gathered hidden states and one 4096 × 32768 tile (trl/kernels/chunked_logprob.py); full logits
    otherwise (c·T·V, or `logits` bytes: the head's own count, _Head.ref)."""
    c = compute_bytes(setup)
    out = tokens * nograd_layer_per_token(spec, setup)
    if setup.precision == "mixed" and setup.method != "qlora":
        out += 2 * spec.layer_linear_params  # autocast bf16 copy of the layer being run
    if fused:
        out += c * tokens * spec.hidden_size + c * min(tokens, TRL_TOKEN_TILE) * min(
            spec.vocab_size, TRL_VOCAB_TILE) + 3 * FP32 * tokens
    else:
        out += c * tokens * spec.vocab_size if logits is None else logits
    return float(out)


def kv_cache_bytes(spec: ModelSpec, setup: TrainingSetup, sequences: int, length: int) -> float:
    """transformers DynamicCache at the end of generation: keys and values for every layer, KV head, head
    dimension and position of every sequence in flight, in the compute dtype (2 × L × n_kv × d × c per token)."""
    return float(2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * compute_bytes(setup) * sequences * length)


class _Head(NamedTuple):
    """A trainer's full-vocabulary logits head, bytes per logit (× T·V): what the policy keeps for backward (in place
    of the SFT loss's items), the moment of the backward through the logits, and what a no_grad scoring forward
    (the reference's) adds; T = `tokens`, the positions whose logits are built."""

    kept: float
    kept_formula: str
    grad: float  # the whole backward-through-the-logits moment (what is kept included)
    grad_label: str
    grad_formula: str
    ref: float
    tokens: int


def _logits_head(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, ps: TrainingSetup) -> _Head | None:
    """The full logits a trainer builds (job.trainer.trainer_head): ORPO and SimPO always; DPO, KTO and GRPO before
    TRL 1.15, by release (docs/versions.md, "The DPO head before 1.15"). None: the fused head or a score head."""
    if trainer_head(setup, tr) != "logits":
        return None
    opt = tr.option
    c = compute_bytes(ps)
    sm = FP32 if ps.autocast else c  # log_softmax autocasts to fp32
    if opt.head == "logits":  # ORPO / SimPO (TRL 1.16's experimental trainers): the comment above ORPO_NLL_SHARE
        nll = ORPO_NLL_SHARE[opt.id]
        return _Head(c + sm * (1 + nll), f"c·T·V logits + {sm} B × T·V row log-softmax" + (
            f" + {sm} B × T·V / 2 chosen-half cross-entropy" if nll else ""), (2 + nll) * c,
            N_("Logits, their gradient, chosen-half log-softmax"), f"{2 + nll:g} × c·T·V", c, ps.tokens)
    # GRPO scores the completion tokens only (grpo_trainer.py _get_per_token_logps, 1.14.0: logits[:, -logits_to_keep:])
    tokens = ps.batch * tr.completion_length if opt.generates else ps.tokens
    label = N_("Logits, log-softmax and their gradients")
    if opt.id == "dpo" and setup.older("trl_dpo_rewrite"):
        # TRL < 0.29 concatenated_forward (dpo_trainer.py:1105-1230, 0.16.0): the logits are freed after
        # selective_log_softmax, which keeps the rows' log-softmax (bf16 rows) or, on fp32 logits, the logits
        # (logsumexp saves its input); the fp32 path's backward makes the gather's and the stacked rows' gradients
        grad = sm + (2 * FP32 if c == FP32 else c)
        return _Head(sm, f"{sm} B × T·V row log-softmax (TRL < 0.29)", grad, label,
                     f"{sm} B kept + {grad - sm:g} B gradients × T·V", c, tokens)
    if opt.id == "dpo" and setup.older("trl_dpo_no_contiguous"):
        # TRL 0.29-1.5 (dpo_trainer.py:1120-1124, 1158, 0.29.0): the outputs (logits) alive until the loss returns, a
        # contiguous shifted copy and the log-softmax; the reference forward makes its logits and their copy
        return _Head(2 * c + sm, f"2·c·T·V logits and shifted copy + {sm} B × T·V log-softmax (TRL 0.29–1.5)",
                     2 * c + sm + c, label, "kept + c·T·V gradient", 2 * c, tokens)
    # DPO on TRL 1.6-1.14 (dpo_trainer.py:1079, 1195, 1232, 1.6.0; :1347, 1.14.0), KTO and GRPO before 1.15: the
    # logits and the rows' log-softmax, the logits' gradient in backward
    return _Head(c + sm, f"c·T·V logits + {sm} B × T·V log-softmax (TRL < 1.15)", c + sm + c, label,
                 "kept + c·T·V gradient", c, tokens)


def _loss_swap(spec: ModelSpec, opt: TrainerOption, head: _Head | None
               ) -> tuple[dict[str, DetailItem], tuple[str, ...]]:
    """The SFT loss items a trainer's head replaces (its own logits) and those it drops (a score head)."""
    dropped = ("activations.loss", "activations.loss_backward") if opt.head == "score" else ()
    swap: dict[str, DetailItem] = {}
    if head is not None:
        swap = {"activations.loss": d(
            "activations.logits", N_("Logits and log-softmaxes (saved)"), head.kept * head.tokens * spec.vocab_size,
            head.kept_formula)}
        dropped = ("activations.loss_backward",)
    return swap, dropped


@dataclass(frozen=True)
class _Lift:
    """What turns an SFT phase into a trainer's: the reference copy, vLLM's reservation and the loss items."""

    ref: float
    ref_item: DetailItem
    vllm: float
    vllm_item: DetailItem
    vllm_always: float  # vLLM's reservation outside generation (none with sleep mode)
    swap: dict[str, DetailItem]
    dropped: tuple[str, ...]

    def phase(self, p: Phase, extra_acts: tuple[DetailItem, ...] = (), drop: tuple[str, ...] | None = None,
              key: str | None = None, name: str | None = None) -> Phase:
        """The SFT phase `p` with the loss items swapped or dropped, `extra_acts`, the reference and vLLM."""
        drop = self.dropped if drop is None else drop
        gen = self.vllm_always
        items = [self.swap.get(x.key, x) for x in p.details if x.key not in drop] + list(extra_acts)
        acts = sum(x.bytes for x in items if x.component == "activations")
        if self.ref:
            items.append(self.ref_item)
        if gen:
            items.append(self.vllm_item if self.vllm else d("generation.other", N_("Generation"), gen, ""))
        return Phase(key or p.key, name or p.name, p.weights, p.gradients, p.optimizer, acts, tuple(items),
                            reference=self.ref, generation=gen)


def _lift(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, mode: str | None, head: _Head | None,
          device_capacity: float | None) -> _Lift:
    """The reference model and vLLM's reservation every phase carries, and the trainer's loss items."""
    ref = reference_bytes(spec, setup, tr)
    ref_item = d("reference.model", N_("Reference model (frozen copy)"), ref, "policy load dtype × params")
    # vLLM reserves gpu_memory_utilization × the CUDA total: requested_memory = init_snapshot.total_memory ×
    # gpu_memory_utilization (vllm/v1/worker/gpu_worker.py:182-184, 0.11.0), the total from torch.cuda.mem_get_info()
    # (vllm/utils/__init__.py:2734) — the device's runtime_total_bytes, which the callers pass
    vllm = float(tr.vllm_util * device_capacity) if mode == "vllm-colocate" and device_capacity else 0.0
    vllm_item = d("generation.vllm", N_("vLLM reservation"), vllm,
                  f"vllm_gpu_memory_utilization {tr.vllm_util:g} × device memory (CUDA's total)")
    vllm_always = vllm if not tr.vllm_sleep else 0.0  # sleep mode (level 2) frees it during training
    swap, dropped = _loss_swap(spec, tr.option, head)
    return _Lift(ref, ref_item, vllm, vllm_item, vllm_always, swap, dropped)


def _reward_model_states(spec: ModelSpec, setup: TrainingSetup, ps: TrainingSetup,
                         phases: list[Phase]) -> list[Phase]:
    """A reward model's input embedding, which keeps its V × H though reward_spec's head has one row."""
    if setup.method == "full" and setup.grad_accum == 1:
        # The reward model's input embedding (V × H, dense) gets its gradient last, after the first layer's
        # backward (reward_spec gives the spec a 1-row head, so memory.estimate cannot tell): take it out there.
        embed_grad = spec.vocab_size * spec.hidden_size * trainable_bytes(ps) / (
            setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
        phases = [replace(p, gradients=p.gradients - embed_grad) if p.key == "backward.first_layer" else p
                  for p in phases]
    if setup.sharding == "zero3" and setup.gpus > 1:
        # ZeRO-3 gathers one FSDP unit at a time; memory/hf/states.py _shard sizes the largest as max(layer, V × H) from
        # the spec's head, but reward_spec's head is 1 × H while the input embedding keeps its V × H: gather that.
        layer = spec.layer_linear_params
        gathered = (max(layer, spec.vocab_size * spec.hidden_size) - max(layer, spec.hidden_size)) * weight_bytes(ps)
        if gathered > 0:
            item = d("weights.embedding_gathered", "Input embedding gathered (ZeRO-3)", gathered,
                     "max(layer, V × H) − max(layer, H) unit, as memory._shard gathers for SFT")
            phases = [replace(p, weights=p.weights + gathered, details=p.details + (item,)) for p in phases]
    return phases


def _logits_gradient_phase(spec: ModelSpec, setup: TrainingSetup, ps: TrainingSetup, head: _Head,
                           lift: _Lift, loss_bwd: Phase) -> Phase:
    """The backward through a trainer's own logits (ORPO/SimPO: the logits, their gradient, the chosen-half
    log-softmax; _Head.grad)."""
    tv = head.tokens * spec.vocab_size
    head_grad = 0.0
    if setup.method == "full":
        head_grad = spec.vocab_size * spec.hidden_size * trainable_bytes(ps) / (
            setup.gpus if setup.sharding in ("zero2", "zero3") else 1)
    grad_phase = lift.phase(loss_bwd, (d("activations.logits_backward", head.grad_label, head.grad * tv,
                                         head.grad_formula),),
                            drop=("activations.loss_backward", "activations.loss"), key="backward.logits_gradient",
                            name=N_("backward, logits gradient"))
    return replace(grad_phase, gradients=grad_phase.gradients + head_grad, details=grad_phase.details + (
        (d("gradients.head_weight", N_("Head weight gradient"), head_grad, "V × H"),) if head_grad else ()))


def _reference_forward_phase(spec: ModelSpec, setup: TrainingSetup, lift: _Lift, loss_bwd: Phase, tokens: int,
                             head: _Head | None) -> Phase:
    """DPO/KTO's reference forward, on top of the policy's saved activations."""
    # DPO/KTO: the reference forward runs after the policy forward, while the policy's saved activations
    # (checkpointed inputs, head input, the fused head's saved tensors) are alive (dpo_trainer.py l. 1299 →
    # 1327; kto_trainer.py KL + reference forwards). Its own working set is one layer and one head tile (before
    # TRL 1.15: its logits, _Head.ref).
    ref_fwd = scoring_forward_bytes(spec, setup, tokens, head is None, _head_logits(spec, head))
    return lift.phase(loss_bwd, (d("activations.reference_forward", N_("Reference forward (no_grad)"), ref_fwd,
                                   "T × one layer's no_grad working set + one head tile"),),
                      drop=lift.dropped + ("activations.loss_backward",), key="reference_forward",
                      name=N_("reference forward"))


def _generation_states(setup: TrainingSetup, mode: str | None, opt_step: Phase, weights_full: float
                       ) -> tuple[tuple[DetailItem, ...], float, float]:
    """The model states alive while generating: the weights (gathered under ZeRO-3), the optimizer state and
    its details; no gradients."""
    # Generation happens at the start of a generation cycle, after the optimizer step and zero_grad
    # (set_to_none): weights and optimizer state are alive, gradients are not.
    step_temp = detail_bytes(opt_step.details, "optimizer.step_temporaries")
    keep = tuple(x for x in opt_step.details if x.component in ("weights", "optimizer")
                 and x.key != "optimizer.step_temporaries")
    weights = opt_step.weights
    if setup.sharding == "zero3" and setup.gpus > 1 and mode == "hf":
        # ds3_gather_for_generation=True (grpo_config.py): GatheredParameters over every parameter allocates each
        # one whole (deepspeed runtime/zero/partition_parameters.py: all-gather into a world_size × partition
        # buffer) while its own partition (param.ds_tensor) stays: the whole model plus this GPU's shard (none
        # with offload_param: the partitions are in CPU RAM).
        shard = 0.0 if setup.offload_params else weights_full / setup.gpus
        weights = weights_full + shard
        keep = tuple(x for x in keep if x.component != "weights") + (
            d("weights.gathered_for_generation", N_("Weights gathered for generation (ZeRO-3)"), weights,
              "whole model + this GPU's partition"),)
    return keep, weights, opt_step.optimizer - step_temp


def _hf_generation(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup
                   ) -> tuple[float, float, list[DetailItem]]:
    """transformers' generate: the KV cache of every sequence in flight and the prefill / decode working set."""
    sequences = setup.batch * setup.grad_accum  # local generation batch (steps_per_generation = grad accum)
    length = tr.prompt_length + tr.completion_length
    # The cache holds every token fed to the model: the prompt and all completion tokens but the last
    # sampled one (real CPU generate: calibration/trainer_trace.py kv_check, exact).
    cached = max(length - 1, 1)
    kv = kv_cache_bytes(spec, setup, sequences, cached)
    items = [d("generation.kv_cache", f"KV cache ({sequences} sequences × {cached:,} tokens)", kv,
               "2 × layers × KV heads × head dim × c × sequences × (prompt + completion − 1)")]
    # Prefill: a no_grad forward over every prompt token (one layer's working set), the cache's
    # torch.cat growth (one layer's K and V copied at a time), and last-position logits in c and fp32
    # plus the fp32 sampling probabilities (generate keeps only the last position's logits).
    prefill = sequences * tr.prompt_length * nograd_layer_per_token(spec, setup)
    grow = kv / spec.num_layers
    logits = sequences * spec.vocab_size * (compute_bytes(setup) + 2 * FP32)
    acts = prefill + grow + logits
    items.append(d("activations.generation", N_("Prefill / decode working set"), acts,
                   "n × prompt × one no_grad layer + one layer's cache growth + last-token logits"))
    return kv, acts, items


def _head_logits(spec: ModelSpec, head: _Head | None) -> float | None:
    """The logits a scoring forward makes with this head, bytes (None: the fused head's tile)."""
    return head.ref * head.tokens * spec.vocab_size if head is not None else None


def _generation_phases(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, mode: str | None, lift: _Lift,
                       opt_step: Phase, tokens: int, head: _Head | None, weights_full: float) -> list[Phase]:
    """GRPO's generation and, with a reference or vLLM, its no_grad scoring forward."""
    keep, weights, optimizer = _generation_states(setup, mode, opt_step, weights_full)
    items: list[DetailItem] = list(keep)
    gen = 0.0
    acts = 0.0
    if mode == "hf":
        gen, acts, working = _hf_generation(spec, setup, tr)
        items.extend(working)
    elif mode == "vllm-colocate":
        gen = lift.vllm
        items.append(lift.vllm_item)
    if lift.ref:
        items.append(lift.ref_item)
    phases = [Phase("generation", "generation", weights, 0.0, optimizer, acts, tuple(items),
                           reference=lift.ref, generation=gen)]
    if tr.uses_reference() or mode in ("vllm-colocate", "vllm-server"):
        # The reference forward (beta > 0) and, with vLLM, the old-policy log-prob forward (importance
        # sampling correction, default on) run under no_grad before the training forward, chunked by
        # per_device_train_batch_size: only their working set is on top of the model states.
        score = scoring_forward_bytes(spec, setup, tokens, head is None, _head_logits(spec, head))
        s_items = list(keep) + [d("activations.scoring_forward", N_("Scoring forward (no_grad)"), score,
                                  "T × one layer's no_grad working set + one head tile")]
        if lift.ref:
            s_items.append(lift.ref_item)
        if lift.vllm_always:
            s_items.append(lift.vllm_item)
        scoring = ("reference_forward", "reference forward") if tr.uses_reference() else (
            "old_logprob_forward", "old log-prob forward")
        phases.append(Phase(*scoring,
                                   weights if mode == "hf" else opt_step.weights, 0.0,
                                   optimizer, score, tuple(s_items),
                                   reference=lift.ref, generation=lift.vllm_always))
    return phases


def trainer_parts(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup,
                  device_capacity: float | None = None) -> StepParts:
    """The parts of one step of a preference/RL trainer (docs/formulas.md §9): its policy's SFT-equivalent step as
    the stack's runtime prices it, with the trainer's phases added. `device_capacity` (bytes, the device's total
    memory as CUDA reports it: Device.runtime_total_bytes) is needed for vLLM colocate mode, which reserves a fraction of it. The caller has checked the trainer
    (job.trainer.check)."""
    opt = tr.option
    ps = policy_setup(setup, tr)
    pspec = reward_spec(spec) if opt.head == "score" else spec
    base = runtime_for(ps).parts(pspec, ps)
    mode = tr.generation_mode if opt.generates else None
    if mode == "vllm-colocate" and not device_capacity:
        raise ValueError(Text(N_("vLLM colocate mode reserves a fraction of the device's memory: choose a device")))

    head = _logits_head(spec, setup, tr, ps)
    lift = _lift(spec, setup, tr, mode, head, device_capacity)
    phases: list[Phase] = [lift.phase(p) for p in base.phases]
    if opt.head == "score":
        phases = _reward_model_states(spec, setup, ps, phases)
    loss_bwd = base.phases[0]  # "loss backward": the policy's saved activations + the loss's backward buffers
    opt_step = next(p for p in base.phases if p.key == "optimizer_step")
    if head is not None:
        phases.append(_logits_gradient_phase(spec, setup, ps, head, lift, loss_bwd))
    if opt.reference == "always" and tr.uses_reference():
        phases.append(_reference_forward_phase(spec, setup, lift, loss_bwd, ps.tokens, head))
    if opt.generates:
        phases.extend(_generation_phases(spec, setup, tr, mode, lift, opt_step, ps.tokens, head,
                                         base.weights_full_bytes))

    notes = [n for n in base.notes if n != REWARD_SPEC_NOTE] + list(trainer_notes(setup, tr))
    # The trainer's phases are lifted SFT moments and its own: no per-request list (requests=None), the stack's
    # allocator; vLLM's colocated pool is counted as it is (fixed_generation).
    return replace(
        base, model=spec, setup=setup, phases=tuple(phases), allocator=stack_allocator(setup.stack), requests=None,
        params_total=pspec.params_total, notes=tuple(notes), trainer=tr, policy_setup=ps,
        fixed_generation=mode == "vllm-colocate")  # the runtime's context is the policy step's: the backend's


def trainer_notes(setup: TrainingSetup, tr: TrainerSetup) -> tuple[str, ...]:
    """What the user should know about this trainer's estimate, in plain words."""
    opt = tr.option
    installed = setup.versions["trl"] if setup.versions is not None and "trl" in setup.versions else None
    out = [_("{trainer} as in {version} ({trainer_class}).").format(
        trainer=_(opt.label), version=f"TRL {installed}" if installed else TRL_VERSION, trainer_class=opt.trainer_class)]
    if opt.sequences == 2:
        out.append(_("Chosen and rejected run together: each forward sees {n} sequences.").format(n=2 * setup.batch))
    if opt.reference != "none":
        if not tr.uses_reference():
            out.append(_("No reference model during training (reference log-probs precomputed).") if tr.precompute_ref
                       else _("No reference model during training (beta = 0)."))
        elif setup.method == "full":
            out.append(_("Full fine-tuning keeps a frozen reference copy of the model."))
        else:
            out.append(_("The reference is the base model with the adapter switched off: no copy."))
    if opt.generates:
        mode = tr.generation_mode
        out.append(_("GRPO: {gens} generations per prompt, prompts of {prompt} + completions of {completion} tokens; "
                     "generation with {mode}.").format(
            gens=tr.gens, prompt=format_int(tr.prompt_length), completion=format_int(tr.completion_length),
            mode=_(GENERATION_MODES[mode].label)))
        if tr.prompt_len is None:
            out.append(_("Prompt length assumed {n} tokens (GRPOConfig has no prompt limit).").format(
                n=DEFAULT_PROMPT_LEN))
        if mode == "vllm-colocate":
            out.append((_("vLLM reserves {share} of the device while generating; sleep mode (level 2) discards its "
                          "weights and KV cache during training (vLLM's CUDA graphs and buffers outside its pool are "
                          "not counted).") if tr.vllm_sleep
                        else _("vLLM reserves {share} of the device for the whole run.")).format(
                share=f"{tr.vllm_util:g}"))
        if mode == "vllm-server":
            out.append(_("The vLLM server needs its own GPUs (not counted here)."))
    if opt.head == "score":
        out.append(_("Reward model: a 1-output score head, no vocabulary logits."))
    return tuple(out)
