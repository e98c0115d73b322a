"""The TRL 1.16.0 script of a preference/RL trainer (DPOConfig, CPOConfig, ORPOConfig, KTOConfig, GRPOConfig,
RewardConfig) with exactly the estimate's assumptions: the batch, length, beta, reference handling, GRPO's
generations, lengths and generation mode, checkpointing, dtypes, optimizer, LoRA and sharding. The trainer facts
come from estimator/options/trainers.py, the model/LoRA/QLoRA lines from estimator/report/snippets/common.py. Pure text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import policy_setup
from ...options.methods import METHOD_LABELS
from ...options.trainers import GENERATION_MODES, TRL_VERSION
from . import training_snippet
from .common import (
    _bnb_lines,
    _comment,
    _comment_text,
    _deepspeed_lines,
    _freeze_tower_lines,
    _from_pretrained_lines,
    _hf_optim_lines,
    _launch_lines,
    _learning_rate,
    _lora_config_lines,
    _model_id,
    _model_id_lines,
    _precision_flag_lines,
    _py,
)

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...job.trainer import TrainerSetup
    from ...models.spec import ModelSpec


def _header_lines(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """What the script matches (trainer, model, method, batch, lengths), the stack caveat and the launch line."""
    opt = tr.option
    ps = policy_setup(setup, tr)
    length = (f"prompts of {tr.prompt_length:,} + completions of {tr.completion_length:,} tokens"
              if opt.generates else f"max length {setup.seq_len:,} tokens")
    out = [
        f"# {opt.label} matching the 'Will it fit?' estimate: {_comment_text(spec.name)}, {TRL_VERSION}.",
        f"# {METHOD_LABELS[setup.method]}, {setup.precision}, per-device batch {setup.batch}, {length}.",
        *_comment(f"{opt.summary} The estimate prices each training forward on {ps.batch} sequences of "
                  f"{ps.seq_len:,} tokens."),
    ]
    if setup.stack not in (None, "trl"):
        out += _comment(f"The estimate uses the {setup.stack} stack's defaults; this is TRL's own trainer.")
    out += _launch_lines(setup)
    return out


def _model_class(tr: TrainerSetup) -> str:
    """A reward model scores sequences (one label); the others are causal LMs."""
    return "AutoModelForSequenceClassification" if tr.option.head == "score" else "AutoModelForCausalLM"


def _model_lines(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """Imports, the model (a one-label scorer for the reward trainer), its LoRA config and GRPO's reward."""
    opt = tr.option
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    model_class = _model_class(tr)
    out = ["import torch", "from datasets import load_dataset"]
    if lora:
        out.append("from peft import LoraConfig")
    out.append(f"from transformers import {model_class}" + (", BitsAndBytesConfig" if qlora else ""))
    out += [f"from {opt.import_path} import {opt.config_class}, {opt.trainer_class}", ""]
    out += _model_id_lines(_model_id(spec)) + [""]
    if qlora:
        out += _bnb_lines(setup)
    model_lines = _from_pretrained_lines(spec, setup)
    if opt.head == "score":
        model_lines = [line.replace("AutoModelForCausalLM", model_class) for line in model_lines]
        model_lines.insert(-1, "    num_labels=1,  # one score per sequence: no vocabulary logits")
    out += model_lines + _freeze_tower_lines(spec, setup) + [""]
    if lora:
        lora_lines = _lora_config_lines(setup, spec)
        if opt.head == "score":
            lora_lines = [line.replace('"CAUSAL_LM"', '"SEQ_CLS"') for line in lora_lines]
        out += lora_lines + [""]
    if opt.generates:
        out += [
            "def reward_len(completions, **kwargs):  # replace with your reward function(s)",
            "    return [-abs(200 - len(c)) / 100 for c in completions]",
            "",
        ]
    return out


def _generation_lines(tr: TrainerSetup) -> list[str]:
    """GRPO's generations, completion length and generation mode (transformers or vLLM)."""
    mode = tr.generation_mode
    out = [f"    num_generations={tr.gens},",
           f"    max_completion_length={tr.completion_length},",
           f"    # prompts up to {tr.prompt_length:,} tokens: GRPOConfig has no prompt limit; filter your dataset"]
    if mode == "hf":
        out.append(f"    use_vllm=False,  # {GENERATION_MODES[mode].label}")
    else:
        out += ["    use_vllm=True,", f"    vllm_mode={_py('colocate' if mode == 'vllm-colocate' else 'server')},"]
        if mode == "vllm-colocate":
            out += [f"    vllm_gpu_memory_utilization={tr.vllm_util},",
                    f"    vllm_enable_sleep_mode={tr.vllm_sleep},"]
        else:
            out.append("    # start the server first on other GPUs: trl vllm-serve --model <model_id>")
    return out


def _config_lines(setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """The trainer's config: batch, lengths or generations, beta, SimPO's loss, reference precomputation,
    checkpointing, precision, optimizer and sharding."""
    opt = tr.option
    out = [f"training_args = {opt.config_class}(", '    output_dir="out",',
           f"    per_device_train_batch_size={setup.batch},"
           + ("  # counts completions" if opt.generates else ""),
           f"    gradient_accumulation_steps={setup.grad_accum},"]
    if opt.generates:
        out += _generation_lines(tr)
    else:
        out.append(f"    max_length={setup.seq_len},")
    if opt.beta_default is not None:
        out.append(f"    beta={tr.beta_value},")
    if opt.id == "simpo":
        out += ['    loss_type="simpo",', "    cpo_alpha=0.0,  # pure SimPO (CPO's default 1.0 adds an NLL term)"]
    if opt.can_precompute:
        out.append(f"    precompute_ref_log_probs={tr.precompute_ref},")
    out.append(f"    gradient_checkpointing={setup.grad_ckpt},")
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},"]
    out += _deepspeed_lines(setup)
    out.append(")")
    return out


def _trainer_lines(setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """The trainer: model, reward function or reference, data and the PEFT config."""
    opt = tr.option
    out = [f"trainer = {opt.trainer_class}(", "    model=model,"]
    if opt.generates:
        out.append("    reward_funcs=reward_len,")
    elif opt.reference == "always" and setup.method == "full" and tr.uses_reference():
        out.append("    # ref_model=None: TRL loads a frozen copy of the model as the reference")
    out += ["    args=training_args,",
            '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data']
    if setup.method != "full":
        out.append("    peft_config=peft_config," + (
            "  # the reference is the base with the adapter switched off" if tr.uses_reference() else ""))
    out += [")", "trainer.train()"]
    return out


def trainer_snippet(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> str:
    """A runnable TRL script for the trainer (SFT: the stack's training_snippet). Python that compiles."""
    if tr.option.id == "sft":
        return training_snippet(spec, setup)
    out = _header_lines(spec, setup, tr)
    out += _model_lines(spec, setup, tr)
    out += _config_lines(setup, tr)
    out += [""]
    out += _trainer_lines(setup, tr)
    return "\n".join(out) + "\n"
