"""ms-swift's `swift sft` (4.6.0) with the estimate's settings: the snippet is the command line ms-swift's example
scripts write (environment variables, then `swift sft --key value …`), the export the same arguments as the YAML
`swift sft FILE` reads (swift/cli/main.py:38-71 turns each key into `--key value`, after setting its ENV block). Both
come from one list of (key, value) pairs; every value in JSON syntax (a subset of YAML)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...models.hub import is_model_id, parse_model_id
from ...options.losses import LOSS_IMPLS
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS, QLORA_PREPS
from ...options.stacks import STACKS
from .common import (
    _DEEPSPEED_STAGES,
    PLACEHOLDER_MODEL_ID,
    _command,
    _comment,
    _common_notes,
    _deepspeed_dict,
    _learning_rate,
    _model_id,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

CONFIG_FILE = "swift_config.yaml"
# The DeepSpeed configs ms-swift ships, by (ZeRO stage, optimizer offload, parameter offload) → the name --deepspeed
# takes (arguments/sft_args.py:261-267, swift/config/<name>.json).
_SHIPPED_DEEPSPEED = {(1, False, False): "zero1", (2, False, False): "zero2", (2, True, False): "zero2_offload",
                      (3, False, False): "zero3", (3, True, True): "zero3_offload"}
_GPUS_PER_NODE = 8  # a node's GPUs when the count is split over several nodes (NNODES)


def env_pairs(setup: TrainingSetup) -> list[tuple[str, str]]:
    """The launch's environment: NPROC_PER_NODE processes (torchrun, swift/cli/main.py:74-98) on as many visible GPUs,
    one each; a process that saw several would split the model over them (model/utils.py:229-242 device_map 'auto'),
    so CUDA_VISIBLE_DEVICES names one GPU per process. DeepSpeed on one GPU also runs under torchrun."""
    gpus = setup.gpus
    nodes = gpus // _GPUS_PER_NODE if gpus > _GPUS_PER_NODE and gpus % _GPUS_PER_NODE == 0 else 1
    per_node = gpus // nodes
    out = [("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(per_node)))]
    if gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        out.append(("NPROC_PER_NODE", str(per_node)))
    if nodes > 1:
        out.append(("NNODES", str(nodes)))
    return out


def _precision_pairs(setup: TrainingSetup, notes: list[str]) -> list[tuple[str, object]]:
    """torch_dtype (arguments/base_args/model_args.py:74, the weights' dtype), bf16 and fp16 (the autocast; :130-142
    would pick fp16 for float32 weights, so both flags are written)."""
    p = setup.precision
    precision = PRECISIONS[p]
    if p == "fp16" and setup.method == "full":
        notes.append("pure fp16 full fine-tuning: ms-swift's fp16: true is the Trainer's AMP, which refuses to unscale "
                     "fp16 gradients of fp16 weights; train with bfloat16 or float32 weights.")
    return [("torch_dtype", precision.model_dtype), ("bf16", precision.bf16_flag), ("fp16", precision.fp16_flag)]


def _deepspeed(setup: TrainingSetup, notes: list[str]) -> list[tuple[str, object]]:
    """A shipped config by name where one matches, else the JSON itself (arguments/sft_args.py:269-270
    json_parse_to_dict)."""
    if setup.sharding == "none" and not setup.offload_optimizer:
        return []
    stage = _DEEPSPEED_STAGES.get(setup.sharding, 2)  # optimizer offload alone: ZeRO-Offload, stage 2
    if setup.sharding == "none":
        notes.append("optimizer offload without sharding: DeepSpeed offloads under ZeRO stage 2 here (over one GPU it "
                     "shards nothing).")
    name = _SHIPPED_DEEPSPEED.get((stage, setup.offload_optimizer, setup.offload_params))
    if name:
        return [("deepspeed", name)]
    return [("deepspeed", _deepspeed_dict(setup, stage))]


def _swift_notes(setup: TrainingSetup, notes: list[str]) -> None:
    """What the estimate assumes that swift sft's arguments cannot express."""
    _common_notes(setup, "swift", notes)
    if setup.method == "qlora" and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': ms-swift never calls "
                     "prepare_model_for_kbit_training; the norms, embeddings and head stay 16-bit.")
    if setup.offload_activations:
        notes.append("checkpointed layer inputs in CPU RAM: swift sft offloads activations only through FSDP's "
                     "activation_cpu_offload (an fsdp config); with DeepSpeed or one GPU it keeps them on the GPU.")


