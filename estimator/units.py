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
