"""Devices: a catalog of laptops and GPUs with their memory as the driver reports it, usable memory (unified vs
discrete), search by name or alias.

Every capacity is the number the machine itself reports, not the marketing size: a GPU's total memory in MiB as
`nvidia-smi` (or AMD's `rocm-smi`) prints it, and a Mac's RAM as macOS reports it (`sysctl hw.memsize`, whole
GiB). The difference decides verdicts: an "RTX 4090 24 GB" reports 24,564 MiB = 25.8 GB, an "H100 80 GB" reports
81,559 MiB = 85.5 GB, and a "36 GB" Mac has 36 GiB = 38.7 GB of RAM. Each entry carries the reported figure and
where it comes from (`source`).

What a training process can allocate on a discrete GPU is less than nvidia-smi's total: PyTorch sees the total
cudaMemGetInfo returns (torch.cuda.get_device_properties(0).total_memory, the "total capacity" its out-of-memory
messages print), which leaves out what the driver keeps: 79.15 GiB = 81,050 MiB of an A100 80GB's 81,920. A GPU's
usable memory is that CUDA-visible total (`cuda_total_mib`, from CUDA_TOTALS with the public output it is read
from, `usable_source`); the estimate already counts the CUDA context inside its total."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..i18n import N_, Text, format_int, format_number, short_number, shown
from ..units import GB, GiB, to_gb, to_gib
from .compute import APPLE_CHIPS, GPU_COMPUTE, Compute

MiB = 1 << 20  # nvidia-smi and rocm-smi print memory.total in MiB (2^20 B)

# The seed: a unified-memory laptop can give about three quarters of its RAM to training (the OS and
# apps keep the rest); Apple's recommendedMaxWorkingSetSize is ≈ 0.75 × RAM (MLX PR #64). A Mac whose
# recommendedMaxWorkingSetSize is published for its RAM size uses that figure instead (MAC_WORKING_SETS): mlx_lm
# wires its limit to it (mlx_lm/utils.py:74-83 maybe_set_recommended_wired_limit) and MLX's allocator frees its
# cache above 95 % of it (mlx/backend/metal/allocator.cpp:61-64).
UNIFIED_USABLE_FRACTION = 0.75
_MIB = 1 << 20
# Metal's recommendedMaxWorkingSetSize per RAM size (GiB), as public logs print it, with the log.
MAC_WORKING_SETS: dict[int, tuple[int, str]] = {
    16: (int(10922.67 * _MIB), "recommendedMaxWorkingSetSize = 10922.67 MB (MiB) on an M1 MacBook Pro with 16 GB, "
                               "abetlen/llama-cpp-python issue #687 (https://github.com/abetlen/llama-cpp-python/"
                               "issues/687); ~10.67 GB on a 16 GB M4 Mac mini, exo-explore/exo PR #1672"),
    32: (int(21845.34 * _MIB), "recommendedMaxWorkingSetSize = 21845.34 MB (MiB) on an M2 Max with 32 GB, ollama/"
                               "ollama issue #434 (https://github.com/ollama/ollama/issues/434); the same on an M1 "
                               "Max 32 GB, ggml-org/llama.cpp PR #2011"),
    64: (int(49152.00 * _MIB), "recommendedMaxWorkingSetSize = 49152.00 MiB on an M1 Max with 64 GB, ggml-org/"
                               "llama.cpp issue #1870 (https://github.com/ggml-org/llama.cpp/issues/1870)"),
    128: (int(107.52 * (1 << 30)), "recommendedMaxWorkingSetSize: 107.52 GiB (stock) on an M5 Max with 128 GB, macOS "
                                   "26, antirez/ds4 PR #893 (https://github.com/antirez/ds4/pull/893)"),
}
_SEED_USABLE_SOURCE = ("no published recommendedMaxWorkingSetSize for this RAM size: the seed's three quarters of RAM "
                       "(the published logs give Apple's figure as 2/3 of RAM on 16-32 GB Macs and 3/4 on 64 GB)")


@dataclass(frozen=True)
class Device:
    """A machine's memory for training. capacity_bytes is the memory the machine reports: a GPU's total memory
    (reported_mib × 2^20, as nvidia-smi / rocm-smi print it) or a Mac's RAM (whole GiB, as macOS reports it).
    A custom device is the decimal GB the user typed. Its display name is `title`, a Text whose figures follow the
    page's language when read as `name`."""

    id: str
    title: str  # the display name in English ('NVIDIA GeForce RTX 4090 (24,564 MiB)'); read it as `name`
    kind: str  # "unified" (shared RAM, Apple silicon) or "discrete" (a GPU's own memory)
    capacity_bytes: int
    reported_mib: int | None = None  # the driver's figure in MiB (GPU total; for a Mac, its GiB × 1024); None if typed
    source: str = ""  # where reported_mib comes from: a public nvidia-smi / rocm-smi output, or the rule used
    aliases: tuple[str, ...] = ()  # lower-case names users type ("4080", "tesla t4", "m4 max 36gb")
    model: str = ""  # the product name without the memory figure ("NVIDIA GeForce RTX 4090"); "" → name
    # A unified-memory Mac: Metal's recommendedMaxWorkingSetSize where a public log gives it for this RAM size (0 =
    # none: the seed's three quarters), and where the usable figure comes from.
    working_set_bytes: int = 0
    usable_source: str = ""
    # A discrete GPU: the total PyTorch sees, in MiB (cudaMemGetInfo's total, torch.cuda.get_device_properties(0)
    # .total_memory; hipMemGetInfo's on ROCm), from CUDA_TOTALS with its source in usable_source; None for a typed
    # capacity (the figure the user gives is taken as what the process can use).
    cuda_total_mib: int | None = None
    # What the device computes per second (options/compute.py), for the time model; None for a custom device (the
    # time is unknown unless the user gives the figures). A Mac's figures are its chip's (`chip`, an APPLE_CHIPS id).
    compute: Compute | None = None
    chip: str = ""

    @property
    def name(self) -> str:
        """The display name in the current language: '… (24,564 MiB)' in English, '… (24.564 MiB)' in Spanish."""
        return shown(self.title)

    @property
    def usable_bytes(self) -> int:
        """Unified: Metal's recommended working set where published for this Mac (working_set_bytes), else ≈ 75 %
        of RAM (the seed). Discrete: the card's own memory as CUDA reports it to the process (cuda_total_mib: the
        total PyTorch can allocate from, below nvidia-smi's by what the driver keeps); a typed capacity is taken
        whole. The CUDA context is part of our estimate, so the verdict weighs the estimate against this."""
        if self.kind == "unified":
            return self.working_set_bytes or int(self.capacity_bytes * UNIFIED_USABLE_FRACTION)
        return self.runtime_total_bytes

    @property
    def runtime_total_bytes(self) -> int:
        """The device's total memory as the training process's runtime reports it, the figure a framework decides
        by (Unsloth's loss pass and offloads, vLLM's gpu_memory_utilization): a discrete GPU's CUDA total
        (cuda_total_mib), a Mac's RAM, a typed capacity."""
        if self.cuda_total_mib is not None:
            return self.cuda_total_mib * MiB
        return self.capacity_bytes

    @property
    def runtime(self) -> str:
        """The GPU runtime whose context sits in the overhead: CUDA (NVIDIA), ROCm (AMD), Metal (Apple's unified
        memory); a typed capacity does not say, so 'GPU runtime'."""
        if self.id.startswith("custom"):
            return "GPU runtime"
        if self.kind == "unified":
            return "Metal"
        return "ROCm" if "AMD" in (self.model or self.title) else "CUDA"

    @property
    def reserved_bytes(self) -> int:
        """Memory the OS and apps keep on a Mac (the shaded band in the capacity overlay), or the driver keeps from
        CUDA on a catalog GPU (nvidia-smi's total less CUDA's; a sliver the overlay does not draw)."""
        return self.capacity_bytes - self.usable_bytes

    @property
    def reported(self) -> str:
        """The driver's figure as the tool prints it: '24,564 MiB' (GPU), '36 GiB' (Mac RAM), or the typed GB; the
        number in the current language's format."""
        if self.reported_mib is None:
            return f"{format_number(to_gb(self.capacity_bytes), 1)} GB"
        if self.kind == "unified" and self.reported_mib % 1024 == 0:
            return f"{format_int(self.reported_mib // 1024)} GiB"
        return f"{format_int(self.reported_mib)} MiB"


