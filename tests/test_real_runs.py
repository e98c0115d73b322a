"""The published real runs (validation/data/real_runs.csv): every row parses and replays through the public estimator,
and the report's figures (verdicts, false fits first, peak errors per metric) are recomputed here from the rows."""

import csv
import statistics

import pytest

from estimator import GB, get_device
from validation.real_runs import (
    MEASURES,
    METRIC_GROUPS,
    REAL_RUNS,
    UNITS,
    format_real_runs,
    parse_versions,
    real_run_rows,
    real_runs_report,
    replay,
    row_job,
)


@pytest.fixture(scope="module")
def raw():
    with REAL_RUNS.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def report():
    return real_runs_report()


def test_every_row_parses_and_replays(raw):
    assert len(raw) >= 40
    assert len({r["id"] for r in raw}) == len(raw)
    for r in raw:
        parse_versions(r["versions"])  # every entry a pinned release
        spec, setup, trainer = row_job(r)
        assert setup.stack == r["stack"] and setup.method == r["method"], r["id"]
        if r["batch"]:
            assert setup.batch == int(r["batch"]), r["id"]
        if r["device"]:
            get_device(r["device"])
        assert r["source"] and r["quote"], r["id"]
        out = replay(r)
        assert out["estimated_bytes"] > 0, r["id"]


def test_both_outcomes_and_several_stacks(raw):
    oom = [r for r in raw if r["outcome"] == "oom"]
    assert len(oom) >= 10 and all(r["device"] for r in oom)
    assert len({r["stack"] for r in raw}) >= 6
    assert {r["measure"] for r in raw if r["measured_value"]} <= set(MEASURES)


def test_report_figures_recomputed_from_the_rows(raw, report):
    rows = real_run_rows()
    assert report["n"] == len(raw) == len(rows)
    assert sum(c["fits"] + c["oom"] for c in report["by_stack"].values()) == len(raw)
    for key, rows_in in (("modelled", [r for r in rows if not r["unmodelled"]]),
                         ("not_modelled", [r for r in rows if r["unmodelled"]])):
        part = report[key]
        judged = []
        for r, row in ((r, next(x for x in raw if x["id"] == r["id"])) for r in rows_in):
            if not row["device"]:
                assert r["verdict"] is None
                continue
            fits = r["estimated_bytes"] <= get_device(row["device"]).usable_bytes
            expect = "right" if fits == (row["outcome"] == "fits") else ("false fit" if fits else "false alarm")
            assert r["verdict"] == expect, r["id"]
            judged.append(expect)
        v = part["verdicts"]
        assert (v["false fit"], v["false alarm"], v["right"], v["judged"]) == (
            judged.count("false fit"), judged.count("false alarm"), judged.count("right"), len(judged))
        for group, measures in METRIC_GROUPS.items():
            errs = []
            for r in rows_in:
                row = next(x for x in raw if x["id"] == r["id"])
                if row["measure"] in measures:
                    measured = float(row["measured_value"]) * UNITS[row["measured_unit"]]
                    compared = r["tensor_bytes"] if row["measure"] == "max_allocated" else r["estimated_bytes"]
                    errs.append(100 * (compared - measured) / measured)
            if errs:
                e = part["errors"][group]
                assert e["n"] == len(errs)
                assert e["median_abs_pct"] == pytest.approx(statistics.median(abs(x) for x in errs))
                assert e["worst_pct"] == pytest.approx(max(errs, key=abs))
            else:
                assert group not in part["errors"]
    text = format_real_runs(report)
    assert f"false fits {report['modelled']['verdicts']['false fit']}" in text


def test_a_false_fit_is_an_oom_row_the_estimate_fits():
    for r in real_run_rows():
        if r["verdict"] == "false fit":
            assert r["outcome"] == "oom" and r["estimated_bytes"] <= r["usable_bytes"]
        if r["verdict"] == "false alarm":
            assert r["outcome"] == "fits" and r["estimated_bytes"] > r["usable_bytes"]


def test_trl_016_dpo_on_an_a100_80gb_is_no_longer_a_false_fit():
    """TRL 0.16's DPO quick start (fp32, batch 8 × 1,024) ran out of memory on an A100 80GB (huggingface/trl#3168).
    Its 85.35 GB estimate was a close call against nvidia-smi's 81,920 MiB (85.9 GB); against the 79.15 GiB (84.99 GB)
    PyTorch can allocate on that card it does not fit: the verdict is right, and no run at a modelled release is a
    false fit."""
    row = {r["id"]: r for r in real_run_rows()}["trl-3168-qwen2.5-0.5b-dpo"]
    a100 = get_device("a100-80gb")
    assert row["usable_bytes"] == a100.usable_bytes == 81_050 * 2**20 < a100.capacity_bytes
    assert row["usable_bytes"] < row["estimated_bytes"] < a100.capacity_bytes
    assert row["estimated_bytes"] == pytest.approx(85.35 * GB, abs=0.005 * GB)
    assert row["verdict"] == "right" and row["band"] in ("borderline", "too big")
    assert [r["id"] for r in real_run_rows() if r["verdict"] == "false fit" and not r["unmodelled"]] == []


