"""Training stacks: what each framework does by default, what the user overrides, and the echo of both."""

from __future__ import annotations

import json

import pytest

from estimator import estimate, load_preset, remedies
from estimator.job.setup import TrainingSetup
from estimator.job.stack import loss_impl_id, resolve_setup, setup_json, setup_summary, with_method
from estimator.options.losses import LOSS_IMPLS, LOSSES
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import QLORA_PREPS
from estimator.options.stacks import STACK_FIELDS, STACK_SIZE_FIELDS, STACKS, get_stack
from estimator.report.cli import main

LLAMA = load_preset("llama-3.1-8b")

# (stack, method) → (grad_ckpt, offload, loss kind, loss implementation, optimizer, adapter dtype, QLoRA prep)
DEFAULTS = [
    ("trl", "lora", (True, False, "chunked", "trl", "adamw", "fp32", "none")),
    ("trl", "qlora", (True, False, "chunked", "trl", "adamw", "bf16", "none")),
    ("trainer", "qlora", (False, False, "standard", "hf", "adamw", "fp32", "peft")),
    ("unsloth", "lora", (True, True, "fused", "cce", "adamw_8bit", "fp32", "none")),
    ("axolotl", "qlora", (False, False, "standard", "hf", "adamw", "fp32", "none")),
    ("torchtune", "lora", (True, False, "chunked", "torchtune", "adamw", "bf16", "none")),
    ("litgpt", "lora", (False, False, "chunked", "litgpt", "adamw_foreach", "bf16", "none")),
    ("litgpt", "qlora", (False, False, "chunked", "litgpt", "paged_adamw", "bf16", "none")),
    ("plain", "full", (False, False, "standard", "hf", "adamw_foreach", "fp32", "none")),
    ("llamafactory", "lora", (True, False, "standard", "hf", "adamw", "fp32", "none")),
    ("llamafactory", "qlora", (True, False, "standard", "hf", "adamw", "fp32", "none")),
    ("swift", "lora", (True, False, "standard", "hf", "adamw", "fp32", "none")),
    ("swift", "qlora", (True, False, "standard", "hf", "adamw", "fp32", "none")),
    ("swift", "full", (True, False, "standard", "hf", "adamw", "fp32", "none")),
]


@pytest.mark.parametrize(("stack", "method", "expected"), DEFAULTS)
def test_each_stack_fills_what_its_framework_does(stack, method, expected):
    s = resolve_setup(stack, method=method)
    assert (s.grad_ckpt, s.offload_activations, s.loss, loss_impl_id(s), s.optimizer, s.adapter_dtype,
            s.qlora_prep) == expected
    assert s.stack == stack and set(s.from_stack) == set(STACK_FIELDS) | set(STACK_SIZE_FIELDS)


def test_every_stack_value_has_a_source_and_known_options():
    for stack in STACKS.values():
        assert stack.version and stack.summary
        assert set(STACK_FIELDS) - {"nf4_double_quant", "load_16bit_first"} <= set(stack.sources)
        assert stack.loss in stack.loss_impls and set(stack.loss_impls) <= set(LOSSES)
        assert all(impl in LOSS_IMPLS and LOSS_IMPLS[impl].kind == kind for kind, impl in stack.loss_impls.items())
        assert stack.optimizer in OPTIMIZERS and stack.qlora_prep in QLORA_PREPS
        assert set(stack.unavailable) == set(LOSSES) - set(stack.loss_impls)


def test_trls_qlora_leaves_nf4_double_quantisation_off_and_its_export_says_so():
    """TRL 1.16.0's ModelConfig.use_bnb_nested_quant defaults to False (trl/trainer/model_config.py:164-165), which
    get_quantization_config passes as bnb_4bit_use_double_quant: the TRL stack prices NF4 without double
    quantisation, and the config file and script it writes reproduce that."""
    import yaml

    from estimator import load_preset
    from estimator.job.configs import import_config
    from estimator.report.configs import export_config
    from estimator.report.snippets import training_snippet

    assert STACKS["trl"].nf4_double_quant is False
    assert "model_config.py:164-165 (1.16.0): use_bnb_nested_quant=False" in STACKS["trl"].sources["nf4_double_quant"]
    setup = resolve_setup("trl", method="qlora")
    assert setup.nf4_double_quant is False
    spec = load_preset("llama-3.1-8b")
    exported = export_config(spec, setup, None)
    assert yaml.safe_load(exported.text)["use_bnb_nested_quant"] is False
    assert import_config(exported.text, name=exported.filename).setup().nf4_double_quant is False
    assert "bnb_4bit_use_double_quant=False," in training_snippet(spec, setup)
    on = resolve_setup("trl", method="qlora", nf4_double_quant=True)  # the sidebar's dq=true still round-trips
    assert yaml.safe_load(export_config(spec, on, None).text)["use_bnb_nested_quant"] is True