def _gpu(id_: str, model: str, mib: int, source: str, aliases: tuple[str, ...], name: str | None = None) -> Device:
    """A discrete GPU whose driver reports `mib` MiB of total memory and whose CUDA total is CUDA_TOTALS[id_]."""
    title = name or Text("{model} ({mib} MiB)", model=model, mib=mib)  # figures in the reader's language
    cuda_mib, cuda_source = CUDA_TOTALS[id_]
    return Device(id_, title, "discrete", mib * MiB, reported_mib=mib, source=source,
                  aliases=aliases, model=model, compute=GPU_COMPUTE[id_], usable_source=cuda_source,
                  cuda_total_mib=cuda_mib)


# macOS reports RAM in whole GiB: hw.memsize of a "36 GB" Mac is 36 × 2^30 B (Apple's "GB" for RAM is GiB).
_MACOS_SOURCE = ("macOS hw.memsize (sysctl): Apple's marketed RAM size in GB is whole GiB, "
                 "so a '{gb} GB' Mac reports {gb} × 2^30 B")
# Apple silicon chips offered with each RAM size (Apple's configurations as known to the author, not re-checked
# here), used only for the aliases users type: they change no capacity.
_MAC_CHIPS: dict[int, tuple[str, ...]] = {
    16: ("m1", "m2", "m3", "m4", "m1 pro", "m2 pro"),
    18: ("m3 pro",),
    24: ("m2", "m3", "m4", "m4 pro"),
    32: ("m1 pro", "m1 max", "m2 pro", "m2 max", "m4"),
    36: ("m3 pro", "m3 max", "m4 max"),
    48: ("m3 max", "m4 pro", "m4 max"),
    64: ("m1 max", "m1 ultra", "m2 max", "m2 ultra", "m3 max", "m4 pro", "m4 max"),
    96: ("m2 max", "m3 max", "m3 ultra"),
    128: ("m1 ultra", "m2 ultra", "m3 max", "m4 max"),
    192: ("m2 ultra",),
    256: ("m3 ultra",),
    512: ("m3 ultra",),
}


def _mac(id_: str, gib: int, name: str | None = None, extra: tuple[str, ...] = ()) -> Device:
    """An Apple silicon Mac with `gib` GiB of unified memory (usable: UNIFIED_USABLE_FRACTION of it)."""
    model = Text(N_("Apple silicon {gb} GB unified"), gb=gib)
    aliases = (f"mac {gib}gb", f"apple silicon {gib}gb", *(f"{chip} {gib}gb" for chip in _MAC_CHIPS[gib]), *extra)
    working_set, usable_source = MAC_WORKING_SETS.get(gib, (0, _SEED_USABLE_SOURCE))
    chip = default_chip(gib)
    return Device(id_, name or Text("{model} ({gib} GiB)", model=model, gib=gib), "unified", gib * GiB,
                  reported_mib=gib * 1024,
                  source=_MACOS_SOURCE.format(gb=gib), aliases=aliases, model=model, working_set_bytes=working_set,
                  usable_source=usable_source, compute=APPLE_CHIPS[chip].compute, chip=chip)


