"""How a QLoRA base is quantised: bitsandbytes NF4 (the PyTorch stacks) or one of MLX's modes (the MLX-LM stack),
with the bit widths and group sizes each accepts and the bytes it stores per weight."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_, Text


@dataclass(frozen=True)
class QuantMode:
    """A quantisation mode: its framework, the bit widths and group sizes it accepts (first = default), and how it
    stores one group of weights (packed codes, a scale, and for affine a bias)."""

    id: str
    label: str
    framework: str  # "bitsandbytes" (PyTorch stacks) or "mlx"
    bits: tuple[int, ...]  # accepted bit widths, the default first
    groups: tuple[int, ...]  # accepted group sizes, the default first
    scale_bytes: int  # bytes of one group's scale; 0 = the weight's float dtype (affine: same as input)
    has_bias: bool  # affine stores a bias per group too (in the float dtype)
    summary: str
    source: str


_MLX_TABLE = ("mlx 0.32.4 mlx/core/__init__.pyi quantize(): table 'Quantization modes' (affine: groups 32, 64*, 128; "
              "bits 1, 2, 3, 4*, 5, 6, 8; scale 'same as input', bias yes; mxfp4 32/4 e8m0; mxfp8 32/8 e8m0; "
              "nvfp4 16/4 e4m3; no bias); defaults mlx/nn/layers/quantized.py:11-24 _defaults_for_mode")

QUANT_MODES: dict[str, QuantMode] = {q.id: q for q in (
    QuantMode("nf4", N_("NF4 (bitsandbytes)"), "bitsandbytes", (4,), (64,), 1, False,
              N_("bitsandbytes 4-bit NormalFloat, one absmax per 64 weights (double-quantised by default)."),
              "bitsandbytes functional.py quantize_4bit (blocksize 64); QLoRA paper §3"),
    QuantMode("affine", N_("MLX affine"), "mlx", (4, 2, 3, 5, 6, 8, 1), (64, 32, 128), 0, True,
              N_("MLX's default: b-bit codes packed in uint32, one scale and one bias per group in the weight's "
                 "float dtype (bf16 for a bf16 checkpoint)."), _MLX_TABLE),
    QuantMode("mxfp4", "MXFP4", "mlx", (4,), (32,), 1, False,
              N_("OCP microscaling FP4 (E2M1) with one 8-bit E8M0 scale per 32 weights, no bias."), _MLX_TABLE),
    QuantMode("nvfp4", "NVFP4", "mlx", (4,), (16,), 1, False,
              N_("NVIDIA FP4 (E2M1) with one 8-bit E4M3 scale per 16 weights, no bias."), _MLX_TABLE),
    QuantMode("mxfp8", "MXFP8", "mlx", (8,), (32,), 1, False,
              N_("OCP microscaling FP8 (E4M3) with one 8-bit E8M0 scale per 32 weights, no bias."), _MLX_TABLE),
)}
QUANT_MODE_IDS: tuple[str, ...] = tuple(QUANT_MODES)
MLX_QUANT_MODES: tuple[str, ...] = tuple(k for k, q in QUANT_MODES.items() if q.framework == "mlx")


def check_quant(mode: str, bits: int, group: int) -> None:
    """ValueError with the reason when `mode` does not accept these bits or this group size."""
    if mode not in QUANT_MODES:
        raise ValueError(Text(N_("unknown quantisation mode '{mode}'; choose one of: {choices}"), mode=str(mode)[:20],
                              choices=", ".join(QUANT_MODES)))
    q = QUANT_MODES[mode]
    if bits not in q.bits:
        raise ValueError(Text(N_("{mode} quantisation has no {bits}-bit form; it accepts {choices} bits"),
                              mode=q.id, bits=bits, choices=", ".join(map(str, sorted(q.bits)))))
    if group not in q.groups:
        raise ValueError(Text(N_("{mode} quantisation has no group size {group}; it accepts {choices}"), mode=q.id,
                              group=group, choices=", ".join(map(str, sorted(q.groups)))))


def mlx_bytes_per_weight(mode: str, bits: int, group: int, float_bytes: int) -> float:
    """Bytes one weight takes in an MLX-quantised matrix: the packed code (bits / 8), plus the group's scale and,
    for affine, its bias (float dtype) spread over the group. Measured with mx.quantize on 0.32.4: affine 4-bit/64
    in bf16 = 0.5625 B, 8-bit = 1.0625 B; mxfp4 0.53125; nvfp4 0.5625; mxfp8 1.03125."""
    q = QUANT_MODES[mode]
    scale = float_bytes if q.scale_bytes == 0 else q.scale_bytes  # affine: "same as input" (the table above)
    return bits / 8 + (scale + (float_bytes if q.has_bias else 0)) / group  # uint32-packed codes + per-group terms
