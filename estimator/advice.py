"""What to change: the seed's five remedies in its order, each with the memory it saves for this exact
setup, and solvers for the largest batch, the longest max length, the smallest device and GPU count."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from .devices import CATALOG, Device
from .i18n import _, format_int
from .memory import Estimate
from .model import MAX_SIZE_B, MIN_SIZE_B, ModelSpec, generic_spec, list_presets, load_preset
from .stacks import with_method
from .training import MAX_BATCH, MAX_GPUS, MAX_SEQ_LEN, TrainingSetup

EstimateFn = Callable[[ModelSpec, TrainingSetup], Estimate]
T = TypeVar("T", int, float)


def _default_estimate(spec: ModelSpec, setup: TrainingSetup) -> Estimate:
    from .memory import estimate

    return estimate(spec, setup)


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


def bisect_last(lo: T, hi: T, fits: Callable[[T], bool], split: Callable[[T, T], T],
                close: Callable[[T, T], bool]) -> T | None:
    """The one bisection every solver uses: the largest x in [lo, hi] with fits(x), for fits monotone (true
    then false); None if not even lo fits. split picks the probe between two bounds (the midpoint of whole
    numbers, the geometric mean of sizes); close says when the bracket is narrow enough."""
    if not fits(lo):
        return None
    if fits(hi):
        return hi
    while not close(lo, hi):
        mid = split(lo, hi)
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _largest_int(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """Largest n in [lo, hi] with fits(n), assuming fits is monotone (true then false). None if none fits."""
    return bisect_last(lo, hi, fits, lambda a, b: (a + b) // 2, lambda a, b: b - a <= 1)


def _smallest_int(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """Smallest n in [lo, hi] with fits(n), assuming fits is monotone (false then true). None if none fits.
    The mirror of _largest_int: the same bisection on not-fits."""
    last_unfit = _largest_int(lo, hi, lambda n: not fits(n))
    if last_unfit is None:
        return lo
    return last_unfit + 1 if last_unfit < hi else None


def max_batch(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
              estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_BATCH) -> int | None:
    """The largest micro-batch that fits (memory never falls as batch grows)."""
    return _largest_int(1, limit, lambda b: estimate_fn(spec, replace(setup, batch=b)).total_bytes <= usable_bytes)


def max_seq_len(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
                estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_SEQ_LEN) -> int | None:
    """The longest max length (tokens) that fits at this batch size."""
    return _largest_int(1, limit, lambda s: estimate_fn(spec, replace(setup, seq_len=s)).total_bytes <= usable_bytes)


def max_fitting_size_b(setup: TrainingSetup, device: Device, rule: str | None = None,
                       rel_tol: float = 0.002, estimate_fn: EstimateFn | None = None) -> float | None:
    """The largest generic decoder (billions of parameters) whose estimate fits the device's usable memory,
    by bisection on a log scale over the sizes the estimator accepts (memory never falls as the size grows);
    None if not even the smallest fits. `estimate_fn` (e.g. a trainer's) replaces the detailed/rule estimate."""
    from . import estimate  # the package's entry point: detailed, or the rule of thumb

    def fits(size_b: float) -> bool:
        spec = generic_spec(size_b)
        est = estimate_fn(spec, setup) if estimate_fn is not None else estimate(spec, setup, rule)
        return est.total_bytes <= device.usable_bytes

    return bisect_last(MIN_SIZE_B, MAX_SIZE_B, fits, lambda a, b: math.sqrt(a * b), lambda a, b: b / a <= 1 + rel_tol)


def smallest_device(spec: ModelSpec, setup: TrainingSetup, catalog: tuple[Device, ...] = CATALOG,
                    estimate_fn: EstimateFn = _default_estimate) -> Device | None:
    """The catalog device with the least usable memory that still fits this setup."""
    total = estimate_fn(spec, setup).total_bytes
    fitting = [d for d in catalog if d.usable_bytes >= total]
    return min(fitting, key=lambda d: (d.usable_bytes, d.id)) if fitting else None


def min_gpus(spec: ModelSpec, setup: TrainingSetup, device: Device, max_gpus: int = 64,
             estimate_fn: EstimateFn = _default_estimate) -> int | None:
    """The smallest GPU count (1..max_gpus) whose per-GPU memory fits the device, for this sharding."""
    return min_gpus_for_devices(spec, setup, [device], max_gpus, estimate_fn)[device.id]


def min_gpus_for_devices(spec: ModelSpec, setup: TrainingSetup, devices: tuple[Device, ...] | list[Device],
                         max_gpus: int = 64, estimate_fn: EstimateFn = _default_estimate, per_node: int = 1
                         ) -> dict[str, int | None]:
    """min_gpus for many devices at once: per-GPU memory depends on the GPU count, not on the device, so each
    count is estimated once and every device answered from it (device id → smallest count, or None). With
    per_node > 1 only whole nodes count (8, 16, 24… GPUs)."""
    answers: dict[str, int | None] = {d.id: None for d in devices}
    open_devices = list(devices)
    step = max(1, per_node)
    for n in range(step, min(max_gpus, MAX_GPUS) + 1, step):
        if not open_devices:
            break
        total = estimate_fn(spec, replace(setup, gpus=n)).total_bytes
        still_open = []
        for device in open_devices:
            if total <= device.usable_bytes:
                answers[device.id] = n
            else:
                still_open.append(device)
        open_devices = still_open
    return answers


def sharded(setup: TrainingSetup, sharding: str, offload: bool = False, gpus: int = 1) -> TrainingSetup:
    """The setup on `gpus` GPUs under one sharding. Optimizer offload goes with ZeRO/FSDP only (the estimator
    refuses it for plain data parallel on several GPUs)."""
    return replace(setup, gpus=gpus, sharding=sharding, offload_optimizer=offload and sharding != "none")


def fewest_gpus(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float, max_gpus: int = 64, per_node: int = 1,
                estimate_fn: EstimateFn = _default_estimate, likely_high: bool = False) -> int | None:
    """The fewest GPUs (a multiple of per_node, at most max_gpus) whose per-GPU estimate fits usable_bytes,
    for the setup's sharding; None if none does. One GPU is tried on its own (a second adds the NCCL buffers
    and the all-reduce bucket); from two GPUs on, per-GPU memory never grows with the count, so the rest is a
    bisection over node counts (about log2(max_gpus / per_node) estimates, not max_gpus). likely_high: the
    upper end of the likely range must fit too (no close call)."""

    def fits(n: int) -> bool:
        est = estimate_fn(spec, replace(setup, gpus=n))
        return (est.high_bytes if likely_high else est.total_bytes) <= usable_bytes

    per_node = max(1, per_node)
    if per_node == 1 and fits(1):
        return 1
    first = max(1, 2 // per_node)  # nodes: from 2 GPUs (or one node of several) on
    nodes = _smallest_int(first, min(max_gpus, MAX_GPUS) // per_node, lambda k: fits(k * per_node))
    return None if nodes is None else nodes * per_node


@dataclass(frozen=True)
class Layout:
    """How to spread a run over GPUs of one kind: the sharding, the GPU count and its per-GPU estimate."""

    sharding: str
    gpus: int
    estimate: Estimate


def best_layout(spec: ModelSpec, setup: TrainingSetup, device: Device, shardings: tuple[str, ...] | list[str],
                offload: bool = False, max_gpus: int = 64, per_node: int = 1,
                estimate_fn: EstimateFn = _default_estimate) -> Layout | None:
    """The fewest GPUs of this device that fit (whole nodes of per_node GPUs), and the least sharding that
    achieves it (shardings are tried in the given order, simplest first); None if nothing fits."""
    best: Layout | None = None
    for sharding in shardings:
        base = sharded(setup, sharding, offload)
        n = fewest_gpus(spec, base, device.usable_bytes, max_gpus, per_node, estimate_fn)
        if n is not None and (best is None or n < best.gpus):
            best = Layout(sharding, n, estimate_fn(spec, replace(base, gpus=n)))
    return best


def what_would_fit(spec: ModelSpec, setup: TrainingSetup, device: Device, shardings: tuple[str, ...] | list[str],
                   offload: bool = False, max_gpus: int = 64, per_node: int = 1,
                   estimate_fn: EstimateFn = _default_estimate) -> list[tuple[str, Layout]]:
    """When no layout up to max_gpus fits: the changes that would make one fit, each with its best layout, in
    the order to try them: gradient checkpointing, optimizer offload to CPU RAM, both, then more GPUs (up to
    16 × max_gpus). Empty when none of them does."""
    options: list[tuple[str, TrainingSetup, bool, int]] = []
    ckpt = replace(setup, grad_ckpt=True, offload_activations=False)
    if not setup.grad_ckpt:
        options.append((_("gradient checkpointing on"), ckpt, offload, max_gpus))
    if not offload:
        options.append((_("optimizer state offloaded to CPU RAM"), setup, True, max_gpus))
    if not setup.grad_ckpt and not offload:
        options.append((_("checkpointing and optimizer offload"), ckpt, True, max_gpus))
    options.append((_("more GPUs (up to {n})").format(n=format_int(16 * max_gpus)), setup, offload, 16 * max_gpus))
    found = []
    for label, changed, off, limit in options:
        layout = best_layout(spec, changed, device, shardings, off, limit, per_node, estimate_fn)
        if layout is not None:
            found.append((label, layout))
    return found


def shard_remedy(spec: ModelSpec, setup: TrainingSetup, device: Device, order: int, max_gpus: int = 64,
                 estimate_fn: EstimateFn = _default_estimate) -> Remedy | None:
    """Spread the run over more GPUs of this kind with ZeRO-3 / FSDP full shard: the fewest that fit. None
    on a unified-memory machine (it does not scale out) or when the setup already shards fully."""
    if device.kind != "discrete" or setup.sharding == "zero3":
        return None
    base = estimate_fn(spec, setup).total_bytes
    full_shard = sharded(setup, "zero3", setup.offload_optimizer)
    n = fewest_gpus(spec, full_shard, device.usable_bytes, max_gpus, 1, estimate_fn)
    if n is None or n <= setup.gpus:
        if n is None:
            return Remedy(order, _("Shard over more GPUs"),
                          _("not even {n} GPUs with ZeRO-3").format(n=format_int(max_gpus)), 0.0, base, False,
                          "", _("not even {n} GPUs fit with ZeRO-3").format(n=format_int(max_gpus)))
        return None
    total = estimate_fn(spec, replace(full_shard, gpus=n)).total_bytes
    return Remedy(order, _("Shard over more GPUs"),
                  _("{before} → {after} GPUs, ZeRO-3 / FSDP full shard").format(before=setup.gpus, after=n),
                  base - total, total, True,
                  _("Weights, gradients and optimizer state split over the GPUs; each keeps its own activations. "
                    "Needs that many GPUs and a fast interconnect (see Scale out)."))


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


def remedies(spec: ModelSpec, setup: TrainingSetup, estimate_fn: EstimateFn = _default_estimate
             ) -> tuple[Remedy, ...]:
    """The seed's five remedies in its order ("If a run runs out of memory"), each priced for this setup."""
    base = estimate_fn(spec, setup).total_bytes
    out: list[Remedy] = []

    def add(order: int, title: str, change: str, new_spec: ModelSpec, new_setup: TrainingSetup | None,
            caveat: str, reason: str = "") -> None:
        if new_setup is None:
            out.append(Remedy(order, title, change, 0.0, base, False, caveat, reason))
            return
        total = estimate_fn(new_spec, new_setup).total_bytes
        out.append(Remedy(order, title, change, base - total, total, True, caveat))

    half_len = max(1, setup.seq_len // 2)
    add(1, _("Lower the max length"),
        _("max length {before} → {after}").format(before=format_int(setup.seq_len), after=format_int(half_len)), spec,
        replace(setup, seq_len=half_len) if setup.seq_len > 1 else None,
        _("Check typical examples still fit, or the model never sees the ends of answers."), _("already 1 token"))
    half_batch = max(1, setup.batch // 2)
    add(2, _("Lower the batch size"), _("batch {before} → {after}").format(before=setup.batch, after=half_batch),
        spec, replace(setup, batch=half_batch) if setup.batch > 1 else None,
        _("Fewer examples per step; raise gradient accumulation to keep the effective batch."),
        _("the batch is already 1"))
    add(3, _("Switch to QLoRA"), _("{method} → qlora (4-bit base)").format(method=setup.method), spec,
        with_method(setup, "qlora") if setup.method != "qlora" else None,
        _("A 4-bit base is about a quarter of a 16-bit one; training is somewhat slower."), _("already QLoRA"))
    add(4, _("Use gradient checkpointing"), _("checkpointing off → on"), spec,
        replace(setup, grad_ckpt=True) if not setup.grad_ckpt else None,
        _("20–30 % slower: activations are recomputed in backward."), _("already on"))
    if setup.method == "full":
        add(5, _("Use LoRA instead of full fine-tuning"), "full → lora", spec, with_method(setup, "lora"),
            _("Fewer trainable weights; less room to change behaviour."))
    else:
        smaller = _smaller_model(spec)
        if smaller is None:
            add(5, _("Pick a smaller model"), _("no smaller model"), spec, None, "", _("no smaller model"))
        else:
            add(5, _("Pick a smaller model"), f"{spec.name} → {smaller.name}", smaller, setup,
                _("A smaller model learns less; compare quality before committing."))
    return tuple(out)
