"""The device catalog holds memory as the driver reports it (nvidia-smi / rocm-smi MiB, macOS GiB), every entry
says where its figure comes from, and find_devices / device_label find and show devices by what users type."""

import re

import pytest

from estimator.memory.verdict import verdict
from estimator.options.devices import (
    CATALOG,
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


def test_rtx_4090_is_the_24564_mib_nvidia_smi_reports():
    rtx = get_device("rtx-4090")
    assert rtx.capacity_bytes == rtx.usable_bytes == 24_564 * MiB == 25_757_220_864
    assert rtx.reported_mib == 24_564 and rtx.kind == "discrete" and rtx.reserved_bytes == 0
    assert rtx.name == "NVIDIA GeForce RTX 4090 (24,564 MiB)"


def test_h100_is_the_81559_mib_nvidia_smi_reports():
    h100 = get_device("h100-80gb")
    assert h100.capacity_bytes == h100.usable_bytes == 81_559 * MiB == 85_520_809_984  # 85.5 GB, not 80 GB
    assert h100.reported_mib == 81_559


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
    assert device.capacity_bytes == device.usable_bytes == mib * MiB
    assert device.name.endswith(f"({mib:,} MiB)")


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


def test_verdicts_flip_on_the_reported_size():
    """25 GB fits a 4090 (25.8 GB reported) that the marketed 24 GB would have refused."""
    rtx = get_device("rtx-4090")
    assert verdict(25e9, rtx).fits and not verdict(26e9, rtx).fits
    assert verdict(85e9, get_device("h100-80gb")).fits


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
