"""Preference and RL trainers (estimator/memory/trainers.py): each trainer's terms with exact values, the bad-input
errors TRL itself raises, and properties (DPO ≥ SFT; GRPO never falls as generations or completions grow)."""

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator import TrainerSetup, estimate, load_preset, parse_config_text
from estimator.job.stack import resolve_setup
from estimator.job.trainer import fix_generations, policy_setup, trainer_json
from estimator.memory.result import component_keys
from estimator.memory.trainers import kv_cache_bytes
from estimator.options.stacks import STACK_IDS, STACKS
from estimator.options.trainers import (
    GRPO_MAX_COMPLETION_LENGTH,
    GRPO_NUM_GENERATIONS,
    TRAINER_IDS,
    TRAINERS,
    VLLM_GPU_MEMORY_UTILIZATION,
)
from tests.test_cli import run_json

ROOT = Path(__file__).resolve().parents[1]
QWEN3_06B = parse_config_text((ROOT / "validation/data/published_configs/qwen3-0.6b.json").read_bytes(), name="qwen3-0.6b")
QWEN25 = load_preset("qwen2.5-0.5b")


def trl(method: str = "lora", **kw):
    return resolve_setup("trl", method=method, **kw)


def test_defaults_match_trl_1_16():
    tr = TrainerSetup("grpo")
    assert (tr.gens, tr.completion_length, tr.vllm_util, tr.beta_value, tr.generation_mode) == (8, 512, 0.3, 0.0, "hf")
    assert GRPO_NUM_GENERATIONS == 8 and GRPO_MAX_COMPLETION_LENGTH == 512 and VLLM_GPU_MEMORY_UTILIZATION == 0.3
    assert TrainerSetup("dpo").beta_value == 0.1
    assert {k: TRAINERS[k].sequences for k in TRAINER_IDS} == {
        "sft": 1, "dpo": 2, "orpo": 2, "simpo": 2, "kto": 1, "grpo": 1, "reward": 2}
    for opt in TRAINERS.values():
        assert "1.16.0" in opt.source


def test_sft_trainer_is_the_sft_estimate():
    s = trl(batch=2, seq_len=512)
    assert estimate(QWEN25, s, trainer=TrainerSetup("sft")) == estimate(QWEN25, s)


def test_dpo_full_adds_a_reference_copy_and_doubles_the_batch():
    s = trl("full", batch=2, seq_len=512)
    dpo = estimate(QWEN25, s, trainer=TrainerSetup("dpo"))
    assert dpo.components_bytes["reference"] == QWEN25.params_total * 2  # bf16 copy
    assert "generation" not in dpo.components_bytes
    assert policy_setup(s, TrainerSetup("dpo")).batch == 4
    assert sum(dpo.components_bytes.values()) == pytest.approx(dpo.total_bytes)
    assert component_keys(dpo)[:2] == ("weights", "reference")
    # precompute_ref_log_probs removes the copy; the SFT(2B) estimate is what remains
    pre = estimate(QWEN25, s, trainer=TrainerSetup("dpo", precompute_ref=True))
    assert "reference" not in pre.components_bytes
    assert pre.total_bytes == pytest.approx(estimate(QWEN25, replace(s, batch=4)).total_bytes)


def test_lora_reference_has_no_copy_but_a_reference_forward_phase():
    est = estimate(QWEN25, trl(batch=2, seq_len=512), trainer=TrainerSetup("dpo"))
    assert "reference" not in est.components_bytes
    assert "reference forward" in [p.name for p in est.phases]


def test_orpo_builds_full_logits():
    s = trl(batch=1, seq_len=1024)
    est = estimate(QWEN25, s, trainer=TrainerSetup("orpo"))
    assert policy_setup(s, TrainerSetup("orpo")).loss == "standard"
    assert est.peak_phase == "loss backward"
    # LoRA under autocast: bf16 logits (2 B) + fp32 row log-softmax (4 B) + fp32 chosen-half cross-entropy
    # (4 B × ½) over 2 × 1024 tokens × vocabulary (traced, calibration/trainer_trace.py)
    kept = next(x for x in est.details if x.key == "activations.logits")
    assert kept.bytes == (2 + 4 * 1.5) * 2048 * QWEN25.vocab_size
    simpo = estimate(QWEN25, s, trainer=TrainerSetup("simpo"))
    assert next(x for x in simpo.details if x.key == "activations.logits").bytes == 6 * 2048 * QWEN25.vocab_size


