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
    ("mlx_lm/lora_config.yaml", "mlx", "hub", "llama-3.2-1b",
     {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj"), "method": "lora", "optimizer": "adamw", "precision": "bf16",
      "seq_len": 2048}, {}, []),
    ("mlx_lm/mlx-examples-0.13.1/lora_config.yaml", "mlx", "local", None,
     {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj"), "method": "lora", "optimizer": "adam", "precision": "bf16",
      "seq_len": 2048}, {}, ["lora_layers", "model", "use_dora"]),
    ("mlx_lm/mlx-examples-0.19.1/lora_config.yaml", "mlx", "local", None,
     {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj"), "method": "lora", "optimizer": "adam", "precision": "bf16",
      "seq_len": 2048}, {}, ["model"]),
    ("mlx_lm/v0.22.0/lora_config.yaml", "mlx", "local", None,
     {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj"), "method": "lora", "optimizer": "adamw", "precision": "bf16",
      "seq_len": 2048}, {}, ["model"]),
    ("mlx_lm/v0.26.4/lora_config.yaml", "mlx", "hub", "llama-3.2-1b",
     {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
      "lora_targets": ("q_proj", "v_proj"), "method": "lora", "optimizer": "adamw", "precision": "bf16",
      "seq_len": 2048}, {}, []),
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
_LF_LORA = {"attention": "sdpa", "batch": 1, "grad_accum": 8, "grad_ckpt": True, "lora_rank": 8,
            "lora_targets": ("all-linear",), "method": "lora", "optimizer": "adamw", "precision": "bf16",
            "seq_len": 2048}
_LF_FULL = {"attention": "sdpa", "batch": 1, "grad_accum": 2, "grad_ckpt": True, "method": "full",
            "optimizer": "adamw", "precision": "mixed", "seq_len": 2048}
_QWEN3 = ("hub", None)  # Qwen/Qwen3-4B-Instruct-2507: no preset of that name (Qwen3-4B's config, another RoPE)
REAL += [  # LLaMA-Factory 0.9.5's examples: bf16 LoRA with fp32 adapters, fp32 trained weights for full ('mixed')
    ("llamafactory/train_lora/qwen3_lora_sft.yaml", "llamafactory", *_QWEN3, _LF_LORA, {"trainer": "sft"}, []),
    ("llamafactory/train_lora/qwen3_lora_pretrain.yaml", "llamafactory", *_QWEN3, _LF_LORA, {"trainer": "sft"}, []),
    ("llamafactory/train_lora/qwen3_lora_dpo.yaml", "llamafactory", *_QWEN3, _LF_LORA, {}, ["stage"]),
    ("llamafactory/train_lora/qwen3_lora_kto.yaml", "llamafactory", *_QWEN3, _LF_LORA, {}, ["stage"]),
    ("llamafactory/train_lora/qwen3_lora_reward.yaml", "llamafactory", *_QWEN3, _LF_LORA, {}, ["stage"]),
    ("llamafactory/train_lora/qwen3_lora_sft_ds3.yaml", "llamafactory", *_QWEN3,
     _LF_LORA | {"grad_accum": 2, "sharding": "zero3"}, {"trainer": "sft"}, ["gpus"]),
    ("llamafactory/train_qlora/qwen3_lora_sft_otfq.yaml", "llamafactory", *_QWEN3,
     _LF_LORA | {"method": "qlora", "nf4_double_quant": True}, {"trainer": "sft"}, []),
    ("llamafactory/train_qlora/qwen3_lora_sft_bnb_npu.yaml", "llamafactory", *_QWEN3,
     _LF_LORA | {"method": "qlora", "nf4_double_quant": False}, {"trainer": "sft"}, []),
    ("llamafactory/train_full/qwen3_full_sft.yaml", "llamafactory", *_QWEN3, _LF_FULL | {"sharding": "zero3"},
     {"trainer": "sft"}, ["gpus"]),
    ("llamafactory/extras/llama_pro/llama3_freeze_sft.yaml", "llamafactory", "hub", None,
     _LF_FULL | {"grad_accum": 8}, {"trainer": "sft"}, ["finetuning_type", "use_llama_pro"]),
    ("llamafactory/extras/fsdp_qlora/llama3_lora_sft.yaml", "llamafactory", "hub", None,
     _LF_LORA | {"method": "qlora", "nf4_double_quant": True}, {"trainer": "sft"}, []),
    ("llamafactory/extras/asft/qwen2_full_asft.yaml", "llamafactory", "hub", "qwen2.5-7b",
     _LF_FULL | {"batch": 4, "grad_accum": 8, "sharding": "none"}, {"trainer": "sft"}, ["use_asft_loss"]),
]
_SW_LORA = {"attention": "sdpa", "batch": 1, "grad_accum": 8, "grad_ckpt": True, "lora_rank": 8,
            "lora_targets": ("all-linear",), "method": "lora", "optimizer": "adamw", "precision": "bf16",
            "seq_len": 2048}
