"""The seed's five remedies in its order, each with the memory it saves for this exact setup (and a trainer's own
remedies), an 8-bit optimizer and optimizer offload where the stack has them, plus sharding over more GPUs on a GPU.
Each remedy keeps the setup it changes to, so advise() can price its time (advice/timing.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import _, format_int
from ..job.stack import check_stack_setup, with_method
from ..job.tower import setup_for_model
from ..memory.trainers import reference_bytes
from ..models.presets import generic_spec, list_presets, load_preset
from ..options.stacks import get_stack
from .search import _default_estimate, solver_estimate_fn
from .solvers import fewest_gpus, sharded

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from ..options.devices import Device
    from .search import EstimateFn


@dataclass(frozen=True)
class Remedy:
    """One of the seed's remedies applied to this setup."""

    order: int  # the seed's order (1 = try first)
    title: str
    change: str  # what exactly changes, e.g. "max length 4096 → 2048"
    saves_bytes: float  # total before − total after (≥ 0 when it helps)
    new_total_bytes: float
    applicable: bool  # False when already applied (e.g. checkpointing already on)
    caveat: str  # the seed's warning that comes with it
    reason: str = ""  # why it does not apply, when it does not ("already on", "the batch is already 1")
    key: str = ""  # the stable id of the change (REMEDY_KEYS); the title is a display label
    # What the run becomes (None where the remedy does not apply): the changed setup, another model (a smaller one;
    # None = the same) and a trainer remedy's changed trainer (None = the same), so its time can be priced.
    new_setup: TrainingSetup | None = None
    new_spec: ModelSpec | None = None
    new_trainer: TrainerSetup | None = None
    # The step-time factor for the same tokens, changed over current (> 1: slower; speed.time_factor): priced by
    # advise() on a device with compute figures, None otherwise.
    time_factor: float | None = None


# The stable id of every remedy (Remedy.key), in the seed's order then the trainers' and sharding: code, the CLI's
# JSON and tests compare these, never the titles (which are translated).
REMEDY_KEYS = ("shorter_length", "smaller_batch", "qlora", "checkpointing", "lora", "smaller_model",
               "precompute_ref", "fewer_generations", "shorter_completions", "vllm_sleep", "lower_vllm_util",
               "vllm_server", "sharding", "fewer_layers", "optimizer_8bit", "offload_optimizer")

# The 8-bit sibling of each optimizer with 32-bit or parameter-dtype AdamW states (bitsandbytes' blockwise 8-bit
# states: options/optimizers.py), for the "8-bit optimizer" remedy.
EIGHT_BIT = {"adamw": "adamw_8bit", "adamw_foreach": "adamw_8bit", "paged_adamw": "paged_adamw_8bit"}


def _priced(order: int, title: str, change: str, base: float, total: float, caveat: str, key: str,
            nothing: str, new_setup: TrainingSetup | None = None, new_spec: ModelSpec | None = None,
            new_trainer: TrainerSetup | None = None) -> Remedy:
    """A change priced for this setup: applicable when it changes the total; one that saves exactly nothing here
    (the rule of thumb ignores it, or the peak lies elsewhere) is not, and says so in its reason."""
    if abs(base - total) < 1:  # bytes: the same estimate
        return Remedy(order, title, change, 0.0, total, False, caveat, nothing, key=key)
    return Remedy(order, title, change, base - total, total, True, caveat, key=key, new_setup=new_setup,
                  new_spec=new_spec, new_trainer=new_trainer)


def without_stack_choice(setup: TrainingSetup, **changes: object) -> TrainingSetup:
    """The setup with `changes`, which are the user's now: the changed fields leave `from_stack`."""
    return replace(setup, **changes, from_stack=tuple(f for f in setup.from_stack if f not in changes))