def test_reward_model_has_no_vocabulary_logits():
    s = trl(batch=2, seq_len=512)
    reward = estimate(QWEN25, s, trainer=TrainerSetup("reward"))
    assert not [x for x in reward.details if x.key in ("activations.loss", "activations.logits", "activations.loss_backward")]
    assert reward.total_bytes < estimate(QWEN25, s, trainer=TrainerSetup("dpo")).total_bytes


def test_grpo_kv_cache_is_the_formula():
    s = trl(batch=8, seq_len=128)
    tr = TrainerSetup("grpo", prompt_len=256, completion_len=256)
    est = estimate(QWEN3_06B, s, trainer=tr)
    gen = next(p for p in est.phases if p.key == "generation")
    # 2 (K, V) × 28 layers × 8 KV heads × 128 × 2 B × 8 sequences × 511 cached tokens (the last is never fed)
    assert gen.generation == 2 * 28 * 8 * 128 * 2 * 8 * 511 == kv_cache_bytes(QWEN3_06B, s, 8, 511)
    assert policy_setup(s, tr).seq_len == 512


def test_grpo_long_generation_peaks_in_generation():
    # 8 steps per generation: 64 sequences in flight while each training micro-batch has 8
    est = estimate(QWEN3_06B, trl(batch=8, grad_accum=8), trainer=TrainerSetup("grpo", completion_len=8192))
    assert est.peak_phase == "generation"
    assert est.components_bytes["generation"] > 0


def test_vllm_colocate_reserves_a_fraction_of_the_device():
    s = trl(batch=8)
    tr = TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=0.5)
    est = estimate(QWEN25, s, trainer=tr, device_capacity=80e9)
    assert est.components_bytes["generation"] == 40e9
    asleep = estimate(QWEN25, s, trainer=replace(tr, vllm_sleep=True), device_capacity=80e9)
    assert asleep.total_bytes < est.total_bytes  # released during training
    server = estimate(QWEN25, s, trainer=TrainerSetup("grpo", generation="vllm-server"))
    assert "generation" not in server.components_bytes
    with pytest.raises(ValueError, match="choose a device"):
        estimate(QWEN25, s, trainer=tr)


def test_vllm_sleep_mode_holds_the_reservation_only_while_generating():
    # vllm_generation.py (TRL 1.16.0): llm.sleep(level=2) after each generate discards weights and KV cache
    s = trl(batch=8)
    tr = TrainerSetup("grpo", generation="vllm-colocate", vllm_gpu_util=0.3)
    awake = {p.name: p.generation for p in estimate(QWEN25, s, trainer=tr, device_capacity=80e9).phases}
    asleep = {p.name: p.generation for p in estimate(QWEN25, s, trainer=replace(tr, vllm_sleep=True),
                                                      device_capacity=80e9).phases}
    assert set(awake.values()) == {24e9}
    assert asleep.pop("generation") == 24e9 and set(asleep.values()) == {0.0} and len(asleep) >= 4


def test_reward_model_under_zero3_gathers_the_input_embedding():
    llama = load_preset("llama-3.1-8b")  # untied: the reward model drops lm_head but keeps the V × H embedding
    s = trl("full", gpus=8, sharding="zero3")
    est = estimate(llama, s, trainer=TrainerSetup("reward"))
    vh, layer = llama.vocab_size * llama.hidden_size, llama.layer_linear_params
    params = llama.params_total - vh + llama.hidden_size  # the 1-output score head replaces lm_head
    # sharded weights + the gathered units as for SFT: the embedding (V × H) and the prefetched layer, bf16
    assert est.components_bytes["weights"] == pytest.approx(2 * params / 8 + 2 * (vh + layer))
    gathered = next(x for x in est.details if x.key == "weights.embedding_gathered")
    assert gathered.bytes == 2 * (vh - layer)
    assert not any("not counted" in n for n in est.notes)