_MEGATRON = ["attention_backend", "cross_entropy_loss_fusion", "expert_model_parallel_size", "finetune",
             "global_batch_size", "merge_lora", "micro_batch_size", "moe_aux_loss_coeff",
             "moe_grouped_gemm", "moe_permute_fusion", "moe_shared_expert_overlap", "recompute_granularity",
             "recompute_method", "recompute_num_layers", "sequence_parallel"]
REAL += [  # ms-swift's examples: bf16 LoRA rank 8, its default dropout 0.05 (counted: read)
    ("swift/yaml/deepspeed/sft.yaml", "swift", "hub", "qwen2.5-7b", _SW_LORA | {"sharding": "zero2"},
     {"trainer": "sft"}, ["gpus"]),
    ("swift/yaml/deepspeed/sft.json", "swift", "hub", "qwen2.5-7b", _SW_LORA | {"sharding": "zero2"},
     {"trainer": "sft"}, ["gpus"]),
    ("swift/yaml/megatron/sft.yaml", "swift", "preset", "qwen3.5-35b-a3b",  # Megatron's accumulation: not read
     {k: v for k, v in _SW_LORA.items() if k != "grad_accum"}, {"trainer": "sft"}, _MEGATRON),
    ("swift/train/multi-node/ray/sft.yaml", "swift", "hub", "qwen2.5-7b",  # no max_length: the model's max_model_len
     {k: v for k, v in _SW_LORA.items() if k != "seq_len"} | {"lora_targets": ("q_proj", "k_proj", "v_proj", "o_proj"),
                                                             "sharding": "zero3"},
     {"trainer": "sft"}, ["gpus", "max_length", "use_ray"]),
]


def read(rel: str):
    path = DATA / rel
    return import_config(path.read_bytes(), name=path.name)


def test_every_shipped_config_is_in_the_table():
    files = {str(p.relative_to(DATA)) for p in (*DATA.rglob("*.y*ml"), *DATA.rglob("*.json"))}
    assert files == {row[0] for row in REAL}
    assert len(files) >= 20
    from estimator.job.configs import FORMAT_IDS

    assert {read(row[0]).format for row in REAL} == set(FORMAT_IDS)  # every format has shipped configs
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in files)


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


# ---- LLaMA-Factory ----------------------------------------------------------------------------------------------------

def lf(text: str, **kw):
    return import_config("model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: sft\n" + text, **kw)


def test_llamafactory_defaults_are_its_releases():
    """A file naming only the model and the stage: LLaMA-Factory 0.9.5's dataclass defaults (LoRA rank 8 on every
    linear, cutoff_len 2048, checkpointing on, SDPA) and transformers 5.6's (batch 8, fused AdamW, bf16 off: no
    autocast, the base in the checkpoint's dtype)."""
    imp = lf("")
    assert imp.stack == "llamafactory" and imp.format == "llamafactory"
    assert imp.setup_kwargs == {"method": "lora", "lora_rank": 8, "lora_targets": ("all-linear",), "batch": 8,
                                "seq_len": 2048, "grad_ckpt": True, "optimizer": "adamw", "precision": "bf16",
                                "attention": "sdpa"}
    assert imp.trainer_kwargs == {"trainer": "sft"} and not imp.not_honoured
    assert {e.key for e in imp.read if e.default} == {"finetuning_type", "lora_rank", "lora_target",
                                                      "per_device_train_batch_size", "cutoff_len", "bf16",
                                                      "disable_gradient_checkpointing", "optim", "flash_attn",
                                                      "(format)"}
    assert import_config("model_name_or_path: Qwen/Qwen2.5-0.5B\ncutoff_len: 512\n").stack == "llamafactory"


@pytest.mark.parametrize(("text", "precision", "adapters"), [
    ("finetuning_type: full\nbf16: true\n", "mixed", None),  # fp32 trained weights under autocast
    ("finetuning_type: full\nfp16: true\n", "mixed", None),
    ("finetuning_type: full\n", "fp32", None),  # bf16/fp16 false: fp32 weights, no autocast
    ("finetuning_type: full\npure_bf16: true\nbf16: true\n", "bf16", None),
    ("finetuning_type: lora\nbf16: true\n", "bf16", "fp32"),
    ("finetuning_type: lora\nfp16: true\n", "fp16", "fp32"),
    ("finetuning_type: lora\npure_bf16: true\n", "bf16", "fp32"),  # PEFT keeps the adapters fp32 anyway
])
def test_llamafactory_precision_follows_its_fp32_cast(text, precision, adapters):
    imp = lf(text)
    assert imp.setup_kwargs["precision"] == precision
    assert imp.setup().adapter_dtype == "fp32" or adapters is None


