"""The device catalog holds memory as the driver reports it (nvidia-smi / rocm-smi MiB, macOS GiB), every entry
says where its figure comes from, and find_devices / device_label find and show devices by what users type."""

import re

import pytest

from estimator.memory.verdict import verdict
from estimator.options.devices import (
    CATALOG,
    CUDA_TOTALS,
    UNIFIED_USABLE_FRACTION,
    Device,
    custom_device,
    device_ids,
    device_label,
    find_devices,
    get_device,
)

MiB = 2**20
GiB = 2**30

# id → the figure its driver prints: GPUs in MiB (nvidia-smi / rocm-smi memory.total), Macs in GiB (hw.memsize).
REPORTED_MIB = [
    ("rtx-4060", 8_188), ("rtx-3080", 10_240), ("rtx-3060", 12_288), ("rtx-4070", 12_282),
    ("gpu-16gb", 16_376), ("rtx-4060-ti", 16_380), ("rtx-4080", 16_376), ("rtx-3090", 24_576),
    ("rtx-4090", 24_564), ("rtx-5090", 32_607), ("rtx-a6000", 49_140), ("rtx-6000-ada", 49_140),
    ("t4", 15_360), ("v100-16gb", 16_160), ("v100-32gb", 32_768), ("a10g", 23_028), ("a10", 23_028),
    ("l4", 23_034), ("l40s", 46_068), ("a100-40gb", 40_960), ("a100-80gb", 81_920), ("h100-80gb", 81_559),
    ("h100-pcie", 81_559), ("h100-nvl", 95_830), ("h200", 143_771), ("b200", 183_359), ("mi300x", 196_592),
]
MAC_GIB = [("laptop-36gb", 36), ("mac-16gb", 16), ("mac-18gb", 18), ("mac-24gb", 24), ("mac-32gb", 32),
           ("mac-48gb", 48), ("mac-64gb", 64), ("mac-96gb", 96), ("mac-128gb", 128), ("mac-192gb", 192),
           ("mac-256gb", 256), ("mac-512gb", 512)]
# Every id that existed before the catalog moved to reported sizes: URLs, README and tests use them.
OLD_IDS = ["laptop-36gb", "mac-16gb", "mac-24gb", "mac-48gb", "mac-64gb", "mac-96gb", "mac-128gb", "gpu-16gb",
           "rtx-3090", "rtx-4090", "rtx-5090", "l4", "a10g", "l40s", "a100-40gb", "a100-80gb", "h100-80gb", "h200"]


def test_rtx_4090_is_the_24564_mib_nvidia_smi_reports_and_cuda_sees_less():
    rtx = get_device("rtx-4090")
    assert rtx.capacity_bytes == 24_564 * MiB == 25_757_220_864
    assert rtx.reported_mib == 24_564 and rtx.kind == "discrete"
    assert rtx.usable_bytes == rtx.runtime_total_bytes == 24_078 * MiB  # Unsloth's "Max memory: 23.514 GB" (GiB)
    assert rtx.reserved_bytes == 486 * MiB  # what the driver keeps from CUDA
    assert rtx.name == "NVIDIA GeForce RTX 4090 (24,564 MiB)"


def test_h100_is_the_81559_mib_nvidia_smi_reports():
    h100 = get_device("h100-80gb")
    assert h100.capacity_bytes == 81_559 * MiB == 85_520_809_984  # 85.5 GB, not 80 GB
    assert h100.reported_mib == 81_559
    assert h100.usable_bytes == round(79.11 * 1024) * MiB  # PyTorch's "total capacity of 79.11 GiB"


def test_a100_80gb_usable_is_the_79_15_gib_pytorch_prints():
    """The A100 80GB's 81,920 MiB by nvidia-smi are 85.9 GB; PyTorch's messages give it 79.15 GiB (84.99 GB) to
    allocate from, and that is what a training run's estimate must fit in."""
    a100 = get_device("a100-80gb")
    assert a100.capacity_bytes == 81_920 * MiB
    assert a100.usable_bytes == 81_050 * MiB == 84_987_084_800
    assert round(a100.usable_bytes / GiB, 2) == 79.15