def default_chip(gib: int) -> str:
    """The chip a Mac of this RAM size is timed with when the user names none: the slowest chip sold with it (lowest
    memory bandwidth, then fewest TFLOPS, each chip in its smallest GPU configuration), so the time is an upper bound
    for that RAM size; `with_chip` times another."""
    chips = [APPLE_CHIPS[name.replace(" ", "-")] for name in _MAC_CHIPS[gib]]
    return min(chips, key=lambda c: (c.memory_gbps, c.tflops)).id


# Public outputs the figures below are read from (GitHub issues and PRs; "code search" = the exact nvidia-smi
# line appears in several public repository files but no issue thread with a URL was found for it).
_MODAL = ("nvidia-smi totals listed in modal-labs/modal-client PR #2797 "
          "(https://github.com/modal-labs/modal-client/pull/2797)")

_RTX_4080 = ("nvidia-smi memory.total 17,171,480,576 B = 16376 MiB on an RTX 4080 SUPER, "
             "utkuozdemir/nvidia_gpu_exporter internal/integration/testdata/"
             "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05__idle.metrics (capture added in PR #414, "
             "https://github.com/utkuozdemir/nvidia_gpu_exporter/pull/414); the non-SUPER 4080 prints the same "
             "'NVIDIA GeForce RTX 4080, 16376 MiB' in public repository files (code search)")

# The total PyTorch sees on each GPU (cudaMemGetInfo's total: torch.cuda.get_device_properties(0).total_memory, the
# "total capacity" of its out-of-memory messages; Unsloth's banner prints it as "Max memory: X GB", in GiB,
# unsloth/device_type.py:612 (2026.10.9); CUDA's deviceQuery prints it as "Total amount of global memory"), in MiB,
# with the public output it is read from. It moves with the driver (newer ones keep more: a T4 printed 14.75 GiB in
# 2023 and 14.56 GiB in 2025-26) and the ECC setting; where reports differ, the lowest recent Linux report is used, so
# a fit holds on the setups reported. A card without a published figure takes the figure of a card with the same
# memory and nvidia-smi total, or the share of a card of its generation, and says so ("inferred").
_GIB_MIB = 1024  # a figure printed in GiB (2 or 3 decimals) × 1024, rounded to whole MiB


def _gib(gib: float) -> int:
    """A CUDA total printed in GiB, in whole MiB."""
    return round(gib * _GIB_MIB)


def _share(mib: int, cited_cuda: int, cited_reported: int) -> int:
    """A card's CUDA total inferred from another of its generation: the same share of nvidia-smi's figure."""
    return round(mib * cited_cuda / cited_reported)