def test_llamafactory_pure_bf16_under_zero3_is_refused_as_llamafactory_does():
    imp = lf("finetuning_type: full\npure_bf16: true\nbf16: true\ndeepspeed: examples/deepspeed/ds_z3_config.json\n")
    assert imp.setup_kwargs["precision"] == "mixed" and imp.setup_kwargs["sharding"] == "zero3"
    assert any(e.key == "pure_bf16" and "384-385" in e.detail for e in imp.not_honoured)


@pytest.mark.parametrize(("ds", "sharding", "offload", "params", "refused"), [
    ("examples/deepspeed/ds_z0_config.json", "none", False, False, False),
    ("examples/deepspeed/ds_z2_config.json", "zero2", False, False, False),
    ("examples/deepspeed/ds_z2_offload_config.json", "zero2", True, False, False),
    ("examples/deepspeed/ds_z3_config.json", "zero3", False, False, False),
    ("examples/deepspeed/ds_z3_offload_config.json", "zero3", True, True, False),
    ("examples/deepspeed/ds_z2_autotp_config.json", "zero2", False, False, True),  # tensor parallelism: said
    ("examples/deepspeed/ds_z3_fp8_config.json", "zero3", True, False, True),
])
def test_llamafactory_shipped_deepspeed_configs_by_name(ds, sharding, offload, params, refused):
    imp = lf(f"finetuning_type: full\nbf16: true\ndeepspeed: {ds}\n")
    s = imp.setup_kwargs
    assert (s["sharding"], s.get("offload_optimizer", False), s.get("offload_params", False)) == (
        sharding, offload, params)
    assert any(e.key == "deepspeed" for e in imp.not_honoured) is refused
    imp.setup()


def test_llamafactory_attached_deepspeed_wins_over_the_shipped_name():
    imp = lf("deepspeed: examples/deepspeed/ds_z3_config.json\n",
             attachments={"ds_z3_config.json": b'{"zero_optimization": {"stage": 2}}'})
    assert imp.setup_kwargs["sharding"] == "zero2"


@pytest.mark.parametrize(("text", "settings", "refused"), [
    ("disable_gradient_checkpointing: true\n", {"grad_ckpt": False}, set()),
    ("use_unsloth_gc: true\n", {"grad_ckpt": True, "offload_activations": True}, set()),
    ("disable_gradient_checkpointing: true\nuse_unsloth_gc: true\n", {"grad_ckpt": False}, {"use_unsloth_gc"}),
    ("disable_gradient_checkpointing: true\ngradient_checkpointing: true\n", {"grad_ckpt": True}, set()),
    ("flash_attn: disabled\n", {"attention": "eager"}, set()),
    ("flash_attn: fa2\n", {"attention": "sdpa"}, set()),
    ("enable_liger_kernel: true\n", {"loss": "fused"}, set()),
    ("lora_target: q_proj, v_proj\nlora_rank: 64\n", {"lora_targets": ("q_proj", "v_proj"), "lora_rank": 64},
     set()),
    ("lora_target: [q_proj, all]\n", {"lora_targets": None}, {"lora_target"}),
    ("quantization_bit: 4\ndouble_quantization: false\n", {"method": "qlora", "nf4_double_quant": False}, set()),
    ("quantization_bit: 4\nupcast_layernorm: true\n", {"method": "qlora", "qlora_prep": "norms"}, set()),
    ("quantization_bit: 8\n", {"method": "lora"}, {"quantization_bit"}),
    ("quantization_bit: 4\nquantization_method: hqq\n", {"method": "qlora"}, {"quantization_method"}),
    ("finetuning_type: full\nquantization_bit: 4\n", {"method": "full"}, {"quantization_bit"}),
    ("finetuning_type: freeze\nfreeze_trainable_layers: 4\n", {"method": "full"}, {"finetuning_type"}),
    ("finetuning_type: oft\n", {"method": "lora"}, {"finetuning_type"}),
    ("optim: adamw_8bit\nmax_grad_norm: 0.5\n", {"optimizer": "adamw_8bit", "max_grad_norm": 0.5}, set()),
    ("use_galore: true\ngalore_rank: 8\n", {"optimizer": "adamw"}, {"use_galore"}),
    ("use_unsloth: true\nuse_dora: true\nupcast_lmhead_output: true\n", {}, {"use_unsloth", "use_dora",
                                                                                "upcast_lmhead_output"}),
    ("neat_packing: true\n", {}, {"neat_packing"}),
    ("neat_packing: true\nflash_attn: fa2\n", {}, set()),
    ("freeze_vision_tower: false\nfreeze_multi_modal_projector: false\n", {"train_tower": True}, set()),
    ("freeze_vision_tower: false\n", {"train_tower": None}, {"freeze_vision_tower"}),
    ("stage: pt\n", {}, set()),
    ("stage: ppo\nreward_model: x/y\n", {}, {"stage"}),
    ("fsdp: full_shard auto_wrap offload\n", {"sharding": "zero3", "offload_optimizer": True, "offload_params": True},
     {"fsdp", "gpus"}),
])
def test_llamafactory_keys(text, settings, refused):
    imp = import_config("model_name_or_path: Qwen/Qwen2.5-0.5B\ncutoff_len: 1024\n" + text)
    assert imp.stack == "llamafactory"
    for name, value in settings.items():
        assert imp.setup_kwargs.get(name) == value, (name, imp.setup_kwargs)
    assert {e.key for e in imp.not_honoured} == refused
    imp.setup()


