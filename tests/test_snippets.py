"""estimator.snippets: the training script compiles and carries exactly the estimate's assumptions."""

from __future__ import annotations

import ast
import itertools

import pytest

from estimator import TrainingSetup, generic_spec, load_preset, parse_config_text
from estimator.snippets import PLACEHOLDER_MODEL_ID, training_snippet
from estimator.training import METHODS, OPTIMIZERS, PRECISIONS

LLAMA = load_preset("llama-3.1-8b")


def calls(source: str) -> dict[str, dict[str, object]]:
    """Keyword arguments of each call by callee name (SFTConfig, LoraConfig, ...), literals evaluated."""
    out: dict[str, dict[str, object]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            kwargs = {}
            for kw in node.keywords:
                try:
                    kwargs[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    kwargs[kw.arg] = ast.unparse(kw.value)
            out[name] = kwargs
    return out


def assignments(source: str) -> dict[str, object]:
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                out[node.targets[0].id] = ast.unparse(node.value)
    return out


@pytest.mark.parametrize(("method", "precision", "optimizer"), list(itertools.product(METHODS, PRECISIONS, OPTIMIZERS)))
def test_every_combination_compiles(method, precision, optimizer):
    source = training_snippet(LLAMA, TrainingSetup(method=method, precision=precision, optimizer=optimizer))
    compile(source, "snippet.py", "exec")
    assert "trainer.train()" in source


def test_lora_defaults_match_the_estimate():
    setup = TrainingSetup(method="lora", batch=4, seq_len=4096, grad_ckpt=True, lora_rank=32)
    source = training_snippet(LLAMA, setup)
    c = calls(source)
    assert c["SFTConfig"]["per_device_train_batch_size"] == 4
    assert c["SFTConfig"]["max_length"] == 4096
    assert c["SFTConfig"]["gradient_checkpointing"] is True
    assert c["SFTConfig"]["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert c["SFTConfig"]["gradient_accumulation_steps"] == 1
    assert (c["SFTConfig"]["bf16"], c["SFTConfig"]["fp16"]) == (True, False)
    assert c["SFTConfig"]["optim"] == "adamw_torch_fused"
    assert c["SFTConfig"]["loss_type"] == "nll"  # HF cross-entropy on fp32 logits, not TRL's chunked loss
    assert c["LoraConfig"] == {"r": 32, "lora_alpha": 64, "lora_dropout": 0.0, "target_modules": "all-linear",
                               "task_type": "CAUSAL_LM"}
    assert c["from_pretrained"]["attn_implementation"] == "sdpa"
    assert c["from_pretrained"]["dtype"] == "torch.bfloat16"
    assert "quantization_config" not in c["from_pretrained"]
    assert assignments(source)["model_id"] == "meta-llama/Llama-3.1-8B"
    assert "BitsAndBytesConfig" not in source
    assert c["SFTTrainer"]["peft_config"] == "peft_config"


def test_qlora_uses_nf4_double_quant_bf16_compute():
    source = training_snippet(LLAMA, TrainingSetup(method="qlora", attention="eager", lora_targets=("q_proj", "v_proj")))
    c = calls(source)
    assert c["BitsAndBytesConfig"] == {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                                       "bnb_4bit_use_double_quant": True,
                                       "bnb_4bit_compute_dtype": "torch.bfloat16"}
    assert c["from_pretrained"]["quantization_config"] == "bnb_config"
    assert c["from_pretrained"]["attn_implementation"] == "eager"
    assert c["LoraConfig"]["target_modules"] == ["q_proj", "v_proj"]
    # The estimate's fp32 upcast of the non-4-bit weights, called explicitly (recent TRL no longer does).
    assert c["prepare_model_for_kbit_training"] == {"use_gradient_checkpointing": False}
    assert "prepare_model_for_kbit_training" not in calls(training_snippet(LLAMA, TrainingSetup(method="lora")))


def test_full_fine_tuning_has_no_adapter():
    source = training_snippet(LLAMA, TrainingSetup(method="full", precision="mixed"))
    c = calls(source)
    assert "LoraConfig" not in c and "peft_config" not in c["SFTTrainer"]
    assert c["from_pretrained"]["dtype"] == "torch.float32"  # fp32 master weights
    assert (c["SFTConfig"]["bf16"], c["SFTConfig"]["fp16"]) == (True, False)  # bf16 autocast


@pytest.mark.parametrize(("precision", "dtype", "bf16", "fp16"), [
    ("bf16", "torch.bfloat16", True, False), ("fp16", "torch.float16", False, True),
    ("mixed", "torch.float32", True, False), ("fp32", "torch.float32", False, False)])
def test_precision_flags(precision, dtype, bf16, fp16):
    c = calls(training_snippet(LLAMA, TrainingSetup(precision=precision)))
    assert c["from_pretrained"]["dtype"] == dtype
    assert (c["SFTConfig"]["bf16"], c["SFTConfig"]["fp16"]) == (bf16, fp16)


@pytest.mark.parametrize(("optimizer", "name"), [
    ("adamw", "adamw_torch_fused"), ("adamw_8bit", "adamw_bnb_8bit"), ("paged_adamw", "paged_adamw_32bit"),
    ("paged_adamw_8bit", "paged_adamw_8bit"), ("sgd", "sgd"), ("adafactor", "adafactor"), ("lion", "lion_32bit")])
def test_optimizer_names(optimizer, name):
    c = calls(training_snippet(LLAMA, TrainingSetup(optimizer=optimizer)))
    assert c["SFTConfig"]["optim"] == name


def test_unfused_adamw_and_sgd_momentum():
    c = calls(training_snippet(LLAMA, TrainingSetup(fused_optimizer=False)))
    assert c["SFTConfig"]["optim"] == "adamw_torch"
    c = calls(training_snippet(LLAMA, TrainingSetup(optimizer="sgd")))
    # transformers' optim="sgd" has no momentum; the estimate counts one momentum buffer.
    assert "momentum" in str(c["SFTTrainer"]["optimizer_cls_and_kwargs"])


def test_sharding_and_offload_become_a_deepspeed_config():
    source = training_snippet(LLAMA, TrainingSetup(method="full", gpus=8, sharding="zero3", offload_optimizer=True))
    c = calls(source)
    ds = c["SFTConfig"]["deepspeed"]
    assert ds["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
    assert "accelerate launch --num_processes 8" in source
    c = calls(training_snippet(LLAMA, TrainingSetup(method="full", gpus=2, sharding="zero1")))
    assert c["SFTConfig"]["deepspeed"]["zero_optimization"] == {"stage": 1}
    assert "deepspeed" not in calls(training_snippet(LLAMA, TrainingSetup()))["SFTConfig"]


def test_qlora_under_zero3_stores_4bit_weights_in_the_model_dtype():
    c = calls(training_snippet(LLAMA, TrainingSetup(method="qlora", gpus=4, sharding="zero3")))
    assert c["BitsAndBytesConfig"]["bnb_4bit_quant_storage"] == "torch.bfloat16"


def test_chunked_loss_turns_on_liger():
    c = calls(training_snippet(LLAMA, TrainingSetup(loss="chunked")))
    assert c["SFTConfig"]["use_liger_kernel"] is True
    assert "loss_type" not in c["SFTConfig"]


def test_checkpointing_reentrancy_follows_trl_for_peft_under_zero3():
    c = calls(training_snippet(LLAMA, TrainingSetup(grad_ckpt=True, gpus=4, sharding="zero3")))
    assert c["SFTConfig"]["gradient_checkpointing_kwargs"] == {"use_reentrant": True}
    c = calls(training_snippet(LLAMA, TrainingSetup(method="full", grad_ckpt=True, gpus=4, sharding="zero3")))
    assert c["SFTConfig"]["gradient_checkpointing_kwargs"] == {"use_reentrant": False}


def test_models_without_a_hub_id_get_a_placeholder_and_hostile_names_stay_in_comments():
    assert assignments(training_snippet(generic_spec(7), TrainingSetup()))["model_id"] == PLACEHOLDER_MODEL_ID
    config = LLAMA_CONFIG_TEXT
    spec = parse_config_text(config, name='evil"\nimport os; os.system("x")  #')
    source = training_snippet(spec, TrainingSetup())
    compile(source, "snippet.py", "exec")
    assert "os.system" not in "".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


LLAMA_CONFIG_TEXT = """{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 2,
"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000}"""