_RTX_4060_CUDA = _gib(7.75)  # 7,936 of 8,188 MiB (96.9 %): the Ada GeForce share the 12 and 16 GB cards take
_RTX_3090_CUDA = 25_286_672_384 // MiB  # 24,115 of 24,576 MiB: 461 MiB kept on GA102
_A10_CUDA = 23_609_475_072 // MiB  # 22,515 MiB
_H100_CUDA = _gib(79.11)  # 81,009 MiB
_INFERRED = "no published figure for this card found; inferred: "
CUDA_TOTALS: dict[str, tuple[int, str]] = {
    "rtx-4060": (_RTX_4060_CUDA,
                 "PyTorch: 'GPU 0 has a total capacity of 7.75 GiB' on an RTX 4060 (8GB, laptop) in ESRSchao/"
                 "EdgeRegNet issue #2 (https://github.com/ESRSchao/EdgeRegNet/issues/2), 2025"),
    "rtx-3080": (_gib(9.78),
                 "PyTorch: '(GPU 0; 9.78 GiB total capacity; …)' on an RTX 3080 in zai-org/CogVideo issue #34 "
                 "(https://github.com/zai-org/CogVideo/issues/34), 2023"),
    "rtx-3060": (_gib(11.75),
                 "PyTorch: '(GPU 0; 11.75 GiB total capacity; …)' on an RTX 3060 in Kunhao-Liu/StyleGaussian issue "
                 "#12 (https://github.com/Kunhao-Liu/StyleGaussian/issues/12), 2024; 11.76 GiB in TencentARC/"
                 "PhotoMaker issue #47"),
    "rtx-4070": (_share(12_282, _RTX_4060_CUDA, 8_188),
                 _INFERRED + "the RTX 4060's share of nvidia-smi's figure (7.75 GiB of 8,188 MiB, ESRSchao/EdgeRegNet "
                 "issue #2, https://github.com/ESRSchao/EdgeRegNet/issues/2) applied to 12,282 MiB"),
    "gpu-16gb": (_share(16_376, _RTX_4060_CUDA, 8_188),
                 _INFERRED + "the RTX 4080's figure: the RTX 4060's share of nvidia-smi's figure (7.75 GiB of "
                 "8,188 MiB, https://github.com/ESRSchao/EdgeRegNet/issues/2) applied to 16,376 MiB"),
    "rtx-4060-ti": (_share(16_380, _RTX_4060_CUDA, 8_188),
                    _INFERRED + "the RTX 4060's share of nvidia-smi's figure (7.75 GiB of 8,188 MiB, "
                    "https://github.com/ESRSchao/EdgeRegNet/issues/2) applied to 16,380 MiB"),
    "rtx-4080": (_share(16_376, _RTX_4060_CUDA, 8_188),
                 _INFERRED + "the RTX 4060's share of nvidia-smi's figure (7.75 GiB of 8,188 MiB, "
                 "https://github.com/ESRSchao/EdgeRegNet/issues/2) applied to 16,376 MiB"),
    "rtx-3090": (_RTX_3090_CUDA,
                 "CUDA deviceQuery: 'Global Memory: 25286672384 bytes' on an RTX 3090 in Jumperkables/"
                 "cuda-benchmarking 00_deviceQuery/README.md (https://github.com/Jumperkables/cuda-benchmarking/blob/"
                 "HEAD/00_deviceQuery/README.md), 2025; PyTorch printed 23.68 GiB in axolotl-ai-cloud/axolotl issue "
                 "#1717"),
    "rtx-4090": (_gib(23.514),
                 "Unsloth's banner (torch's total_memory in GiB): 'NVIDIA GeForce RTX 4090. Num GPUs = 2. Max memory: "
                 "23.514 GB' in unslothai/unsloth issue #3542 (https://github.com/unslothai/unsloth/issues/3542), "
                 "torch 2.8, 2025; deviceQuery printed 24210 MBytes on driver 550 (thamada/nvidia-smi "
                 "gls/RTX4090_deviceQuery.py)"),
    "rtx-5090": (33_677_180_928 // MiB,
                 "CUDA deviceQuery: 'Total amount of global memory: 32117 MBytes (33677180928 bytes)' on an RTX 5090, "
                 "driver 570.133, in aikitoria/open-gpu-kernel-modules issue #1 (https://github.com/aikitoria/"
                 "open-gpu-kernel-modules/issues/1), 2025"),
    "rtx-a6000": (49_140 - (24_576 - _RTX_3090_CUDA),
                  _INFERRED + "the 461 MiB the driver keeps on the RTX 3090 (same GA102 chip: 25286672384 bytes of "
                  "24,576 MiB, https://github.com/Jumperkables/cuda-benchmarking/blob/HEAD/00_deviceQuery/README.md) "
                  "taken from 49,140 MiB (ECC off)"),
    "rtx-6000-ada": (49_140 - (46_068 - _gib(44.43)),
                     _INFERRED + "the same card with ECC on prints 'GPU 0 has a total capacity of 44.43 GiB' beside "
                     "nvidia-smi's '46068MiB' (DINGYANB/MTVCrafter issue #21, https://github.com/DINGYANB/MTVCrafter/"
                     "issues/21, 2025): the 572 MiB kept taken from 49,140 MiB (ECC off)"),
    "t4": (_gib(14.56),
           "PyTorch: 'GPU 0 has a total capacity of 14.56 GiB' on a Tesla T4 (GCP) in Zheng-Chong/CatVTON issue #133 "
           "(https://github.com/Zheng-Chong/CatVTON/issues/133), 2025, and on Colab in facebookresearch/tribev2 issue "
           "#28, 2026; older drivers gave 14.74-14.75 GiB (huggingface/trl issue #4237, googlecolab/colabtools issue "
           "#3814)"),
    "v100-16gb": (_gib(15.78),
                  "PyTorch: '(GPU 0; 15.78 GiB total capacity; …)' on a 16G V100 in kchengiva/Shift-GCN issue #34 "
                  "(https://github.com/kchengiva/Shift-GCN/issues/34), 2021"),
    "v100-32gb": (_gib(31.74),
                  "PyTorch: '(GPU 0; 31.74 GiB total capacity; …)' on a V100 32GB in liucongg/ChatGLM-Finetuning "
                  "issue #73 (https://github.com/liucongg/ChatGLM-Finetuning/issues/73), 2023"),
    "a10g": (_A10_CUDA,
             _INFERRED + "the A10's figure (the same 23,028 MiB nvidia-smi total): 'Total amount of global memory: "
             "21.99 GBytes (23609475072 bytes)' on an NVIDIA A10 (https://github.com/aalanwyr/face2cuda/blob/HEAD/"
             "step2cuda/README.md)"),
    "a10": (_A10_CUDA,
            "CUDA device query: 'Total amount of global memory: 21.99 GBytes (23609475072 bytes)' on an NVIDIA A10 "
            "in aalanwyr/face2cuda step2cuda/README.md (https://github.com/aalanwyr/face2cuda/blob/HEAD/step2cuda/"
            "README.md); PyTorch printed 21.99 GiB on a Lambda A10 in zai-org/CogVLM issue #236"),
    "l4": (23_583_784_960 // MiB,
           "CUDA deviceQuery: 'Total amount of global memory: 22491 MBytes (23583784960 bytes)' on an NVIDIA L4 in "
           "bottlerocket-os/bottlerocket-kernel-kit PR #139 (https://github.com/bottlerocket-os/"
           "bottlerocket-kernel-kit/pull/139), 2025"),
    "l40s": (_gib(44.40),
             _INFERRED + "the L40's figure (the same 48 GB with ECC and 46,068 MiB nvidia-smi total): 'GPU 0 has a "
             "total capacity of 44.40 GiB' in QwenLM/Qwen3-VL issue #2097 (https://github.com/QwenLM/Qwen3-VL/"
             "issues/2097), 2026"),
    "a100-40gb": (42_298_834_944 // MiB,
                  "CUDA deviceQuery: 'Total amount of global memory: 40339 MBytes (42298834944 bytes)' on an NVIDIA "
                  "A100-SXM4-40GB, driver 535, in bottlerocket-os/bottlerocket PR #3873 (https://github.com/"
                  "bottlerocket-os/bottlerocket/pull/3873); PyTorch printed 39.50 GiB in TianheWu/CoSeR issue #10"),
    "a100-80gb": (_gib(79.15),
                  "PyTorch: '(GPU 0; 79.15 GiB total capacity; …)' on an A100 80GB in axolotl-ai-cloud/axolotl issue "
                  "#971 (https://github.com/axolotl-ai-cloud/axolotl/issues/971); Unsloth's banner prints 'Max memory: "
                  "79.151 GB' on an A100-SXM4-80GB (2025)"),
    "h100-80gb": (_H100_CUDA,
                  "PyTorch: 'GPU 0 has a total capacity of 79.11 GiB' on an NVIDIA H100 80GB HBM3, driver 535.247, "
                  "in vllm-project/vllm issue #27508 (https://github.com/vllm-project/vllm/issues/27508), 2025; "
                  "torch's total_memory prints 81082-81090 MB on other drivers"),
    "h100-pcie": (_H100_CUDA,
                  _INFERRED + "the H100 SXM's figure (the same 81,559 MiB nvidia-smi total): 'GPU 0 has a total "
                  "capacity of 79.11 GiB' (https://github.com/vllm-project/vllm/issues/27508)"),
    "h100-nvl": (_gib(93.00),
                 "PyTorch: 'GPU 0 has a total capacity of 93.00 GiB' on an H100 NVL 94GB (RunPod) in ali-vilab/VACE "
                 "issue #56 (https://github.com/ali-vilab/VACE/issues/56), 2025"),
    "h200": (_gib(139.81),
             "PyTorch: 'GPU 0 has a total capacity of 139.81 GiB' on 'NVIDIA H200 (139.8 GB)' in sungwon-chae/"
             "arxiv_confi etu_logging.md (https://github.com/sungwon-chae/arxiv_confi/blob/HEAD/etu_logging.md)"),
    "b200": (_gib(178.35),
             "cudaGetDeviceProperties: 'Total Global Memory: 178.35 GB' (GiB, as its size shows) on an NVIDIA B200 "
             "in pytorch/ao PR #4002 (https://github.com/pytorch/ao/pull/4002), 2026"),
    "mi300x": (196_592,
               _INFERRED + "ROCm's HIP total is the whole VRAM rocm-smi reports (a 288 GB gfx950 prints 'GPU 0 has a "
               "total capacity of 287.98 GiB' in ROCm/TheRock issue #2118, https://github.com/ROCm/TheRock/issues/"
               "2118), so the MI300X's 196,592 MiB (191.98 GiB) as rocm-smi prints it"),
}

