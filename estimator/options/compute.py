"""What a device computes per second: dense tensor TFLOPS per dtype, memory bandwidth, the host link and the GPU-to-GPU
interconnect, each as its vendor publishes it (the datasheet or whitepaper URL beside the figure). Dense figures only:
datasheets print the 2:4-sparsity figure first (marked *), which is twice the dense one; the dense one is used here.

The time model (estimator/speed/) reads these figures; the device catalog (devices.py) attaches them to its entries.
A custom device has none (the time is unknown unless the user gives its TFLOPS and bandwidth: `custom_compute`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..i18n import N_, Text, short_number

# Compute dtypes the figures are given for. PyTorch runs bf16/fp16 matmuls on the tensor cores with an fp32
# accumulator (cuBLAS CUBLAS_COMPUTE_32F), so the "bf16"/"fp16" figure is the "with FP32 accumulate" one where a
# whitepaper lists both (GeForce cards halve it). "fp32" is the plain FP32 rate: PyTorch leaves TF32 off for matmuls
# (torch.backends.cuda.matmul.allow_tf32 = False since torch 1.12, docs/source/notes/cuda.rst "TensorFloat-32").
DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")
GPU_CLASSES = ("datacenter", "workstation", "consumer", "apple")
ARCHS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "apple")

# PCIe per direction, GB/s (PCI-SIG: 8 GT/s × 128b/130b = 0.985 GB/s per lane for 3.0, doubling per generation).
PCIE = {"3.0 x16": 15.75, "4.0 x8": 15.75, "4.0 x16": 31.5, "5.0 x16": 63.0}


@dataclass(frozen=True)
class Compute:
    """A device's throughput figures. tflops: (dtype, dense TFLOPS) pairs for the dtypes its vendor publishes (a dtype
    the hardware lacks is absent: the T4 and the V100 have no bf16 tensor cores). memory_gbps: memory bandwidth in GB/s
    (10^9 B/s). host_gbps: the host link per direction (PCIe, GB/s); a unified-memory Mac has no copy to make (its
    memory bandwidth). interconnect_gbps: GPU-to-GPU per direction (NVLink, Infinity Fabric; 0 = none, peers talk
    over PCIe). gpu_class: datacenter, workstation, consumer or apple (the time model's efficiency class)."""

    tflops: tuple[tuple[str, float], ...]
    memory_gbps: float
    host_link: str
    host_gbps: float
    interconnect: str
    interconnect_gbps: float
    gpu_class: str
    source: str
    arch: str = ""  # the architecture generation (ARCHS): volta, turing, ampere, ada, hopper, blackwell, cdna3, apple

    def tflops_for(self, dtype: str) -> float | None:
        """The dense TFLOPS for a compute dtype, or None when the device has no published figure for it."""
        return dict(self.tflops).get(dtype)

    @property
    def memory_bytes_per_s(self) -> float:
        return self.memory_gbps * 1e9

    @property
    def host_bytes_per_s(self) -> float:
        return self.host_gbps * 1e9

    @property
    def peer_bytes_per_s(self) -> float:
        """GPU-to-GPU bandwidth per direction: the interconnect, else the host link (PCIe peer-to-peer)."""
        return (self.interconnect_gbps or self.host_gbps) * 1e9


def _c(tflops: dict[str, float], memory_gbps: float, host: str, interconnect: str, interconnect_gbps: float,
       gpu_class: str, source: str, host_gbps: float | None = None) -> Compute:
    return Compute(tuple(tflops.items()), memory_gbps, f"PCIe {host}" if host in PCIE else host,
                   PCIE.get(host, host_gbps or 0.0), interconnect, interconnect_gbps, gpu_class, source)


# Each GPU's architecture generation (NVIDIA's and AMD's product pages name it).
_ARCH = {**dict.fromkeys(("rtx-4060", "rtx-4070", "rtx-4060-ti", "rtx-4080", "rtx-4090", "rtx-6000-ada", "l4",
                          "l40s"), "ada"),
         **dict.fromkeys(("rtx-3080", "rtx-3060", "rtx-3090", "rtx-a6000", "a10g", "a10", "a100-40gb", "a100-80gb"),
                         "ampere"),
         **dict.fromkeys(("h100-80gb", "h100-pcie", "h100-nvl", "h200"), "hopper"),
         **dict.fromkeys(("rtx-5090", "b200"), "blackwell"),
         "t4": "turing", "v100-16gb": "volta", "v100-32gb": "volta", "mi300x": "cdna3"}


# Sources (vendor datasheets and whitepapers).
_ADA_WP = ("NVIDIA Ada GPU architecture whitepaper, Appendix A (https://images.nvidia.com/aem-dam/Solutions/geforce/"
           "ada/nvidia-ada-gpu-architecture.pdf)")
_ADA_DERIVED = (f"FP32 = CUDA cores × 2 × boost clock from NVIDIA's product page; tensor BF16/FP16 with FP32 accumulate "
                f"= 2 × FP32 and FP8 = 4 × FP32 on GeForce Ada, the ratios {_ADA_WP} gives for the RTX 4090 and 4080")
_AMPERE_WP = ("NVIDIA Ampere GA102 GPU architecture whitepaper, Appendix A (https://www.nvidia.com/content/PDF/"
              "nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)")
_BLACKWELL_WP = ("NVIDIA RTX Blackwell GPU architecture whitepaper, Appendix A (https://images.nvidia.com/aem-dam/"
                 "Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf)")
_A100_DS = ("NVIDIA A100 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 312 TF, TF32 156 TF, FP32 19.5 TF, NVLink 600 "
            "GB/s; SXM4 figures")
_H100_DS = ("NVIDIA H100 datasheet (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet): "
            "sparse figures ÷ 2")
_NVLINK_NOTE = "NVLink per direction = the datasheet's bidirectional figure ÷ 2"

GPU_COMPUTE: dict[str, Compute] = {
    # -- consumer --------------------------------------------------------------------------------------------------
    "rtx-4060": _c({"bf16": 30.2, "fp16": 30.2, "tf32": 15.1, "fp32": 15.1, "fp8": 60.4}, 272, "4.0 x8", "", 0,
                   "consumer", f"3,072 cores × 2.46 GHz; {_ADA_DERIVED}; 272 GB/s, PCIe 4.0 x8 (https://www.nvidia.com/"
                   "en-us/geforce/graphics-cards/40-series/rtx-4060-4060ti/)"),
    "rtx-3080": _c({"bf16": 59.5, "fp16": 59.5, "tf32": 29.8, "fp32": 29.8}, 760, "4.0 x16", "", 0, "consumer",
                   f"{_AMPERE_WP}: RTX 3080 FP16/BF16 tensor with FP32 accumulate 59.5 TF, 760 GB/s"),
    "rtx-3060": _c({"bf16": 25.5, "fp16": 25.5, "tf32": 12.7, "fp32": 12.7}, 360, "4.0 x16", "", 0, "consumer",
                   "3,584 cores × 1.78 GHz = 12.7 TF FP32 (https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/"
                   f"rtx-3060-3060ti/); tensor with FP32 accumulate = 2 × FP32 on GeForce Ampere, the ratio {_AMPERE_WP} "
                   "gives for the 3080 and 3090; 360 GB/s"),
    "rtx-4070": _c({"bf16": 58.3, "fp16": 58.3, "tf32": 29.1, "fp32": 29.1, "fp8": 116.6}, 504, "4.0 x16", "", 0,
                   "consumer", f"5,888 cores × 2.475 GHz; {_ADA_DERIVED}; 504 GB/s (https://www.nvidia.com/en-us/geforce/"
                   "graphics-cards/40-series/rtx-4070-family/)"),
    "rtx-4060-ti": _c({"bf16": 44.1, "fp16": 44.1, "tf32": 22.1, "fp32": 22.1, "fp8": 88.3}, 288, "4.0 x8", "", 0,
                      "consumer", f"4,352 cores × 2.535 GHz; {_ADA_DERIVED}; 288 GB/s, PCIe 4.0 x8 (https://www.nvidia."
                      "com/en-us/geforce/graphics-cards/40-series/rtx-4060-4060ti/)"),
    "rtx-4080": _c({"bf16": 97.5, "fp16": 97.5, "tf32": 48.7, "fp32": 48.7, "fp8": 194.9}, 716.8, "4.0 x16", "", 0,
                   "consumer", f"{_ADA_WP}: RTX 4080 FP16/BF16 tensor with FP32 accumulate 97.5 TF, 716.8 GB/s"),
    "rtx-3090": _c({"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6}, 936, "4.0 x16", "NVLink 3 bridge", 56.25,
                   "consumer", f"{_AMPERE_WP}: RTX 3090 FP16/BF16 tensor with FP32 accumulate 71 TF, 936 GB/s, NVLink "
                   f"112.5 GB/s; {_NVLINK_NOTE}"),
    "rtx-4090": _c({"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6, "fp8": 330.3}, 1008, "4.0 x16", "", 0,
                   "consumer", f"{_ADA_WP}: RTX 4090 FP16/BF16 tensor with FP32 accumulate 165.2 TF, FP8 330.3 TF, "
                   "1,008 GB/s"),
    "rtx-5090": _c({"bf16": 209.5, "fp16": 209.5, "tf32": 104.8, "fp32": 104.8, "fp8": 419.0}, 1792, "5.0 x16", "", 0,
                   "consumer", f"{_BLACKWELL_WP}: RTX 5090 FP16/BF16 tensor with FP32 accumulate 209.5 TF, 1,792 GB/s"),
    # -- workstation -----------------------------------------------------------------------------------------------
    "rtx-a6000": _c({"bf16": 154.8, "fp16": 154.8, "tf32": 77.4, "fp32": 38.7}, 768, "4.0 x16", "NVLink 3 bridge",
                    56.25, "workstation", "NVIDIA RTX A6000 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
                    "design-visualization/quadro-product-literature/proviz-print-nvidia-rtx-a6000-datasheet-us-nvidia-"
                    f"1454980-r9-web.pdf): tensor 309.7 TF sparse, 768 GB/s, NVLink 112.5 GB/s; {_NVLINK_NOTE}"),
    "rtx-6000-ada": _c({"bf16": 364.2, "fp16": 364.2, "tf32": 182.1, "fp32": 91.1, "fp8": 728.5}, 960, "4.0 x16", "",
                       0, "workstation", "NVIDIA RTX 6000 Ada datasheet (https://www.nvidia.com/content/dam/en-zz/"
                       "Solutions/design-visualization/rtx-6000/proviz-print-rtx6000-datasheet-web-2504660.pdf): tensor "
                       "1,457 TF FP8 sparse, 91.1 TF FP32, 960 GB/s"),
    # -- data centre -----------------------------------------------------------------------------------------------
    "t4": _c({"fp16": 65.0, "fp32": 8.1}, 320, "3.0 x16", "", 0, "datacenter",
             "NVIDIA T4 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
             "t4-tensor-core-datasheet-951643.pdf): mixed precision FP16/FP32 65 TF, FP32 8.1 TF, 320 GB/s; Turing has "
             "no bf16 tensor cores"),
    "v100-16gb": _c({"fp16": 125.0, "fp32": 15.7}, 900, "3.0 x16", "NVLink 2", 150.0, "datacenter",
                    "NVIDIA V100 datasheet (https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-"
                    f"update-us-1165301-r5.pdf): SXM2 tensor 125 TF, FP32 15.7 TF, 900 GB/s, NVLink 300 GB/s; "
                    f"{_NVLINK_NOTE}; Volta has no bf16"),
    "v100-32gb": _c({"fp16": 125.0, "fp32": 15.7}, 900, "3.0 x16", "NVLink 2", 150.0, "datacenter",
                    "NVIDIA V100 datasheet (https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-"
                    f"update-us-1165301-r5.pdf): SXM2 tensor 125 TF, FP32 15.7 TF, 900 GB/s, NVLink 300 GB/s; "
                    f"{_NVLINK_NOTE}; Volta has no bf16"),
    "a10g": _c({"bf16": 70.0, "fp16": 70.0, "tf32": 35.0, "fp32": 31.2}, 600, "4.0 x16", "", 0, "datacenter",
               "AWS's A10G spec sheet as Baseten quotes it (https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-"
               "inference/): 70 TF BF16/FP16 tensor, 35 TF TF32, 31.2 TF FP32, 600 GB/s (NVIDIA publishes no A10G "
               "datasheet)"),
    "a10": _c({"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}, 600, "4.0 x16", "", 0, "datacenter",
              "NVIDIA A10 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-"
              "new/nvidia-a10-datasheet.pdf): BF16 125 TF (250 sparse), TF32 62.5, FP32 31.2, 600 GB/s"),
    "l4": _c({"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3, "fp8": 242.5}, 300, "4.0 x16", "", 0,
             "datacenter", "NVIDIA L4 datasheet (https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-"
             "datasheet): BF16 242 TF sparse, FP8 485 TF sparse, FP32 30.3 TF, 300 GB/s"),
    "l40s": _c({"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6, "fp8": 733.0}, 864, "4.0 x16", "", 0,
               "datacenter", "NVIDIA L40S datasheet (https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413): "
               "BF16 362.05 TF (733 sparse), TF32 183, FP32 91.6, FP8 733 (1,466 sparse), 864 GB/s, no NVLink"),
    "a100-40gb": _c({"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, 1555, "4.0 x16", "NVLink 3", 300.0,
                    "datacenter", f"{_A100_DS}; 40 GB 1,555 GB/s; {_NVLINK_NOTE}"),
    "a100-80gb": _c({"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, 2039, "4.0 x16", "NVLink 3", 300.0,
                    "datacenter", f"{_A100_DS}; 80 GB SXM 2,039 GB/s (PCIe 1,935); {_NVLINK_NOTE}"),
    "h100-80gb": _c({"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0, "fp8": 1978.9}, 3350, "5.0 x16",
                    "NVLink 4", 450.0, "datacenter", f"{_H100_DS}: SXM BF16 1,979 TF sparse, FP32 67 TF, 3.35 TB/s, "
                    f"NVLink 900 GB/s; {_NVLINK_NOTE}"),
    "h100-pcie": _c({"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.0, "fp8": 1513.0}, 2000, "5.0 x16",
                    "NVLink bridge", 300.0, "datacenter", f"{_H100_DS}: PCIe BF16 1,513 TF sparse, FP32 51 TF, 2 TB/s, "
                    f"NVLink bridge 600 GB/s between pairs; {_NVLINK_NOTE}"),
    "h100-nvl": _c({"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0, "fp8": 1670.5}, 3900, "5.0 x16",
                   "NVLink bridge", 300.0, "datacenter", f"{_H100_DS}: NVL BF16 1,671 TF sparse, FP32 60 TF, 3.9 TB/s, "
                   f"NVLink 600 GB/s; {_NVLINK_NOTE}"),
    "h200": _c({"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0, "fp8": 1978.9}, 4800, "5.0 x16",
               "NVLink 4", 450.0, "datacenter", "NVIDIA H200 datasheet (https://nvdam.widen.net/s/nb5zzzsjdf/hpc-"
               "datasheet-sc23-h200-datasheet-3002446): SXM BF16 1,979 TF sparse, FP32 67 TF, 4.8 TB/s, NVLink 900 "
               f"GB/s; {_NVLINK_NOTE}"),
    "b200": _c({"bf16": 2250.0, "fp16": 2250.0, "tf32": 1100.0, "fp8": 4500.0}, 8000, "5.0 x16", "NVLink 5", 900.0,
               "datacenter", "NVIDIA DGX B200 datasheet (https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-"
               "datasheet): 72 PF FP8 training per 8 GPUs with sparsity → 4.5 PF dense FP8 and 2.25 PF BF16 per GPU, "
               "8 TB/s HBM3e, NVLink 5 1.8 TB/s; no FP32 figure published per GPU"),
    "mi300x": _c({"bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4, "fp8": 2614.9}, 5300, "5.0 x16",
                 "Infinity Fabric", 448.0, "datacenter", "AMD Instinct MI300X datasheet (https://www.amd.com/content/"
                 "dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf): BF16 1,307.4 "
                 "TF dense, FP32 163.4 TF, 5.3 TB/s, 896 GB/s peak aggregate Infinity Fabric (÷ 2 per direction)"),
}
GPU_COMPUTE = {k: replace(v, arch=_ARCH[k]) for k, v in GPU_COMPUTE.items()}
# The generic 16 GB card carries the RTX 4080's memory figure (devices.py) and so its compute figures; an RTX 4060 Ti
# 16 GB computes 2.2 × slower (GPU_COMPUTE["rtx-4060-ti"]).
GPU_COMPUTE["gpu-16gb"] = GPU_COMPUTE["rtx-4080"]


@dataclass(frozen=True)
class AppleChip:
    """An Apple silicon chip in one GPU configuration: its GPU's FP32 TFLOPS (FP16 runs at the same rate on the Apple
    GPU's ALUs, so one figure serves every dtype) and its unified-memory bandwidth."""

    id: str
    label: str
    gpu_cores: int
    tflops: float
    memory_gbps: float
    source: str

    @property
    def compute(self) -> Compute:
        return Compute((("bf16", self.tflops), ("fp16", self.tflops), ("fp32", self.tflops)), self.memory_gbps,
                       "unified memory", self.memory_gbps, "", 0.0, "apple", self.source, "apple")


# Apple's figures: GPU TFLOPS Apple states for M1 and M2 chips; for M3 and M4 (Apple states none) cores × 128 FP32 ALUs
# × 2 FLOP × the GPU clock, as the hmc-tech.com chip pages compute them (e.g. https://hmc-tech.com/gpu/apple-8-core-m4-
# fl-vs-apple-40-core-m3-max: 40-core M3 Max 5,120 ALUs at 1,398 MHz = 14.32 TFLOPS, FP16 = FP32).
_M1 = "Apple newsroom 2020-11 (https://www.apple.com/newsroom/2020/11/apple-unleashes-m1/): 2.6 teraflops"
_M1_PM = ("Apple newsroom 2021-10 (https://www.apple.com/newsroom/2021/10/introducing-m1-pro-and-m1-max-the-most-"
          "powerful-chips-apple-has-ever-built/): M1 Pro 200 GB/s, M1 Max 400 GB/s; 10.4 TFLOPS for the 32-core M1 Max")
_M1_ULTRA = ("Apple newsroom 2022-03 (https://www.apple.com/newsroom/2022/03/apple-unveils-m1-ultra-the-worlds-most-"
             "powerful-chip-for-a-personal-computer/): 800 GB/s, 21 TFLOPS with 64 GPU cores")
_M2 = ("Apple newsroom 2022-06 (https://www.apple.com/newsroom/2022/06/apple-unveils-m2-with-breakthrough-performance-"
       "and-capabilities/): 100 GB/s, 3.6 TFLOPS with 10 GPU cores")
_M2_PM = ("Apple newsroom 2023-01 (https://www.apple.com/newsroom/2023/01/apple-unveils-m2-pro-and-m2-max-next-"
          "generation-chips-for-next-level-workflows/): M2 Pro 200 GB/s (6.8 TFLOPS with 19 cores), M2 Max 400 GB/s "
          "(13.6 TFLOPS with 38 cores)")
_M2_ULTRA = ("Apple newsroom 2023-06 (https://www.apple.com/newsroom/2023/06/apple-introduces-m2-ultra/): 800 GB/s, "
             "27.2 TFLOPS with 76 GPU cores")
_M3 = ("Apple newsroom 2023-10 (https://www.apple.com/newsroom/2023/10/apple-unveils-m3-m3-pro-and-m3-max-the-most-"
       "advanced-chips-for-a-personal-computer/): M3 100 GB/s, M3 Pro 150 GB/s, M3 Max 300 GB/s (30-core) or 400 GB/s "
       "(40-core); TFLOPS at 1,398 MHz (hmc-tech.com: 14-core M3 Pro 5.01, 30-core M3 Max 10.74, 40-core 14.32)")
_M3_ULTRA = ("Apple newsroom 2025-03 (https://www.apple.com/newsroom/2025/03/apple-reveals-m3-ultra-taking-apple-"
             "silicon-to-a-new-extreme/): 819 GB/s; TFLOPS at the M3 family's 1,398 MHz")
_M4 = ("Apple newsroom 2024-05 (https://www.apple.com/newsroom/2024/05/apple-introduces-m4-chip/): 120 GB/s; TFLOPS at "
       "1,470 MHz (hmc-tech.com: 8-core M4 3.01, 10-core 3.76)")
_M4_PM = ("Apple newsroom 2024-10 (https://www.apple.com/newsroom/2024/10/apple-introduces-m4-pro-and-m4-max/): M4 Pro "
          "273 GB/s, M4 Max 546 GB/s (410 GB/s with the 32-core GPU, MacBook Pro tech specs); TFLOPS at 1,678 MHz "
          "(hmc-tech.com: 32-core M4 Max 13.74; the M4 Pro's clock assumed the same)")


def _ft(cores: int, mhz: float) -> float:
    """FP32 TFLOPS of an Apple GPU: cores × 128 ALUs × 2 FLOP (fused multiply-add) × clock."""
    return round(cores * 128 * 2 * mhz * 1e6 / 1e12, 2)


APPLE_CHIPS: dict[str, AppleChip] = {c.id: c for c in (
    AppleChip("m1", "M1 (8-core GPU)", 8, 2.6, 68.25, f"{_M1}; 68.25 GB/s = LPDDR4X-4266 × 128 bit"),
    AppleChip("m1-pro", "M1 Pro (14-core GPU)", 14, _ft(14, 1269.5), 200, f"{_M1_PM}; 14 cores at the 1,269.5 MHz clock the 10.4 TFLOPS imply"),
    AppleChip("m1-max", "M1 Max (24-core GPU)", 24, _ft(24, 1269.5), 400, f"{_M1_PM}; 24 cores at the same clock"),
    AppleChip("m1-max-32c", "M1 Max (32-core GPU)", 32, 10.4, 400, _M1_PM),
    AppleChip("m1-ultra", "M1 Ultra (48-core GPU)", 48, _ft(48, 1269.5), 800, f"{_M1_ULTRA}; 48 cores at the same clock"),
    AppleChip("m2", "M2 (8-core GPU)", 8, _ft(8, 1398), 100, f"{_M2}; 8 cores at the same clock"),
    AppleChip("m2-pro", "M2 Pro (16-core GPU)", 16, _ft(16, 1398), 200, f"{_M2_PM}; 16 cores at the same clock"),
    AppleChip("m2-max", "M2 Max (30-core GPU)", 30, _ft(30, 1398), 400, f"{_M2_PM}; 30 cores at the same clock"),
    AppleChip("m2-max-38c", "M2 Max (38-core GPU)", 38, 13.6, 400, _M2_PM),
    AppleChip("m2-ultra", "M2 Ultra (60-core GPU)", 60, _ft(60, 1398), 800, f"{_M2_ULTRA}; 60 cores at the same clock"),
    AppleChip("m3", "M3 (8-core GPU)", 8, _ft(8, 1398), 100, _M3),
    AppleChip("m3-pro", "M3 Pro (14-core GPU)", 14, 5.01, 150, _M3),
    AppleChip("m3-max", "M3 Max (30-core GPU)", 30, 10.74, 300, _M3),
    AppleChip("m3-max-40c", "M3 Max (40-core GPU)", 40, 14.32, 400, _M3),
    AppleChip("m3-ultra", "M3 Ultra (60-core GPU)", 60, _ft(60, 1398), 819, _M3_ULTRA),
    AppleChip("m4", "M4 (8-core GPU)", 8, 3.01, 120, _M4),
    AppleChip("m4-pro", "M4 Pro (16-core GPU)", 16, _ft(16, 1678), 273, _M4_PM),
    AppleChip("m4-max", "M4 Max (32-core GPU)", 32, 13.74, 410, _M4_PM),
    AppleChip("m4-max-40c", "M4 Max (40-core GPU)", 40, _ft(40, 1678), 546, _M4_PM),
)}
APPLE_CHIP_IDS = tuple(APPLE_CHIPS)

# Limits on a user's own figures (custom_compute): above any shipping part by far, below absurd.
CUSTOM_MAX_TFLOPS = 100_000.0
CUSTOM_MAX_GBPS = 1_000_000.0


def _positive(name: str, value: object, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not (
            0 < value <= high):
        raise ValueError(Text(N_("{name} must be a number above 0 and at most {high}, got {value}"), name=name,
                              high=short_number(high), value=repr(str(value)[:20])))
    return float(value)


def custom_compute(tflops: float, memory_gbps: float) -> Compute:
    """A device the user describes by its dense 16-bit TFLOPS and its memory bandwidth (GB/s): the figures a custom
    device lacks. Used for every dtype (a user who knows the fp32 rate types that one)."""
    tf = _positive("TFLOPS", tflops, CUSTOM_MAX_TFLOPS)
    bw = _positive("GB/s", memory_gbps, CUSTOM_MAX_GBPS)
    # The host link is not asked: a PCIe 4.0 x16 slot, the common one, prices offload and peer traffic.
    return Compute((("bf16", tf), ("fp16", tf), ("fp32", tf)), bw, "PCIe 4.0 x16", PCIE["4.0 x16"], "", 0.0,
                   "consumer", "figures typed by the user")