def test_a_36_gb_mac_has_36_gib_and_27_gib_usable():
    laptop = get_device("laptop-36gb")
    assert laptop.kind == "unified"
    assert laptop.capacity_bytes == 36 * GiB == 38_654_705_664
    assert laptop.usable_bytes == 27 * GiB == 28_991_029_248  # the page's "about 27 GB usable", as GiB
    assert laptop.reserved_bytes == 9 * GiB
    assert UNIFIED_USABLE_FRACTION == 0.75


@pytest.mark.parametrize(("device_id", "mib"), REPORTED_MIB)
def test_gpu_capacity_is_the_reported_mib(device_id, mib):
    device = get_device(device_id)
    assert device.kind == "discrete"
    assert device.reported_mib == mib
    assert device.capacity_bytes == mib * MiB
    assert device.usable_bytes == device.runtime_total_bytes == device.cuda_total_mib * MiB
    assert 0 <= device.reserved_bytes < 0.035 * device.capacity_bytes  # the driver keeps up to 3.1 % (an RTX 4060)
    assert device.name.endswith(f"({mib:,} MiB)")


# The CUDA total each card's source quotes (options.devices.CUDA_TOTALS): the words quoted, the figure they give and
# its unit (a PyTorch message's GiB with two decimals, Unsloth's banner's three, a device query's bytes), the page.
CUDA_QUOTED = [
    ("rtx-4060", "total capacity of 7.75 GiB", 7.75, GiB, 0.005, "ESRSchao/EdgeRegNet/issues/2"),
    ("rtx-3080", "9.78 GiB total capacity", 9.78, GiB, 0.005, "zai-org/CogVideo/issues/34"),
    ("rtx-3060", "11.75 GiB total capacity", 11.75, GiB, 0.005, "Kunhao-Liu/StyleGaussian/issues/12"),
    ("rtx-3090", "25286672384 bytes", 25_286_672_384, 1, 0, "Jumperkables/cuda-benchmarking/blob/HEAD/"),
    ("rtx-4090", "Max memory: 23.514 GB", 23.514, GiB, 0.0005, "unslothai/unsloth/issues/3542"),
    ("rtx-5090", "32117 MBytes (33677180928 bytes)", 33_677_180_928, 1, 0, "aikitoria/open-gpu-kernel-modules/issues/1"),
    ("t4", "total capacity of 14.56 GiB", 14.56, GiB, 0.005, "Zheng-Chong/CatVTON/issues/133"),
    ("v100-16gb", "15.78 GiB total capacity", 15.78, GiB, 0.005, "kchengiva/Shift-GCN/issues/34"),
    ("v100-32gb", "31.74 GiB total capacity", 31.74, GiB, 0.005, "liucongg/ChatGLM-Finetuning/issues/73"),
    ("a10", "21.99 GBytes (23609475072 bytes)", 23_609_475_072, 1, 0, "aalanwyr/face2cuda/blob/HEAD/"),
    ("l4", "22491 MBytes (23583784960 bytes)", 23_583_784_960, 1, 0, "bottlerocket-kernel-kit/pull/139"),
    ("a100-40gb", "40339 MBytes (42298834944 bytes)", 42_298_834_944, 1, 0, "bottlerocket-os/bottlerocket/pull/3873"),
    ("a100-80gb", "79.15 GiB total capacity", 79.15, GiB, 0.005, "axolotl-ai-cloud/axolotl/issues/971"),
    ("h100-80gb", "total capacity of 79.11 GiB", 79.11, GiB, 0.005, "vllm-project/vllm/issues/27508"),
    ("h100-nvl", "total capacity of 93.00 GiB", 93.00, GiB, 0.005, "ali-vilab/VACE/issues/56"),
    ("h200", "total capacity of 139.81 GiB", 139.81, GiB, 0.005, "sungwon-chae/arxiv_confi/blob/HEAD/"),
    ("b200", "Total Global Memory: 178.35 GB", 178.35, GiB, 0.005, "pytorch/ao/pull/4002"),
]
# A card without a figure of its own: the card or share it is inferred from, and the MiB that gives.
CUDA_INFERRED = [
    ("rtx-4070", round(12_282 * 7_936 / 8_188)), ("rtx-4060-ti", round(16_380 * 7_936 / 8_188)),
    ("rtx-4080", round(16_376 * 7_936 / 8_188)), ("gpu-16gb", round(16_376 * 7_936 / 8_188)),
    ("rtx-a6000", 49_140 - (24_576 - 24_115)),  # the RTX 3090's 461 MiB (GA102)
    ("rtx-6000-ada", 49_140 - (46_068 - round(44.43 * 1024))),  # the same card with ECC on: 572 MiB
    ("a10g", 22_515), ("l40s", round(44.40 * 1024)), ("h100-pcie", round(79.11 * 1024)), ("mi300x", 196_592),
]


