"""Solvers: the largest batch, the longest max length (or GRPO completion), the largest model, the smallest device
and the fewest GPUs that fit, each a `bisect_last` over the estimate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import _, format_int
from ..job.setup import MAX_BATCH, MAX_GPUS, MAX_SEQ_LEN
from ..job.tower import setup_for_model
from ..memory.overhead import ALLOCATOR_SLACK
from ..memory.price import estimate as price
from ..models.presets import MAX_SIZE_B, MIN_SIZE_B, generic_spec
from ..options.backends import device_backend, same_runtime
from ..options.devices import CATALOG
from .search import _default_estimate, _smallest_int, bisect_last

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..memory.result import Estimate
    from ..models.spec import ModelSpec
    from ..options.devices import Device
    from .search import EstimateFn


def max_batch(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
              estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_BATCH) -> int | None:
    """The largest micro-batch that fits (memory never falls as batch grows). The setup's own batch and its half
    (the page's estimate and the "lower the batch" remedy) are tried first."""
    if estimate_fn is _default_estimate and estimate_fn(spec, setup).floor_bytes > usable_bytes:
        return None  # the optimizer step alone is too big: no batch fits
    hints = [setup.batch, max(1, setup.batch // 2)]
    base = estimate_fn(spec, setup)
    if setup.batch == 1 and base.total_bytes <= usable_bytes and base.components_bytes.get("activations"):
        # No half to draw a line from: guess that each example adds the peak's activations (and their slack).
        per_example = base.components_bytes["activations"] * (1 + ALLOCATOR_SLACK)
        guess = 1 + int((usable_bytes - base.total_bytes) // per_example)
        hints += [min(guess, limit), min(guess + 1, limit)]
    return bisect_last(1, limit, lambda b: estimate_fn(spec, replace(setup, batch=b)).total_bytes, usable_bytes,
                       hints=hints)


def max_seq_len(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
                estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_SEQ_LEN) -> int | None:
    """The longest max length (tokens) that fits at this batch size. The setup's own length and its half (the
    page's estimate and the "lower the max length" remedy) are tried first."""
    if estimate_fn is _default_estimate and estimate_fn(spec, setup).floor_bytes > usable_bytes:
        return None  # the optimizer step alone is too big: no length fits
    return bisect_last(1, limit, lambda s: estimate_fn(spec, replace(setup, seq_len=s)).total_bytes, usable_bytes,
                       hints=(setup.seq_len, max(1, setup.seq_len // 2)))


def max_fitting_size_b(setup: TrainingSetup, device: Device, rule: str | None = None,
                       rel_tol: float = 0.002, estimate_fn: EstimateFn | None = None) -> float | None:
    """The largest generic decoder (billions of parameters) whose estimate fits the device's usable memory,
    searched over the sizes the estimator accepts to within rel_tol (memory never falls as the size grows);
    None if not even the smallest fits. `estimate_fn` (e.g. a trainer's) replaces the detailed/rule estimate."""
    from ..memory.price import estimate  # the package's entry point: detailed, or the rule of thumb

    text_setup = setup_for_model(generic_spec(1.0), setup)  # a generic decoder takes no image tokens or tower

    def total(size_b: float) -> float:
        spec = generic_spec(size_b)
        sized = setup_for_model(spec, text_setup)  # --lora-layers past a small model's depth: all its layers
        return (estimate_fn(spec, sized) if estimate_fn is not None else estimate(spec, sized, rule)).total_bytes

    return bisect_last(MIN_SIZE_B, MAX_SIZE_B, total, device.usable_bytes, integer=False, rel_tol=rel_tol)


def smallest_device(spec: ModelSpec, setup: TrainingSetup, catalog: tuple[Device, ...] = CATALOG,
                    estimate_fn: EstimateFn = _default_estimate) -> Device | None:
    """The catalog device with the least usable memory that still fits this setup, among the devices that run its
    backend (a CUDA setup's answer is a GPU, an MLX or MPS one's a Mac: each is priced for its own runtime)."""
    total = estimate_fn(spec, setup).total_bytes
    fitting = [d for d in catalog if d.usable_bytes >= total and same_runtime(device_backend(d), setup.backend)]
    return min(fitting, key=lambda d: (d.usable_bytes, d.id)) if fitting else None


def min_gpus(spec: ModelSpec, setup: TrainingSetup, device: Device, max_gpus: int = 64,
             estimate_fn: EstimateFn = _default_estimate) -> int | None:
    """The smallest GPU count (1..max_gpus) whose per-GPU memory fits the device, for this sharding: every count
    tried in turn, whatever the estimate (the reference the searches are tested against)."""
    return min_gpus_for_devices(spec, setup, [device], max_gpus, estimate_fn, monotone=False)[device.id]


def min_gpus_for_devices(spec: ModelSpec, setup: TrainingSetup, devices: tuple[Device, ...] | list[Device],
                         max_gpus: int = 64, estimate_fn: EstimateFn = _default_estimate, per_node: int = 1,
                         monotone: bool = True) -> dict[str, int | None]:
    """min_gpus for many devices at once (device id → smallest count, or None). Per-GPU memory depends on the
    GPU count, not on the device, so each count is estimated once for all of them. With per_node > 1 only whole
    nodes count (8, 16, 24… GPUs).

    monotone (per-GPU memory never grows with the count from two GPUs on, as for SFT and the scoring trainers):
    the devices are answered from the most usable memory down, each with one fewest_gpus search that starts at
    the answer before it (a device with less memory never needs fewer GPUs, and none fits where a larger one does
    not). Otherwise every count is tried in turn: GRPO's generation under ZeRO-3 gathers the weights, and their
    per-GPU total rises again with more GPUs (estimator/memory/trainers.py, _generation_states)."""
    if not monotone:
        return _min_gpus_count_by_count(spec, setup, devices, max_gpus, estimate_fn, per_node)
    seen: dict[int, Estimate] = {}

    def once_per_count(model: ModelSpec, at: TrainingSetup) -> Estimate:
        if at.gpus not in seen:
            seen[at.gpus] = estimate_fn(model, at)
        return seen[at.gpus]

    by_usable: dict[float, int | None] = {}
    floor: int | None = 1  # the fewest GPUs the devices still to answer can need
    for device in sorted(devices, key=lambda d: -d.usable_bytes):
        usable = device.usable_bytes
        if usable in by_usable:
            continue
        if floor is None:  # not even the most GPUs fit a larger device
            n = None
        elif floor in seen and seen[floor].total_bytes <= usable:  # the fewest it can need, already priced, fits
            n = floor
        else:
            n = fewest_gpus(spec, setup, usable, max_gpus, per_node, once_per_count, at_least=floor, guess=floor)
        by_usable[usable] = floor = n
    return {d.id: by_usable[d.usable_bytes] for d in devices}


def _min_gpus_count_by_count(spec: ModelSpec, setup: TrainingSetup, devices: tuple[Device, ...] | list[Device],
                             max_gpus: int, estimate_fn: EstimateFn, per_node: int) -> dict[str, int | None]:
    """min_gpus_for_devices trying every count (whole nodes) in turn, for estimates not monotone in the count."""
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
    refuses it for plain data parallel on several GPUs); parameter offload with ZeRO-3 only."""
    return replace(setup, gpus=gpus, sharding=sharding, offload_optimizer=offload and sharding != "none",
                   offload_params=setup.offload_params and sharding == "zero3")


def fewest_gpus(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float, max_gpus: int = 64, per_node: int = 1,
                estimate_fn: EstimateFn = _default_estimate, likely_high: bool = False, at_least: int = 1,
                guess: int | None = None) -> int | None:
    """The fewest GPUs (a multiple of per_node, at most max_gpus) whose per-GPU estimate fits usable_bytes,
    for the setup's sharding; None if none does. One GPU is tried on its own (a second adds the NCCL buffers
    and the all-reduce bucket); from two GPUs on, per-GPU memory never grows with the count, so the rest is a
    search over node counts (bisect_last, interpolating in 1 / GPUs: the sharded states divide by the count).
    likely_high: the upper end of the likely range must fit too (no close call). at_least: counts below it are
    not tried (the shard remedy wants more GPUs than the setup has). guess: a count expected near the answer
    (tried first with the count below it; the search stays exact whatever it is)."""

    def per_gpu(n: int) -> float:
        est = estimate_fn(spec, replace(setup, gpus=n))
        return est.high_bytes if likely_high else est.total_bytes

    per_node = max(1, per_node)
    if per_node == 1 and at_least <= 1 and per_gpu(1) <= usable_bytes:
        return 1
    first = max(1, 2 // per_node, -(-at_least // per_node))  # nodes: from 2 GPUs (or one node of several) on
    last = min(max_gpus, MAX_GPUS) // per_node
    if first > last:
        return None
    # Without a guess, the most GPUs and half as many first: the line through them in 1 / GPUs points at the
    # answer (near the top the unsharded activations and buffers decide, as at the answer).
    if guess is not None:
        k = min(max(-(-guess // per_node), first), last)
        hints = (max(first, k - 1), k)
    else:
        hints = (max(first, last // 2), last)
    nodes = _smallest_int(first, last, lambda k: per_gpu(k * per_node), usable_bytes,
                          coord=(lambda k: 1 / k, lambda u: 1 / u), hints=hints)
    return None if nodes is None else nodes * per_node


@dataclass(frozen=True)
class Layout:
    """How to spread a run over GPUs of one kind: the sharding, the GPU count and its per-GPU estimate."""

    sharding: str
    gpus: int
    estimate: Estimate


def best_layout(spec: ModelSpec, setup: TrainingSetup, device: Device, shardings: tuple[str, ...] | list[str],
                offload: bool = False, max_gpus: int = 64, per_node: int = 1,
                estimate_fn: EstimateFn = _default_estimate, likely_high: bool = False) -> Layout | None:
    """The fewest GPUs of this device that fit (whole nodes of per_node GPUs) and, at that count, the simplest
    sharding whose likely range fits too (the calculator's 'fits' band) before one that is only a close call
    (shardings are tried in the given order, simplest first); None if nothing fits. likely_high: the upper end of
    the likely range must fit (the fewest GPUs with no close call)."""
    best: Layout | None = None
    best_key: tuple[int, bool] | None = None
    for sharding in shardings:
        base = sharded(setup, sharding, offload)
        n = fewest_gpus(spec, base, device.usable_bytes, max_gpus, per_node, estimate_fn, likely_high=likely_high)
        if n is None or (best is not None and n > best.gpus):
            continue
        est = estimate_fn(spec, replace(base, gpus=n))
        key = (n, est.high_bytes > device.usable_bytes)  # fewer GPUs first, then no close call
        if best_key is None or key < best_key:
            best, best_key = Layout(sharding, n, est), key
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


def max_completion_len(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup, usable_bytes: float,
                       device_capacity: float | None = None) -> int | None:
    """GRPO: the longest max_completion_length that fits (memory never falls as it grows)."""
    from .search import bisect_last

    limit = MAX_SEQ_LEN - tr.prompt_length
    if limit < 1:
        return None

    def total(c: int) -> float:
        return price(spec, setup, trainer=replace(tr, completion_len=c), device_capacity=device_capacity,
                     strict=False).total_bytes

    return bisect_last(1, limit, total, usable_bytes, hints=(tr.completion_length,))