def test_grpo_beta_loads_a_reference_for_full_only():
    s = trl("full", batch=8)
    assert "reference" not in estimate(QWEN25, s, trainer=TrainerSetup("grpo")).components_bytes
    assert estimate(QWEN25, s, trainer=TrainerSetup("grpo", beta=0.04)).components_bytes["reference"] > 0
    assert "reference" not in estimate(QWEN25, trl(batch=8), trainer=TrainerSetup("grpo", beta=0.04)).components_bytes


@pytest.mark.parametrize(("setup_kw", "tr", "match"), [
    ({"batch": 1}, TrainerSetup("kto"), "batch of at least 2"),
    ({"batch": 4}, TrainerSetup("grpo"), "divisible by num_generations"),
    ({"batch": 6}, TrainerSetup("grpo", num_generations=4), r"batch 6 .* = 6\)"),
    ({"batch": 4, "loss": "standard"}, TrainerSetup("dpo"), "fused chunked head"),
])
def test_trl_refuses(setup_kw, tr, match):
    with pytest.raises(ValueError, match=match):
        estimate(QWEN25, trl(**setup_kw), trainer=tr)


@pytest.mark.parametrize(("kw", "match"), [
    ({"trainer": "ppo"}, "trainer must be one of"),
    ({"trainer": "orpo", "precompute_ref": True}, "no reference log-probs"),
    ({"trainer": "dpo", "num_generations": 4}, "GRPO option"),
    ({"trainer": "reward", "beta": 0.1}, "has no beta"),
    ({"trainer": "grpo", "num_generations": 1}, "at least 2 completions"),
    ({"trainer": "grpo", "vllm_gpu_util": 0.5}, "colocate mode only"),
    ({"trainer": "grpo", "generation": "vllm-colocate", "vllm_gpu_util": 1.5}, "between 0 and 1"),
    ({"trainer": "grpo", "generation": "tgi"}, "generation must be one of"),
    ({"trainer": "dpo", "beta": -1.0}, "beta must be"),
])
def test_bad_trainer_options(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainerSetup(**kw)


def test_fix_generations_for_the_app():
    s, tr, note = fix_generations(trl(batch=4), TrainerSetup("grpo"))
    assert (s.batch, tr.gens) == (4, 4) and "shown with 4 generations" in note
    s, tr, note = fix_generations(trl(batch=1), TrainerSetup("grpo"))
    assert (s.batch, tr.gens) == (8, 8) and "batch 8" in note
    assert fix_generations(trl(batch=8), TrainerSetup("grpo"))[2] == ""


def test_trainer_json_names_the_version():
    doc = trainer_json(TrainerSetup("grpo", generation="vllm-colocate"))
    assert doc["trainer_version"] == "TRL 1.16.0" and doc["vllm_gpu_memory_utilization"] == 0.3
    assert doc["config_class"] == "GRPOConfig" and doc["reference_model"] is False


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# Real architectures of different shapes: tied and untied heads, GQA, big vocabularies, MoE.
PROPERTY_MODELS = ("qwen2.5-0.5b", "llama-3.2-1b", "gemma-2-2b", "phi-3-mini", "qwen3-30b-a3b", "mixtral-8x7b")


@SETTINGS
@given(model=st.sampled_from(PROPERTY_MODELS), method=st.sampled_from(["full", "lora", "qlora"]),
       precision=st.sampled_from(["bf16", "mixed", "fp32"]), batch=st.integers(1, 16), seq_len=st.integers(16, 8192),
       grad_ckpt=st.booleans(),  # mlx-lm, LLaMA-Factory and ms-swift are priced for SFT only
       stack=st.sampled_from([s for s in STACK_IDS if "dpo" in STACKS[s].trainers]),
       precompute=st.booleans(),
       layout=st.sampled_from([(1, "none"), (4, "none"), (8, "zero2"), (8, "zero3")]))
def test_dpo_never_below_sft(model, method, precision, batch, seq_len, grad_ckpt, stack, precompute, layout):
    gpus, sharding = layout
    s = resolve_setup(stack, method=method, precision=precision, batch=batch, seq_len=seq_len, grad_ckpt=grad_ckpt,
                      gpus=gpus, sharding=sharding)
    spec = load_preset(model)
    sft = estimate(spec, s).total_bytes
    dpo = estimate(spec, s, trainer=TrainerSetup("dpo", precompute_ref=precompute)).total_bytes
    assert dpo >= sft


@SETTINGS
@given(method=st.sampled_from(["full", "lora", "qlora"]), per_prompt=st.integers(1, 4),
       gens=st.sampled_from([2, 4, 8, 16]), more_gens=st.sampled_from([1, 2, 4]),
       prompt=st.integers(1, 4096), completion=st.integers(1, 8192), extra=st.integers(0, 4096),
       mode=st.sampled_from(["hf", "vllm-colocate", "vllm-server"]), beta=st.sampled_from([None, 0.04]))
def test_grpo_never_falls_as_generations_or_completions_grow(method, per_prompt, gens, more_gens, prompt,
                                                              completion, extra, mode, beta):
    def total(g: int, c: int) -> float:
        s = trl(method, batch=per_prompt * gens * more_gens)
        tr = TrainerSetup("grpo", num_generations=g, prompt_len=prompt, completion_len=c, generation=mode, beta=beta)
        return estimate(QWEN3_06B, s, trainer=tr, device_capacity=80e9).total_bytes

    base = total(gens, completion)
    assert total(gens * more_gens, completion) >= base
    assert total(gens, completion + extra) >= base


@SETTINGS
@given(model=st.sampled_from(("qwen2.5-0.5b", "llama-3.2-1b", "qwen3-30b-a3b")),
       method=st.sampled_from(["full", "lora", "qlora"]), prompts=st.integers(1, 4), gens=st.integers(2, 16),
       more=st.integers(0, 16), grad_accum=st.integers(1, 4), prompt=st.integers(1, 2048),
       completion=st.integers(1, 4096), mode=st.sampled_from(["hf", "vllm-colocate", "vllm-server"]),
       beta=st.sampled_from([None, 0.04]))
def test_grpo_never_falls_with_more_generations_for_the_same_prompts(model, method, prompts, gens, more, grad_accum,
                                                                     prompt, completion, mode, beta):
    """The same prompts per step with more completions each: the batch (which counts completions) grows with
    num_generations, so the memory must not fall."""
    spec = load_preset(model)

    def total(g: int) -> float:
        s = trl(method, batch=prompts * g, grad_accum=grad_accum)
        tr = TrainerSetup("grpo", num_generations=g, prompt_len=prompt, completion_len=completion, generation=mode,
                          beta=beta)
        return estimate(spec, s, trainer=tr, device_capacity=80e9).total_bytes

    assert total(gens + more) >= total(gens)


# ---- CLI -------------------------------------------------------------------------------------------------

def test_cli_dpo_full_json(capsys):
    doc = run_json(capsys, "--model", "qwen2.5-0.5b", "--method", "full", "--trainer", "dpo", "--batch", "2",
                   "--seq-len", "512")
    assert doc["components_bytes"]["reference"] == 2 * 494_032_768
    assert list(doc["components_bytes"]) == ["weights", "reference", "gradients", "optimizer", "activations",
                                             "overhead"]
    assert sum(doc["components_bytes"].values()) == doc["total_bytes"]
    assert doc["trainer"]["trainer_version"] == "TRL 1.16.0" and doc["trainer"]["forward_sequences"] == 4
    assert doc["trainer"]["beta"] == 0.1 and doc["trainer"]["reference_model"] is True
    plain = run_json(capsys, "--model", "qwen2.5-0.5b", "--method", "full", "--batch", "2", "--seq-len", "512")
    assert "trainer" not in plain and set(plain["components_bytes"]) == {
        "weights", "gradients", "optimizer", "activations", "overhead"}


def test_cli_grpo_vllm_and_advice(capsys):
    doc = run_json(capsys, "--model", "qwen2.5-0.5b", "--trainer", "grpo", "--batch", "8", "--generation",
                   "vllm-colocate", "--vllm-gpu-util", "0.25", "--device", "h100-80gb", "--advice")
    assert doc["components_bytes"]["generation"] == round(0.25 * 81_009 * 2**20)  # of CUDA's total, as vLLM reads it
    assert doc["trainer"]["forward_seq_len"] == 1024 and doc["trainer"]["num_generations"] == 8
    titles = [r["title"] for r in doc["advice"]["remedies"]]
    assert "vLLM sleep mode" in titles and "Generate on a vLLM server" in titles
    assert "Lower the max length" not in titles and doc["advice"]["max_completion_len"] > 512
    server = next(r for r in doc["advice"]["remedies"] if r["title"] == "Generate on a vLLM server")
    assert server["saves_bytes"] >= doc["components_bytes"]["generation"]


def test_cli_text_names_the_trainer(capsys):
    from estimator.report.cli import main

    assert main(["--size", "1", "--trainer", "grpo", "--batch", "8", "--completion-len", "256"]) == 0
    out = capsys.readouterr().out
    assert "batch 8 completions × (512 + 256) tokens · GRPO (TRL 1.16.0)" in out and "generation" not in out.split(
        "\n")[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--trainer", "kto", "--batch", "1"], "KTO needs a per-device batch of at least 2"),
    (["--trainer", "grpo", "--batch", "4"], "divisible by num_generations (8)"),
    (["--trainer", "grpo", "--num-generations", "1", "--batch", "2"], "at least 2 completions"),
    (["--trainer", "dpo", "--num-generations", "4"], "num_generations is a GRPO option"),
    (["--trainer", "orpo", "--precompute-ref"], "no reference log-probs to precompute"),
    (["--trainer", "grpo", "--batch", "8", "--generation", "vllm-colocate"], "choose a device"),
    (["--trainer", "grpo", "--batch", "8", "--vllm-gpu-util", "0.5"], "colocate mode only"),
    (["--trainer", "grpo", "--batch", "8", "--seq-len", "1024"], "drop --seq-len"),
    (["--trainer", "dpo", "--loss", "standard"], "cannot use the 'standard' loss"),
    (["--trainer", "reward", "--beta", "0.2"], "has no beta"),
    (["--trainer", "dpo", "--rule", "seed"], "rule of thumb covers SFT only"),
    (["--trainer", "ppo"], "invalid choice"),
])
def test_cli_bad_combinations_exit_2_with_one_line(capsys, args, message):
    from estimator.report.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--size", "1", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("offload", [False, True])