@pytest.mark.parametrize(("device_id", "quote", "value", "unit", "digits", "page"), CUDA_QUOTED,
                         ids=[row[0] for row in CUDA_QUOTED])
def test_each_cuda_total_is_the_figure_its_source_quotes(device_id, quote, value, unit, digits, page):
    device = get_device(device_id)
    assert quote in device.usable_source and "https://github.com/" in device.usable_source
    assert page in device.usable_source
    # within the printed figure's last digit (a byte count: the whole MiB below it)
    assert abs(device.usable_bytes - value * unit) <= digits * unit + MiB


@pytest.mark.parametrize(("device_id", "mib"), CUDA_INFERRED)
def test_an_inferred_cuda_total_says_so_and_what_from(device_id, mib):
    device = get_device(device_id)
    assert device.cuda_total_mib == mib
    assert device.usable_source.startswith("no published figure for this card found; inferred: ")
    assert "https://github.com/" in device.usable_source


def test_every_gpu_has_a_cuda_total_and_the_tables_cover_them():
    gpus = {d.id for d in CATALOG if d.kind == "discrete"}
    assert gpus == set(CUDA_TOTALS) == {r[0] for r in CUDA_QUOTED} | {r[0] for r in CUDA_INFERRED}
    assert all(get_device(i).cuda_total_mib <= get_device(i).reported_mib for i in gpus)


def test_macs_and_typed_capacities_keep_their_figures():
    mac = get_device("laptop-36gb")
    assert mac.cuda_total_mib is None and mac.runtime_total_bytes == mac.capacity_bytes
    typed = custom_device(20.0)
    assert typed.usable_bytes == typed.runtime_total_bytes == typed.capacity_bytes == 20_000_000_000


def test_the_dpo_false_fit_is_now_too_big_and_the_boundary_is_cudas_total():
    """TRL 0.16's DPO quick start OOMed on an A100 80GB (huggingface/trl#3168) at an estimate of 85.35 GB: below
    nvidia-smi's 85.9 GB, above the 84.99 GB (79.15 GiB) PyTorch had. The verdict turns at CUDA's total, to the byte."""
    a100 = get_device("a100-80gb")
    assert not verdict(85.35e9, a100).fits
    assert verdict(a100.usable_bytes, a100).fits and not verdict(a100.usable_bytes + 1, a100).fits
    assert a100.usable_bytes + 1 < 85.35e9 < a100.capacity_bytes  # the old limit would have called it a fit


# Metal's recommendedMaxWorkingSetSize as the public logs print it (options.devices.MAC_WORKING_SETS): 2/3 of RAM
# on 16 and 32 GB, 3/4 on 64 GB, 107.52 GiB on 128 GB (macOS 26).
WORKING_SET_MIB = {16: 10922.67, 32: 21845.34, 64: 49152.0, 128: 107.52 * 1024}


@pytest.mark.parametrize(("device_id", "gib"), MAC_GIB)
def test_mac_capacity_is_whole_gib_usable_is_the_working_set_or_three_quarters(device_id, gib):
    device = get_device(device_id)
    assert device.kind == "unified"
    assert device.capacity_bytes == gib * GiB and device.reported_mib == gib * 1024
    if gib in WORKING_SET_MIB:
        assert device.usable_bytes == pytest.approx(WORKING_SET_MIB[gib] * MiB, abs=1)
        assert "recommendedMaxWorkingSetSize" in device.usable_source and "github.com" in device.usable_source
    else:
        assert device.usable_bytes == gib * GiB * 3 // 4
        assert "three quarters" in device.usable_source
    assert device.reported == f"{gib} GiB"


