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