def test_llamafactory_stage_decides_the_trainer_and_its_own_stages_are_refused():
    assert lf("").trainer_kwargs == {"trainer": "sft"}
    pt = import_config("model_name_or_path: x/y\nstage: pt\n")
    assert pt.trainer_kwargs == {"trainer": "sft"} and any("pre-training" in e.detail for e in pt.read)
    dpo = import_config("model_name_or_path: x/y\nstage: dpo\npref_beta: 0.2\npref_loss: sigmoid\n")
    assert dpo.trainer_kwargs == {} and {e.key for e in dpo.not_honoured} == {"stage"}
    assert {e.key for e in dpo.ignored} >= {"pref_beta", "pref_loss"}
    rm = import_config("model_name_or_path: x/y\nstage: rm\n")
    assert "value-head" in next(e.detail for e in rm.not_honoured if e.key == "stage")
    marked = import_config("# will-it-fit: stack=llamafactory trainer=dpo gpus=2\nmodel_name_or_path: x/y\n"
                           "stage: sft\n")
    assert marked.trainer_kwargs == {"trainer": "sft"} and marked.setup_kwargs["gpus"] == 2


def test_llamafactory_does_not_take_other_formats():
    """Its fingerprint keys are in no other format's schema; a TRL file stays TRL's, an Axolotl file Axolotl's."""
    from estimator.job.configs import llamafactory
    from estimator.job.configs._fields import load_keys

    others = set().union(*(load_keys(n) for n in ("axolotl", "trl", "torchtune", "litgpt", "mlx_lm")))
    assert not (set(llamafactory._STRONG) | set(llamafactory._OWN_KEYS)) & others
    assert set(llamafactory._STRONG) | set(llamafactory._OWN_KEYS) <= llamafactory.SCHEMA
    assert trl_cfg("per_device_train_batch_size: 2\nbf16: true\n").format == "trl"
    from estimator.job.configs import trl

    assert {k: 2 if k in ("model_name_or_path", "per_device_train_batch_size") else 1
            for k in llamafactory._SHARED_KEYS} == llamafactory._SHARED_KEYS  # trl.score's weights
    assert set(llamafactory._SHARED_KEYS) <= set(trl._OWN_KEYS) & llamafactory.SCHEMA


# ---- ms-swift -------------------------------------------------------------------------------------------------------

def swift_cfg(text: str, **kw):
    return import_config("model: Qwen/Qwen2.5-0.5B\ntuner_type: lora\n" + text, **kw)


