"""What a training stack sustains of a device's peak: the handful of constants the time model fits on published
throughputs (validation/data/throughput.csv, rows marked `fit`; validation/speed.py `fit_constants` reproduces them),
and the fixed assumptions beside them, each with its source.

A matmul-heavy pass runs at peak TFLOPS × the stack's efficiency on its platform; bandwidth-bound kernels at the
memory bandwidth × Calibration.bandwidth; every layer a pass crosses costs a fixed launch overhead (the Python and
kernel-launch time of an eager framework, which dominates small micro-batches: PyTorch's own performance guide
names it, https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html "CUDA graphs ... reduce the CPU
overhead of launching kernels")."""

from __future__ import annotations

from dataclasses import dataclass

# The efficiency class of each training stack: whose kernels and model code run the step.
STACK_FAMILY: dict[str, str] = {
    "trl": "transformers", "trainer": "transformers", "plain": "transformers", "axolotl": "transformers",
    # LitGPT runs its own PyTorch model with the same SDPA kernels; no published LitGPT throughput with a token count
    # was found, so it takes torchtune's (the other stack with its own native PyTorch model code).
    "litgpt": "torchtune", "torchtune": "torchtune",
    "unsloth": "unsloth", "mlx": "mlx",
}

# --- fitted constants (validation/speed.py fit_constants; the rows each was fit on are listed) ------------------------
@dataclass(frozen=True)
class Calibration:
    """The fitted constants.
    pytorch: sustained share of the dense peak for the matmul passes of the PyTorch stacks (transformers + PEFT,
    torchtune, LitGPT, Unsloth's base) on NVIDIA/AMD GPUs: the same cuBLAS GEMMs and SDPA/FlashAttention kernels run
    under each; what differs between stacks is the Python and launch overhead (launch_pytorch) and compilation
    (compile_speedup). No consumer-card row was usable: consumer and workstation cards take this value, untested.
    mlx_apple: the same for MLX on Apple GPUs; MLX's CUDA backend runs its matmuls through cuBLAS like PyTorch
    (mlx/backend/cuda/gemms/cublas_gemm.cpp, mlx 0.32), so it takes `pytorch`.
    compile_speedup: torch.compile (torchtune compile=True) on the compute passes.
    hopper: the factor a data-centre Hopper/Blackwell GPU's efficiency is multiplied by (HIGH_PEAK_ARCHS below).
    launch_pytorch, launch_mlx: seconds per decoder layer per pass (forward, backward, recompute, a decode step).
    bandwidth: the share of the memory bandwidth elementwise kernels sustain."""

    pytorch: float
    mlx_apple: float
    compile_speedup: float
    hopper: float
    launch_pytorch: float
    launch_mlx: float
    bandwidth: float

    def efficiency(self, family: str, platform: str, arch: str = "", gpu_class: str = "") -> float:
        """The matmul efficiency of a stack family on a platform; a data-centre Hopper or Blackwell GPU sustains a
        smaller share of its peak (`hopper`); Unsloth's kernels UNSLOTH_SPEEDUP times more, capped."""
        factor = self.hopper if arch in HIGH_PEAK_ARCHS and gpu_class == "datacenter" else 1.0
        if platform == "apple":
            # every stack on an Apple GPU: MLX's figure; a PyTorch stack runs through MPS, for which no throughput
            # with a token count was found: MLX's is an optimistic bound for it (an assumption)
            return self.mlx_apple
        base = factor * self.pytorch
        return min(MAX_EFFICIENCY, base * UNSLOTH_SPEEDUP) if family == "unsloth" else base

    def launch_seconds(self, family: str) -> float:
        if family == "mlx":
            return self.launch_mlx
        return self.launch_pytorch / UNSLOTH_SPEEDUP if family == "unsloth" else self.launch_pytorch


CALIBRATION = Calibration(
    pytorch=0.572,  # fit on tt-01, tt-02, tt-04, tt-06, tt-08 (torchtune flags table, A100), peft-01, peft-03, peft-05
    #                (PEFT MetaMathQA bench, L40S) and titan-01 (torchtitan, 8 H100)
    mlx_apple=0.385,  # fit on mlx-01 (transformer_lm, M2 Max 38-core) and mlx-03 (mlx-lm LORA.md, M1 Max)
    compile_speedup=1.303,  # fit on tt-02 against tt-01
    hopper=0.557,  # fit on titan-01
    launch_pytorch=1.27e-3,  # fit on the PEFT rows (840 tokens a step) against the torchtune rows (8,192)
    launch_mlx=4.07e-4,  # fit on the MLX rows (mlx-04, on MLX's CUDA backend, separates it from the efficiency)
    bandwidth=0.712,  # fit on all fit rows
)

# --- assumptions (not fitted) --------------------------------------------------------------------------------------
# The same framework sustains a smaller share of a Hopper GPU's peak than of an A100's: torchtitan reports 56.8-58.2 %
# MFU for Llama 3 8B with FSDP on A100s (pytorch/torchtitan docs/performance.md) and 33-39 % on H100s (benchmarks/
# llama3_h100_202412_torchtitan.md, footnote 2: with the SXM peak). The `hopper` factor (fitted) applies to data-centre
# Hopper GPUs and, by assumption, to data-centre Blackwell (B200), whose peak is higher still; no B200 row exists.
HIGH_PEAK_ARCHS = ("hopper", "blackwell")
# Unsloth: no published throughput with a token count was found; Unsloth publishes its speed relative to Hugging Face
# + FlashAttention 2 on the same runs: "2x" for Llama 3.1 8B and Llama 3.3 70B QLoRA (Unsloth benchmarks,
# https://docs.unsloth.ai/basics/unsloth-benchmarks: Alpaca, batch 2, accumulation 4, rank 32, all linear layers).
# The Unsloth stack runs its matmuls at the PyTorch efficiency × this ratio (capped at MAX_EFFICIENCY) and pays the
# PyTorch launch overhead ÷ this ratio (its fused Triton kernels launch fewer kernels per layer).
UNSLOTH_SPEEDUP = 2.0
MAX_EFFICIENCY = 0.85
# Collectives: NCCL's ring reaches about 80 % of the link bandwidth as "bus bandwidth" on large messages
# (NVIDIA/nccl-tests doc/PERFORMANCE.md defines busbw; an assumption, not fitted: one multi-GPU fit row).
COLLECTIVE_EFFICIENCY = 0.8
GPUS_PER_NODE = 8  # above this count the GPUs span nodes (DGX/HGX servers hold 8)
# Between nodes: one 400 Gb/s NIC per GPU (NVIDIA DGX H100 datasheet: 8 × ConnectX-7 400 Gb/s), 50 GB/s per direction.
NODE_LINK_GBPS = 50.0
# A host's memory bandwidth for the CPU optimizer step of ZeRO-Offload: half of one 8-channel DDR4-3200 socket's
# 204.8 GB/s peak (JEDEC DDR4-3200: 25.6 GB/s per channel); DeepSpeed's CPU Adam is bandwidth-bound (fp32 param,
# grad, two states read, three written: Ren et al. 2021, ZeRO-Offload, arXiv 2101.06840 §5.1 CPU-Adam).
HOST_MEMORY_GBPS = 100.0


