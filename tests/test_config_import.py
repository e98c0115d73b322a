"""Importing training configs (estimator/job/configs): the example configs the projects ship, each with every field
it maps (a table), and each format's mapping rules one by one: the tools' own defaults, DeepSpeed and FSDP,
torchtune's overrides, the export's marker, the file-name hint, model references, and the keys ignored or not
honoured. Offline: a Hub id is tried through a stand-in that refuses, as an offline machine would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator import estimate, load_preset
from estimator.job.configs import ConfigError, fit_targets, import_config, model_choice
from estimator.job.configs._models import ModelRef, ref_from_litgpt, ref_from_name, ref_from_torchtune
from estimator.models.hub import HubError

DATA = Path(__file__).resolve().parent / "data" / "configs"


def offline(model: str) -> None:
    raise HubError(f"'{model}' cannot be read: offline")


# (file, stack, model kind, model preset, every setting it maps, the trainer's settings, keys not honoured)
REAL = [
    ("axolotl/alst/llama3-8b-deepspeed-alst.yaml", "axolotl", "preset", "llama-3.1-8b",
     {"attention": "sdpa", "batch": 1, "grad_accum": 1, "grad_ckpt": True, "method": "full",
      "offload_activations": True, "offload_optimizer": True, "offload_params": True, "precision": "bf16",
      "seq_len": 500000, "sharding": "zero3"}, {},
     ["activation_offloading", "context_parallel_size", "gpus", "optimizer", "tiled_mlp"]),
    ("axolotl/llama-3/fft-8b-liger-fsdp.yaml", "axolotl", "hub", "llama-3.1-8b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 4, "grad_ckpt": True, "loss": "fused", "method": "full",
      "offload_optimizer": True, "offload_params": True, "optimizer": "adamw", "precision": "bf16", "seq_len": 4096,
      "sharding": "zero3"}, {},
     ["fsdp_config", "gpus", "liger_glu_activation", "liger_rms_norm", "liger_rope"]),
    ("axolotl/llama-3/fft-8b.yaml", "axolotl", "hub", "llama-3.1-8b",
     {"attention": "sdpa", "batch": 1, "grad_accum": 8, "grad_ckpt": True, "method": "full",
      "optimizer": "paged_adamw_8bit", "precision": "bf16", "seq_len": 8192}, {}, []),
    ("axolotl/llama-3/instruct-dpo-lora-8b.yml", "axolotl", "hub", None,
     {"attention": "sdpa", "batch": 2, "grad_accum": 4, "grad_ckpt": True, "lora_rank": 32,
      "lora_targets": ("all-linear",), "method": "lora", "optimizer": "adamw_8bit", "precision": "bf16",
      "seq_len": 4096}, {"trainer": "dpo"}, ["load_in_8bit", "lora_dropout"]),
    ("axolotl/llama-3/lora-1b.yml", "axolotl", "hub", "llama-3.2-1b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 2, "grad_ckpt": True, "lora_rank": 16,
      "lora_targets": ("gate_proj", "down_proj", "up_proj", "q_proj", "v_proj", "k_proj", "o_proj"),
      "method": "lora", "optimizer": "adamw_8bit", "precision": "bf16", "seq_len": 2048}, {}, ["lora_dropout"]),
    ("axolotl/llama-3/qlora-1b-kto.yaml", "axolotl", "preset", "llama-3.2-1b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 1, "grad_ckpt": True, "lora_rank": 32,
      "lora_targets": ("all-linear",), "method": "qlora", "optimizer": "adamw_8bit", "precision": "bf16",
      "seq_len": 2048}, {"beta": 0.5, "trainer": "kto"}, ["lora_dropout"]),
    ("axolotl/llama-3/qlora-1b.yml", "axolotl", "hub", "llama-3.2-1b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 4, "grad_ckpt": True, "lora_rank": 32,
      "lora_targets": ("gate_proj", "down_proj", "up_proj", "q_proj", "v_proj", "k_proj", "o_proj"),
      "method": "qlora", "optimizer": "adamw_8bit", "precision": "bf16", "seq_len": 2048}, {}, ["lora_dropout"]),
    ("axolotl/mistral/mixtral/mixtral.yml", "axolotl", "preset", "mixtral-8x7b",
     {"attention": "sdpa", "batch": 1, "grad_accum": 2, "grad_ckpt": True, "lora_rank": 32,
      "lora_targets": ("all-linear",), "method": "qlora", "offload_optimizer": True, "optimizer": "adamw_8bit",
      "precision": "bf16", "seq_len": 4096, "sharding": "zero2"}, {}, ["gpus", "lora_dropout", "model_config"]),
    ("axolotl/qwen2/dpo.yaml", "axolotl", "preset", "qwen2.5-0.5b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 4, "grad_ckpt": True, "method": "full",
      "optimizer": "adamw_8bit", "precision": "bf16", "seq_len": 2048}, {"trainer": "dpo"}, []),
    ("axolotl/qwen2/reward-model.yaml", "axolotl", "preset", "qwen2.5-0.5b",
     {"attention": "sdpa", "batch": 2, "grad_accum": 4, "grad_ckpt": True, "method": "full",
      "optimizer": "adamw_8bit", "precision": "bf16", "seq_len": 2048}, {"trainer": "reward"}, ["num_labels"]),
    ("litgpt/llama-3.1-8b/lora.yaml", "litgpt", "hub", "llama-3.1-8b",
     {"batch": 1, "gpus": 1, "grad_accum": 8, "lora_rank": 32, "lora_targets": ("q_proj", "v_proj"),
      "method": "lora", "optimizer": "adamw_foreach", "precision": "bf16", "seq_len": 512}, {}, []),
    ("litgpt/llama-3.2-1B/full.yaml", "litgpt", "preset", "llama-3.2-1b",
     {"batch": 4, "gpus": 1, "grad_accum": 16, "method": "full", "optimizer": "adamw_foreach", "precision": "bf16",
      "seq_len": 512}, {}, []),
    ("litgpt/llama-3.2-1B/lora.yaml", "litgpt", "preset", "llama-3.2-1b",
     {"batch": 1, "gpus": 1, "grad_accum": 8, "lora_rank": 32, "lora_targets": ("q_proj", "v_proj"),
      "method": "lora", "optimizer": "adamw_foreach", "precision": "bf16", "seq_len": 512}, {}, []),
    ("litgpt/llama-3.2-1B/qlora.yaml", "litgpt", "preset", "llama-3.2-1b",
     {"batch": 2, "gpus": 1, "grad_accum": 4, "lora_rank": 32, "lora_targets": ("q_proj", "v_proj"),
      "method": "qlora", "nf4_double_quant": False, "precision": "bf16", "seq_len": 512}, {}, []),
    ("litgpt/phi-2/lora.yaml", "litgpt", "preset", "phi-2",
     {"batch": 4, "gpus": 1, "grad_accum": 2, "lora_rank": 8,
      "lora_targets": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"),
      "method": "lora", "optimizer": "adamw_foreach", "precision": "bf16", "seq_len": 512}, {}, []),
    ("torchtune/gemma2/2B_lora_single_device.yaml", "torchtune", "preset", "gemma-2-2b",
     {"batch": 8, "compile": False, "grad_accum": 8, "grad_ckpt": True, "lora_rank": 64,
      "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), "loss": "chunked",
      "max_grad_norm": 0.0, "method": "lora", "offload_activations": False, "optimizer": "adamw",
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("torchtune/llama3_1/8B_full_single_device.yaml", "torchtune", "preset", "llama-3.1-8b",
     {"batch": 2, "compile": False, "grad_accum": 1, "grad_ckpt": True, "loss": "chunked", "max_grad_norm": 0.0,
      "method": "full", "offload_activations": False, "optimizer": "paged_adamw_8bit", "optimizer_in_bwd": True,
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("torchtune/llama3_1/8B_lora.yaml", "torchtune", "preset", "llama-3.1-8b",
     {"batch": 2, "compile": False, "grad_accum": 8, "grad_ckpt": False, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), "loss": "chunked",
      "max_grad_norm": 0.0, "method": "lora", "offload_activations": False, "optimizer": "adamw",
      "precision": "bf16", "sharding": "zero3"}, {}, ["gpus", "tokenizer.max_seq_len"]),
    ("torchtune/llama3_1/8B_lora_single_device.yaml", "torchtune", "preset", "llama-3.1-8b",
     {"batch": 2, "compile": False, "grad_accum": 8, "grad_ckpt": True, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), "loss": "chunked",
      "max_grad_norm": 0.0, "method": "lora", "offload_activations": False, "optimizer": "adamw",
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("torchtune/llama3_1/8B_qlora_single_device.yaml", "torchtune", "preset", "llama-3.1-8b",
     {"batch": 2, "compile": False, "grad_accum": 8, "grad_ckpt": True, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), "loss": "chunked",
      "max_grad_norm": 0.0, "method": "qlora", "offload_activations": False, "optimizer": "adamw",
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("torchtune/llama3_2/1B_lora_single_device.yaml", "torchtune", "preset", "llama-3.2-1b",
     {"batch": 4, "compile": False, "grad_accum": 8, "grad_ckpt": False, "lora_rank": 64,
      "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), "loss": "chunked",
      "max_grad_norm": 0.0, "method": "lora", "offload_activations": False, "optimizer": "adamw",
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("torchtune/qwen2_5/0.5B_full_single_device.yaml", "torchtune", "preset", "qwen2.5-0.5b",
     {"batch": 2, "compile": False, "grad_accum": 8, "grad_ckpt": False, "loss": "chunked", "max_grad_norm": 0.0,
      "method": "full", "offload_activations": False, "optimizer": "adamw", "optimizer_in_bwd": False,
      "precision": "bf16"}, {}, ["tokenizer.max_seq_len"]),
    ("trl/dpo_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "gpus": 4, "method": "full", "precision": "mixed", "seq_len": 1024}, {"trainer": "dpo"}, []),
    ("trl/example_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "method": "full", "precision": "mixed", "seq_len": 1024}, {}, []),
    ("trl/grpo_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "gpus": 8, "method": "full", "precision": "mixed", "sharding": "zero2"}, {"trainer": "grpo"},
     ["max_prompt_length"]),
    ("trl/kto_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "method": "full", "precision": "mixed", "seq_len": 1024}, {"trainer": "kto"}, []),
    ("trl/reward_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "method": "full", "precision": "mixed", "seq_len": 1024}, {"trainer": "reward"}, []),
    ("trl/rloo_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "gpus": 4, "method": "full", "precision": "mixed"}, {"trainer": "grpo"}, ["max_prompt_length"]),
    ("trl/sft_config.yaml", "trl", "preset", "qwen2.5-0.5b",
     {"batch": 8, "method": "full", "precision": "mixed", "seq_len": 1024}, {"trainer": "sft"}, []),
]


def read(rel: str):
    path = DATA / rel
    return import_config(path.read_bytes(), name=path.name)


def test_every_shipped_config_is_in_the_table():
    files = {str(p.relative_to(DATA)) for p in DATA.rglob("*.y*ml")} - {"mlx_lm/lora_config.yaml"}
    assert files == {row[0] for row in REAL}
    assert len(files) >= 20
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in files | {"mlx_lm/lora_config.yaml"})


@pytest.mark.parametrize(("rel", "stack", "kind", "preset", "settings", "trainer", "refused"), REAL,
                         ids=[row[0] for row in REAL])
def test_a_shipped_config_maps_every_field(rel, stack, kind, preset, settings, trainer, refused):
    imp = read(rel)
    assert imp.stack == stack
    assert (imp.model.kind, imp.model.preset) == (kind, preset)
    assert imp.setup_kwargs == settings
    assert imp.trainer_kwargs == trainer
    assert sorted({e.key for e in imp.not_honoured}) == refused
    # every key of the file is in one of the three lists (read, ignored, not honoured)
    doc_keys = set(json.loads(json.dumps(__import__("yaml").safe_load((DATA / rel).read_text())), parse_int=str))
    listed = {e.key.split(".")[0] for e in imp.read + imp.ignored + imp.not_honoured}
    assert doc_keys <= listed, doc_keys - listed
    setup = imp.setup()
    spec = load_preset(preset or "llama-3.1-8b")
    fitted, _ = fit_targets(spec, setup.lora_targets)
    from dataclasses import replace

    assert estimate(spec, replace(setup, lora_targets=fitted), trainer=imp.trainer_setup()).total_bytes > 0


def test_mlx_lm_lora_config_is_recognised_and_refused_with_a_message():
    with pytest.raises(ConfigError, match="mlx-lm LoRA config"):
        read("mlx_lm/lora_config.yaml")


# ---- Axolotl --------------------------------------------------------------------------------------------------

def axolotl(text: str, **kw):
    return import_config("base_model: meta-llama/Llama-3.2-1B\n" + text, **kw)


def test_axolotl_defaults_are_axolotls():
    imp = axolotl("learning_rate: 0.0002\n")
    assert imp.setup_kwargs == {"method": "full", "seq_len": 512, "batch": 1, "grad_accum": 1, "grad_ckpt": False,
                                "optimizer": "adamw", "precision": "bf16", "attention": "sdpa"}
    assert {e.key for e in imp.read if e.default} >= {"sequence_len", "micro_batch_size", "adapter"}
    assert [e.key for e in imp.ignored] == ["learning_rate"]


@pytest.mark.parametrize(("ds", "sharding", "offload", "params"), [
    ("deepspeed_configs/zero1.json", "zero1", False, False),
    ("deepspeed_configs/zero2.json", "zero2", True, False),  # Axolotl's zero2.json offloads the optimizer
    ("deepspeed_configs/zero3_bf16.json", "zero3", False, False),
    ("deepspeed_configs/zero3_bf16_cpuoffload_all.json", "zero3", True, True),
    ("deepspeed_configs/zero3_bf16_cpuoffload_params.json", "zero3", False, True),
])
def test_axolotl_shipped_deepspeed_configs_by_name(ds, sharding, offload, params):
    imp = axolotl(f"deepspeed: {ds}\n")
    assert imp.setup_kwargs["sharding"] == sharding
    assert imp.setup_kwargs.get("offload_optimizer", False) is offload
    assert imp.setup_kwargs.get("offload_params", False) is params
    assert not [e for e in imp.not_honoured if e.key == "deepspeed"]
    assert any(e.key == "gpus" for e in imp.not_honoured)  # the launcher's GPU count is not in the file
    imp.setup()  # ZeRO-3 parameter offload resolves on one GPU


def test_axolotl_deepspeed_inline_and_attached():
    inline = axolotl('deepspeed: {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}\n')
    assert (inline.setup_kwargs["sharding"], inline.setup_kwargs["offload_optimizer"]) == ("zero3", True)
    attached = {"my_ds.json": b'{"zero_optimization": {"stage": 2}}'}
    imp = axolotl("deepspeed: configs/my_ds.json\n", attachments=attached)
    assert imp.setup_kwargs["sharding"] == "zero2" and "offload_optimizer" not in imp.setup_kwargs
    missing = axolotl("deepspeed: configs/other.json\n")
    assert "sharding" not in missing.setup_kwargs
    assert any("was not given" in e.detail for e in missing.not_honoured)
    junk = axolotl("deepspeed: my_ds.json\n", attachments={"my_ds.json": b"\x00\x01"})
    assert any("not a DeepSpeed JSON" in e.detail for e in junk.not_honoured)


def test_axolotl_checkpoint_offload_spellings():
    hidden = axolotl("gradient_checkpointing: true\nactivation_offloading: hidden_states\n")
    assert hidden.setup_kwargs["offload_activations"] is True and not hidden.not_honoured
    legacy = axolotl("gradient_checkpointing: offload\n")
    assert legacy.setup_kwargs["grad_ckpt"] and legacy.setup_kwargs["offload_activations"]
    assert any(e.key == "gradient_checkpointing" for e in legacy.not_honoured)
    refused = axolotl("activation_offloading: true\n")  # validation.py: needs gradient_checkpointing
    assert "offload_activations" not in refused.setup_kwargs


def test_axolotl_adapters_and_quantisation():
    q = axolotl("adapter: qlora\nload_in_4bit: true\nlora_r: 64\nlora_target_linear: true\n")
    assert (q.setup_kwargs["method"], q.setup_kwargs["lora_rank"], q.setup_kwargs["lora_targets"]) == (
        "qlora", 64, ("all-linear",))
    eight = axolotl("adapter: lora\nload_in_8bit: true\n")
    assert eight.setup_kwargs["method"] == "lora" and eight.setup_kwargs["lora_targets"] == ("q_proj", "v_proj")
    assert any(e.key == "load_in_8bit" for e in eight.not_honoured)
    dq = axolotl("adapter: qlora\nload_in_4bit: true\nbnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n")
    assert dq.setup_kwargs["nf4_double_quant"] is False


def test_axolotl_loss_plugins():
    liger = axolotl("plugins: [axolotl.integrations.liger.LigerPlugin]\nliger_fused_linear_cross_entropy: true\n")
    assert liger.setup_kwargs["loss"] == "fused"
    cce = axolotl("plugins: [axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin]\ncut_cross_entropy: true\n")
    assert cce.setup_kwargs["loss"] == "fused"
    chunked = axolotl("chunked_cross_entropy: true\n")
    assert chunked.setup_kwargs["loss"] == "standard"  # Axolotl's chunked CE still builds the full logits


def test_axolotl_grpo_block():
    imp = axolotl("rl: grpo\nmax_prompt_len: 256\ntrl:\n  beta: 0.04\n  num_generations: 4\n"
                  "  max_completion_length: 1024\n  use_vllm: true\n  vllm_mode: colocate\n"
                  "  vllm_enable_sleep_mode: true\nvllm:\n  gpu_memory_utilization: 0.5\n")
    assert imp.trainer_kwargs == {"trainer": "grpo", "beta": 0.04, "num_generations": 4, "completion_len": 1024,
                                  "prompt_len": 256, "generation": "vllm-colocate", "vllm_gpu_util": 0.5,
                                  "vllm_sleep": True}


# ---- TRL / TrainingArguments -------------------------------------------------------------------------------------

def trl_cfg(text: str, **kw):
    return import_config("model_name_or_path: Qwen/Qwen2.5-0.5B\n" + text, **kw)


@pytest.mark.parametrize(("text", "precision"), [
    ("", "mixed"),  # ModelConfig dtype 'float32' + TRL's bf16 default True: fp32 weights under autocast
    ("bf16: false\n", "fp32"),
    ("dtype: bfloat16\n", "bf16"),
    ("dtype: float16\nfp16: true\n", "fp16"),
    ("dtype: auto\n", "bf16"),
])
def test_trl_precision_follows_modelconfig_dtype(text, precision):
    assert trl_cfg(text).setup_kwargs["precision"] == precision


def test_trl_peft_quantisation_and_defaults():
    imp = trl_cfg("use_peft: true\nload_in_4bit: true\n")
    s = imp.setup_kwargs
    assert (s["method"], s["lora_rank"], s["lora_targets"], s["nf4_double_quant"]) == (
        "qlora", 16, ("q_proj", "v_proj"), False)  # ModelConfig: r=16, use_bnb_nested_quant=False
    assert s["batch"] == 8 and s["seq_len"] == 1024  # TrainingArguments 8, SFTConfig max_length 1024
    assert any(e.key == "lora_dropout" for e in imp.not_honoured)  # ModelConfig default 0.05


def test_trl_trainer_from_keys_name_and_marker():
    assert trl_cfg("num_generations: 4\n").trainer_kwargs["trainer"] == "grpo"
    assert trl_cfg("precompute_ref_log_probs: true\n").trainer_kwargs == {"trainer": "dpo", "precompute_ref": True}
    assert trl_cfg("", name="kto_config.yaml").trainer_kwargs == {"trainer": "kto"}
    marked = import_config("# will-it-fit: stack=trl trainer=orpo gpus=2\nmodel_name_or_path: Qwen/Qwen2.5-0.5B\n")
    assert marked.trainer_kwargs == {"trainer": "orpo"} and marked.setup_kwargs["gpus"] == 2


def test_trl_parallel_launch_arguments():
    zero3 = trl_cfg("accelerate_config: zero3\n")
    assert (zero3.setup_kwargs["sharding"], zero3.setup_kwargs["gpus"]) == ("zero3", 8)  # the profile's 8
    four = trl_cfg("accelerate_config: fsdp2\nnum_processes: 4\n")
    assert (four.setup_kwargs["sharding"], four.setup_kwargs["gpus"]) == ("zero3", 4)
    custom = trl_cfg("accelerate_config: my/accelerate.yaml\n")
    assert any(e.key == "accelerate_config" for e in custom.not_honoured)


def test_trl_renamed_and_null_lengths():
    old = trl_cfg("max_seq_length: 4096\n")
    assert old.setup_kwargs["seq_len"] == 4096 and any(e.key == "max_seq_length" for e in old.not_honoured)
    null = trl_cfg("max_length: null\n")
    assert "seq_len" not in null.setup_kwargs and any(e.key == "max_length" for e in null.not_honoured)


def test_hf_trainer_marker_reads_trainingarguments_names():
    imp = import_config("# will-it-fit: stack=trainer trainer=sft gpus=1\nmodel_name_or_path: Qwen/Qwen2.5-0.5B\n"
                        "dtype: bfloat16\nactivation_checkpointing: true\n"
                        "activation_checkpointing_kwargs: {use_reentrant: false, offload: true}\n"
                        "use_liger_kernel: true\n")
    assert imp.stack == "trainer"
    s = imp.setup_kwargs
    assert (s["grad_ckpt"], s["offload_activations"], s["loss"]) == (True, True, "fused")


# ---- torchtune ----------------------------------------------------------------------------------------------------

def test_torchtune_overrides_apply_before_reading():
    path = DATA / "torchtune/llama3_1/8B_lora_single_device.yaml"
    imp = import_config(path.read_bytes(), name=path.name, overrides=(
        "batch_size=4", "tokenizer.max_seq_len=4096", "model.apply_lora_to_mlp=False", "~clip_grad_norm",
        "enable_activation_offloading=True"))
    s = imp.setup_kwargs
    assert (s["batch"], s["seq_len"], s["lora_targets"], s["offload_activations"]) == (
        4, 4096, ("q_proj", "v_proj", "o_proj"), True)
    assert "max_grad_norm" not in s
    assert [k for k, _ in imp.overrides] == ["batch_size", "tokenizer.max_seq_len", "model.apply_lora_to_mlp",
                                            "clip_grad_norm", "enable_activation_offloading"]
    bad = import_config(path.read_bytes(), overrides=("not an override", "batch_size=0"))
    assert {e.key for e in bad.not_honoured} >= {"not an override", "batch_size"}
    with pytest.raises(ConfigError, match="overrides are torchtune's"):
        import_config((DATA / "trl/sft_config.yaml").read_bytes(), overrides=("batch_size=4",))


def test_torchtune_recipe_refusals():
    path = DATA / "torchtune/llama3_1/8B_full_single_device.yaml"
    imp = import_config(path.read_bytes(), overrides=("gradient_accumulation_steps=4",))
    assert "optimizer_in_bwd" not in imp.setup_kwargs  # the recipe refuses it with accumulation
    assert any(e.key == "optimizer_in_bwd" for e in imp.not_honoured)
    fp16 = import_config(path.read_bytes(), overrides=("dtype=fp16",))
    assert fp16.setup_kwargs["precision"] == "bf16" and any(e.key == "dtype" for e in fp16.not_honoured)


def test_torchtune_unknown_builder_names_no_model():
    path = DATA / "torchtune/llama3_1/8B_lora_single_device.yaml"
    imp = import_config(path.read_bytes(), overrides=("model._component_=torchtune.models.mistral.lora_mistral_7b",))
    assert imp.model.kind == "none" and imp.setup_kwargs["method"] == "lora"


# ---- LitGPT --------------------------------------------------------------------------------------------------------

def test_litgpt_devices_shard_and_checkpoint():
    path = DATA / "litgpt/llama-3.2-1B/lora.yaml"
    text = path.read_text().replace("devices: 1", "devices: 4")
    s = import_config(text).setup_kwargs
    assert (s["gpus"], s["sharding"], s["grad_ckpt"], s["grad_accum"]) == (4, "zero3", True, 2)  # 8 // 4 // 1


def test_litgpt_quantize_spellings():
    base = "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nlora_r: 8\n"
    assert import_config(base + "quantize: bnb.nf4-dq\n").setup_kwargs["nf4_double_quant"] is True
    int8 = import_config(base + "quantize: bnb.int8-training\n")
    assert int8.setup_kwargs["method"] == "lora" and any(e.key == "quantize" for e in int8.not_honoured)


# ---- models ---------------------------------------------------------------------------------------------------------

def test_model_references():
    assert ref_from_name("llama-3.1-8b") == ModelRef("preset", "llama-3.1-8b", "llama-3.1-8b")
    assert ref_from_name("meta-llama/Llama-3.1-8B").kind == "preset"
    assert ref_from_name("unsloth/Llama-3.2-1B-Instruct") == ModelRef("hub", "unsloth/Llama-3.2-1B-Instruct",
                                                                      "llama-3.2-1b")
    assert ref_from_name("acme/secret-model") == ModelRef("hub", "acme/secret-model", None)
    assert ref_from_name("/data/models/llama").kind == "local"
    assert ref_from_name("your-org/your-model").kind == "none"
    assert ref_from_torchtune("torchtune.models.qwen2_5.lora_qwen2_5_7b_instruct").preset == "qwen2.5-7b"
    assert ref_from_litgpt("checkpoints/microsoft/phi-2").preset == "phi-2"
    assert ref_from_litgpt("/mnt/ckpt/llama").kind == "local"


def test_model_choice_tries_the_hub_then_the_same_architecture_preset():
    ref = ref_from_name("NousResearch/Llama-3.2-1B")
    choice, note = model_choice(ref, offline)
    assert choice == "llama-3.2-1b" and "stands in" in note
    assert model_choice(ref, lambda model: None) == ("NousResearch/Llama-3.2-1B", "")
    assert model_choice(ref_from_name("acme/secret-model"), offline) == ("acme/secret-model", "")
    assert model_choice(ref_from_name("/data/llama"), offline)[0] is None


def test_fit_targets_maps_llama_names_to_the_models_own():
    phi2 = load_preset("phi-2")
    fitted, note = fit_targets(phi2, ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    assert set(fitted) == {"q_proj", "v_proj", "dense", "fc1", "fc2"} and note
    llama = load_preset("llama-3.1-8b")
    assert fit_targets(llama, ("q_proj", "v_proj")) == (("q_proj", "v_proj"), "")


# ---- the lists ------------------------------------------------------------------------------------------------------

def test_unknown_keys_and_out_of_range_values_are_named_and_the_rest_applies():
    imp = axolotl("micro_batch_sise: 4\nmicro_batch_size: 0\nsequence_len: 99999999999\nlora_r: -3\n"
                  "adapter: lora\ngradient_accumulation_steps: 2\n")
    refused = {e.key: e.detail for e in imp.not_honoured}
    assert "unknown key" in refused["micro_batch_sise"]
    assert "out of range" in refused["micro_batch_size"] and "out of range" in refused["sequence_len"]
    assert "lora_r" in refused
    s = imp.setup_kwargs
    assert s["grad_accum"] == 2 and s["method"] == "lora" and "batch" not in s and "seq_len" not in s


def test_a_combination_the_setup_refuses_moves_to_not_honoured():
    # offloading without checkpointing: Axolotl and the setup both refuse; the rest applies
    imp = trl_cfg("gradient_checkpointing: false\nactivation_offloading: true\nper_device_train_batch_size: 2\n")
    assert "offload_activations" not in imp.setup_kwargs and imp.setup_kwargs["batch"] == 2
    assert any(e.key == "activation_offloading" for e in imp.not_honoured)
    imp.setup()  # resolves