def config_pairs(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[tuple[str, object]]:
    """swift sft's arguments for the estimate, in the order ms-swift's examples write them."""
    _swift_notes(setup, notes)
    pairs: list[tuple[str, object]] = [("model", _model_id(spec))]
    revision = parse_model_id(spec.name)[1] if spec.source == "hub" and is_model_id(spec.name) else None
    if revision:
        pairs.append(("model_revision", revision))
    pairs += _precision_pairs(setup, notes)
    pairs.append(("attn_impl", attention_impl(setup, spec.family)))
    pairs.append(("tuner_type", "full" if setup.method == "full" else "lora"))
    if setup.method != "full":
        pairs += [("lora_rank", setup.lora_rank), ("lora_alpha", 2 * setup.lora_rank),
                  ("lora_dropout", STACKS["swift"].lora_dropout),  # ms-swift's default, which the estimate counts
                  ("target_modules", ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets))]
        if setup.adapter_dtype != "fp32":
            pairs.append(("lora_dtype", "bfloat16"))  # tuners/peft.py:147-160: no fp32 upcast when set
    if setup.method == "qlora":
        pairs += [("quant_method", "bnb"), ("quant_bits", 4), ("bnb_4bit_quant_type", "nf4"),
                  ("bnb_4bit_use_double_quant", setup.nf4_double_quant),
                  ("bnb_4bit_compute_dtype", PRECISIONS[setup.precision].compute_dtype)]
    if setup.train_tower:
        pairs += [("freeze_vit", False), ("freeze_aligner", False)]
    pairs.append(("gradient_checkpointing", setup.grad_ckpt))
    if setup.loss == "fused":
        pairs.append(("use_liger_kernel", True))
    pairs += [("dataset", "AI-ModelScope/alpaca-gpt4-data-en#500"), ("max_length", setup.seq_len),
              ("per_device_train_batch_size", setup.batch), ("gradient_accumulation_steps", setup.grad_accum),
              ("learning_rate", _learning_rate(setup)), ("optim", OPTIMIZERS[setup.optimizer].hf_optim)]
    if setup.optimizer == "sgd":
        pairs.append(("optim_args", f"momentum={SGD_MOMENTUM}"))
    pairs.append(("max_grad_norm", float(setup.max_grad_norm)))
    pairs += _deepspeed(setup, notes)
    pairs.append(("output_dir", "output"))
    return pairs


def explanation(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """The comment lines above the arguments: the model placeholder, the loss, what the defaults would do."""
    out: list[str] = []
    if _model_id(spec) == PLACEHOLDER_MODEL_ID:
        out.append("# your-org/your-model: the Hub id (or local folder) of the model you estimated.")
    out.append(f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label} (the model's own, on the labelled tokens' logits).")
    out += _comment("gradient_accumulation_steps is written out: ms-swift's default (ceil(16 / (batch × GPUs))) would "
                    "keep the gradients alive through more forwards than the estimate counts. max_length caps each "
                    "example (left out, it is the model's max_model_len).")
    return out


def run_command(filename: str = CONFIG_FILE) -> str:
    """swift sft FILE: the file's ENV block sets the launch (swift/cli/main.py:53-59, 74-98)."""
    return f"swift sft {filename}"


def _value(value: object) -> list[str]:
    """A value as swift sft's command line takes it: lists as separate words, mappings as JSON, booleans lower-case
    (swift/cli/main.py:61-70 writes a config's values the same way)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [json.dumps(value)]
    if isinstance(value, bool):
        return [str(value).lower()]
    return [str(value)]


def _swift(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    """The `swift sft` command, one argument per line, after its environment."""
    pairs = config_pairs(spec, setup, notes)
    env = env_pairs(setup)
    out = explanation(spec, setup)
    if "NNODES" in dict(env):
        out += _comment("Run it on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set (torchrun's).")
    return out + _command([[f"{k}={v}" for k, v in env] + ["swift", "sft"]] + [[f"--{k}", *_value(v)]
                                                                              for k, v in pairs])