def test_swift_defaults_are_its_releases():
    """ms-swift 4.6.0's own defaults when the file leaves them out: batch 1 with accumulation ceil(16 / (batch × GPUs)),
    LoRA rank 8 on every linear, checkpointing on, the checkpoint's dtype (bf16 assumed), fused AdamW; its dropout
    0.05 and the model's max_model_len as max_length are listed, not guessed."""
    imp = swift_cfg("")
    assert imp.stack == "swift" and imp.format == "swift" and imp.model.preset == "qwen2.5-0.5b"
    assert imp.setup_kwargs == {"method": "lora", "lora_rank": 8, "lora_targets": ("all-linear",), "batch": 1,
                                "grad_accum": 16, "precision": "bf16", "grad_ckpt": True, "optimizer": "adamw",
                                "attention": "sdpa"}
    assert sorted(e.key for e in imp.not_honoured) == ["max_length"]
    assert {e.key for e in imp.read if e.default} >= {"gradient_accumulation_steps", "lora_rank", "torch_dtype"}
    assert imp.setup().seq_len == 2048  # the stack's own length
    four = swift_cfg("per_device_train_batch_size: 2\nENV: {NPROC_PER_NODE: 4, CUDA_VISIBLE_DEVICES: '0,1,2,3'}\n")
    assert (four.setup_kwargs["gpus"], four.setup_kwargs["grad_accum"]) == (4, 2)  # ceil(16 / 2 / 4)
    nodes = swift_cfg("ENV: {NPROC_PER_NODE: 8, NNODES: 2}\n")
    assert (nodes.setup_kwargs["gpus"], nodes.setup_kwargs["grad_accum"]) == (16, 1)


@pytest.mark.parametrize(("text", "precision"), [
    ("torch_dtype: bfloat16\n", "bf16"), ("torch_dtype: float16\n", "fp16"),
    ("torch_dtype: float32\n", "mixed"),  # model_args.py:133-134: fp16 autocast for float32 weights
    ("torch_dtype: float32\nbf16: true\n", "mixed"), ("torch_dtype: float32\nbf16: false\nfp16: false\n", "fp32"),
    ("torch_dtype: bfloat16\nbf16: false\n", "bf16"),
])
def test_swift_precision_is_the_weights_dtype_and_its_autocast(text, precision):
    assert swift_cfg(text).setup_kwargs["precision"] == precision


@pytest.mark.parametrize(("text", "settings", "refused"), [
    ("quant_method: bnb\nquant_bits: 4\n", {"method": "qlora", "nf4_double_quant": True}, []),
    ("quant_method: bnb\nquant_bits: 4\nbnb_4bit_use_double_quant: false\n", {"method": "qlora",
                                                                                  "nf4_double_quant": False}, []),
    ("quant_method: bnb\nquant_bits: 8\n", {"method": "lora"}, ["quant_bits"]),
    ("quant_method: hqq\nquant_bits: 4\n", {"method": "lora"}, ["quant_bits"]),
    ("quant_method: bnb\n", {"method": "lora"}, ["quant_method"]),
    ("quant_bits: 4\n", {"method": "lora"}, ["quant_bits"]),
    ("tuner_type: full\nquant_method: bnb\nquant_bits: 4\n", {"method": "full"}, ["quant_bits"]),
    ("lora_rank: 64\ntarget_modules: [q_proj, v_proj]\nlora_dropout: 0.0\nlora_dtype: bfloat16\n",
     {"lora_rank": 64, "lora_targets": ("q_proj", "v_proj"), "adapter_dtype": "bf16"}, ["lora_dropout"]),
    ("target_modules: all-linear all-embedding\n", {"lora_targets": ("all-linear",)}, ["target_modules"]),
    ("tuner_type: adalora\n", {"method": "lora"}, ["tuner_type"]),
    ("tuner_backend: unsloth\n", {"method": "lora"}, ["tuner_backend"]),
    ("deepspeed: zero2_offload\n", {"sharding": "zero2", "offload_optimizer": True}, ["gpus"]),
    ("deepspeed: zero3_offload\n", {"sharding": "zero3", "offload_optimizer": True, "offload_params": True},
     ["gpus"]),
    ("deepspeed: '{\"zero_optimization\": {\"stage\": 1}}'\n", {"sharding": "zero1"}, ["gpus"]),
    ("fsdp: fsdp2\n", {"sharding": "zero3"}, ["gpus"]),
    ("ENV: {CUDA_VISIBLE_DEVICES: '0,1'}\n", {}, ["ENV.CUDA_VISIBLE_DEVICES"]),
    ("use_liger_kernel: true\ngradient_checkpointing: false\nattn_impl: eager\n",
     {"loss": "fused", "grad_ckpt": False, "attention": "eager"}, []),
    ("freeze_vit: false\nfreeze_aligner: false\n", {"train_tower": True}, []),
    ("freeze_vit: false\n", {}, ["freeze_vit"]),
    ("sequence_parallel_size: 2\nuse_dora: true\noptimizer: galore\n", {}, ["optimizer", "sequence_parallel_size",
                                                                             "use_dora"]),
    ("packing: true\npadding_free: true\nuse_logits_to_keep: false\n", {}, []),
])
def test_swift_keys(text, settings, refused):
    imp = swift_cfg("max_length: 1024\nlora_dropout: 0.05\n" + text if "lora_dropout" not in text else
                    "max_length: 1024\n" + text)
    assert imp.stack == "swift"
    assert {k: imp.setup_kwargs.get(k) for k in settings} == settings
    assert sorted(e.key for e in imp.not_honoured) == refused
    imp.setup()