def test_the_tables_cover_the_whole_catalog():
    assert sorted(d for d, _ in REPORTED_MIB + MAC_GIB) == sorted(device_ids())


def test_ids_are_unique_and_every_entry_has_a_source():
    assert len(device_ids()) == len(CATALOG) == len(set(device_ids()))
    assert len({d.name for d in CATALOG}) == len(CATALOG)  # names index the min-GPUs table
    for device in CATALOG:
        assert device.source.strip(), device.id
        assert device.aliases and all(a == a.lower() for a in device.aliases), device.id


def test_sources_cite_what_they_quote():
    """A source either links the public issue/PR/file it quotes, or says it found none (never a bare number)."""
    for device in CATALOG:
        if device.kind == "unified":
            assert "hw.memsize" in device.source
            continue
        assert f"{device.reported_mib}" in device.source.replace(",", ""), device.id
        cited = re.search(r"https://github\.com/\S+/(issues|pull)/\d+", device.source)
        assert cited or "no issue URL found" in device.source or "testdata" in device.source, device.id


@pytest.mark.parametrize("device", CATALOG, ids=lambda d: d.id)
def test_every_id_and_alias_finds_its_device_first(device):
    for key in (device.id, *device.aliases, device.id.upper(), device.id.replace("-", " ")):
        assert find_devices(key)[0] is device, key


@pytest.mark.parametrize(("query", "first"), [
    ("4080", "rtx-4080"), ("RTX 4080 SUPER", "rtx-4080"), ("A6000", "rtx-a6000"), ("T4", "t4"), ("t4", "t4"),
    ("Tesla T4", "t4"), ("rtx4090", "rtx-4090"), ("RTX-4090", "rtx-4090"), ("geforce rtx 4090", "rtx-4090"),
    ("h100", "h100-80gb"), ("H100 PCIe", "h100-pcie"), ("a10", "a10"), ("A10G", "a10g"), ("a100", "a100-40gb"),
    ("m4 max 36gb", "laptop-36gb"), ("M3 Ultra 512GB", "mac-512gb"), ("mi300x", "mi300x"), ("3090", "rtx-3090"),
])
def test_find_devices_ranks_the_exact_match_first(query, first):
    assert find_devices(query)[0].id == first


def test_find_devices_lists_every_match_in_rank_then_catalog_order():
    assert [d.id for d in find_devices("h100")] == ["h100-80gb", "h100-pcie", "h100-nvl"]
    assert [d.id for d in find_devices("m3 max")] == ["laptop-36gb", "mac-48gb", "mac-64gb", "mac-96gb",
                                                      "mac-128gb"]
    assert [d.id for d in find_devices("a10")] == ["a10", "a10g", "a100-40gb", "a100-80gb"]
    assert [d.id for d in find_devices("4080")] == ["rtx-4080", "gpu-16gb"]  # the generic 16 GB card by name


def test_a_short_query_does_not_match_inside_words():
    """'T4' is the Tesla T4, not every name with a 't4' somewhere inside it."""
    assert [d.id for d in find_devices("t4")] == ["t4"]
    assert [d.id for d in find_devices("A6000")] == ["rtx-a6000"]


@pytest.mark.parametrize("query", ["", "   ", " - "])
def test_an_empty_query_is_the_whole_catalog(query):
    assert find_devices(query) == CATALOG


@pytest.mark.parametrize("query", ["zzz", "rtx 9999", "tpu v5", "m9 max"])
def test_an_unknown_query_finds_nothing(query):
    assert find_devices(query) == ()


@pytest.mark.parametrize("device_id", OLD_IDS)
def test_every_old_id_still_resolves(device_id):
    assert get_device(device_id).id == device_id


def test_unknown_id_still_raises_with_the_choices():
    with pytest.raises(ValueError, match="unknown device 'rtx-9999'.*rtx-4090"):
        get_device("rtx-9999")


