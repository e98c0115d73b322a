"""Backends: the runtime a step runs on (CUDA, ROCm, Apple's Metal, the CPU), which stacks run on which, and what a
backend lacks. The estimate reads the setup's backend (TrainingSetup.backend), which the CLI and the pages derive
from the device (`device_backend`); a PyTorch stack on Metal is priced as a PyTorch MPS run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_, Text

if TYPE_CHECKING:
    from .devices import Device


@dataclass(frozen=True)
class Backend:
    """One runtime: its label (what the How page and the CLI print) and what it means for the estimate."""

    id: str
    label: str
    runtime: str  # the runtime's name in the overhead's label (CUDA, ROCm, Metal, CPU)
    summary: str


BACKENDS: dict[str, Backend] = {b.id: b for b in (
    Backend("cuda", N_("NVIDIA GPU (CUDA)"), "CUDA",
            N_("PyTorch on CUDA: a CUDA context, FlashAttention/SDPA without s² memory, bitsandbytes kernels.")),
    Backend("rocm", N_("AMD GPU (ROCm)"), "ROCm",
            N_("PyTorch on ROCm (HIP): priced as CUDA (the same allocator and kernels' memory).")),
    Backend("metal", N_("Apple GPU (Metal)"), "Metal",
            N_("Apple silicon: MLX's Metal backend, or PyTorch's MPS backend for the PyTorch stacks; no CUDA "
               "context; unified memory.")),
    Backend("cpu", N_("CPU"), "CPU",
            N_("MLX's CPU backend (how the MLX fixtures are measured); the PyTorch stacks are priced on GPUs "
               "only.")),
)}
BACKEND_IDS: tuple[str, ...] = tuple(BACKENDS)
DEFAULT_BACKEND = "cuda"

# Where each stack cannot run, with the reason (stack id → backend id → why). A stack not listed for a backend runs
# there. PyTorch stacks on "metal" are PyTorch MPS runs; MLX on "cuda" is MLX's CUDA backend.
_PYTORCH_CPU = N_("the PyTorch stacks are priced on a GPU (CUDA, ROCm or Apple's MPS), not on the CPU")
STACK_REFUSALS: dict[str, dict[str, str]] = {
    "mlx": {"rocm": N_("MLX has Metal, CUDA and CPU backends only (mlx/backend/metal, cuda, cpu in mlx 0.32); "
                       "there is no ROCm backend")},
    "unsloth": {
        "metal": N_("on Apple silicon unsloth 2026.10.9 does not train through PyTorch's MPS: unsloth/__init__.py "
                    "(l. 140-160, _is_mlx_available) switches to its MLX path (unsloth_zoo.mlx); choose the MLX-LM "
                    "stack to price an MLX run"),
        "cpu": _PYTORCH_CPU,
    },
    **{s: {"cpu": _PYTORCH_CPU} for s in ("trl", "trainer", "axolotl", "torchtune", "litgpt", "plain",
                                                "llamafactory")},
}

# What PyTorch's MPS backend lacks that a CUDA run has (each refused on "metal" with its reason).
MPS_NO_8BIT_OPTIMIZER = N_("bitsandbytes 0.50.2 registers its 8-bit optimizer kernel (optimizer_update_8bit_blockwise) "
                           "for CUDA, XPU and the CPU only (bitsandbytes/backends/*/ops.py): no 8-bit optimizer "
                           "state on MPS")
MPS_NO_PAGED = N_("bitsandbytes' paged optimizers allocate CUDA managed memory (cudaMallocManaged), which MPS does not "
                  "have")
MPS_NO_TRITON = N_("the fused loss kernels (Liger, Cut Cross-Entropy) are Triton kernels; Triton has no Apple GPU "
                   "backend")
# PyTorch's SDPA on MPS: the MPS kernel runs only without grad (aten/src/ATen/native/transformers/attention.cpp,
# scaled_dot_product_attention, math branch: `!(GradMode::is_enabled() && any_inputs_require_grad)`); in training
# it falls back to _scaled_dot_product_attention_math, which materialises the attention weights.
MPS_ATTENTION = N_("PyTorch's SDPA on MPS uses its Metal kernel only without gradients (attention.cpp, "
                   "scaled_dot_product_attention: the MPS branch needs grad mode off); in training it runs the math "
                   "path, which keeps s²-sized attention weights per head, so it is priced as eager attention.")
MPS_NF4 = ("bitsandbytes 0.50.2 backends/mps/ops.py registers quantize_4bit, dequantize_4bit and gemm_4bit for "
           "'mps' (NF4 QLoRA runs on a Mac)")
MPS_FUSED_ADAMW = "torch 2.13 torch/utils/_foreach_utils.py:13-21 _get_fused_kernels_supported_devices lists 'mps'"


def device_backend(device: Device | None) -> str:
    """The backend a device runs: Metal for unified-memory (Apple silicon) devices, ROCm for AMD cards, CUDA for
    the others (a typed discrete capacity counts as CUDA); CUDA when there is no device."""
    if device is None:
        return DEFAULT_BACKEND
    if device.kind == "unified":
        return "metal"
    return "rocm" if device.runtime == "ROCm" else "cuda"


def same_runtime(device_backend_id: str, setup_backend: str) -> bool:
    """Does a device with this backend run a setup priced for `setup_backend`? Its own backend, and a ROCm card
    for a CUDA setup or the other way round (BACKENDS: ROCm is priced as CUDA)."""
    gpus = ("cuda", "rocm")
    return device_backend_id == setup_backend or (device_backend_id in gpus and setup_backend in gpus)


def stack_refusal(stack_id: str, backend: str) -> str | None:
    """Why this stack cannot run on this backend (a message id to translate), or None when it can."""
    return STACK_REFUSALS.get(stack_id, {}).get(backend)


def check_stack_backend(stack_id: str, stack_label: str, backend: str) -> None:
    """ValueError with the reason when the stack cannot run on the backend."""
    why = stack_refusal(stack_id, backend)
    if why:
        raise ValueError(Text(N_("the {stack} stack cannot run on {backend}: {why}"), stack=stack_label,
                              backend=Text(BACKENDS[backend].label), why=Text(why)))