def smaller_batch(setup: TrainingSetup) -> TrainingSetup | None:
    """Half the micro-batch (for an odd batch its largest divisor below half) and the accumulation that keeps the
    examples per optimizer step; None at batch 1."""
    if setup.batch <= 1:
        return None
    half = max(d for d in range(1, setup.batch // 2 + 1) if setup.batch % d == 0)
    return without_stack_choice(setup, batch=half, grad_accum=setup.grad_accum * (setup.batch // half))


def shard_remedy(spec: ModelSpec, setup: TrainingSetup, device: Device, order: int, max_gpus: int = 64,
                 estimate_fn: EstimateFn = _default_estimate) -> Remedy | None:
    """Spread the run over more GPUs of this kind with ZeRO-3 / FSDP full shard: the fewest that fit. None
    on a unified-memory machine (it does not scale out) or when the setup already shards fully."""
    if device.kind != "discrete" or setup.sharding == "zero3" or not (setup.stack and get_stack(setup.stack).multi_gpu):
        return None  # a Mac does not scale out; mlx-lm is priced on one device (Stack.multi_gpu)
    base = estimate_fn(spec, setup).total_bytes
    if base <= device.usable_bytes:
        return None  # it fits on the GPUs it has (and full sharding never needs more of them)
    full_shard = sharded(setup, "zero3", setup.offload_optimizer)
    # A first guess from the estimate already made: ZeRO-3 divides the model states (weights, gradients,
    # optimizer) by the GPU count and keeps the rest (activations, overhead) on each GPU.
    est = estimate_fn(spec, setup)
    states = sum(est.components_bytes[k] for k in ("weights", "gradients", "optimizer")) * setup.gpus
    room = device.usable_bytes - (est.total_bytes - states / setup.gpus)
    guess = math.ceil(states / room) if room > 0 else max_gpus
    n = fewest_gpus(spec, full_shard, device.usable_bytes, max_gpus, 1, estimate_fn, at_least=setup.gpus + 1,
                    guess=guess)
    if n is None or n <= setup.gpus:
        if n is None:
            return Remedy(order, _("Shard over more GPUs"),
                          _("not even {n} GPUs with ZeRO-3").format(n=format_int(max_gpus)), 0.0, base, False,
                          "", _("not even {n} GPUs fit with ZeRO-3").format(n=format_int(max_gpus)), key="sharding")
        return None
    total = estimate_fn(spec, replace(full_shard, gpus=n)).total_bytes
    return Remedy(order, _("Shard over more GPUs"),
                  _("{before} → {after} GPUs, ZeRO-3 / FSDP full shard").format(before=setup.gpus, after=n),
                  base - total, total, True,
                  _("Weights, gradients and optimizer state split over the GPUs; each keeps its own activations. "
                    "Needs that many GPUs and a fast interconnect (see Scale out)."), key="sharding",
                  new_setup=replace(full_shard, gpus=n))


def _smaller_model(spec: ModelSpec) -> ModelSpec | None:
    """The next smaller model: the largest preset of the same family below this one, else half the size."""
    same = []
    for p in list_presets():
        if p.family == spec.family and p.id != spec.source:
            candidate = load_preset(p.id)
            if candidate.params_total < spec.params_total:
                same.append(candidate)
    if same:
        return max(same, key=lambda s: s.params_total)
    half = spec.params_total / 2e9
    return generic_spec(half) if half >= 0.1 else None


def _changed(make: Callable[[], TrainingSetup], check: bool = False) -> tuple[TrainingSetup | None, str]:
    """A changed setup, or None and the reason when the stack refuses it (LitGPT's QLoRA optimizer on a Mac…);
    check: also the stack's own refusals (an 8-bit optimizer on a Mac)."""
    try:
        made = make()
        if check:
            check_stack_setup(made)
        return made, ""
    except ValueError as exc:
        return None, str(exc)


def remedies(spec: ModelSpec, setup: TrainingSetup, estimate_fn: EstimateFn = _default_estimate
             ) -> tuple[Remedy, ...]:
    """The seed's five remedies in its order ("If a run runs out of memory"), each priced for this setup."""
    from ..memory.rule import seed_estimate

    base = estimate_fn(spec, setup).total_bytes
    out: list[Remedy] = []
    nothing = _("the rule of thumb does not count it") if estimate_fn is seed_estimate else _("saves nothing here")

    def add(order: int, key: str, title: str, change: str, new_spec: ModelSpec, new_setup: TrainingSetup | None,
            caveat: str, reason: str = "") -> None:
        if new_setup is None:
            out.append(Remedy(order, title, change, 0.0, base, False, caveat, reason, key=key))
            return
        total = estimate_fn(new_spec, new_setup).total_bytes
        out.append(_priced(order, title, change, base, total, caveat, key, nothing, new_setup,
                           new_spec if new_spec is not spec else None))

    half_len = max(1, setup.seq_len // 2)
    add(1, "shorter_length", _("Lower the max length"),
        _("max length {before} → {after}").format(before=format_int(setup.seq_len), after=format_int(half_len)), spec,
        replace(setup, seq_len=half_len) if setup.seq_len > 1 else None,
        _("Check typical examples still fit, or the model never sees the ends of answers."), _("already 1 token"))
    halved = smaller_batch(setup)
    add(2, "smaller_batch", _("Lower the batch size"),
        _("batch {before} → {after}, gradient accumulation {accum} → {more}").format(
            before=setup.batch, after=halved.batch, accum=setup.grad_accum, more=halved.grad_accum)
        if halved is not None else _("batch {before} → {after}").format(before=setup.batch, after=setup.batch),
        spec, halved,
        _("The same examples per optimizer step, in more micro-steps: accumulation keeps the effective batch, and "
          "the accumulated gradients stay in memory between micro-steps."),
        _("the batch is already 1"))
    qlora, why_not = _changed(lambda: with_method(setup, "qlora")) if setup.method != "qlora" else (
        None, _("already QLoRA"))
    add(3, "qlora", _("Switch to QLoRA"), _("{method} → qlora (4-bit base)").format(method=setup.method), spec,
        qlora, _("A 4-bit base is about a quarter of a 16-bit one; it is dequantised at every use, so training is "
                 "somewhat slower."), why_not)
    add(4, "checkpointing", _("Use gradient checkpointing"), _("checkpointing off → on"), spec,
        without_stack_choice(setup, grad_ckpt=True) if not setup.grad_ckpt else None,
        _("20–30 % slower: activations are recomputed in backward."), _("already on"))
    if setup.stack and get_stack(setup.stack).lora_layers:  # the stack trains the last N blocks (mlx-lm's
        # num_layers): fewer of them keep activations
        trained = min(setup.lora_layers or spec.num_layers, spec.num_layers)
        fewer = max(1, trained // 2)
        add(4, "fewer_layers", _("Train fewer layers"),
            _("trained layers {before} → {after} (--num-layers)").format(before=trained, after=fewer), spec,
            replace(setup, lora_layers=fewer, from_stack=tuple(f for f in setup.from_stack if f != "lora_layers"))
            if trained > 1 else None,
            _("Only the last layers adapt; the earlier ones keep no activations. Less capacity to change the model."),
            _("one layer already"))
    eight = EIGHT_BIT.get(setup.optimizer)
    if eight is not None and not (setup.stack and get_stack(setup.stack).framework == "mlx"):
        eight_bit, why_not = _changed(lambda: without_stack_choice(setup, optimizer=eight), check=True)
        if eight_bit is not None:  # a stack that cannot run bitsandbytes (a Mac) is not offered it
            add(4, "optimizer_8bit", _("Use an 8-bit optimizer"),
                f"{setup.optimizer} → {eight}", spec, eight_bit,
                _("bitsandbytes keeps the optimizer states in 8 bits (blockwise); the same updates within its "
                  "quantisation error."))
    if (not setup.offload_optimizer and setup.backend in ("cuda", "rocm") and setup.stack
            and get_stack(setup.stack).multi_gpu and (setup.gpus == 1 or setup.sharding != "none")):
        offload, why_not = _changed(lambda: without_stack_choice(setup, offload_optimizer=True), check=True)
        if offload is not None:
            add(4, "offload_optimizer", _("Offload the optimizer state to CPU RAM"),
                _("optimizer state → CPU RAM (ZeRO-Offload)"), spec, offload,
                _("DeepSpeed's ZeRO-Offload or FSDP's CPU offload: the optimizer steps on the CPU; needs CPU RAM "
                  "for the state and a fast PCIe link."))
    if setup.method == "full":
        lora, why_not = _changed(lambda: with_method(setup, "lora"))
        add(5, "lora", _("Use LoRA instead of full fine-tuning"), "full → lora", spec, lora,
            _("Fewer trainable weights; less room to change behaviour."), why_not)
    else:
        smaller = _smaller_model(spec)
        if smaller is None:
            add(5, "smaller_model", _("Pick a smaller model"), _("no smaller model"), spec, None, "", _("no smaller model"))
        else:
            add(5, "smaller_model", _("Pick a smaller model"), f"{spec.name} → {smaller.name}", smaller,
                setup_for_model(smaller, setup),
                _("A smaller model learns less; compare quality before committing."))
    return tuple(out)


def all_remedies(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, device_capacity: float | None = None
                 ) -> tuple:
    """The seed's remedies priced for this trainer, then the trainer's own. GRPO's length is prompt +
    completion, so the seed's 'lower the max length' gives way to 'shorter completions'."""
    from .remedies import remedies

    opt = tr.option
    out = []
    for r in remedies(spec, setup, solver_estimate_fn(tr, device_capacity)):
        if r.key == "shorter_length" and opt.generates:
            continue  # GRPO's length is prompt + completion: see "Shorter completions"
        # (GRPO: the accumulation that keeps the effective batch keeps the generation batch, batch × GPUs ×
        # accumulation, so num_generations still divides it)
        if r.key == "smaller_batch" and setup.batch // 2 < opt.min_batch:
            r = replace(r, change=_("{trainer} needs a batch of at least {n}").format(trainer=_(opt.label),
                                                                                       n=opt.min_batch),
                        saves_bytes=0.0,
                        new_total_bytes=r.new_total_bytes + r.saves_bytes, applicable=False, new_setup=None)
        if r.applicable:
            r = replace(r, new_trainer=tr)
        if r.key == "lora" and setup.method == "full" and reference_bytes(spec, setup, tr):
            r = replace(r, title=_("Use LoRA: the reference becomes the adapter-off base (no copy)"))
        out.append(r)
    return tuple(out) + trainer_remedies(spec, setup, tr, device_capacity)


def trainer_remedies(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup,
                     device_capacity: float | None = None) -> tuple:
    """The remedies that apply to this trainer, each priced for this setup (advice.Remedy, orders 6–12):
    precomputed reference log-probs, fewer generations, shorter completions, vLLM sleep or
    server mode, a lower vllm_gpu_memory_utilization."""

    fn = solver_estimate_fn(tr, device_capacity)
    base = fn(spec, setup).total_bytes
    out: list[Remedy] = []
    opt = tr.option

    def add(order: int, key: str, title: str, change: str, new_setup: TrainingSetup, new_tr: TrainerSetup,
            caveat: str) -> None:
        total = solver_estimate_fn(new_tr, device_capacity)(spec, new_setup).total_bytes
        out.append(_priced(order, title, change, base, total, caveat, key, _("saves nothing here"), new_setup,
                           new_trainer=new_tr))

    if opt.can_precompute and tr.uses_reference():
        add(6, "precompute_ref", _("Precompute the reference log-probs"), "precompute_ref_log_probs False → True", setup,
            replace(tr, precompute_ref=True),
            _("The reference scores the dataset once before training; it cannot follow sync_ref_model."))
    if opt.generates:
        if tr.gens >= 4 and setup.batch % 2 == 0:
            add(8, "fewer_generations", _("Fewer generations per prompt"),
                _("num_generations {before} → {after}, batch {batch} → {half} (same prompts per step)").format(
                    before=tr.gens, after=tr.gens // 2, batch=setup.batch, half=setup.batch // 2),
                replace(setup, batch=setup.batch // 2), replace(tr, num_generations=tr.gens // 2),
                _("Fewer completions per prompt give noisier advantages."))
        if tr.completion_length > 1:
            half = max(1, tr.completion_length // 2)
            add(9, "shorter_completions", _("Shorter completions"),
                f"max_completion_length {format_int(tr.completion_length)} → {format_int(half)}", setup,
                replace(tr, completion_len=half), _("Truncated completions get no reward for what they cut off."))
        mode = tr.generation_mode
        if mode == "vllm-colocate" and not tr.vllm_sleep:
            add(10, "vllm_sleep", _("vLLM sleep mode"), "vllm_enable_sleep_mode False → True", setup, replace(tr, vllm_sleep=True),
                _("vLLM discards its weights and KV cache after each generation (sleep level 2); TRL pushes the "
                  "training weights back before the next one (slower steps)."))
        if mode == "vllm-colocate" and tr.vllm_util > 0.1:
            lower = round(max(0.1, tr.vllm_util - 0.1), 2)
            add(11, "lower_vllm_util", _("Lower vllm_gpu_memory_utilization"), f"vllm_gpu_memory_utilization {tr.vllm_util:g} → "
                f"{lower:g}", setup, replace(tr, vllm_gpu_util=lower),
                _("vLLM must still hold its weights and a KV cache for the generation batch."))
        if mode != "vllm-server":
            add(12, "vllm_server", _("Generate on a vLLM server"),
                _("{mode} → vllm-server (trl vllm-serve on other GPUs)").format(mode=mode), setup,
                replace(tr, generation="vllm-server", vllm_gpu_util=None, vllm_sleep=False),
                _("Needs one or more extra GPUs for the server."))
    return tuple(out)