def test_stackless_setups_count_each_loss_kinds_default_implementation():
    # LossOption.default_impl: HF's loss for "standard", TRL's fused chunked head, Liger's fused kernel
    assert {kind: option.default_impl for kind, option in LOSSES.items()} == {
        "standard": "hf", "chunked": "trl", "fused": "liger"}
    for kind, option in LOSSES.items():
        assert LOSS_IMPLS[option.default_impl].kind == kind
        assert loss_impl_id(TrainingSetup(loss=kind)) == option.default_impl


def test_a_given_setting_wins_and_is_not_marked_as_the_stacks():
    s = resolve_setup("trl", grad_ckpt=False, loss="standard", optimizer="adamw_8bit")
    assert (s.grad_ckpt, s.loss, s.optimizer) == (False, "standard", "adamw_8bit")
    assert {"grad_ckpt", "loss", "optimizer"}.isdisjoint(s.from_stack)
    assert "checkpointing off (your choice)" in setup_summary(s)
    assert "loss: HF ForCausalLMLoss (your choice)" in setup_summary(s)
    assert "optimizer: 8-bit AdamW (bitsandbytes) (your choice)" in setup_summary(s)


def test_checkpointing_off_takes_the_stacks_offloading_with_it():
    s = resolve_setup("unsloth", grad_ckpt=False)
    assert not s.grad_ckpt and not s.offload_activations
    with pytest.raises(ValueError, match="needs gradient checkpointing"):
        resolve_setup("trl", grad_ckpt=False, offload_activations=True)


@pytest.mark.parametrize(("stack", "loss", "why"), [
    ("trl", "fused", "TRL 1.16 raises"), ("torchtune", "fused", "no fused"), ("litgpt", "standard", "always"),
    ("plain", "chunked", "own loss"), ("trainer", "chunked", "no chunked loss"),
    ("llamafactory", "chunked", "Trainer's loss on the full logits"),
    ("swift", "chunked", "model's own loss on the full logits of the labelled tokens"),
])
def test_a_loss_the_stack_cannot_do_is_refused_with_the_reason(stack, loss, why):
    with pytest.raises(ValueError, match=why):
        resolve_setup(stack, loss=loss)


def test_unknown_stack_and_setting_are_refused():
    with pytest.raises(ValueError, match="unknown stack"):
        get_stack("deepspeed-chat")
    with pytest.raises(ValueError, match="unknown setting"):
        resolve_setup("trl", flash=True)
    with pytest.raises(ValueError, match="stack must be one of"):
        TrainingSetup(stack="nope")


def test_the_default_stack_changes_the_headline_numbers():
    """The issue's examples: TRL's checkpointing and chunked head against the old defaults."""
    trl = estimate(LLAMA, resolve_setup("trl", method="qlora")).total_bytes
    old = estimate(LLAMA, TrainingSetup(method="qlora")).total_bytes
    # 8.3 GB: TRL's NF4 without double quantisation (0.33 GB of fp32 absmax more than the 8.0 GB with it)
    assert round(trl / 1e9, 1) == 8.3 and round(old / 1e9, 1) == 25.4
    plain = estimate(LLAMA, resolve_setup("plain", method="full")).total_bytes
    trainer = estimate(LLAMA, resolve_setup("trainer", method="full")).total_bytes
    assert plain - trainer == pytest.approx(2 * LLAMA.params_total, rel=0.06)  # foreach AdamW's step buffer


