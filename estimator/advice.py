"""What to change: the seed's five remedies in its order, each with the memory it saves for this exact
setup, and solvers for the largest batch, the longest max length, the smallest device and GPU count."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from .devices import CATALOG, Device
from .i18n import _, format_int
from .memory import ALLOCATOR_SLACK, Estimate, setup_for_model
from .model import MAX_SIZE_B, MIN_SIZE_B, ModelSpec, generic_spec, list_presets, load_preset
from .stacks import with_method
from .training import MAX_BATCH, MAX_GPUS, MAX_SEQ_LEN, TrainingSetup

if TYPE_CHECKING:
    from .trainers import TrainerSetup

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


def bisect_last(lo: T, hi: T, value: Callable[[T], float], limit: float, *, integer: bool = True,
                rel_tol: float = 0.002, hints: Iterable[T] = (),
                coord: tuple[Callable[[float], float], Callable[[float], float]] | None = None) -> T | None:
    """The one search every solver uses: the largest x in [lo, hi] with value(x) <= limit, for value
    nondecreasing in x; None if not even lo fits. Whole numbers (integer=True) are searched to the exact
    answer, other numbers until the bracket's ratio is within 1 + rel_tol.

    A bisection sped up by interpolation: memory is piecewise linear in batch, length and model size (each
    phase is affine in the tokens and the parameters, docs/formulas.md §0), so the line through the two
    largest fitting points usually lands on the answer, and one more probe confirms it. A plain halving step
    is taken whenever two steps did not halve the bracket, so the worst case stays a bisection. `hints` are
    points to classify first (the page's own setup and the remedies' halves: estimates already computed, so
    free with the estimate cache); `coord` = (forward, inverse) maps x to the coordinate in which value is
    nearest to linear (per-GPU memory is linear in 1 / GPUs)."""
    fwd, inv = coord or (float, float)
    seen: dict[T, float] = {}

    def f(x: T) -> float:
        if x not in seen:
            seen[x] = value(x)
        return seen[x]

    def step_up(a: T) -> T:  # the next point worth probing above a
        return a + 1 if integer else a * (1 + 0.75 * rel_tol)  # type: ignore[return-value]

    def inside(x: float, a: T, b: T) -> T:  # a probe strictly between a and b, on the fitting side of x
        if integer:
            return min(max(math.floor(x), a + 1), b - 1)  # type: ignore[return-value]
        return min(max(x / (1 + rel_tol / 4), a * (1 + rel_tol / 4)), b / (1 + rel_tol / 4))  # type: ignore

    def done(a: T, b: T) -> bool:
        return b - a <= 1 if integer else b / a <= 1 + rel_tol

    def line(x0: T, x1: T) -> float | None:
        """Where the line through (x0, f(x0)) and (x1, f(x1)) reaches limit, when it rises."""
        u0, u1, v0, v1 = fwd(x0), fwd(x1), f(x0), f(x1)
        if v1 <= v0 or u1 == u0:
            return None
        try:
            return inv(u0 + (limit - v0) * (u1 - u0) / (v1 - v0))
        except (ValueError, ZeroDivisionError, OverflowError):
            return None

    def secant(side: str) -> float | None:
        """Where the line through the two nearest known points on one side of the answer reaches limit: the
        two largest fitting points ("fit") or the two smallest failing ones ("fail")."""
        if side == "fit":
            pts = sorted(x for x in seen if seen[x] <= limit)[-2:]
        else:
            pts = sorted(x for x in seen if seen[x] > limit)[:2]
        return line(pts[0], pts[1]) if len(pts) == 2 else None

    def aim(a: T, b: T, last_fit: bool) -> float | None:
        """The interpolated answer: the secant on the side of the last probe, else the other side's, else the
        chord a–b; None when none of them lands inside [a, b]."""
        for guess in (secant("fit" if last_fit else "fail"), secant("fail" if last_fit else "fit"), line(a, b)):
            if guess is not None and a <= guess <= b:
                return guess
        return None

    known = {x for x in hints if lo <= x <= hi}
    fits_at = [x for x in sorted(known) if f(x) <= limit]
    fails_at = [x for x in sorted(known) if f(x) > limit]
    a, b = (fits_at[-1] if fits_at else None), (fails_at[0] if fails_at else None)
    # One side of the answer known: follow the line through its two nearest points across (two probes at most)
    # before falling back to the ends of the range.
    for _probe in range(2):
        if (a is None) == (b is None):
            break
        guess = secant("fit" if b is None else "fail")
        if guess is None:
            break
        if b is None:
            x = step_up(a) if guess < step_up(a) else inside(guess, a, hi)
            if not a < x < hi:
                break
        else:
            x = inside(guess, lo, b) if guess > lo else lo
            if not lo < x < b:
                break
        if f(x) <= limit:
            a = x
        else:
            b = x
    if a is None:
        if f(lo) > limit:
            return None
        a = lo
    if b is None:
        if f(hi) <= limit:
            return hi
        b = hi
    widths: list[float] = []
    last_fit = True
    while not done(a, b):
        widths.append(abs(fwd(b) - fwd(a)))
        guess = aim(a, b, last_fit)
        if guess is None or not a <= guess <= b or (len(widths) > 2 and widths[-1] > widths[-3] / 2):
            mid = (a + b) / 2 if integer or coord else math.sqrt(a * b)  # halve
            x = inside(mid, a, b) if integer else mid
        elif guess < step_up(a):  # the line says a is the answer: check the point just above
            x = inside(step_up(a), a, b) if not integer else min(step_up(a), b - 1)
        else:
            x = inside(guess, a, b)
        last_fit = f(x) <= limit
        if last_fit:
            a = x
        else:
            b = x
    return a


def _smallest_int(lo: int, hi: int, value: Callable[[int], float], limit: float,
                  coord: tuple[Callable[[float], float], Callable[[float], float]] | None = None,
                  hints: Iterable[int] = ()) -> int | None:
    """The smallest n in [lo, hi] with value(n) <= limit, for value nonincreasing in n (per-GPU memory as GPUs
    are added); None if not even hi fits. The mirror of bisect_last: the last n that does not fit, plus one."""
    last_unfit = bisect_last(lo, hi, lambda n: -value(n), math.nextafter(-limit, -math.inf), coord=coord,
                             hints=hints)
    if last_unfit is None:
        return lo
    return last_unfit + 1 if last_unfit < hi else None


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
    from . import estimate  # the package's entry point: detailed, or the rule of thumb

    text_setup = setup_for_model(generic_spec(1.0), setup)  # a generic decoder takes no image tokens or tower

    def total(size_b: float) -> float:
        spec = generic_spec(size_b)
        return (estimate_fn(spec, text_setup) if estimate_fn is not None
                else estimate(spec, text_setup, rule)).total_bytes

    return bisect_last(MIN_SIZE_B, MAX_SIZE_B, total, device.usable_bytes, integer=False, rel_tol=rel_tol)


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


@dataclass(frozen=True)
class Advice:
    """What to change, for the calculator: the remedies in the order to try them, and the solvers' answers."""

    remedies: tuple[Remedy, ...]
    max_batch: int | None  # the largest micro-batch that fits (None: not even 1)
    max_length: int | None  # the longest max length that fits; GRPO: the longest max completion length
    smallest_device: Device | None  # the catalog device with the least usable memory that fits