def test_swift_rlhf_is_its_own_trainer_and_refused():
    """swift rlhf's trainers subclass TRL < 1.0 on the full logits: refused with the stack's reason, estimated as SFT;
    a file with swift rlhf's keys but no rlhf_type is its default DPO."""
    imp = swift_cfg("rlhf_type: grpo\nnum_generations: 8\nuse_vllm: true\nbeta: 0.04\n")
    (entry,) = [e for e in imp.not_honoured if e.key == "rlhf_type"]
    assert "ms-swift runs its own GRPO step" in entry.detail and "estimated as SFT" in entry.detail
    assert imp.trainer_kwargs == {} and {"num_generations", "use_vllm", "beta"} <= {e.key for e in imp.not_honoured}
    dpo = swift_cfg("beta: 0.1\n")
    assert "ms-swift runs its own DPO step" in next(e for e in dpo.not_honoured if e.key == "rlhf_type").detail
    assert swift_cfg("").trainer_kwargs == {"trainer": "sft"}


def test_swift_does_not_take_other_formats():
    """Its fingerprint keys are in no other format's schema; a TRL or LLaMA-Factory file stays theirs."""
    from estimator.job.configs import swift, trl
    from estimator.job.configs._fields import load_keys

    others = set().union(*(load_keys(n) for n in ("axolotl", "trl", "torchtune", "litgpt", "mlx_lm", "llamafactory")))
    assert not (set(swift._STRONG) | set(swift._OWN_KEYS)) & others
    assert set(swift._STRONG) | set(swift._OWN_KEYS) <= swift.SCHEMA
    assert {k: 2 if k in ("model", "per_device_train_batch_size") else 1 for k in swift._SHARED_KEYS} == \
        swift._SHARED_KEYS  # trl.score's weights (model: as model_name_or_path)
    assert set(swift._SHARED_KEYS) - {"model"} <= set(trl._OWN_KEYS) & swift.SCHEMA
    assert trl_cfg("per_device_train_batch_size: 2\nbf16: true\nmax_length: 512\n").format == "trl"
    assert import_config("model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: sft\nmax_length: 512\n").stack == "llamafactory"
    assert import_config("model: Qwen/Qwen2.5-0.5B\nfine_tune_type: lora\nbatch_size: 2\n").stack == "mlx"


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


def test_litgpt_num_nodes_without_devices_lists_the_key_it_read():
    """num_nodes alone: LitGPT's devices default of 1 per node; the read list names num_nodes and its value (it once
    showed the reader's internal 'missing' marker under devices)."""
    base = "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nlora_r: 8\nnum_nodes: 2\n"
    imp = import_config(base)
    gpus = [(e.key, e.value) for e in imp.read if e.setting == "gpus"]
    assert gpus == [("num_nodes", "2")] and imp.setup_kwargs["gpus"] == 2
    assert "object at" not in repr(imp.as_json())


def test_litgpt_quantize_spellings():
    base = "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nlora_r: 8\n"
    assert import_config(base + "quantize: bnb.nf4-dq\n").setup_kwargs["nf4_double_quant"] is True
    int8 = import_config(base + "quantize: bnb.int8-training\n")
    assert int8.setup_kwargs["method"] == "lora" and any(e.key == "quantize" for e in int8.not_honoured)


# ---- mlx-lm ---------------------------------------------------------------------------------------------------------

def mlx_cfg(text: str, **kw):
    return import_config("model: mlx-community/Llama-3.2-1B-Instruct-bf16\nfine_tune_type: lora\n" + text, **kw)


def test_mlx_lm_defaults_are_mlx_lms():
    """A file that names only the model and the method: CONFIG_DEFAULTS (mlx_lm/lora.py:45-82), the default entries
    marked as such."""
    imp = mlx_cfg("")
    assert imp.stack == "mlx" and imp.format == "mlx_lm"
    assert imp.setup_kwargs == {"batch": 4, "grad_accum": 1, "grad_ckpt": False, "lora_layers": 16, "lora_rank": 8,
                                "lora_targets": ("all-linear",), "method": "lora", "optimizer": "adam",
                                "precision": "bf16", "seq_len": 2048}
    assert {e.key for e in imp.read if e.default} >= {"num_layers", "batch_size", "max_seq_length", "optimizer",
                                                      "lora_parameters.rank", "lora_parameters.keys"}
    assert imp.setup() == __import__("estimator.job.stack", fromlist=["x"]).resolve_setup(
        "mlx", **imp.setup_kwargs)
    nothing = import_config("fine_tune_type: lora\niters: 10\n")  # no model: CONFIG_DEFAULTS' Qwen/Qwen3-0.6b
    assert (nothing.model.kind, nothing.model.preset) == ("preset", "qwen3-0.6b")
    assert any(e.key == "model" and e.default for e in nothing.read)


