"""What sits beside the tensors: the CUDA context, NCCL buffers, the caching allocator's slack and the model's
measured error band (docs/formulas.md §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup

# CUDA context + cuBLAS workspaces, invisible to torch.cuda.memory_allocated (docs/formulas.md §5):
# 287 MB measured with lazy module loading (pytorch PR #86509), 1.3–2 GB on old stacks (HF docs).
CUDA_CONTEXT_BYTES = 500_000_000  # expected: CUDA 12 with lazy loading
CUDA_CONTEXT_LOW = 300_000_000
CUDA_CONTEXT_HIGH = 1_000_000_000
NCCL_BYTES = 250_000_000  # NCCL communicator buffers per GPU when more than one GPU (~hundreds of MB)
# Caching-allocator rounding and fragmentation: reserved ≈ allocated × 1.05–1.15 (docs/formulas.md §5).
ALLOCATOR_SLACK = 0.05
# Relative error of the tensor-level estimate on real runs: 10th/90th percentile of measured ÷ estimated over
# the published measurements (validation.derived_band; tests/test_accuracy.py re-derives and checks them).
MODEL_ERROR_LOW = 0.07
MODEL_ERROR_HIGH = 0.08


class RuntimeContext(NamedTuple):
    """The runtime's memory outside the tensors on one GPU: expected, low and high, the NCCL part, the formula."""

    expected: float  # the context, plus NCCL's buffers over several GPUs
    low: float  # the context's low end (NCCL is added to the band apart)
    high: float
    nccl: float
    formula: str


# Unsloth Studio's own planning figure for the memory outside an Unsloth training step's tensors: "CUDA driver +
# PyTorch runtime, calibrated on RTX 5070 Ti" (unsloth studio/backend/utils/hardware/vram_estimation.py:20 and
# VRAM_ESTIMATION.md §7 at 015bdef0d9: 1.4 GiB). Not checked here (no GPU trace of an Unsloth process's context):
# the Unsloth runtime's high end, not its expected value (docs/unsloth.md §12).
UNSLOTH_STUDIO_OVERHEAD = int(1.4 * 2**30)


def unsloth_context(setup: TrainingSetup) -> RuntimeContext:
    """An Unsloth process's context: the PyTorch one, its high end widened to Unsloth Studio's calibrated overhead."""
    rc = runtime_context(setup)
    if setup.backend == "metal" or rc.high >= UNSLOTH_STUDIO_OVERHEAD:
        return rc
    return rc._replace(high=float(UNSLOTH_STUDIO_OVERHEAD),
                       formula="0.3–1.5 GB (lazy module loading; high: Unsloth Studio's 1.4 GiB)")


def runtime_context(setup: TrainingSetup) -> RuntimeContext:
    """The CUDA context (and NCCL's buffers with more than one GPU) of a PyTorch step. PyTorch on MPS has none (torch/mps:
    the Metal device and MPSAllocator); NCCL is CUDA's."""
    if setup.backend == "metal":
        return RuntimeContext(0.0, 0.0, 0.0, 0.0, "none on MPS (no CUDA context)")
    nccl = NCCL_BYTES if setup.gpus > 1 else 0
    return RuntimeContext(CUDA_CONTEXT_BYTES + nccl, CUDA_CONTEXT_LOW, CUDA_CONTEXT_HIGH, nccl,
                          "0.3–1.0 GB (lazy module loading)")
