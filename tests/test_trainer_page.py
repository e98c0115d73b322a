"""The trainer controls end to end without a browser: the chart builders' reference/generation segments, the
TRL snippets per trainer, the How page's Preference & RL section, and the calculator page (AppTest) with
trainer links, bad link values and combinations TRL refuses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from estimator import TrainerSetup, estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.options.trainers import TRAINER_IDS, TRAINERS
from estimator.report.snippets.trainers import trainer_snippet
from tests.test_calculator_page import chart, headline, run, unescape
from ui.charts import COMPONENT_COLORS, memory_bar, segment_bytes, segments
from ui.report import breakdown_frame
from ui.trainer_inputs import how_section_markdown, resolve_trainer

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
QWEN = load_preset("qwen2.5-0.5b")
LLAMA = load_preset("llama-3.1-8b")
H100 = get_device("h100-80gb")
RTX = get_device("rtx-4090")


def trl(**kw):
    return resolve_setup("trl", **kw)


# ---- chart builders (pure) -------------------------------------------------------------------------------

def test_sft_chart_keeps_its_five_components():
    est = estimate(QWEN, trl())
    assert [s.component for s in segments([est])] == ["weights", "weights", "gradients", "optimizer",
                                                       "activations", "overhead"]


def test_reference_and_generation_segments_in_their_own_colours():
    dpo = estimate(QWEN, trl(method="full", batch=2), trainer=TrainerSetup("dpo"))
    grpo = estimate(QWEN, trl(batch=8), trainer=TrainerSetup("grpo", generation="vllm-colocate"),
                    device_capacity=H100.runtime_total_bytes)
    segs = segments([dpo, grpo])
    by_comp = {s.component: s for s in segs}
    assert [s.component for s in segs] == ["weights", "weights", "reference", "gradients", "optimizer",
                                           "activations", "generation", "overhead"]
    assert by_comp["reference"].color == COMPONENT_COLORS["reference"] == "#994F00"
    assert by_comp["generation"].color == COMPONENT_COLORS["generation"] == "#AA44FF"
    assert len(set(COMPONENT_COLORS.values())) == len(COMPONENT_COLORS)
    assert segment_bytes(dpo, by_comp["reference"]) == 2 * QWEN.params_total
    assert segment_bytes(dpo, by_comp["generation"]) == 0.0
    assert segment_bytes(grpo, by_comp["generation"]) == pytest.approx(0.3 * H100.runtime_total_bytes)
    for est in (dpo, grpo):
        assert sum(segment_bytes(est, s) for s in segs) == pytest.approx(est.total_bytes)
    fig = memory_bar(grpo, H100)
    names = [t.name for t in fig.data if t.type == "bar"]
    assert "Generation (KV cache / vLLM)" in names
    gen_trace = next(t for t in fig.data if t.name == "Generation (KV cache / vLLM)")
    assert gen_trace.x[0] == pytest.approx(0.3 * H100.runtime_total_bytes / 1e9)
    assert "vLLM reservation" in gen_trace.hovertext[0]


def test_breakdown_lists_the_reference():
    frame = breakdown_frame(estimate(QWEN, trl(method="full", batch=2), trainer=TrainerSetup("dpo")))
    row = frame[frame["component"] == "Reference model"]
    assert list(row["bytes"]) == [2 * QWEN.params_total]


# ---- snippets --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("trainer", [t for t in TRAINER_IDS if t != "sft"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_each_trainer_snippet_compiles_and_matches_the_estimate(trainer, method):
    tr = TrainerSetup(trainer)
    code = trainer_snippet(QWEN, trl(method=method, batch=8), tr)
    compile(code, "train.py", "exec")
    opt = TRAINERS[trainer]
    assert f"training_args = {opt.config_class}(" in code and f"trainer = {opt.trainer_class}(" in code
    assert f"from {opt.import_path} import {opt.config_class}, {opt.trainer_class}" in code
    assert "per_device_train_batch_size=8," in code and "TRL 1.16.0" in code
    assert ("peft_config=peft_config" in code) == (method != "full")
    if trainer == "grpo":
        assert "num_generations=8," in code and "max_completion_length=512," in code and "use_vllm=False" in code
    else:
        assert "max_length=2048," in code
    if opt.beta_default is not None:
        assert f"beta={opt.beta_default}," in code


def test_grpo_vllm_snippet():
    tr = TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=0.4, vllm_sleep=True, beta=0.04)
    code = trainer_snippet(QWEN, trl(batch=4), replace_gens(tr, 4))
    for line in ('vllm_mode="colocate",', "vllm_gpu_memory_utilization=0.4,", "vllm_enable_sleep_mode=True,",
                 "beta=0.04,", "num_generations=4,"):
        assert line in code


def replace_gens(tr: TrainerSetup, n: int) -> TrainerSetup:
    from dataclasses import replace

    return replace(tr, num_generations=n)


def test_dpo_snippet_says_precompute_and_simpo_loss_type():
    assert "precompute_ref_log_probs=True," in trainer_snippet(QWEN, trl(), TrainerSetup("dpo", precompute_ref=True))
    assert 'loss_type="simpo",' in trainer_snippet(QWEN, trl(), TrainerSetup("simpo"))
    assert "num_labels=1" in trainer_snippet(QWEN, trl(), TrainerSetup("reward"))


def test_how_section_names_every_trainer_and_source():
    md = how_section_markdown()
    for opt in TRAINERS.values():
        assert f"| {opt.label} |" in md and opt.source.split(" (")[0] in md
    assert "TRL 1.16.0" in md and "KV = 2 × layers × KV heads × head dim" in md


# ---- resolve_trainer (the page's fallbacks, pure) ----------------------------------------------------------

def test_resolve_trainer_fallbacks():
    args = dict(beta="auto", precompute_ref=False, gens=8, prompt_len=512, completion_len=512, gen="hf", vllm_util=0.3)
    r = resolve_trainer(trl(batch=1), "kto", **args)
    assert r.setup.batch == 2 and "at least 2" in r.notes[0]
    r = resolve_trainer(trl(batch=12), "grpo", **args)
    assert r.trainer.gens == 6 and "shown with 6 generations" in r.notes[0]
    r = resolve_trainer(trl(batch=2, loss="standard"), "dpo", **args)
    assert r.setup.loss == "chunked" and "does not use the 'standard' loss" in r.notes[0]
    r = resolve_trainer(trl(), "orpo", **{**args, "precompute_ref": True, "beta": "-3"})
    assert r.trainer.precompute_ref is False and r.trainer.beta is None and "Beta must be" in r.notes[0]
    r = resolve_trainer(trl(batch=8), "dpo", **{**args, "gens": 3, "gen": "vllm-colocate"})
    assert r.trainer.num_generations is None  # GRPO-only widgets are not applied, and a note says so
    assert r.notes == ("DPO has no use for num_generations, the generation mode: not applied.",)
    r = resolve_trainer(trl(batch=8), "grpo", **{**args, "vllm_util": 0.5, "vllm_sleep": True})
    assert r.trainer.vllm_gpu_util is None and r.trainer.vllm_sleep is False
    assert r.notes == ("GRPO with hf has no use for vllm_gpu_memory_utilization, vLLM sleep mode: not applied.",)
    r = resolve_trainer(trl(batch=8), "reward", **{**args, "beta": "0.2", "precompute_ref": True})
    assert r.notes == ("Reward model has no use for beta, precompute_ref_log_probs: not applied.",)
    assert resolve_trainer(trl(batch=8), "dpo", **args).notes == ()


# ---- the calculator page (AppTest) -----------------------------------------------------------------------

def chart_traces(at: AppTest) -> dict[str, float]:
    return {t["name"]: t["x"][0] for t in chart(at)["data"] if t["type"] == "bar"}


def test_grpo_link_shows_the_trainers_estimate():
    at = run({"trainer": "grpo", "batch": "8", "model": "qwen2.5-0.5b", "device": "h100-80gb",
              "gen": "vllm-colocate", "vllm_util": "0.4", "completion_len": "1024"})
    tr = TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=0.4, completion_len=1024,
                      num_generations=8, prompt_len=512)
    est = estimate(QWEN, trl(batch=8), trainer=tr, device_capacity=H100.runtime_total_bytes)
    assert headline(at) == verdict(est.total_bytes, H100, est.high_bytes).headline
    traces = chart_traces(at)
    assert traces["Generation (KV cache / vLLM)"] == pytest.approx(0.4 * H100.runtime_total_bytes / 1e9)  # of CUDA's total, as vLLM reads it
    assert sum(traces.values()) == pytest.approx(est.total_bytes / 1e9)
    captions = " ".join(unescape(c.value) for c in at.caption)
    assert "Qwen2.5-0.5B · LoRA · bf16 · detailed estimate · GRPO" in captions
    md = "\n".join(unescape(m.value) for m in at.markdown)
    assert "Holds at batch 8 completions × (512 + 1,024) tokens, every example padded" in md  # the verdict's condition
    assert "Every length up to the model's 32,256 tokens of completion fits at batch 8." in md  # its way out
    assert "vLLM sleep mode" in md and "Lower vllm_gpu_memory_utilization" in md and "Shorter completions" in md
    assert "Longest max completion length that fits" in md
    at.session_state["trainer_script"] = True  # the trainer's script: one click away
    at.run()
    code = [c.value for c in at.code]
    assert any("GRPOConfig(" in c and "vllm_gpu_memory_utilization=0.4," in c for c in code)
    share = code[-1]
    for part in ("trainer=grpo", "gen=vllm-colocate", "vllm_util=0.4", "completion_len=1024"):
        assert part in share
    assert not at.warning  # a valid link: no notes


def test_dpo_full_link_shows_the_reference_segment():
    at = run({"trainer": "dpo", "method": "full", "model": "qwen2.5-0.5b", "batch": "2"})
    traces = chart_traces(at)
    assert traces["Reference model"] == pytest.approx(2 * QWEN.params_total / 1e9)
    est = estimate(QWEN, trl(method="full", batch=2), trainer=TrainerSetup("dpo"))
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    md = "\n".join(unescape(m.value) for m in at.markdown)
    assert "Precompute the reference log-probs" in md


def test_bad_trainer_links_fall_back_with_notes():
    # a GRPO link without a batch gets TRL's 8 (job.stack.default_settings, as the CLI): no note
    at = run({"trainer": "grpo"})
    assert at.sidebar.slider(key="batch").value == 8
    assert not any("divisible by num_generations" in unescape(w.value) for w in at.warning)
    at = run({"trainer": "grpo", "batch": "1", "gens": "abc", "completion_len": "300", "vllm_util": "7"})
    warnings = [unescape(w.value) for w in at.warning]
    assert any("'gens' was not valid; using the default (8)" in w for w in warnings)
    assert any("'completion_len' was not valid; using the default (512)" in w for w in warnings)
    assert any("'vllm_util' was not valid" in w for w in warnings)
    assert any("divisible by num_generations (8); shown with batch 8" in w for w in warnings)
    est = estimate(LLAMA, trl(batch=8), trainer=TrainerSetup("grpo", num_generations=8, prompt_len=512,
                                                             completion_len=512, generation="hf"))
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline
    at = run({"trainer": "ppo"})
    assert any("'trainer' was not valid" in unescape(w.value) for w in at.warning)
    assert headline(at) == verdict(estimate(LLAMA, trl()).total_bytes, RTX, estimate(LLAMA, trl()).high_bytes).headline


def test_kto_batch_one_and_rule_fall_back():
    assert run({"trainer": "kto"}).sidebar.slider(key="batch").value == 2  # KTO's smallest batch: the run's default
    at = run({"trainer": "kto", "batch": "1", "rule": "true"})
    warnings = [unescape(w.value) for w in at.warning]
    assert any("KTO needs a per-device batch of at least 2" in w for w in warnings)
    assert any("rule of thumb covers SFT only" in w for w in warnings)
    est = estimate(LLAMA, trl(batch=2), trainer=TrainerSetup("kto"))
    assert headline(at) == verdict(est.total_bytes, RTX, est.high_bytes).headline


def test_sft_keeps_the_users_loss():
    r = resolve_trainer(trl(loss="standard"), "sft", beta="auto", precompute_ref=False, gens=8, prompt_len=512,
                        completion_len=512, gen="hf", vllm_util=0.3)
    assert r.setup.loss == "standard" and r.notes == ()


# ---- the other pages honour the Trainer box (AppTest, opened from the entrypoint like a link) ---------------

def test_compare_prices_every_method_for_grpo():
    from estimator.job.stack import with_method
    from estimator.options.methods import METHOD_LABELS
    from tests.test_pages import metrics, open_page

    at = open_page("pages/compare.py", trainer="grpo", gens="8", model="qwen2.5-0.5b", batch="8",
                   device="h100-80gb", completion_len="1024", gen="vllm-colocate")
    tr = TrainerSetup("grpo", num_generations=8, prompt_len=512, completion_len=1024, generation="vllm-colocate",
                      vllm_gpu_util=0.3)
    shown = metrics(at)
    for method, label in METHOD_LABELS.items():
        s = with_method(trl(batch=8, seq_len=512 + 1024), method)
        grpo = estimate(QWEN, s, trainer=tr, device_capacity=H100.runtime_total_bytes).total_bytes
        assert shown[label][0] == f"{grpo / 1e9:,.1f} GB"
        # not the SFT bar: the same tokens per step, plus vLLM's reservation of 0.3 of the device
        assert grpo >= estimate(QWEN, s).total_bytes + 0.3 * H100.runtime_total_bytes
    caption = unescape(at.caption[0].value)
    assert "batch 8 × 1,536 tokens" in caption and "GRPO (TRL 1.16.0) · 8 generations · prompt 512 + completion " \
                                                   "1,024 tokens" in caption
    assert "trainer=grpo" in at.code[-1].value and "completion_len=1024" in at.code[-1].value
    assert at.selectbox(key="trainer").value == "grpo"


def test_fits_page_prices_dpo_and_notes_the_rule():
    from estimator.job.stack import with_method
    from tests.test_pages import dataframe, open_page

    at = open_page("pages/fits.py", trainer="dpo", models=["qwen2.5-0.5b", "llama-3.1-8b"], batch="2",
                   rule="true")
    assert any("rule of thumb covers SFT only" in unescape(w.value) for w in at.warning)
    table = dataframe(at, "fits_table").set_index(["Model", "Method"])
    for spec in (QWEN, LLAMA):
        for method, short in (("full", "full"), ("lora", "LoRA"), ("qlora", "QLoRA")):
            dpo = estimate(spec, with_method(trl(batch=2), method), trainer=TrainerSetup("dpo")).total_bytes
            assert table.loc[(spec.name, short), "Estimate (GB)"] == pytest.approx(dpo / 1e9)
    assert "DPO (TRL 1.16.0)" in unescape(at.caption[0].value)


def test_size_table_detailed_columns_price_the_trainer():
    from estimator import generic_spec
    from estimator.job.stack import with_method
    from tests.test_pages import dataframe, open_page

    at = open_page("pages/sizes.py", trainer="orpo", batch="2", max_len="1024")
    table = dataframe(at, "size_table").set_index("Model")
    orpo = estimate(generic_spec(7), with_method(trl(batch=2, seq_len=1024), "lora"), trainer=TrainerSetup("orpo"))
    assert table.loc["7B", "LoRA · detailed (GB)"] == pytest.approx(orpo.total_bytes / 1e9)
    assert table.loc["7B", "LoRA · rule (GB)"] == pytest.approx(2 * 7 + 3)  # the rule stays the SFT rule
    assert any("price a ORPO step" in unescape(c.value) for c in at.caption)


def test_scale_out_prices_the_dpo_reference_copy():
    from estimator.advice.search import solver_estimate_fn
    from estimator.advice.solvers import min_gpus, sharded
    from tests.test_pages import dataframe, open_page

    at = open_page("pages/scale.py", trainer="dpo", method="full", model="llama-3.1-8b", device="h100-80gb",
                   batch="2")
    table = dataframe(at, "min_gpus_table").set_index("Device")
    fn = solver_estimate_fn(TrainerSetup("dpo"))
    s = sharded(trl(method="full", batch=2), "zero3")
    dpo_n = min_gpus(LLAMA, s, H100, 64, fn)
    sft_n = min_gpus(LLAMA, s, H100, 64)
    assert dpo_n is not None and sft_n is not None and dpo_n > sft_n  # the frozen copy needs more GPUs
    assert table.loc[H100.name, "ZeRO-3 / FSDP"] == str(dpo_n)
    assert "DPO (TRL 1.16.0)" in unescape(at.caption[0].value)


def test_trainer_survives_page_switches():
    """Set DPO on the calculator, go to Compare, How and back: the Trainer box and the address keep it."""
    at = run({"model": "qwen2.5-0.5b"})
    at.selectbox(key="trainer").set_value("dpo").run()
    at.toggle(key="precompute_ref").set_value(True).run()
    for page in ("pages/compare.py", "pages/how.py", "pages/calculator.py"):
        at.switch_page(page).run()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.selectbox(key="trainer").value == "dpo", page
        assert at.toggle(key="precompute_ref").value is True, page
        assert at.query_params["trainer"] in ("dpo", ["dpo"]), page
        assert at.query_params["precompute_ref"] in ("true", ["true"]), page
    caption = " ".join(unescape(c.value) for c in at.caption)
    assert "· DPO" in caption


def test_bad_trainer_link_on_another_page_notes_and_keeps_working():
    from estimator.advice.search import solver_estimate_fn
    from estimator.advice.solvers import min_gpus, sharded
    from tests.test_pages import dataframe, open_page

    at = open_page("pages/scale.py", trainer="kto", batch="1", gens="4", vllm_util="0.5", model="qwen2.5-0.5b",
                   device="rtx-4090")
    warnings = [unescape(w.value) for w in at.warning]
    assert any("KTO needs a per-device batch of at least 2" in w for w in warnings)
    assert any("KTO has no use for num_generations, vllm_gpu_memory_utilization: not applied." in w for w in warnings)
    table = dataframe(at, "min_gpus_table").set_index("Device")
    n = min_gpus(QWEN, sharded(trl(batch=2), "none"), RTX, 64, solver_estimate_fn(TrainerSetup("kto")))
    assert table.loc[RTX.name, "DDP"] == str(n)


@pytest.mark.parametrize("sleep", [False, True])
def test_min_gpus_table_with_vllm_colocated_answers_each_device_with_its_own_reservation(sleep):
    from estimator import CATALOG
    from estimator.advice.search import solver_estimate_fn
    from estimator.advice.solvers import min_gpus, sharded
    from ui.grids import SHORT_SHARDING, min_gpus_table

    tr = TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=0.4, vllm_sleep=sleep)
    s = trl(method="full", batch=16)
    table = min_gpus_table(LLAMA, s, shardings=("none", "zero3"), trainer=tr).set_index("Device")
    answers = set()
    for device in (d for d in CATALOG if d.kind == "discrete"):
        for sharding in ("none", "zero3"):
            n = min_gpus(LLAMA, sharded(s, sharding), device, 64, solver_estimate_fn(tr, device.runtime_total_bytes))
            shown = table.loc[device.name, SHORT_SHARDING[sharding]]
            assert (shown is pd.NA and n is None) or shown == n, (device.id, sharding, shown, n)
            answers.add(n)
    assert len(answers) > 2  # the devices get different answers: the check is not vacuous