@pytest.mark.parametrize(("layers", "expected"), [(-1, 0), (0, 0), (-5, 0), (8, 8), (16, 16)])
def test_mlx_lm_num_layers(layers, expected):
    """layers[-max(N, 0):]: any N ≤ 0 is every block (the estimate's 0), N the last N (mlx_lm/lora.py:241)."""
    assert mlx_cfg(f"num_layers: {layers}\n").setup_kwargs["lora_layers"] == expected


def test_mlx_lm_fine_tune_types():
    dora = mlx_cfg("").setup_kwargs | import_config("model: x/y\nfine_tune_type: dora\n").setup_kwargs
    assert dora["method"] == "lora" and dora["dora"] is True
    full = import_config("model: Qwen/Qwen2.5-0.5B\nfine_tune_type: full\nnum_layers: -1\n"
                         "lora_parameters: {rank: 8, scale: 20.0, dropout: 0.0}\n")
    s = full.setup_kwargs
    assert s["method"] == "full" and s["lora_layers"] == 0 and "lora_rank" not in s and "lora_targets" not in s
    assert any(e.key == "lora_parameters" and "full fine-tuning" in e.detail for e in full.ignored)
    bad = import_config("model: x/y\nfine_tune_type: qlora\n")
    assert bad.setup_kwargs["method"] == "lora" and any(e.key == "fine_tune_type" for e in bad.not_honoured)


@pytest.mark.parametrize(("name", "preset", "precision", "quant"), [
    ("mlx-community/Llama-3.2-1B-Instruct-bf16", "llama-3.2-1b", "bf16", None),
    ("mlx-community/Llama-3.2-1B-Instruct-4bit", "llama-3.2-1b", "bf16", ("affine", 4, 64)),
    ("mlx-community/Qwen2.5-7B-Instruct-8bit", "qwen2.5-7b", "bf16", ("affine", 8, 64)),
    ("mlx-community/Qwen3-8B-4bit-DWQ", "qwen3-8b", "bf16", ("affine", 4, 64)),
    ("mlx-community/Mistral-7B-v0.3-mxfp4", "mistral-7b-v0.3", "bf16", ("mxfp4", 4, 32)),
    ("mlx-community/gemma-2-2b-fp16", "gemma-2-2b", "fp16", None),
    ("mlx-community/Meta-Llama-3.1-8B-Instruct-MLX", "llama-3.1-8b", "bf16", None),
    ("acme/secret-model-4bit", None, "bf16", ("affine", 4, 64)),
])
def test_mlx_lm_repo_names(name, preset, precision, quant):
    """An MLX conversion keeps its original's architecture (the preset stands in offline); its name's -4bit / -mxfp4
    / -fp16 say the base (mlx_lm.convert -q defaults), which the repo's config.json decides when read."""
    imp = import_config(f"model: {name}\nfine_tune_type: lora\n")
    assert (imp.model.kind, imp.model.name, imp.model.preset) == ("hub", name, preset)
    s = imp.setup_kwargs
    assert s["precision"] == precision
    if quant is None:
        assert s["method"] == "lora" and "quant_mode" not in s
    else:
        assert s["method"] == "qlora" and (s["quant_mode"], s["quant_bits"], s["quant_group"]) == quant
    imp.setup()
    full = import_config(f"model: {name}\nfine_tune_type: full\n")
    assert full.setup_kwargs["method"] == "full"
    assert bool(quant) == any("quantised base" in e.detail for e in full.not_honoured)


