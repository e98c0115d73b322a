"""Out-of-memory messages: real ones from public issues parsed to the bytes written by hand from their text
(tests/data/oom/README.md lists the sources), the diagnosis of each, the CLI's --oom-log, and bad input (no known
format, cut-off and altered messages, huge numbers, odd units, markup, binary junk, more than 1 MB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator.advice.oom import CAUSES, cuda_matches, diagnose_oom, mps_matches
from estimator.job.stack import resolve_setup
from estimator.models.presets import load_preset
from estimator.oom_message import MAX_TEXT_CHARS, OomReading, parse_oom
from estimator.options.devices import get_device
from estimator.report.cli import main

DATA = Path(__file__).resolve().parent / "data" / "oom"


def KiB(x: float) -> int:  # noqa: N802 - the unit's name
    return round(x * 2**10)


def MiB(x: float) -> int:  # noqa: N802
    return round(x * 2**20)


def GiB(x: float) -> int:  # noqa: N802
    return round(x * 2**30)


# file → (kind, the figures the text gives, by hand: "2.11 GiB" is GiB(2.11); an MPS "GB" is a GiB)
REAL: dict[str, tuple[str, dict[str, object]]] = {
    "trl-4237.txt": ("cuda", dict(
        device_index=0, requested_bytes=GiB(2.11), capacity_bytes=GiB(14.74), free_bytes=GiB(1.65),
        allocated_bytes=GiB(4.50), reserved_unallocated_bytes=GiB(2.14), in_use_bytes=None,
        other_processes=((19066, GiB(6.79)), (19069, MiB(514.00)), (19060, GiB(4.93)), (19063, MiB(894.00))),
        hint="expandable_segments", messages=1)),
    "trl-5750.txt": ("cuda", dict(  # the second message is the last, cut off after "Process 22053 has 246.00 MiB mem"
        requested_bytes=MiB(216.00), capacity_bytes=GiB(14.74), free_bytes=MiB(182.19), allocated_bytes=None,
        reserved_unallocated_bytes=None, other_processes=((22056, GiB(1.06)), (22047, GiB(12.12))), messages=2)),
    "unsloth-1144.txt": ("cuda", dict(
        requested_bytes=GiB(11.89), capacity_bytes=GiB(22.17), free_bytes=GiB(3.38), allocated_bytes=GiB(18.18),
        reserved_unallocated_bytes=MiB(308.07), other_processes=((39863, GiB(18.71)),))),
    "axolotl-998.txt": ("cuda", dict(  # NVML's not-available figure for both processes: left out
        requested_bytes=MiB(20.00), capacity_bytes=GiB(24.00), free_bytes=0, in_use_bytes=None,
        allocated_bytes=GiB(23.01), reserved_unallocated_bytes=MiB(121.23), other_processes=((2954422, None),),
        hint="max_split_size_mb")),
    "axolotl-971.txt": ("cuda_legacy", dict(
        device_index=0, requested_bytes=GiB(341.58), capacity_bytes=GiB(79.15), allocated_bytes=GiB(5.62),
        free_bytes=GiB(72.91), reserved_bytes=GiB(5.73), reserved_unallocated_bytes=GiB(5.73) - GiB(5.62))),
    "axolotl-1717.txt": ("cuda", dict(
        device_index=None, requested_bytes=MiB(112.00), capacity_bytes=GiB(23.68), free_bytes=MiB(60.31),
        in_use_bytes=GiB(23.61), allocated_bytes=GiB(23.15), reserved_unallocated_bytes=MiB(64.54))),
    "transformers-6375.txt": ("cuda_legacy", dict(
        device_index=0, requested_bytes=MiB(20.00), capacity_bytes=GiB(14.73), allocated_bytes=GiB(13.67),
        free_bytes=MiB(15.88), reserved_bytes=GiB(13.72), reserved_unallocated_bytes=GiB(13.72) - GiB(13.67))),
    "pytorch-55004.txt": ("cuda_legacy", dict(
        requested_bytes=MiB(20.00), capacity_bytes=GiB(2.00), allocated_bytes=GiB(1.28), free_bytes=MiB(4.55),
        reserved_bytes=GiB(1.28), reserved_unallocated_bytes=0)),
    "pytorch-152351.txt": ("mps", dict(
        allocated_bytes=GiB(11.14), other_bytes=GiB(6.65), limit_bytes=GiB(18.13), requested_bytes=MiB(375.40),
        pool="private")),
    "pytorch-130112.txt": ("mps", dict(
        allocated_bytes=GiB(5.50), other_bytes=GiB(14.76), limit_bytes=GiB(20.40), requested_bytes=MiB(147.24),
        pool="private")),
    "mlx-lm-236.txt": ("mlx_command_buffer", dict(peak_bytes=34_108_000_000)),  # the last "Peak mem 34.108 GB"
    "mlx-lm-1185.txt": ("mlx_resource_limit", dict(resource_limit=499000)),
    "mlx-examples-481.txt": ("mlx_command_buffer", dict(peak_bytes=None)),
    "mlx-examples-70.txt": ("mlx_malloc", dict(requested_bytes=12)),
    "lmstudio-2240.txt": ("mlx_buffer", dict(requested_bytes=48736917632, max_buffer_bytes=30150672384)),
    "mistral-finetune-69.txt": ("cuda", dict(
        requested_bytes=MiB(896.00), capacity_bytes=GiB(21.99), free_bytes=MiB(759.38), in_use_bytes=0,
        allocated_bytes=GiB(20.52), reserved_unallocated_bytes=MiB(102.08))),
}
FROM_LISTED_PROJECTS = [f for f in REAL if f.split("-")[0] in ("trl", "unsloth", "axolotl", "transformers", "pytorch",
                                                               "mlx")]


def read(name: str) -> OomReading:
    return parse_oom((DATA / name).read_text(encoding="utf-8"))


def test_every_file_is_in_the_table_and_the_readme():
    files = sorted(p.name for p in DATA.glob("*.txt"))
    assert files == sorted(REAL)
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for name in files:
        assert f"`{name}`" in readme and "https://github.com/" in readme
    assert len(FROM_LISTED_PROJECTS) >= 8  # the target: 8 from PyTorch, transformers, TRL, Axolotl, Unsloth, mlx-lm


@pytest.mark.parametrize("name", sorted(REAL))
def test_a_real_message_parses_to_the_figures_in_its_text(name):
    kind, figures = REAL[name]
    r = read(name)
    assert r.kind == kind
    for field, expected in figures.items():
        assert getattr(r, field) == expected, (field, getattr(r, field), expected)


def test_a_cut_off_message_says_so_and_keeps_what_it_read():
    r = read("trl-5750.txt")
    assert not r.complete and r.messages == 2
    assert any("cut short" in n for n in r.notes) and any("2 out-of-memory messages" in n for n in r.notes)
    assert read("trl-4237.txt").complete and read("trl-4237.txt").notes == ()


def test_nvml_not_available_is_left_out_with_a_note():
    r = read("axolotl-998.txt")
    assert r.in_use_bytes is None and r.other_processes == ((2954422, None),)
    assert sum("NVML's 'not available'" in n for n in r.notes) == 2


# ---- the diagnosis --------------------------------------------------------------------------------------------

LLAMA = load_preset("llama-3.1-8b")
TRL = resolve_setup("trl", method="lora", batch=4, seq_len=2048)


def causes(name: str, **kw) -> list[str]:
    return [c.key for c in diagnose_oom(read(name), **kw).causes]


def test_other_processes_and_fragmentation():
    d = diagnose_oom(read("trl-4237.txt"))
    assert [c.key for c in d.causes] == ["other_processes", "fragmentation"]
    assert d.expandable_segments and [a.key for a in d.actions] == ["stop_other_processes", "expandable_segments"]
    assert d.short_by_bytes == GiB(2.11) - GiB(1.65)
    # 19066 (6.79 GiB) covers PyTorch's 4.50 + 2.14 GiB: this process; the other three are the others
    others = next(c for c in d.causes if c.key == "other_processes").text
    assert "19069, 19060, 19063" in others and "19066" not in others
    assert [x.id for x in d.matches] == ["t4"]


def test_one_process_line_in_a_container_is_this_process():
    assert causes("unsloth-1144.txt") == ["run_too_big"]


def test_a_full_card_is_the_runs_fault_not_fragmentation():
    assert causes("axolotl-998.txt") == ["run_too_big"]  # 121 MiB of pieces on a full 24 GiB card
    assert causes("axolotl-1717.txt") == ["run_too_big"]


def test_a_request_larger_than_the_device():
    d = diagnose_oom(read("axolotl-971.txt"))
    assert [c.key for c in d.causes] == ["request_exceeds_device"]
    assert "a100-80gb" in [x.id for x in d.matches]  # 79.15 GiB by CUDA, 80 GiB by nvidia-smi


def test_nvml_zero_bytes_is_not_believed():
    d = diagnose_oom(read("mistral-finetune-69.txt"))
    assert "other_processes" not in [c.key for c in d.causes]  # "0 bytes in use" beside 20.52 GiB allocated


def test_mps_limit_and_the_mac_it_means():
    d = diagnose_oom(read("pytorch-152351.txt"))
    assert [c.key for c in d.causes] == ["mps_watermark", "mps_other_allocations"]
    assert d.matches[0].id == "mac-16gb" and d.capacity_inferred  # 18.13 / 1.7 = 10.66 GiB = 2/3 of 16 GiB
    assert d.short_by_bytes == GiB(11.14) + GiB(6.65) + MiB(375.40) - GiB(18.13)
    assert [x.id for x in mps_matches(GiB(20.40))][:2] == ["mac-18gb", "mac-16gb"]  # 12 GiB working set


def test_metal_messages():
    assert causes("lmstudio-2240.txt") == ["metal_buffer_limit"]
    assert causes("mlx-lm-1185.txt") == ["metal_resource_limit"]
    assert causes("mlx-lm-236.txt") == ["metal_out_of_memory"]
    assert causes("mlx-examples-481.txt") == ["metal_out_of_memory", "no_figures"]


def test_cuda_totals_match_the_catalog_within_the_drivers_reserve():
    assert [d.id for d in cuda_matches(GiB(14.74))] == ["t4"]
    assert [d.id for d in cuda_matches(GiB(23.68))] == ["rtx-3090", "rtx-4090"]  # 3090: 23.55 GiB, 4090: 23.51
    assert cuda_matches(GiB(79.15))[0].id == "a100-80gb"  # its own figure; the H100 (79.11 GiB) comes second
    assert cuda_matches(GiB(79.11))[0].id == "h100-80gb"
    assert cuda_matches(GiB(2.00)) == ()


def test_every_cause_id_is_listed():
    seen = set()
    for name in REAL:
        seen |= set(causes(name))
    assert seen <= set(CAUSES)


def test_priced_on_the_messages_device_with_the_remedies():
    d = diagnose_oom(read("trl-4237.txt"), LLAMA, TRL)
    assert d.device.id == "t4" and d.estimate is not None and d.advice is not None
    assert d.verdict.fits is False and d.verdict.usable_bytes == get_device("t4").usable_bytes
    assert "The message agrees" in d.comparison
    assert any(r.applicable for r in d.advice.remedies)


def test_the_comparison_names_each_figure_of_the_estimate():
    """Two figures of the estimate in one sentence ('19.20 GB … the estimate's 17.81 GB') each say what they are:
    the total with the CUDA context and the allocator's slack, and the tensors at the peak that the message's own
    figure is compared with."""
    from estimator.memory.price import estimate
    from estimator.units import fmt_both

    d = diagnose_oom(read("trl-4237.txt"), LLAMA, resolve_setup("trl"))
    est = estimate(LLAMA, resolve_setup("trl"), device_capacity=get_device("t4").runtime_total_bytes)
    total, tensors = fmt_both(est.total_bytes, 2), fmt_both(est.tensor_bytes, 2)
    assert total != tensors
    text = d.comparison
    assert f"{total} at the peak, counting the CUDA context and the allocator's slack; too big" in text
    assert f"the estimate's {tensors} of tensors at its peak (without the context and the slack" in text
    fits = diagnose_oom(read("axolotl-1717.txt"), LLAMA, resolve_setup("trl")).comparison  # fits by the estimate
    assert "of tensors at its peak (without the context and the slack, as the message counts)" in fits
    mac = diagnose_oom(read("pytorch-152351.txt"), LLAMA, resolve_setup("trl")).comparison
    assert "counting the Metal context and the allocator's slack" in mac


def test_a_custom_device_when_the_catalog_has_none():
    d = diagnose_oom(read("pytorch-55004.txt"), LLAMA, TRL)
    assert d.device.id == "custom" and d.device.capacity_bytes == int(round(GiB(2.00) / 1e9, 2) * 1e9)


def test_the_sidebars_device_when_the_message_names_none():
    mac = get_device("mac-64gb")
    d = diagnose_oom(read("mlx-lm-236.txt"), LLAMA, TRL, fallback=mac)
    assert d.device is mac and d.estimate is not None


def test_the_logits_are_recognised():
    tokens, vocab = TRL.tokens, LLAMA.vocab_size
    text = (f"CUDA out of memory. Tried to allocate {tokens * vocab * 4 / 2**30:.2f} GiB. GPU 0 has a total capacity "
            "of 23.65 GiB of which 1.00 GiB is free. Of the allocated memory 20.00 GiB is allocated by PyTorch, and "
            "100.00 MiB is reserved by PyTorch but unallocated.")
    assert "logits" in [c.key for c in diagnose_oom(parse_oom(text), LLAMA, TRL).causes]


# ---- the CLI --------------------------------------------------------------------------------------------------

def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_oom_json_has_the_bytes_and_the_diagnosis(capsys):
    code, out, err = run_cli(["--model", "llama-3.1-8b", "--batch", "4", "--oom-log", str(DATA / "trl-4237.txt"),
                              "--json"], capsys)
    assert code == 0, err
    oom = json.loads(out)["oom"]
    assert oom["requested_bytes"] == GiB(2.11) and oom["capacity_bytes"] == GiB(14.74)
    assert oom["free_bytes"] == GiB(1.65) and oom["allocated_bytes"] == GiB(4.50)
    assert oom["reserved_unallocated_bytes"] == GiB(2.14) and "in_use_bytes" not in oom
    diag = oom["diagnosis"]
    assert diag["causes"] == ["other_processes", "fragmentation"] and diag["matched_devices"] == ["t4"]
    assert diag["priced_on"] == "t4" and diag["estimate_fits"] is False and diag["advice"]["remedies"]


def test_cli_oom_text(capsys):
    code, out, _err = run_cli(["--model", "llama-3.1-8b", "--oom-log", str(DATA / "axolotl-998.txt")], capsys)
    assert code == 0
    assert "out-of-memory message: PyTorch CUDA caching allocator" in out
    assert "cause [run_too_big]" in out and "note: this process's use reads 17179869184.00 GiB" in out


@pytest.mark.parametrize(("content", "expected"), [
    (b"hello, nothing here\n", "no out-of-memory message found"),
    (b"\x00\x01\x02\xff" * 100, "does not look like text"),
    (b"x" * (MAX_TEXT_CHARS + 1), "the limit is 1,000,000"),
])
def test_cli_refuses_a_bad_log_in_one_line(tmp_path, capsys, content, expected):
    path = tmp_path / "log.txt"
    path.write_bytes(content)
    code, out, err = run_cli(["--oom-log", str(path)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and expected in err


def test_cli_missing_log(capsys):
    code, _out, err = run_cli(["--oom-log", "/nonexistent/oom.txt"], capsys)
    assert code == 2 and "cannot read --oom-log" in err and len(err.strip().splitlines()) == 1


# ---- the page's builders (pure) --------------------------------------------------------------------------------

def test_the_chart_splits_the_device_as_the_message_says():
    from ui.page_charts import oom_chart, oom_segments

    r = read("trl-4237.txt")
    parts = oom_segments(r)
    assert parts["allocated"] == GiB(4.50) and parts["unallocated"] == GiB(2.14) and parts["free"] == GiB(1.65)
    assert parts["others"] == GiB(14.74) - GiB(1.65) - GiB(4.50) - GiB(2.14)  # other processes, context, driver
    assert sum(parts.values()) == GiB(14.74)
    fig = oom_chart(r)
    bars = {t.name: t.x[0] for t in fig.data}
    assert bars["Requested"] == pytest.approx(GiB(2.11) / 1e9)
    assert sum(v for k, v in bars.items() if k != "Requested") == pytest.approx(GiB(14.74) / 1e9)
    mps = oom_segments(read("pytorch-152351.txt"))  # MPS: the limit split into tensors, other allocations, the rest
    assert mps["others"] == GiB(6.65) and sum(mps.values()) == GiB(18.13)
    assert oom_segments(read("mlx-lm-236.txt")) == {}  # no total: no bar


def test_a_partial_message_says_what_it_lacks_and_nothing_is_worked_out_from_it():
    """Only "Tried to allocate 2.00 GiB": no total, no free memory, no split; the finding names what is missing
    instead of an empty "Why it failed". With the total and the free memory but not PyTorch's split, the memory in
    use is not blamed on other processes (it was 84 GB of "other processes" on an 80 GB card)."""
    from ui.page_charts import oom_chart, oom_segments

    bare = parse_oom("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert bare.missing == ("capacity_bytes", "free_bytes", "allocated_bytes", "reserved_unallocated_bytes")
    d = diagnose_oom(bare, LLAMA, TRL, fallback=get_device("rtx-4090"))
    assert [c.key for c in d.causes] == ["partial_message"] and d.short_by_bytes is None
    text = d.causes[0].text
    assert "Total capacity (as the runtime reports it); Free on the device; Allocated by PyTorch" in text
    assert "nor by how much the device fell short" in text
    assert oom_segments(bare) == {}
    cut = parse_oom("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
                    "which 1.20 GiB is free.")
    parts = oom_segments(cut)
    assert parts == {"in_use": GiB(79.19) - GiB(1.20), "free": GiB(1.20)}  # not "others": the split is unknown
    assert {t.name for t in oom_chart(cut).data} == {"In use (the message does not say by what)", "Free", "Requested"}
    d = diagnose_oom(cut)
    assert [c.key for c in d.causes] == ["partial_message"] and d.short_by_bytes == GiB(2.00) - GiB(1.20)
    assert "Allocated by PyTorch (live tensors); Reserved by PyTorch but unallocated." in d.causes[0].text
    assert "fell short" not in d.causes[0].text  # the shortfall is known: request less free
    no_free = parse_oom("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB")
    assert oom_segments(no_free) == {"unknown": GiB(79.19)}  # not "all free"
    # a cut message whose other figures still say something: they are kept, and the lack is named after them
    assert causes("trl-5750.txt") == ["other_processes", "partial_message"]
    mps = parse_oom("MPS backend out of memory (MPS allocated: 11.14 GB, other allocations: 6.65 GB, max allowed: "
                    "18.13 GB). Tried to allocate 375.40 MB on private pool.")
    assert oom_segments(mps)["free"] == GiB(18.13) - GiB(11.14) - GiB(6.65) and mps.complete


def test_the_chart_keeps_its_row_labels_and_its_legend_above_the_plot():
    from ui.page_charts import oom_chart_spec

    layout = oom_chart_spec(read("trl-4237.txt"))["layout"]
    assert layout["yaxis"]["automargin"] and layout["xaxis"]["automargin"]  # "Device at the failure" not cut to "e"
    assert layout["legend"]["y"] >= 1 and layout["legend"]["yanchor"] == "bottom"  # not on the axis title below


def test_the_figures_table_lists_what_the_message_gives():
    from ui.report import oom_frame

    frame = oom_frame(read("axolotl-998.txt"))
    assert list(frame["figure"][:2]) == ["Requested (the allocation that failed)",
                                         "Total capacity (as the runtime reports it)"]
    assert frame["bytes"].iloc[0] == MiB(20.00)
    assert "Process 2954422 (NVML) — not reported" in list(frame["figure"])
    assert "In use by this process (all of it, NVML)" not in list(frame["figure"])  # NVML's figure left out
