"""Byte units. Everything inside the estimator is bytes; GB (10^9) and GiB (2^30) exist only for display."""

from __future__ import annotations

from .i18n import format_number

GB = 1_000_000_000  # decimal gigabyte, what the seed page and GPU vendors quote
GiB = 1 << 30  # binary gibibyte, what PyTorch and nvidia-smi report


def to_gb(n_bytes: float) -> float:
    """Bytes to decimal gigabytes."""
    return n_bytes / GB


def to_gib(n_bytes: float) -> float:
    """Bytes to binary gibibytes."""
    return n_bytes / GiB


def fmt_gb(n_bytes: float, digits: int = 1) -> str:
    """'17.2 GB' (decimal); '17,2 GB' in Spanish (estimator/i18n.py)."""
    return f"{format_number(to_gb(n_bytes), digits)} GB"


def fmt_both(n_bytes: float, digits: int = 1) -> str:
    """'17.2 GB (16.0 GiB)': both units, labelled."""
    return f"{format_number(to_gb(n_bytes), digits)} GB ({format_number(to_gib(n_bytes), digits)} GiB)"


# Byte units as the frameworks print them in their error messages, in bytes (estimator/oom_message.py reads them).
# PyTorch's CUDA allocator prints binary units with their IEC names (format_size in c10/cuda/CUDACachingAllocator.cpp:
# "bytes", "KiB", "MiB", "GiB", two decimals); its MPS allocator divides by 1024 too but prints "KB", "MB", "GB"
# (MPSHeapAllocatorImpl::format_size in aten/src/ATen/mps/MPSAllocator.h), so in a PyTorch message a "GB" is a GiB.
# mlx prints whole bytes (mlx/backend/metal/allocator.cpp); mlx-lm's "Peak mem … GB" is decimal (÷ 1e9).
MESSAGE_UNITS: dict[str, int] = {
    "bytes": 1, "byte": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40,  # PyTorch's MPS spelling of binary units
}