def test_mlx_lm_lora_parameters():
    imp = mlx_cfg("lora_parameters:\n  keys: [self_attn.q_proj, self_attn.k_proj, self_attn.v_proj, "
                  "self_attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj]\n  rank: 16\n  scale: 10.0\n"
                  "  dropout: 0.0\n")
    assert imp.setup_kwargs["lora_targets"] == ("all-linear",) and imp.setup_kwargs["lora_rank"] == 16
    assert not imp.not_honoured
    head = mlx_cfg("lora_parameters: {keys: [self_attn.q_proj, lm_head, model.embed_tokens], rank: 8, scale: 20.0,"
                   " dropout: 0.0}\n")
    assert head.setup_kwargs["lora_targets"] == ("q_proj",)
    assert any("lm_head" in e.value and "118-120" in e.detail for e in head.not_honoured)
    alpha = mlx_cfg("lora_parameters: {rank: 8, alpha: 16, dropout: 0.0}\n")
    refused = {e.key: e.detail for e in alpha.not_honoured}
    assert "scale" in refused["lora_parameters"] and "not alpha" in refused["lora_parameters"]
    assert alpha.setup_kwargs["lora_rank"] == 8 and alpha.setup_kwargs["lora_targets"] == ("all-linear",)
    dropout = mlx_cfg("lora_parameters: {rank: 8, scale: 20.0, dropout: 0.1, bogus: 1, keys: []}\n")
    keys = {e.key for e in dropout.not_honoured}
    assert {"lora_parameters.dropout", "lora_parameters.bogus", "lora_parameters.keys"} <= keys
    assert dropout.setup_kwargs["lora_targets"] == ("all-linear",)


def test_mlx_lm_optimizers():
    assert mlx_cfg("optimizer: SGD\n").setup_kwargs["optimizer"] == "sgd"  # lora.py:288 lower-cases it
    assert mlx_cfg("optimizer: muon\n").setup_kwargs["optimizer"] == "muon"
    lion = mlx_cfg("optimizer: lion\n")
    assert lion.setup_kwargs["optimizer"] == "adam" and any(e.key == "optimizer" for e in lion.not_honoured)
    factored = mlx_cfg("optimizer: adafactor\noptimizer_config:\n  adafactor: {beta_1: 0.9}\n"
                       "  adamw: {betas: [0.9, 0.98]}\n")
    assert any(e.key == "optimizer_config.adafactor" for e in factored.not_honoured)
    assert any(e.key == "optimizer_config.adamw" and "another optimizer" in e.detail for e in factored.ignored)
    plain = mlx_cfg("optimizer: adamw\noptimizer_config: {adamw: {betas: [0.9, 0.98], weight_decay: 0.05}}\n")
    assert not plain.not_honoured and any(e.key == "optimizer_config.adamw" for e in plain.ignored)


def test_mlx_lm_run_keys():
    imp = mlx_cfg("batch_size: 2\nmax_seq_length: 4096\ngrad_checkpoint: true\ngrad_accumulation_steps: 8\n"
                  "train: false\nmask_prompt: true\nhf_dataset: {path: billsum}\nlr_schedule: {name: cosine_decay}\n"
                  "clear_cache_threshold: 2GB\nreport_to: wandb\nnum_layers: many\nlora_layres: 8\n")
    s = imp.setup_kwargs
    assert (s["batch"], s["seq_len"], s["grad_ckpt"], s["grad_accum"]) == (2, 4096, True, 8)
    assert "lora_layers" not in s  # not a number: the stack's 16 applies
    refused = {e.key: e.detail for e in imp.not_honoured}
    assert set(refused) == {"train", "num_layers", "lora_layres"} and "unknown key" in refused["lora_layres"]
    assert {"mask_prompt", "hf_dataset", "lr_schedule", "clear_cache_threshold", "report_to"} <= {
        e.key for e in imp.ignored}


def test_mlx_lm_marker_and_other_trainers():
    marked = import_config("# will-it-fit: stack=mlx trainer=dpo gpus=1 model=Qwen/Qwen2.5-0.5B dtype=float16 "
                           "q_mode=affine q_bits=8 q_group=32\nmodel: ./mlx_model\nfine_tune_type: lora\n")
    assert marked.stack == "mlx" and marked.trainer_kwargs == {}
    assert any("supervised fine-tuning only" in e.detail for e in marked.not_honoured)
    assert (marked.model.kind, marked.model.preset) == ("preset", "qwen2.5-0.5b")
    s = marked.setup_kwargs
    assert (s["method"], s["precision"], s["quant_mode"], s["quant_bits"], s["quant_group"]) == (
        "qlora", "fp16", "affine", 8, 32)
    assert any(e.key == "model" and "mlx_lm.convert" in e.detail for e in marked.ignored)
    bad = import_config("# will-it-fit: stack=mlx q_mode=nf4 q_bits=4 q_group=64 dtype=int4 model=Qwen/Qwen2.5-0.5B\n"
                        "model: ./mlx_model\n")
    assert {e.key for e in bad.not_honoured} >= {"# will-it-fit: q_mode", "# will-it-fit: dtype"}
    assert bad.setup_kwargs["method"] == "lora"


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