def test_each_row_is_priced_at_the_releases_it_ran():
    """Issue 28: the `versions` column goes into resolve_setup as pins; a release outside the stack's modelled range
    is the estimator's own line (the row priced at the newest releases), everything inside is priced at its
    releases. Fails before the wiring (the report had its own table of forks and priced every row at the newest)."""
    from estimator import estimate, load_preset
    from estimator.job.stack import resolve_setup

    rows = {r["id"]: r for r in real_run_rows()}
    # mlx 0.24 ran training attention through the fused kernel (mlx_no_sdpa_in_grad): priced on that side
    mlx = rows["mlx-lm-47-llama-3.2-1b"]
    assert mlx["unmodelled"] == [] and mlx["priced_at"]["mlx"]["version"] == "0.24.0"
    spec = load_preset("llama-3.2-1b")
    job = dict(method="lora", precision="bf16", batch=4, seq_len=4096, grad_ckpt=False, lora_rank=8, lora_layers=16)
    old = estimate(spec, resolve_setup("mlx", pins=("mlx==0.24.0", "mlx-lm==0.22.1"), **job))
    assert mlx["estimated_bytes"] == old.total_bytes < 0.6 * estimate(spec, resolve_setup("mlx", **job)).total_bytes
    # a release the stack does not model: the estimator's own line, and the newest releases priced
    xtuner = rows["xtuner-mixtral-qlora-a100"]
    assert xtuner["priced_at"] is None and xtuner["unmodelled"] == [
        "transformers 4.36.2 (--installed transformers==4.36.2) is outside the releases the HF Trainer stack is "
        "modelled for: 4.46.0 to 5.24.0"]
    assert rows["fsdpqlora-02"]["unmodelled"][0].startswith("torch 2.2.1 ")
    assert rows["litgpt-hub-llama-2-7b-full-oom"]["unmodelled"][0].startswith("litgpt 0.4.0.dev0 ")
    # TRL, ms-swift and LLaMA-Factory runs use their own stacks, so their releases are read (not ignored pins of the
    # HF Trainer stack): TRL 0.16's DPO and 0.17's GRPO are priced on those releases' heads
    for rid, release in (("trl-3168-qwen2.5-0.5b-dpo", "0.16.0"), ("trl-3456-qwen3-0.6b", "0.17.0")):
        assert rows[rid]["stack"] == "trl" and rows[rid]["priced_at"]["trl"]["version"] == release, rid
        assert rows[rid]["ignored_pins"] == [], rid
    assert rows["msswift-llama3-8b-lora"]["unmodelled"][0].startswith("ms-swift 2.0.3 ")
    assert rows["llamafactory-5545-llama3.1-8b-qlora-oom"]["unmodelled"][0].startswith("llamafactory 0.9.0 ")
    # the MLX run on mlx 0.24 peaked at about half of today's model
    assert mlx["measured_bytes"] == pytest.approx(69.810 * GB)


@pytest.mark.parametrize("text", ["transformers>=4.46", "trl", "trl==0.16.0;trl==0.17.0", "not a version==x"])
def test_bad_versions_are_refused(text):
    with pytest.raises(ValueError):
        parse_versions(text)


def test_bad_rows_are_refused(raw):
    row = dict(next(r for r in raw if r["outcome"] == "oom"))
    with pytest.raises(ValueError):
        replay({**row, "outcome": "maybe"})
    with pytest.raises(ValueError):
        replay({**row, "device": ""})  # an out-of-memory row needs its card
    with pytest.raises(ValueError):
        replay({**row, "settings": "no_such_field=1"})
    fit = dict(next(r for r in raw if r["measured_value"]))
    with pytest.raises(ValueError):
        replay({**fit, "measure": "a guess"})


def test_long_sequence_full_fine_tuning_on_trl_before_1_7_is_priced_on_full_logits():
    """Issue 28's long-sequence regime (about 2B, 16k tokens, full fine-tuning without checkpointing, 80 GB): the TRL
    stack prices TRL 1.16's chunked head, where the whole likely range stays under an 80 GB card; TRL before 1.7.0 ran
    SFT on full-vocabulary fp32 logits (loss_type 'nll', trl b58947c7e / PR #5846 made 'chunked_nll' the default),
    12 x T x V bytes at the loss backward: `trl==1.6.0` given, the estimate prices that and does not fit."""
    from estimator import estimate, get_device, load_preset
    from estimator.job.stack import resolve_setup

    spec = load_preset("qwen2.5-1.5b")
    job = dict(method="full", precision="bf16", batch=1, seq_len=16384, grad_ckpt=False)
    chunked = estimate(spec, resolve_setup("trl", **job))
    full_logits = estimate(spec, resolve_setup("trl", pins=("trl==1.6.0",), **job))
    card = get_device("h100-80gb").usable_bytes
    assert chunked.high_bytes < card < full_logits.total_bytes  # fits at its high end; does not fit
    # the loss alone: 12 x 16,384 x 151,936 bytes ~ 29.9 GB more at the loss backward
    assert full_logits.total_bytes - chunked.total_bytes > 25e9
    assert full_logits.total_bytes == estimate(spec, resolve_setup("trl", loss="standard", **job)).total_bytes


def test_readme_figures_are_the_reports(report):
    """validation/data/README.md's 'Real-run figures' quote the report, each part's verdicts and every peak-error
    group it has: recomputed here so they cannot drift."""
    from validation.real_runs import ROOT

    text = (ROOT / "validation" / "data" / "README.md").read_text(encoding="utf-8").split("### Real-run figures")[1]
    text = " ".join(text.split())
    modelled, not_modelled = text.split("at a release not modelled (", 1)
    for key, part in (("modelled", modelled), ("not_modelled", not_modelled)):
        v = report[key]["verdicts"]
        assert (f"({report[key]['n']} runs): **false fits {v['false fit']}, false alarms {v['false alarm']}, right "
                f"{v['right']} of {v['judged']} judged**") in (part if key == "modelled" else "(" + part), key
        for group, e in report[key]["errors"].items():
            worst = f"{e['worst_pct']:+.1f}".replace("-", "−")
            line = f"{group} n={e['n']} median {e['median_abs_pct']:.1f} % worst {worst} %"
            assert line in part, (key, line)
