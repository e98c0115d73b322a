"""What to change: the seed's five remedies in its order, each with the memory it saves for this exact
setup, and solvers for the largest batch, the longest max length, the smallest device and GPU count."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .devices import CATALOG, Device
from .memory import Estimate
from .model import ModelSpec, generic_spec, list_presets, load_preset
from .stacks import with_method
from .training import MAX_BATCH, MAX_GPUS, MAX_SEQ_LEN, TrainingSetup

EstimateFn = Callable[[ModelSpec, TrainingSetup], Estimate]


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


def _largest_int(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """Largest n in [lo, hi] with fits(n), assuming fits is monotone (true then false). None if none fits."""
    if not fits(lo):
        return None
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_batch(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
              estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_BATCH) -> int | None:
    """The largest micro-batch that fits (memory never falls as batch grows)."""
    return _largest_int(1, limit, lambda b: estimate_fn(spec, replace(setup, batch=b)).total_bytes <= usable_bytes)


def max_seq_len(spec: ModelSpec, setup: TrainingSetup, usable_bytes: float,
                estimate_fn: EstimateFn = _default_estimate, limit: int = MAX_SEQ_LEN) -> int | None:
    """The longest max length (tokens) that fits at this batch size."""
    return _largest_int(1, limit, lambda s: estimate_fn(spec, replace(setup, seq_len=s)).total_bytes <= usable_bytes)


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
                         max_gpus: int = 64, estimate_fn: EstimateFn = _default_estimate
                         ) -> dict[str, int | None]:
    """min_gpus for many devices at once: per-GPU memory depends on the GPU count, not on the device, so each
    count is estimated once and every device answered from it (device id → smallest count, or None)."""
    answers: dict[str, int | None] = {d.id: None for d in devices}
    open_devices = list(devices)
    for n in range(1, min(max_gpus, MAX_GPUS) + 1):
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
            caveat: str) -> None:
        if new_setup is None:
            out.append(Remedy(order, title, change, 0.0, base, False, caveat))
            return
        total = estimate_fn(new_spec, new_setup).total_bytes
        out.append(Remedy(order, title, change, base - total, total, True, caveat))

    half_len = max(1, setup.seq_len // 2)
    add(1, "Lower the max length", f"max length {setup.seq_len:,} → {half_len:,}", spec,
        replace(setup, seq_len=half_len) if setup.seq_len > 1 else None,
        "Check typical examples still fit, or the model never sees the ends of answers.")
    half_batch = max(1, setup.batch // 2)
    add(2, "Lower the batch size", f"batch {setup.batch} → {half_batch}", spec,
        replace(setup, batch=half_batch) if setup.batch > 1 else None,
        "Fewer examples per step; raise gradient accumulation to keep the effective batch.")
    add(3, "Switch to QLoRA", f"{setup.method} → qlora (4-bit base)", spec,
        with_method(setup, "qlora") if setup.method != "qlora" else None,
        "A 4-bit base is about a quarter of a 16-bit one; training is somewhat slower.")
    add(4, "Use gradient checkpointing", "checkpointing off → on", spec,
        replace(setup, grad_ckpt=True) if not setup.grad_ckpt else None,
        "20–30 % slower: activations are recomputed in backward.")
    if setup.method == "full":
        add(5, "Use LoRA instead of full fine-tuning", "full → lora", spec, with_method(setup, "lora"),
            "Fewer trainable weights; less room to change behaviour.")
    else:
        smaller = _smaller_model(spec)
        if smaller is None:
            add(5, "Pick a smaller model", "no smaller model", spec, None, "")
        else:
            add(5, "Pick a smaller model", f"{spec.name} → {smaller.name}", smaller, setup,
                "A smaller model learns less; compare quality before committing.")
    return tuple(out)