def advise(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
           rule: str | None = None, batch_limit: int = MAX_BATCH, length_limit: int = MAX_SEQ_LEN) -> Advice:
    """The calculator's "What to change": the seed's remedies (and the trainer's own, and sharding over more GPUs
    of this kind when the run does not fit) priced with the estimate the page shows, the largest batch and
    the longest length that fit, and the smallest catalog device. With rule='seed' the remedies and the
    smallest device are the rule's (the batch and length answers stay the detailed estimate's: the rule has
    neither). Every estimate goes through the estimate cache, so the page's own estimate and the remedies'
    halves are computed once and the solvers start from them. Raises ValueError when a changed setup is
    refused."""
    from .rule import seed_estimate
    from .trainers import TrainerSetup as _TrainerSetup
    from .trainers import all_remedies, max_completion_len, solver_estimate_fn

    tr = trainer or _TrainerSetup("sft")
    usable = device.usable_bytes
    if tr.trainer == "sft":
        fn: EstimateFn = _default_estimate
        found = remedies(spec, setup)
        longest = max_seq_len(spec, setup, usable, limit=length_limit)
    else:
        fn = solver_estimate_fn(tr, device.capacity_bytes)
        found = all_remedies(spec, setup, tr, device.capacity_bytes)
        longest = (max_completion_len(spec, setup, tr, usable, device.capacity_bytes) if tr.option.generates
                   else max_seq_len(spec, setup, usable, fn, limit=length_limit))
    # DPO, ORPO, SimPO, reward: each example is 2 sequences per forward, so the batch stops at half the limit.
    biggest = max_batch(spec, setup, usable, fn, limit=batch_limit // tr.option.sequences)
    if rule == "seed":  # the rule prices its own changes and its own smallest device
        return Advice(remedies(spec, setup, seed_estimate), biggest, longest,
                      smallest_device(spec, setup, estimate_fn=seed_estimate))
    if tr.trainer == "sft":
        shard = shard_remedy(spec, setup, device, order=len(found) + 1)
        found = found + ((shard,) if shard is not None else ())
    return Advice(tuple(found), biggest, longest, smallest_device(spec, setup, estimate_fn=fn))
