"""The Axolotl YAML config (and command) for the setup."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS, QLORA_PREPS
from .common import _DEEPSPEED_STAGES, PLACEHOLDER_MODEL_ID, _common_notes, _learning_rate, _model_id

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


# --- Axolotl: a YAML config. Every value is written in JSON syntax (a subset of YAML) ------------------------

def _axolotl(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    impl = loss_impl_id(setup)
    _common_notes(setup, "axolotl", notes)
    if setup.precision == "mixed":
        notes.append("mixed precision (fp32 weights, bf16 autocast): with bf16: true Axolotl loads the model in "
                     "bf16 (utils/config resolve_dtype), so weights are 16-bit here.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': Axolotl 0.19 runs "
                     "prepare_model_for_kbit_training and then casts norms, embed_tokens and lm_head back to the "
                     "model dtype for adapter runs without FSDP (loaders/model.py _configure_embedding_dtypes); "
                     "fp32_norms needs FSDP2, so no key keeps them fp32 on one GPU.")
    if qlora and setup.adapter_dtype == "bf16":
        notes.append("bf16 LoRA adapters on a 4-bit base: PEFT creates them in fp32 and no Axolotl key casts them.")
    elif setup.method == "lora" and setup.adapter_dtype == "bf16" and precision.model_dtype == "float32":
        notes.append("bf16 LoRA adapters on an fp32 model: peft_autocast_adapter_dtype: false keeps them in the "
                     "model dtype (fp32).")
    if qlora and precision.compute_dtype != precision.model_dtype:
        notes.append(f"Axolotl computes the 4-bit matmuls in the load dtype; the estimate assumes "
                     f"{precision.compute_dtype}.")

    def line(key: str, value: object) -> str:
        text = json.dumps(value)
        if isinstance(value, float) and "e" in text and "." not in text:
            text = text.replace("e", ".0e", 1)  # YAML 1.1 (PyYAML, axolotl) reads 2e-05 as a string, 2.0e-05 as a float
        return f"{key}: {text}"

    model_id = _model_id(spec)
    out: list[str] = []
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append("# base_model: the Hub id of the model you estimated")
    out += [line("base_model", model_id), line("output_dir", "./out"),
            line("datasets", [{"path": "train.jsonl", "ds_type": "json", "type": "completion"}]), ""]
    if lora:
        out.append(line("adapter", setup.method))
        if qlora:
            out += [line("load_in_4bit", True),
                    line("bnb_config_kwargs", {"bnb_4bit_use_double_quant": setup.nf4_double_quant})]
        out += [line("lora_r", setup.lora_rank), line("lora_alpha", 2 * setup.lora_rank), line("lora_dropout", 0.0)]
        if setup.lora_targets == (ALL_LINEAR,):
            out.append(line("lora_target_linear", True))
        else:
            out.append(line("lora_target_modules", list(setup.lora_targets)))
        if setup.method == "lora" and setup.adapter_dtype == "bf16":
            out.append(line("peft_autocast_adapter_dtype", False))
        out.append("")
    else:
        out += ["# Full fine-tuning: no adapter.", ""]
    out += [line("sequence_len", setup.seq_len), line("micro_batch_size", setup.batch),
            line("gradient_accumulation_steps", setup.grad_accum)]
    out += [line("gradient_checkpointing", setup.grad_ckpt)]
    if setup.grad_ckpt:
        out.append(line("gradient_checkpointing_kwargs", {"use_reentrant": False}))
    if setup.offload_activations:
        out += ["# Checkpointed layer inputs offloaded to CPU RAM ('offload' / true would offload every activation",
                "# of a LoRA run without recompute instead).",
                line("activation_offloading", "hidden_states")]
    out += [line("attn_implementation", attention_impl(setup, spec.family)), ""]
    out += [line("optimizer", OPTIMIZERS[setup.optimizer].hf_optim)]
    if setup.optimizer == "sgd":
        out.append(line("optim_args", f"momentum={SGD_MOMENTUM}"))
    out += [line("learning_rate", _learning_rate(setup)), line("max_grad_norm", float(setup.max_grad_norm)),
            line("bf16", precision.bf16_flag), line("fp16", precision.fp16_flag), ""]
    out.append(f"# Loss: {LOSS_IMPLS[impl].label}.")
    if setup.loss == "fused":
        out += [line("plugins", ["axolotl.integrations.liger.LigerPlugin"]),
                line("liger_fused_linear_cross_entropy", True)]
    if setup.sharding != "none" or setup.offload_optimizer:
        stage = _DEEPSPEED_STAGES.get(setup.sharding, 2)
        zero: dict[str, object] = {"stage": stage}
        if setup.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        out += ["", "# DeepSpeed config inline (a path such as deepspeed_configs/zero3.json works too).",
                line("deepspeed", {"zero_optimization": zero, "bf16": {"enabled": "auto"},
                                   "fp16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
                                   "gradient_accumulation_steps": "auto"})]
    if setup.gpus > 1:
        out.append(f"# Launch with: accelerate launch --num_processes {setup.gpus} -m axolotl.cli.train config.yml")
    else:
        out.append("# Launch with: axolotl train config.yml")
    return out