def test_offloading_keeps_two_layer_inputs_on_the_gpu_and_reports_all_as_cpu_ram():
    on = estimate(LLAMA, resolve_setup("trl", batch=4, seq_len=8192))
    off = estimate(LLAMA, resolve_setup("trl", batch=4, seq_len=8192, offload_activations=True))
    ckpt = LLAMA.num_layers * 2 * LLAMA.hidden_size * 4 * 8192  # L bf16 layer inputs
    assert off.cpu_offload_bytes == ckpt
    assert on.tensor_bytes - off.tensor_bytes == pytest.approx(ckpt * (LLAMA.num_layers - 2) / LLAMA.num_layers,
                                                                rel=0.01)


def test_switching_method_rechooses_the_stacks_method_dependent_values():
    lora = resolve_setup("trl", method="lora", batch=2)
    qlora = with_method(lora, "qlora")
    assert qlora == resolve_setup("trl", method="qlora", batch=2)
    assert (lora.adapter_dtype, qlora.adapter_dtype) == ("fp32", "bf16")
    remedy = next(r for r in remedies(LLAMA, lora) if r.title == "Switch to QLoRA")
    assert remedy.new_total_bytes == estimate(LLAMA, qlora).total_bytes


def test_setup_json_echoes_every_effective_value():
    doc = setup_json(resolve_setup("unsloth", method="qlora", batch=3))
    assert doc["stack"] == "unsloth" and doc["stack_version"].startswith("unsloth 2026.10.9")
    assert (doc["batch"], doc["grad_ckpt"], doc["offload_activations"], doc["checkpointing"]) == (3, True, True,
                                                                                                "offload")
    assert (doc["loss"], doc["loss_impl"], doc["hf_optim"]) == ("fused", "cce", "adamw_bnb_8bit")
    assert doc["qlora_prep"] == "none" and "qlora_prep_label" in doc
    assert "batch" not in doc["from_stack"] and "loss" in doc["from_stack"]
    json.dumps(doc)