CATALOG: tuple[Device, ...] = (
    # -- Apple silicon (unified memory): RAM as macOS reports it, 75 % usable ------------------------------------
    # The product page's example: a 36 GB laptop is 36 GiB of RAM, so usable = 27 GiB (29.0 GB) — the page's
    # "about 27 GB usable" read as GiB, which is what the OS reports.
    _mac("laptop-36gb", 36, name=Text(N_("{gb} GB laptop (unified, {gib} GiB)"), gb=36, gib=36),
         extra=("36gb laptop", "mac-36gb", "macbook pro 36gb")),
    _mac("mac-16gb", 16),
    _mac("mac-18gb", 18),
    _mac("mac-24gb", 24),
    _mac("mac-32gb", 32),
    _mac("mac-48gb", 48),
    _mac("mac-64gb", 64),
    _mac("mac-96gb", 96),
    _mac("mac-128gb", 128),
    _mac("mac-192gb", 192),
    _mac("mac-256gb", 256),
    _mac("mac-512gb", 512),
    # -- Consumer NVIDIA GeForce ----------------------------------------------------------------------------------
    _gpu("rtx-4060", "NVIDIA GeForce RTX 4060", 8188,  # 8 GB GDDR6
         "nvidia-smi 'NVIDIA GeForce RTX 4060, 8188 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 8 GB",
         ("4060", "rtx 4060", "geforce rtx 4060")),
    _gpu("rtx-3080", "NVIDIA GeForce RTX 3080 10GB", 10240,  # 10 GB GDDR6X (the 12 GB variant reports more)
         "nvidia-smi 'NVIDIA GeForce RTX 3080, 10240 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 10 GB",
         ("3080", "rtx 3080", "geforce rtx 3080", "rtx 3080 10gb")),
    _gpu("rtx-3060", "NVIDIA GeForce RTX 3060 12GB", 12288,  # 12 GB GDDR6
         "nvidia-smi '1MiB / 12288MiB' on an RTX 3060 in geerlingguy/raspberry-pi-pcie-devices issue #790 "
         "(https://github.com/geerlingguy/raspberry-pi-pcie-devices/issues/790)",
         ("3060", "rtx 3060", "geforce rtx 3060", "rtx 3060 12gb")),
    _gpu("rtx-4070", "NVIDIA GeForce RTX 4070", 12282,  # 12 GB GDDR6X
         "nvidia-smi '430MiB / 12282MiB' on an RTX 4070 in Frogging-Family/nvidia-all PR #212 "
         "(https://github.com/Frogging-Family/nvidia-all/pull/212)",
         ("4070", "rtx 4070", "geforce rtx 4070")),
    # A generic 16 GB card (kept for old links): the RTX 4080's reported size, the common 16 GB figure.
    _gpu("gpu-16gb", Text(N_("{gb} GB NVIDIA GPU"), gb=16), 16376,
         f"the RTX 4080's figure: {_RTX_4080}; the RTX 4060 Ti 16 GB reports 16,380 MiB",
         ("16gb gpu", "16 gb gpu", "generic 16gb", "16gb"),
         name=Text(N_("{gb} GB NVIDIA GPU, RTX 4080 / 4060 Ti 16 GB class ({mib} MiB)"), gb=16, mib=16376)),
    _gpu("rtx-4060-ti", "NVIDIA GeForce RTX 4060 Ti 16GB", 16380,  # 16 GB GDDR6 (the 8 GB variant: 8,188 MiB)
         "nvidia-smi 'NVIDIA GeForce RTX 4060 Ti, 16380 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 16 GB",
         ("4060 ti", "4060ti", "rtx 4060 ti", "geforce rtx 4060 ti", "4060 ti 16gb", "rtx 4060 ti 16gb")),
    _gpu("rtx-4080", "NVIDIA GeForce RTX 4080", 16376,  # 16 GB GDDR6X, 4080 and 4080 SUPER alike
         _RTX_4080,
         ("4080", "rtx 4080", "geforce rtx 4080", "4080 super", "rtx 4080 super", "geforce rtx 4080 super")),
    _gpu("rtx-3090", "NVIDIA GeForce RTX 3090", 24576,  # 24 GB GDDR6X
         "nvidia-smi '15005MiB / 24576MiB' on an RTX 3090 in noonghunna/club-3090 issue #390 "
         "(https://github.com/noonghunna/club-3090/issues/390)",
         ("3090", "rtx 3090", "geforce rtx 3090")),
    _gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 24564,  # 24 GB GDDR6X
         "nvidia-smi '507MiB / 24564MiB' on an RTX 4090 in RLinf/RLinf issue #255 "
         "(https://github.com/RLinf/RLinf/issues/255); also vllm-project/vllm issue #7553",
         ("4090", "rtx 4090", "geforce rtx 4090")),
    _gpu("rtx-5090", "NVIDIA GeForce RTX 5090", 32607,  # 32 GB GDDR7
         "nvidia-smi '18MiB / 32607MiB' on an RTX 5090 in noonghunna/club-3090 issue #741 "
         "(https://github.com/noonghunna/club-3090/issues/741); also issue #1261",
         ("5090", "rtx 5090", "geforce rtx 5090")),
    # -- Workstation ------------------------------------------------------------------------------------------------
    _gpu("rtx-a6000", "NVIDIA RTX A6000", 49140,  # 48 GB GDDR6 (Ampere)
         "nvidia-smi 'NVIDIA RTX A6000, 49140 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 48 GB",
         ("a6000", "rtx a6000", "nvidia rtx a6000")),
    _gpu("rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", 49140,  # 48 GB GDDR6 (Ada)
         "nvidia-smi 'NVIDIA RTX 6000 Ada Generation, 49140 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 48 GB",
         ("6000 ada", "rtx 6000 ada", "rtx 6000 ada generation")),
    # -- Data centre ------------------------------------------------------------------------------------------------
    _gpu("t4", "NVIDIA Tesla T4", 15360,  # 16 GB GDDR6
         f"nvidia-smi 15360MiB for the T4: {_MODAL}",
         ("t4", "tesla t4", "nvidia t4")),
    _gpu("v100-16gb", "NVIDIA Tesla V100 16GB", 16160,  # 16 GB HBM2
         "nvidia-smi '112MiB / 16160MiB' on a 'Tesla V100-SXM2...' in 4paradigm/k8s-vgpu-scheduler issue #7 "
         "(https://github.com/4paradigm/k8s-vgpu-scheduler/issues/7)",
         ("v100", "tesla v100", "v100 16gb", "v100-sxm2-16gb")),
    _gpu("v100-32gb", "NVIDIA Tesla V100 32GB", 32768,  # 32 GB HBM2 (older drivers printed 32480-32510 MiB)
         "nvidia-smi '308MiB / 32768MiB' on a 'Tesla V100-SXM2...' (driver 525) in Wan-Video/Wan2.1 issue #5 "
         "(https://github.com/Wan-Video/Wan2.1/issues/5)",
         ("v100 32gb", "tesla v100 32gb", "v100-sxm2-32gb")),
    _gpu("a10g", "NVIDIA A10G", 23028,  # 24 GB GDDR6 (AWS g5)
         "nvidia-smi '8722MiB / 23028MiB' on an A10G in NVIDIA/DCGM issue #232 "
         "(https://github.com/NVIDIA/DCGM/issues/232)",
         ("a10g", "nvidia a10g", "aws a10g", "g5")),
    _gpu("a10", "NVIDIA A10", 23028,  # 24 GB GDDR6
         f"nvidia-smi 23028MiB for the A10: {_MODAL}",
         ("a10", "nvidia a10")),
    _gpu("l4", "NVIDIA L4", 23034,  # 24 GB GDDR6
         f"nvidia-smi 23034MiB for the L4: {_MODAL}",
         ("l4", "nvidia l4")),
    _gpu("l40s", "NVIDIA L40S", 46068,  # 48 GB GDDR6
         "nvidia-smi 'NVIDIA L40S, 595.71.05, 46068 MiB' in akash-network/provider-configs PR #99 "
         f"(https://github.com/akash-network/provider-configs/pull/99); same figure in {_MODAL}",
         ("l40s", "nvidia l40s")),
    _gpu("a100-40gb", "NVIDIA A100 40GB", 40960,  # 40 GB HBM2
         "nvidia-smi '598MiB / 40960MiB' on an NVIDIA A100-SXM4-40GB in bottlerocket-os/bottlerocket-core-kit "
         f"PR #834 (https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834); same figure in {_MODAL}",
         ("a100", "a100 40gb", "a100-sxm4-40gb", "a100 pcie 40gb")),
    _gpu("a100-80gb", "NVIDIA A100 80GB", 81920,  # 80 GB HBM2e
         f"nvidia-smi 81920MiB for the A100 80GB: {_MODAL}; also '7488MiB / 81920MiB' on A100-SXM4 cards in "
         "CHTC/templates-GPUs PR #24 (https://github.com/CHTC/templates-GPUs/pull/24)",
         ("a100 80gb", "a100-sxm4-80gb", "a100 pcie 80gb")),
    _gpu("h100-80gb", "NVIDIA H100 80GB HBM3", 81559,  # 80 GB HBM3, SXM5
         "nvidia-smi '0MiB / 81559MiB' on 'NVIDIA H100 80GB HBM3' (SXM) in NVIDIA/nccl issue #1264 "
         "(https://github.com/NVIDIA/nccl/issues/1264); also wilicc/gpu-burn issue #114",
         ("h100", "h100 sxm", "h100 sxm5", "h100 80gb", "h100 80gb hbm3", "nvidia h100")),
    _gpu("h100-pcie", "NVIDIA H100 PCIe", 81559,  # 80 GB HBM2e
         "nvidia-smi 'NVIDIA H100 PCIe, 81559 MiB' (code search: several public repository files; "
         "no issue URL found); vendor spec 80 GB",
         ("h100 pcie", "nvidia h100 pcie")),
    _gpu("h100-nvl", "NVIDIA H100 NVL", 95830,  # 94 GB HBM3
         "nvidia-smi '0MiB / 95830MiB' on 'NVIDIA H100 NVL' in NVIDIA/gpu-admin-tools issue #4 "
         "(https://github.com/NVIDIA/gpu-admin-tools/issues/4)",
         ("h100 nvl", "nvidia h100 nvl", "h100 94gb")),
    _gpu("h200", "NVIDIA H200", 143771,  # 141 GB HBM3e
         "nvidia-smi memory.total 150,754,820,096 B = 143771 MiB on 'NVIDIA H200', utkuozdemir/nvidia_gpu_exporter "
         "internal/integration/testdata/linux-x86_64__nvidia-h200__590.48.01__idle.metrics",
         ("h200", "nvidia h200", "h200 141gb", "h200 sxm")),
    _gpu("b200", "NVIDIA B200", 183359,  # 180 GB HBM3e usable of 192 GB on the package
         "nvidia-smi '166593MiB / 183359MiB' on 'NVIDIA B200' in NVIDIA/TensorRT-LLM issue #10278 "
         "(https://github.com/NVIDIA/TensorRT-LLM/issues/10278)",
         ("b200", "nvidia b200")),
    _gpu("mi300x", "AMD Instinct MI300X", 196592,  # 192 GB HBM3
         "rocm-smi 'VRAM Total Memory (B): 206141652992' = 196592 MiB (code search: public rocm-smi captures); "
         "matches ROCm/legacy-rocm-build issue #4750 (https://github.com/ROCm/legacy-rocm-build/issues/4750): "
         "a CPX partition's KFD size_in_bytes 25,767,706,624 B × 8 partitions = 206,141,652,992 B",
         ("mi300x", "amd mi300x", "instinct mi300x", "amd instinct mi300x")),
)
_BY_ID = {d.id: d for d in CATALOG}
CUSTOM_MIN_GB = 0.5  # the smallest capacity a user may type, in decimal GB
CUSTOM_MAX_GB = 100_000.0  # the largest capacity a user may type, in decimal GB
DEVICE_KINDS = ("discrete", "unified")  # a GPU's own memory, or RAM shared with the CPU (about 75 % usable)