def test_grpo_zero3_generation_gathers_the_whole_model_plus_its_own_partition(offload):
    """ds3_gather_for_generation: each GPU holds the whole model while generating, plus its own partition
    (param.ds_tensor stays) unless the partitions are offloaded; more GPUs never make the gathered weights grow."""
    spec = load_preset("llama-3.2-1b")
    gathered = []
    for gpus in (2, 4, 16):
        setup = resolve_setup("trl", method="full", sharding="zero3", gpus=gpus, batch=8, offload_params=offload,
                              offload_optimizer=offload)
        est = estimate(spec, setup, trainer=TrainerSetup(trainer="grpo"))
        full = est.weights_full_bytes
        assert full == pytest.approx(2 * spec.params_total, rel=0.01)  # bf16 weights, every parameter
        generation = next(p for p in est.phases if p.key == "generation")
        assert generation.weights == pytest.approx(full + (0 if offload else full / gpus))
        gathered.append(generation.weights)
    assert gathered == sorted(gathered, reverse=True)


def test_a_trainers_runtime_context_is_the_backends_whatever_the_trainer():
    """Issue 27: on Apple silicon (PyTorch MPS, no CUDA context) the TRL DPO estimate of Llama-3.1-8B had a 500 MB
    CUDA context while the SFT estimate of the same setup had none; both take the backend's context now."""
    spec = load_preset("llama-3.1-8b")
    mac = trl(backend="metal")
    sft = estimate(spec, mac)
    for trainer in ("dpo", "orpo", "kto", "grpo"):
        setup = replace(mac, batch=8) if trainer in ("kto", "grpo") else mac
        est = estimate(spec, setup, trainer=TrainerSetup(trainer))
        context = next(x for x in est.details if x.key == "overhead.cuda_context")
        assert context.bytes == 0.0 == next(x for x in sft.details if x.key == "overhead.cuda_context").bytes
        assert context.formula == "none on MPS (no CUDA context)"
    cuda = estimate(spec, trl(gpus=2, sharding="zero2"), trainer=TrainerSetup("dpo"))
    assert next(x for x in cuda.details if x.key == "overhead.cuda_context").bytes == 500_000_000 + 250_000_000
