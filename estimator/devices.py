"""Devices: a catalog of laptops and GPUs, usable memory (unified vs discrete), and the verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .units import GB

# The seed: a unified-memory laptop can give about three quarters of its RAM to training (the OS and
# apps keep the rest); Apple's recommendedMaxWorkingSetSize is ≈ 0.75 × RAM (MLX PR #64).
UNIFIED_USABLE_FRACTION = 0.75


@dataclass(frozen=True)
class Device:
    """A machine's memory for training. capacity_bytes is the marketed memory (GB = 1e9 B; NVIDIA's
    '80 GB' is 80 GiB-ish but sold as GB: we use the vendor's number of decimal GB as printed)."""

    id: str
    name: str
    kind: str  # "unified" (shared RAM, Apple silicon) or "discrete" (a GPU's own memory)
    capacity_bytes: int

    @property
    def usable_bytes(self) -> int:
        """Unified: ≈ 75 % of RAM (the seed). Discrete: the card's whole memory (the seed: the limit is
        the card's own memory, not the PC's RAM); CUDA context is already part of our estimate."""
        if self.kind == "unified":
            return int(self.capacity_bytes * UNIFIED_USABLE_FRACTION)
        return self.capacity_bytes

    @property
    def reserved_bytes(self) -> int:
        """Memory the OS and apps keep (unified) — the shaded band in the capacity overlay."""
        return self.capacity_bytes - self.usable_bytes


def _gpu(id_: str, name: str, gb: float) -> Device:
    return Device(id_, name, "discrete", int(gb * GB))


def _mac(id_: str, name: str, gb: float) -> Device:
    return Device(id_, name, "unified", int(gb * GB))


# Capacities as vendors state them (decimal GB as marketed).
CATALOG: tuple[Device, ...] = (
    _mac("laptop-36gb", "36 GB laptop (unified, the seed's example)", 36),
    _mac("mac-16gb", "Apple silicon 16 GB (unified)", 16),
    _mac("mac-24gb", "Apple silicon 24 GB (unified)", 24),
    _mac("mac-48gb", "Apple silicon 48 GB (unified)", 48),
    _mac("mac-64gb", "Apple silicon 64 GB (unified)", 64),
    _mac("mac-96gb", "Apple silicon 96 GB (unified)", 96),
    _mac("mac-128gb", "Apple silicon 128 GB (unified)", 128),
    _gpu("gpu-16gb", "16 GB NVIDIA GPU (RTX 4080, 4060 Ti 16 GB, T4, V100 16 GB)", 16),
    _gpu("rtx-3090", "NVIDIA RTX 3090 24 GB", 24),
    _gpu("rtx-4090", "NVIDIA RTX 4090 24 GB", 24),
    _gpu("rtx-5090", "NVIDIA RTX 5090 32 GB", 32),
    _gpu("l4", "NVIDIA L4 24 GB", 24),
    _gpu("a10g", "NVIDIA A10G 24 GB", 24),
    _gpu("l40s", "NVIDIA L40S 48 GB", 48),
    _gpu("a100-40gb", "NVIDIA A100 40 GB", 40),
    _gpu("a100-80gb", "NVIDIA A100 80 GB", 80),
    _gpu("h100-80gb", "NVIDIA H100 80 GB", 80),
    _gpu("h200", "NVIDIA H200 141 GB", 141),
)
_BY_ID = {d.id: d for d in CATALOG}
CUSTOM_MAX_GB = 100_000.0


def device_ids() -> tuple[str, ...]:
    return tuple(_BY_ID)


def get_device(device_id: str) -> Device:
    """A catalog device. Unknown ids raise ValueError listing the choices."""
    if device_id not in _BY_ID:
        raise ValueError(f"unknown device '{str(device_id)[:60]}'; choose one of: {', '.join(_BY_ID)}")
    return _BY_ID[device_id]


def custom_device(capacity_gb: float, kind: str = "discrete") -> Device:
    """A device the user describes: capacity in decimal GB, unified or discrete."""
    if kind not in ("unified", "discrete"):
        raise ValueError("device kind must be 'unified' or 'discrete'")
    if isinstance(capacity_gb, bool) or not isinstance(capacity_gb, (int, float)) or not math.isfinite(capacity_gb):
        raise ValueError(f"capacity must be a number of GB, got {str(capacity_gb)[:40]!r}")
    if not 0.5 <= capacity_gb <= CUSTOM_MAX_GB:
        raise ValueError(f"capacity must be between 0.5 and {CUSTOM_MAX_GB:,.0f} GB, got {capacity_gb:g}")
    label = "unified" if kind == "unified" else "GPU"
    return Device("custom", f"Custom {capacity_gb:g} GB ({label})", kind, int(capacity_gb * GB))


@dataclass(frozen=True)
class Verdict:
    """Does the estimate fit the device's usable memory, and by how much."""

    fits: bool
    total_bytes: float
    usable_bytes: int
    margin_bytes: float  # usable − total: headroom when it fits, shortfall (negative) when not
    high_fits: bool  # does the upper end of the band fit too?

    @property
    def headline(self) -> str:
        from .units import fmt_gb

        if self.fits:
            return f"Fits: {fmt_gb(self.total_bytes)} of {fmt_gb(self.usable_bytes)} usable"
        return f"Too big by {fmt_gb(-self.margin_bytes)}"


def verdict(total_bytes: float, device: Device, high_bytes: float | None = None) -> Verdict:
    usable = device.usable_bytes
    high = total_bytes if high_bytes is None else high_bytes
    return Verdict(fits=total_bytes <= usable, total_bytes=total_bytes, usable_bytes=usable,
                   margin_bytes=usable - total_bytes, high_fits=high <= usable)