def _norm(text: str) -> str:
    """Lower-case, letters and digits only: 'RTX-4090', 'rtx 4090' and 'rtx4090' are one key."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def _keys(device: Device) -> tuple[str, ...]:
    """The exact keys a device answers to: its id and aliases, normalized."""
    return tuple(dict.fromkeys(_norm(k) for k in (device.id, *device.aliases)))


def device_ids() -> tuple[str, ...]:
    return tuple(_BY_ID)


def get_device(device_id: str) -> Device:
    """A catalog device. Unknown ids raise ValueError listing the choices."""
    if device_id not in _BY_ID:
        raise ValueError(Text(N_("unknown device '{device}'; choose one of: {choices}"), device=str(device_id)[:60],
                              choices=", ".join(_BY_ID)))
    return _BY_ID[device_id]


def _ranked(query: str) -> list[tuple[int, int, Device]]:
    """(rank, catalog position, device) for every device a typed name matches (find_devices' ranks)."""
    q = _norm(str(query))
    ranked: list[tuple[int, int, Device]] = []
    for position, device in enumerate(CATALOG):
        keys = _keys(device)
        if q in keys:
            rank = 0
        elif any(k.startswith(q) for k in keys):
            rank = 1
        elif len(q) >= 3 and any(q in k for k in (*keys, _norm(device.title))):  # the English name
            rank = 2  # short queries ('t4', 'a1') only match whole keys or their starts, never mid-word
        else:
            continue
        ranked.append((rank, position, device))
    if not ranked:  # no name contains the query: its words and memory figure, in any order
        ranked = [(3, position, device) for position, device in enumerate(CATALOG) if _words_match(query, device)]
    return sorted(ranked, key=lambda r: r[:2])


# Words that name any Apple silicon Mac (the chips and the product lines), and words a query may carry that name no
# device ('my 36 GB MacBook'): a query's words are matched one by one against a device's own.
_APPLE_WORDS = frozenset({"apple", "mac", "macbook", "macbookpro", "macbookair", "imac", "mini", "studio", "air",
                          "pro", "max", "ultra", "silicon", "laptop", "unified", "m1", "m2", "m3", "m4", "m5"})
_FILLER_WORDS = frozenset({"my", "a", "an", "the", "with", "of", "on", "in", "and", "ram", "memory", "vram", "gpu",
                           "card"})
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z])")
_WORD = re.compile(r"\d+(?:\.\d+)?|[a-z0-9]+")