@pytest.mark.parametrize(("device_id", "label"), [
    ("rtx-4090", "NVIDIA GeForce RTX 4090 · 24,564 MiB (25.8 GB / 24.0 GiB)"),
    ("h100-80gb", "NVIDIA H100 80GB HBM3 · 81,559 MiB (85.5 GB / 79.6 GiB)"),
    ("rtx-4080", "NVIDIA GeForce RTX 4080 · 16,376 MiB (17.2 GB / 16.0 GiB)"),
    ("laptop-36gb", "Apple silicon 36 GB unified · 36 GiB (38.7 GB / 36.0 GiB)"),
    ("mi300x", "AMD Instinct MI300X · 196,592 MiB (206.1 GB / 192.0 GiB)"),
])
def test_device_label_shows_the_reported_figure_in_both_units(device_id, label):
    assert device_label(get_device(device_id)) == label


def test_custom_device_stays_decimal_gb_and_keeps_working():
    gpu = custom_device(20)
    assert gpu.capacity_bytes == gpu.usable_bytes == 20_000_000_000 and gpu.reported_mib is None
    assert gpu.source and device_label(gpu) == "Custom 20 GB (GPU) · 20.0 GB (20.0 GB / 18.6 GiB)"
    mac = custom_device(36, "unified")
    assert mac.usable_bytes == 27_000_000_000
    with pytest.raises(ValueError):
        custom_device(0.1)


def test_device_is_frozen_and_the_old_positional_form_still_builds():
    device = Device("x", "X", "discrete", 10 * GiB)
    assert device.usable_bytes == 10 * GiB and device.source == "" and device.aliases == ()
    with pytest.raises(AttributeError):
        device.capacity_bytes = 1  # type: ignore[misc]


def test_verdicts_flip_on_what_cuda_reports():
    """25 GB fits a 4090 (25.2 GB by CUDA, 25.8 GB by nvidia-smi) that the marketed 24 GB would have refused; 84.9 GB
    fits an H100 (84.94 GB by CUDA) that 85 GB does not, though nvidia-smi's 85.5 GB would hold both."""
    rtx = get_device("rtx-4090")
    assert verdict(25e9, rtx).fits and not verdict(25.3e9, rtx).fits
    h100 = get_device("h100-80gb")
    assert verdict(84.9e9, h100).fits and not verdict(85e9, h100).fits


def test_verdict_bands():
    """The four bands every page shows: the likely range's ends against the usable memory."""
    card = get_device("rtx-4090")
    u = card.usable_bytes
    assert verdict(u - 2e9, card, u - 1e9, u - 3e9).band == "fits"
    assert verdict(u - 1e9, card, u + 1e9, u - 2e9).band == "close call"
    assert verdict(u, card, u + 1e9, u - 1e9).band == "close call"  # exactly at the limit still fits
    assert verdict(u + 1e9, card, u + 2e9, u - 1e9).band == "borderline"
    assert verdict(u + 1e9, card, u + 2e9, u + 0.5e9).band == "too big"
    assert verdict(u + 1e9, card).band == "too big" and verdict(u - 1e9, card).band == "fits"  # no range given


def test_a_tiny_shortfall_is_never_too_big_by_zero():
    from estimator import verdict

    card = get_device("rtx-4090")
    v = verdict(card.usable_bytes + 30e6, card)
    assert v.headline == "Too big by 30 MB: right at the limit"
    assert verdict(card.usable_bytes + 1, card).headline == "Too big by 1 MB: right at the limit"
    assert verdict(card.usable_bytes + 0.06e9, card).headline == "Too big by 0.1 GB"


def test_overhead_is_named_for_the_device_runtime():
    from estimator.memory.result import component_label, context_label

    assert component_label("overhead", get_device("rtx-4090")) == "Overhead (CUDA + allocator)"
    assert component_label("overhead", get_device("mac-48gb")) == "Overhead (Metal + allocator)"
    assert "CUDA" not in context_label(get_device("laptop-36gb"))
    assert get_device("mi300x").runtime == "ROCm"