def test_cli_stack_flags_and_setup_echo(capsys):
    assert main(["--json", "--stack", "trainer", "--grad-ckpt", "--loss", "fused", "--method", "lora"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["setup"]["stack"] == "trainer" and doc["setup"]["loss_impl"] == "liger"
    assert doc["setup"]["grad_ckpt"] is True and "grad_ckpt" not in doc["setup"]["from_stack"]
    assert set(doc["components_bytes"]) == {"weights", "gradients", "optimizer", "activations", "overhead"}
    assert main(["--json", "--stack", "trl", "--no-grad-ckpt"]) == 0
    assert json.loads(capsys.readouterr().out)["setup"]["grad_ckpt"] is False


@pytest.mark.parametrize("argv", [["--stack", "megatron"], ["--loss", "liger"], ["--stack", "torchtune", "--loss",
                                                                                  "fused"],
                                  ["--no-grad-ckpt", "--offload-activations"]])
def test_cli_bad_stack_input_exits_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("estimator: error:") and "\n" not in err


def test_gemma2_sdpa_runs_eager_on_transformers_stacks():
    """Gemma 2 has no SDPA in transformers 5.24 (_supports_sdpa = False): the default falls back to eager, so an
    SDPA setup is estimated as eager on the transformers stacks, with a note, and the snippet writes eager."""
    from estimator.job.stack import attention_impl
    from estimator.report.snippets import training_snippet

    gemma = load_preset("gemma-2-2b")
    sdpa = resolve_setup("trl", method="lora", batch=2, seq_len=2048, attention="sdpa")
    eager = resolve_setup("trl", method="lora", batch=2, seq_len=2048, attention="eager")
    assert attention_impl(sdpa, "gemma2") == "eager"
    assert attention_impl(sdpa, "llama") == "sdpa"
    assert attention_impl(resolve_setup("unsloth", method="lora", attention="sdpa"), "gemma2") == "sdpa"
    est_sdpa, est_eager = estimate(gemma, sdpa), estimate(gemma, eager)
    assert est_sdpa.total_bytes == est_eager.total_bytes
    assert any("falls back to eager" in n for n in est_sdpa.notes)
    # the scores are real memory: at 2,048 tokens eager is well above what SDPA would have kept on Llama
    llama_sdpa = estimate(LLAMA, sdpa)
    assert llama_sdpa.components_bytes["activations"] < estimate(LLAMA, eager).components_bytes["activations"]
    assert 'attn_implementation="eager"' in training_snippet(gemma, sdpa)
    assert 'attn_implementation="sdpa"' in training_snippet(LLAMA, sdpa)


def test_with_method_drops_the_optimizer_step_in_backward_for_adapters():
    """optimizer_in_bwd is torchtune's full fine-tuning switch: the same setup trained with LoRA (a remedy, the
    Compare page's bars) has none, instead of a setup the estimator refuses."""
    full = resolve_setup("torchtune", method="full", optimizer_in_bwd=True)
    assert with_method(full, "lora").optimizer_in_bwd is False
    assert with_method(with_method(full, "lora"), "full").optimizer_in_bwd is False  # not remembered: a new choice
    assert with_method(full, "full").optimizer_in_bwd is True


def test_llamafactory_defaults_are_its_releases():
    """LLaMA-Factory 0.9.5's own defaults (options/stacks.py cites each): LoRA rank 8 on every linear, cutoff_len
    2048, reentrant checkpointing on, NF4 with double quantisation, fp32 adapters on a 16-bit or 4-bit base."""
    from estimator.options.stacks import LLAMAFACTORY_VERSION

    s = resolve_setup("llamafactory", method="qlora")
    assert (s.lora_rank, s.seq_len, s.batch, s.lora_layers, s.quant_mode, s.nf4_double_quant) == (8, 2048, 1, 0, "nf4",
                                                                                                  True)
    assert s.lora_targets == ("all-linear",) and s.max_grad_norm == 1.0 and not s.load_16bit_first
    assert LLAMAFACTORY_VERSION == "llamafactory 0.9.5 (transformers ≤ 5.6.0, PEFT 0.18.1, TRL ≤ 0.24.0)"
    assert get_stack("llamafactory").loss_impl("fused") == "liger"
    # the fused loss (enable_liger_kernel) keeps no logits: less than the standard loss at a long length
    long = resolve_setup("llamafactory", method="lora", seq_len=8192)
    assert estimate(LLAMA, replace_loss(long, "fused")).total_bytes < estimate(LLAMA, long).total_bytes


def replace_loss(setup, loss):
    return resolve_setup(setup.stack, method=setup.method, seq_len=setup.seq_len, loss=loss)


@pytest.mark.parametrize("trainer", ["dpo", "orpo", "simpo", "kto", "grpo", "reward"])
def test_llamafactory_prices_sft_only_and_says_why(trainer):
    """Its DPO/KTO/RM steps are its own (full fp32 logits, a value head), not TRL 1.16's: refused with the reason in
    the check, the estimate and the CLI alike."""
    from estimator.job.trainer import TrainerSetup, check

    setup = resolve_setup("llamafactory", method="lora", batch=2)
    for call in (lambda: check(setup, TrainerSetup(trainer)), lambda: estimate(LLAMA, setup,
                                                                              trainer=TrainerSetup(trainer))):
        with pytest.raises(ValueError, match="LLaMA-Factory runs its own"):
            call()
    check(setup, TrainerSetup("sft"))


def test_llamafactory_refuses_adapters_on_the_last_layers():
    with pytest.raises(ValueError, match="lora_target names modules"):
        resolve_setup("llamafactory", method="lora", lora_layers=4)


def test_cli_llamafactory_stack(capsys):
    assert main(["--json", "--stack", "llamafactory", "--method", "qlora"]) == 0
    doc = json.loads(capsys.readouterr().out)["setup"]
    assert (doc["stack"], doc["lora_rank"], doc["grad_ckpt"], doc["loss_impl"], doc["adapter_dtype"]) == (
        "llamafactory", 8, True, "hf", "fp32")
    with pytest.raises(SystemExit) as exc:
        main(["--stack", "llamafactory", "--trainer", "dpo"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "LLaMA-Factory runs its own DPO step" in err and "\n" not in err


def test_swift_defaults_are_its_releases():
    """ms-swift 4.6.0's own defaults (options/stacks.py cites each): LoRA rank 8 on every linear, batch 1, checkpointing,
    the model's own loss (Liger fused with use_liger_kernel), fused AdamW, NF4 with double quantisation quantised on
    load, fp32 adapters, no kbit preparation; the dropout it would use (0.05) is not counted, and the snippet says so."""
    from estimator.options.stacks import SWIFT_VERSION

    s = resolve_setup("swift", method="qlora")
    assert (s.lora_rank, s.seq_len, s.batch, s.grad_accum, s.lora_layers, s.quant_mode, s.nf4_double_quant) == (
        8, 2048, 1, 1, 0, "nf4", True)
    assert s.lora_targets == ("all-linear",) and s.max_grad_norm == 1.0 and not s.load_16bit_first
    assert SWIFT_VERSION == "ms-swift 4.6.0 (transformers ≤ 5.19.0, PEFT ≤ 0.20.0, TRL < 1.0)"
    stack = get_stack("swift")
    assert stack.loss_impl("fused") == "liger" and stack.lora_dropout == 0.05 and stack.host_load == "direct"
    assert (stack.framework, stack.model_code, stack.quantizer, stack.multi_gpu, stack.mixed_precision) == (
        "torch", "hf", "bitsandbytes", True, True)
    assert "tuner_args.py:135 lora_dropout=0.05" in stack.sources["lora_dropout"]
    assert "ceil(16 / batch / world size)" in stack.sources["grad_accum"]
    # the same step as the HF Trainer's with checkpointing and without kbit preparation: one model code, other defaults
    trainer = resolve_setup("trainer", method="qlora", grad_ckpt=True, qlora_prep="none", lora_rank=8)
    assert estimate(LLAMA, s).total_bytes == estimate(LLAMA, trainer).total_bytes
    assert estimate(LLAMA, s).total_bytes < estimate(LLAMA, resolve_setup("trainer", method="qlora")).total_bytes


@pytest.mark.parametrize("trainer", ["dpo", "orpo", "simpo", "kto", "grpo", "reward"])
def test_swift_prices_sft_only_and_says_why(trainer):
    """Its swift rlhf trainers subclass TRL < 1.0 on the full logits, not TRL 1.16's fused head: refused with the reason
    in the check, the estimate and the CLI alike."""
    from estimator.job.trainer import TrainerSetup, check

    setup = resolve_setup("swift", method="lora", batch=2)
    for call in (lambda: check(setup, TrainerSetup(trainer)), lambda: estimate(LLAMA, setup,
                                                                              trainer=TrainerSetup(trainer))):
        with pytest.raises(ValueError, match="ms-swift runs its own"):
            call()
    check(setup, TrainerSetup("sft"))
    with pytest.raises(ValueError, match="target_regex"):
        resolve_setup("swift", method="lora", lora_layers=4)


def test_cli_swift_stack(capsys):
    assert main(["--json", "--stack", "swift", "--method", "qlora"]) == 0
    doc = json.loads(capsys.readouterr().out)["setup"]
    assert (doc["stack"], doc["lora_rank"], doc["grad_ckpt"], doc["loss_impl"], doc["adapter_dtype"]) == (
        "swift", 8, True, "hf", "fp32")
    with pytest.raises(SystemExit) as exc:
        main(["--stack", "swift", "--trainer", "grpo"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "ms-swift runs its own GRPO step" in err and "\n" not in err


def test_pefts_lora_dropout_is_counted_where_the_stack_uses_one():
    """ms-swift's default lora_dropout 0.05 (arguments/tuner_args.py:135): each adapted module's nn.Dropout keeps a
    bool mask (1 B per input element) and hands lora_A a dropped copy of its input. With fp32 adapters under bf16
    autocast that copy replaces the per-module cast copy already counted, so one layer keeps 1 B more per input element
    of every adapted linear; the TRL stack (no dropout) keeps none of it."""
    from dataclasses import replace

    from estimator.memory.hf.activations.layers import dense_layer
    from estimator.memory.runtimes import runtime_for

    spec = load_preset("llama-3.2-1b")
    setup = resolve_setup("swift", method="lora", grad_ckpt=False)
    ctx = runtime_for(setup).context(spec, setup)
    assert ctx.lora_dropout and ctx.adapter_copies
    without = replace(ctx, lora_dropout=False)
    inputs = sum(m.in_features for m in spec.linears if m.name in ctx.adapted)  # q, k, v, o, gate, up, down
    assert dense_layer(spec, ctx).total - dense_layer(spec, without).total == inputs
    trl = resolve_setup("trl", method="lora")
    assert not runtime_for(trl).context(spec, trl).lora_dropout