def _query_words(text: str) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """A typed name's memory figures ('36 GB', '36gb', '36 GiB', '36G') and its other words, lower case (a bare
    number is a word: a model number or a memory figure)."""
    low = str(text).lower()
    sizes = tuple(float(m.group(1)) for m in _MEMORY.finditer(low))
    return sizes, tuple(_WORD.findall(_MEMORY.sub(" ", low)))


def _device_words(device: Device) -> frozenset[str]:
    """The words a device answers to: its id's, aliases', name's and model's, and for a Mac every Apple word."""
    words: set[str] = set()
    for text in (device.id.replace("-", " "), *device.aliases, str(device.title), str(device.model)):
        words.update(_query_words(text)[1])
    return frozenset(words | (_APPLE_WORDS if device.kind == "unified" else set()))


def _has_memory(device: Device, gb: float) -> bool:
    """Is this figure the device's memory, as people say it: its GB or its GiB, to the nearest whole one ('36' for a
    36 GiB Mac, '24' for an RTX 4090's 23.99 GiB, '80' for an H100's 79.6 GiB)?"""
    return any(abs(gb - size) < 0.5 for size in (to_gb(device.capacity_bytes), to_gib(device.capacity_bytes)))


def _words_match(query: str, device: Device) -> bool:
    """Does every word of the query name this device and every memory figure equal its memory ('36 GB MacBook',
    'M4 Pro 36', 'apple 36gb', 'nvidia 24 GB')?"""
    sizes, words = _query_words(query)
    words = tuple(w for w in words if w not in _FILLER_WORDS)
    if not sizes and not words:
        return False
    own = _device_words(device)
    return all(_has_memory(device, n) for n in sizes) and all(
        w in own or (w[0].isdigit() and _has_memory(device, float(w))) for w in words)


