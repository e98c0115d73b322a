"""TRL's `trl sft|dpo|kto|grpo|reward --config` YAML (the trainer's config, ModelConfig and accelerate's
num_processes; ORPO and SimPO have no command in TRL 1.16: theirs is for TrlParser in a script), and the same YAML
under TrainingArguments' and ModelConfig's names for the stacks without a config file of their own (the HF
Trainer, the plain loop, Unsloth)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...job.trainer import TrainerSetup
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS
from ...options.stacks import STACKS
from ..snippets.axolotl import _line
from ..snippets.common import (
    _DEEPSPEED_STAGES,
    _comment,
    _common_notes,
    _header,
    _learning_rate,
    _model_id,
    _stack_id,
)
from ..snippets.unsloth import _unsloth_notes
from ._common import (
    ExportedConfig,
    _hub_revision,
    _marker,
    _offload_note,
    _text,
    _trainer_marker,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

# TRL 1.16's commands (trl/cli/commands/__init__.py); ORPO and SimPO (CPOConfig) have none.
TRL_COMMANDS = {"sft": "sft", "dpo": "dpo", "kto": "kto", "grpo": "grpo", "reward": "reward"}
_TRL_OFFLOAD_FIELD = frozenset({"sft", "dpo", "kto", "reward"})  # *_config.py with activation_offloading


def _model_lines(spec: ModelSpec, setup: TrainingSetup, stack: str) -> list[tuple[str, object]]:
    """ModelConfig (trl/trainer/model_config.py, 1.16.0): the model, its dtype and attention, PEFT and 4-bit."""
    pairs: list[tuple[str, object]] = [("model_name_or_path", _model_id(spec))]
    revision = _hub_revision(spec)
    if revision:
        pairs.append(("model_revision", revision))
    pairs += [("dtype", PRECISIONS[setup.precision].model_dtype), ("attn_implementation", attention_impl(setup, spec.family))]
    if setup.method == "full":
        return pairs + [("use_peft", False)]
    targets: object = ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets)
    pairs += [("use_peft", True), ("lora_r", setup.lora_rank), ("lora_alpha", 2 * setup.lora_rank),
              ("lora_dropout", 0.0), ("lora_target_modules", targets)]
    if setup.method == "qlora":
        pairs += [("load_in_4bit", True), ("bnb_4bit_quant_type", "nf4"),
                  ("use_bnb_nested_quant", setup.nf4_double_quant)]
    return pairs


def _checkpoint_pairs(setup: TrainingSetup, stack: str, tr: TrainerSetup) -> list[tuple[str, object]]:
    if stack == "unsloth":  # FastLanguageModel.from_pretrained(use_gradient_checkpointing=True | False | "unsloth")
        value: object = "unsloth" if setup.offload_activations else setup.grad_ckpt
        return [("use_gradient_checkpointing", value)]
    if stack == "trl":
        pairs: list[tuple[str, object]] = [("gradient_checkpointing", setup.grad_ckpt)]
        if setup.offload_activations:
            if tr.trainer in _TRL_OFFLOAD_FIELD:
                pairs.append(("activation_offloading", True))
            else:
                pairs.append(("gradient_checkpointing_kwargs", {"use_reentrant": False, "offload": True}))
        return pairs
    pairs = [("activation_checkpointing", setup.grad_ckpt)]  # transformers 5.24 training_args.py
    if setup.grad_ckpt:
        kwargs: dict[str, object] = {"use_reentrant": False}
        if setup.offload_activations:
            kwargs["offload"] = True
        pairs.append(("activation_checkpointing_kwargs", kwargs))
    return pairs


def _deepspeed_pair(setup: TrainingSetup) -> list[tuple[str, object]]:
    if setup.sharding == "none" and not setup.offload_optimizer:
        return []
    zero: dict[str, object] = {"stage": _DEEPSPEED_STAGES.get(setup.sharding, 2)}
    if setup.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
    if setup.offload_params:  # ZeRO-3 offload_param (report/snippets/common.py _deepspeed_lines)
        zero["offload_param"] = {"device": "cpu"}
    return [("deepspeed", {"zero_optimization": zero, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
                           "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"})]


def _trainer_pairs(setup: TrainingSetup, tr: TrainerSetup) -> list[tuple[str, object]]:
    """The trainer's own config keys (trl/trainer/*_config.py, 1.16.0)."""
    opt = tr.option
    pairs: list[tuple[str, object]] = []
    if opt.generates:
        pairs += [("num_generations", tr.gens), ("max_completion_length", tr.completion_length),
                  ("reward_funcs", ["accuracy_reward"])]
        if tr.generation_mode == "hf":
            pairs.append(("use_vllm", False))
        else:
            pairs += [("use_vllm", True),
                      ("vllm_mode", "server" if tr.generation_mode == "vllm-server" else "colocate")]
            if tr.generation_mode == "vllm-colocate":
                pairs += [("vllm_gpu_memory_utilization", tr.vllm_util),
                          ("vllm_enable_sleep_mode", tr.vllm_sleep)]
    else:
        pairs.append(("max_length", setup.seq_len))
    if opt.beta_default is not None:
        pairs.append(("beta", tr.beta_value))
    if opt.id == "simpo":
        pairs += [("loss_type", "simpo"), ("cpo_alpha", 0.0)]
    if opt.can_precompute:
        pairs.append(("precompute_ref_log_probs", tr.precompute_ref))
    return pairs