def find_devices(query: str) -> tuple[Device, ...]:
    """Catalog devices matching a typed name, case-insensitive and ignoring spaces and dashes ('4080', 'A6000',
    'T4', 'rtx4090', 'h100', 'm3 max'). Ranked: an exact id or alias first, then ids/aliases that start with the
    query, then (for queries of 3+ characters) ids, aliases or names that contain it; when none does, the devices
    whose words and memory the query's words name in any order ('36 GB MacBook', 'M4 Pro 36', 'apple 36gb':
    brand, product and chip words, the memory with or without a space or unit); catalog order within a rank.
    An empty query returns the whole catalog; no match returns ()."""
    if not _norm(str(query)):
        return CATALOG
    return tuple(device for _, _, device in _ranked(query))


_SIZE = re.compile(r"(\d+(?:\.\d+)?)gb")


def lookup_devices(query: str) -> tuple[Device, ...]:
    """The devices a typed name means, for a command line that must pick one: the exact id or alias alone;
    else, for a bare size ('24gb'), every device whose memory is that many GB or GiB, rounded (a '24 GB' card
    reports 22.5 GiB, an RTX 4090 24.0 GiB, a 24 GB Mac 24 GiB); else the devices of find_devices' best rank.
    One device: found. Several: the name is ambiguous, ask which. None: unknown (see nearest_device_ids)."""
    q = _norm(str(query))
    if not q:
        return ()
    ranked = _ranked(query)
    if ranked and ranked[0][0] == 0:
        return (ranked[0][2],)
    size = _SIZE.fullmatch(q)
    if size:
        n = float(size.group(1))
        by_size = tuple(d for d in CATALOG
                        if n in (round(to_gb(d.capacity_bytes)), round(to_gib(d.capacity_bytes))))
        if by_size:
            return by_size
    if not ranked:
        return ()
    best = ranked[0][0]
    return tuple(device for rank, _, device in ranked if rank == best)


def nearest_device_ids(query: str, n: int = 3) -> tuple[str, ...]:
    """The catalog ids closest to a name that matches none (difflib over ids and aliases), best first."""
    import difflib

    names: dict[str, str] = {}
    for device in CATALOG:
        for key in (device.id, *device.aliases):
            names.setdefault(key.lower(), device.id)
    close = difflib.get_close_matches(str(query).lower(), list(names), n=3 * n, cutoff=0.6)
    return tuple(dict.fromkeys(names[c] for c in close))[:n]


def with_chip(device: Device, chip_id: str) -> Device:
    """A unified-memory Mac timed with a named chip (an APPLE_CHIPS id: 'm3-max-40c'); its memory figures stay."""
    if device.kind != "unified":
        raise ValueError(Text(N_("only an Apple silicon Mac has a chip to choose; {device} is a discrete GPU"),
                              device=device.id))
    if chip_id not in APPLE_CHIPS:
        raise ValueError(Text(N_("unknown Apple chip '{chip}'; choose one of: {choices}"), chip=str(chip_id)[:40],
                              choices=", ".join(APPLE_CHIPS)))
    from dataclasses import replace

    return replace(device, compute=APPLE_CHIPS[chip_id].compute, chip=chip_id)


def device_label(device: Device) -> str:
    """Display text with the reported figure and both units:
    'NVIDIA GeForce RTX 4090 · 24,564 MiB (25.8 GB / 24.0 GiB)', 'Apple silicon 36 GB unified · 36 GiB (38.7 GB /
    36.0 GiB)'."""
    size = f"{format_number(to_gb(device.capacity_bytes), 1)} GB / {format_number(to_gib(device.capacity_bytes), 1)} GiB"
    return f"{shown(device.model) or device.name} · {device.reported} ({size})"


def custom_device(capacity_gb: float, kind: str = "discrete") -> Device:
    """A device the user describes: capacity in decimal GB, unified or discrete."""
    if kind not in DEVICE_KINDS:
        raise ValueError(Text(N_("device kind must be 'unified' or 'discrete'")))
    if isinstance(capacity_gb, bool) or not isinstance(capacity_gb, (int, float)) or not math.isfinite(capacity_gb):
        raise ValueError(Text(N_("capacity must be a number of GB, got {value}"), value=repr(str(capacity_gb)[:40])))
    if not CUSTOM_MIN_GB <= capacity_gb <= CUSTOM_MAX_GB:
        raise ValueError(Text(N_("capacity must be between {low} and {high} GB, got {value}"),
                              low=short_number(CUSTOM_MIN_GB), high=int(CUSTOM_MAX_GB), value=short_number(capacity_gb)))
    label = Text(N_("unified")) if kind == "unified" else "GPU"
    title = Text(N_("Custom {capacity} GB ({kind})"), capacity=short_number(capacity_gb), kind=label)
    return Device("custom", title, kind, int(capacity_gb * GB),
                  source="capacity typed by the user, in decimal GB (1 GB = 10^9 B)")