def _hf_notes(setup: TrainingSetup, stack: str, tr: TrainerSetup, notes: list[str]) -> None:
    """What the TRL-style YAML cannot hold for this stack."""
    _common_notes(setup, stack, notes)
    impl = loss_impl_id(setup)
    if stack == "trl" and impl == "hf" and tr.trainer == "sft":
        notes.append("the full-logits loss: TRL's CLI runs every SFT loss through its fused chunked head (a "
                     "compute_loss_func in a script sees the full logits).")
    if stack == "unsloth" and impl in ("hf", "unsloth_ce"):  # report/snippets/unsloth.py: the env variable
        notes.append("the full-logits loss: Unsloth returns logits only with UNSLOTH_RETURN_LOGITS=1 in the "
                     "environment, which no key of this file sets.")
    if stack == "plain" and impl != "hf":
        notes.append(f"loss {setup.loss}: a plain loop computes the model's own loss.")
    if stack == "unsloth":
        _unsloth_notes(setup, notes)
    if setup.method != "full" and stack == "trl":
        trl_adapter = "bf16" if setup.method == "qlora" or setup.sharding == "zero3" else "fp32"
        if setup.adapter_dtype != trl_adapter:
            notes.append(f"TRL 1.16 makes the LoRA adapters {trl_adapter} here (sft_trainer.py); the estimate counts "
                         f"{setup.adapter_dtype} adapters.")
    if stack in ("trainer", "plain") and setup.method != "full" and setup.adapter_dtype != "fp32":
        notes.append(f"{setup.adapter_dtype} LoRA adapters: no TrainingArguments key casts them (the script does).")
    if stack in ("trainer", "plain") and setup.method == "qlora" and setup.qlora_prep != STACKS[stack].qlora_prep:
        notes.append(f"QLoRA preparation '{setup.qlora_prep}': the script decides it, no key holds it.")
    if setup.compile or setup.optimizer_in_bwd:
        notes.append("compile / optimizer_in_bwd are torchtune's switches.")
    _offload_note(setup, notes, "DeepSpeed offloads under ZeRO stage 2 here")


def _export_hf(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    stack = _stack_id(setup)
    notes: list[str] = []
    _hf_notes(setup, stack, tr, notes)
    precision = PRECISIONS[setup.precision]
    pairs = _model_lines(spec, setup, stack)
    pairs += [("dataset_name", "your-org/your-dataset"), ("output_dir", "out"),
              ("per_device_train_batch_size", setup.batch), ("gradient_accumulation_steps", setup.grad_accum)]
    pairs += _trainer_pairs(setup, tr)
    pairs += _checkpoint_pairs(setup, stack, tr)
    pairs += [("bf16", precision.bf16_flag), ("fp16", precision.fp16_flag),
              ("optim", OPTIMIZERS[setup.optimizer].hf_optim)]
    if setup.optimizer == "sgd":
        pairs.append(("optim_args", f"momentum={SGD_MOMENTUM}"))
    pairs += [("learning_rate", _learning_rate(setup)), ("max_grad_norm", float(setup.max_grad_norm))]
    if stack == "trainer" and setup.loss == "fused":
        pairs.append(("use_liger_kernel", True))
    pairs += _deepspeed_pair(setup)
    if setup.gpus > 1:
        pairs.append(("num_processes", setup.gpus))
    carried = ("prompt_len",) if tr.option.generates else ()
    lines = [_marker(setup, tr, _trainer_marker(tr, carried)), *_header(spec, setup, notes)]
    command = TRL_COMMANDS.get(tr.trainer)
    filename = f"{tr.trainer}_config.yaml" if stack == "trl" else f"{stack}_{tr.trainer}_args.yaml"
    if stack == "trl" and command:
        run = f"trl {command} --config {filename}"
        lines.append(f"# Run with: {run}")
    else:
        cls = tr.option.config_class if tr.trainer != "sft" else ("SFTConfig" if stack in ("trl", "unsloth")
                                                                    else "TrainingArguments")
        run = f"python train.py --config {filename}"
        lines += _comment(f"{STACKS[stack].label} has no config file of its own"
                          + (" (TRL 1.16 has no `trl " + tr.trainer + "` command)" if stack == "trl" else "")
                          + f": these are TRL ModelConfig's and {cls}'s names, read in your script with "
                          f"TrlParser((ScriptArguments, {cls}, ModelConfig)).parse_args_and_config() (or "
                          "HfArgumentParser(...).parse_yaml_file(path, allow_extra_keys=True)); the first line names "
                          "the stack for 'Will it fit?'.")
    if tr.option.generates:
        lines += _comment(f"GRPOConfig has no prompt limit: the estimate assumes prompts of {tr.prompt_length:,} "
                          "tokens (carried in the first line).")
    lines += [_line(k, v) for k, v in pairs]
    return ExportedConfig(stack, filename, _text(lines), run, tuple(notes))
