"""Export: the estimate's setup as its stack's config file, which `import_config` reads back to the same estimate.

- Axolotl: the YAML config (the snippet is already one), with Axolotl's rl / trl / vllm keys for the trainers;
- torchtune: the recipe YAML: torchtune 0.6.1's shipped single-device config for the model and method
  (torchtune_bases.json) with the estimate's values, for `tune run <recipe> --config FILE`;
- LitGPT: the finetune YAML (config_hub's layout) for `litgpt finetune_lora|finetune_full --config FILE`;
- TRL: the YAML `trl sft|dpo|kto|grpo|reward --config FILE` reads (the trainer's config, ModelConfig and
  accelerate's num_processes); ORPO and SimPO have no command in TRL 1.16, so theirs is for TrlParser in a script;
- MLX-LM: mlx-lm's lora_config.yaml for `mlx_lm.lora --config FILE` (SFT only: the stack refuses the other
  trainers); a base to quantise or cast is converted first with mlx_lm.convert (the command in the header, the model
  and conversion in the marker), and the file trains on the converted folder;
- HF Trainer, plain PyTorch loop, Unsloth: these have no config file of their own. Theirs is the same YAML under
  transformers TrainingArguments' and TRL ModelConfig's names, which a script reads with HfArgumentParser; the
  first line, a comment every tool ignores, names the stack, so importing it gives back the same stack.

Every file starts with the marker comment `# will-it-fit: stack=… trainer=… gpus=…` (plus the model where the
format has no field for it, and the trainer's options the tool's file cannot hold), then the snippet's header: what
the estimate assumes and what the file cannot express. Pure text; values in JSON syntax (a subset of YAML)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl, loss_impl_id
from ...job.trainer import TrainerSetup, check
from ...models.hub import parse_model_id
from ...models.spec import LM_HEAD
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS
from ...options.stacks import STACKS
from ..snippets.axolotl import _axolotl, _line
from ..snippets.common import (
    _ATTN_TARGETS,
    _DEEPSPEED_STAGES,
    _TORCHTUNE_RECIPES,
    _TORCHTUNE_TEMPLATE,
    PLACEHOLDER_MODEL_ID,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_DTYPES,
    _adapter_switches,
    _comment,
    _common_notes,
    _header,
    _learning_rate,
    _model_id,
    _stack_id,
)
from ..snippets.litgpt import _litgpt_notes, _litgpt_precision
from ..snippets.mlx import _line as mlx_line
from ..snippets.mlx import config_pairs, convert_args
from ..snippets.torchtune import _torchtune_notes
from ..snippets.unsloth import _unsloth_notes

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec

# TRL 1.16's commands (trl/cli/commands/__init__.py); ORPO and SimPO (CPOConfig) have none.
TRL_COMMANDS = {"sft": "sft", "dpo": "dpo", "kto": "kto", "grpo": "grpo", "reward": "reward"}
_TRL_OFFLOAD_FIELD = frozenset({"sft", "dpo", "kto", "reward"})  # *_config.py with activation_offloading
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "mixed": "float32", "fp32": "float32"}


@dataclass(frozen=True)
class ExportedConfig:
    """A stack's config file for the estimate: its name, text and language, the command that runs it, and what the
    file cannot express (the run differs from the estimate there; also written in the file's header)."""

    stack: str
    filename: str
    text: str
    command: str
    notes: tuple[str, ...]
    language: str = "yaml"


def _marker(setup: TrainingSetup, tr: TrainerSetup, extra: dict[str, object] | None = None) -> str:
    parts = {"stack": _stack_id(setup), "trainer": tr.trainer, "gpus": setup.gpus, **(extra or {})}
    return "# will-it-fit: " + " ".join(f"{k}={_token(v)}" for k, v in parts.items())


def _token(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value).replace(" ", "")


def _trainer_marker(tr: TrainerSetup, carried: tuple[str, ...]) -> dict[str, object]:
    """The trainer's options a format has no key for, carried in the marker (TrainerSetup field names)."""
    values = {"beta": tr.beta_value, "precompute_ref": tr.precompute_ref, "num_generations": tr.gens,
              "prompt_len": tr.prompt_length, "completion_len": tr.completion_length,
              "generation": tr.generation_mode, "vllm_gpu_util": tr.vllm_util, "vllm_sleep": tr.vllm_sleep}
    opt = tr.option
    applies = {"beta": opt.beta_default is not None, "precompute_ref": opt.can_precompute}
    applies |= {k: opt.generates for k in ("num_generations", "prompt_len", "completion_len", "generation")}
    applies |= {k: opt.generates and tr.generation_mode == "vllm-colocate" for k in ("vllm_gpu_util", "vllm_sleep")}
    return {k: values[k] for k in carried if applies[k]}


def _hub_revision(spec: ModelSpec) -> str | None:
    if spec.source == "hub":
        try:
            return parse_model_id(spec.name)[1]
        except ValueError:
            return None
    return None


def _offload_note(setup: TrainingSetup, notes: list[str], how: str) -> None:
    """Optimizer offload without sharding: the tools offload under a sharding strategy; over one GPU it shards
    nothing, so the memory is the same, but the file reads back with that sharding."""
    if setup.offload_optimizer and setup.sharding == "none":
        notes.append(f"optimizer offload without sharding: {how} (over one GPU it shards nothing).")


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# ---- Axolotl ----------------------------------------------------------------------------------------------------

_AXOLOTL_RL = {"dpo": "dpo", "orpo": "orpo", "kto": "kto", "simpo": "simpo", "grpo": "grpo"}


def _axolotl_trainer_lines(setup: TrainingSetup, tr: TrainerSetup) -> list[str]:
    """rl, rl_beta, precompute_ref_log_probs, reward_model, GRPO's trl: and vllm: blocks (axolotl 0.19.0
    utils/schemas/config.py, trl.py, vllm.py; core/builders/rl.py)."""
    if tr.trainer == "sft":
        return []
    if tr.trainer == "reward":
        return ["", "# Reward model (TRL RewardTrainer).", _line("reward_model", True)]
    out = ["", f"# {tr.option.label} (TRL {tr.option.trainer_class} through Axolotl's rl:).",
           _line("rl", _AXOLOTL_RL[tr.trainer])]
    if tr.option.generates:
        block: dict[str, object] = {"beta": tr.beta_value, "num_generations": tr.gens,
                                    "max_completion_length": tr.completion_length,
                                    "reward_funcs": ["your_rewards.reward_len"]}
        if tr.generation_mode != "hf":
            block |= {"use_vllm": True, "vllm_mode": "server" if tr.generation_mode == "vllm-server" else "colocate"}
            if tr.generation_mode == "vllm-colocate":
                block["vllm_enable_sleep_mode"] = tr.vllm_sleep
        out += [_line("trl", block), _line("max_prompt_len", tr.prompt_length)]
        if tr.generation_mode == "vllm-colocate":
            out.append(_line("vllm", {"gpu_memory_utilization": tr.vllm_util}))
        return out
    out.append(_line("rl_beta", tr.beta_value))
    if tr.option.can_precompute:
        out.append(_line("precompute_ref_log_probs", tr.precompute_ref))
    return out


def _export_axolotl(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    body = _axolotl(spec, setup, notes)
    _offload_note(setup, notes, "DeepSpeed offloads under ZeRO stage 2 here")
    revision = _hub_revision(spec)
    if revision:
        body.insert(next(i for i, line in enumerate(body) if line.startswith("base_model:")) + 1,
                    _line("revision_of_model", revision))
    launch = [i for i, line in enumerate(body) if line.startswith("# Launch with:")]
    at = launch[0] if launch else len(body)
    body[at:at] = _axolotl_trainer_lines(setup, tr)
    lines = [_marker(setup, tr), *_header(spec, setup, notes), *body]
    return ExportedConfig("axolotl", "axolotl_config.yml", _text(lines), "axolotl train axolotl_config.yml",
                          tuple(notes))


# ---- TRL and the stacks without a config file of their own --------------------------------------------------------

def _model_lines(spec: ModelSpec, setup: TrainingSetup, stack: str) -> list[tuple[str, object]]:
    """ModelConfig (trl/trainer/model_config.py, 1.16.0): the model, its dtype and attention, PEFT and 4-bit."""
    pairs: list[tuple[str, object]] = [("model_name_or_path", _model_id(spec))]
    revision = _hub_revision(spec)
    if revision:
        pairs.append(("model_revision", revision))
    pairs += [("dtype", _DTYPES[setup.precision]), ("attn_implementation", attention_impl(setup, spec.family))]
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


# ---- torchtune ---------------------------------------------------------------------------------------------------

def _torchtune_bases() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("torchtune_bases.json").read_text(encoding="utf-8")
    return json.loads(text)["configs"]


_TORCHTUNE_LOSS = {"torchtune": "torchtune.modules.loss.CEWithChunkedOutputLoss",
                   "torchtune_full": "torch.nn.CrossEntropyLoss"}


def _torchtune_optimizer(setup: TrainingSetup, base: dict[str, Any]) -> dict[str, Any]:
    """The optimizer block: the estimate's class with the base config's lr and weight decay."""
    opt = OPTIMIZERS[setup.optimizer]
    out: dict[str, Any] = {"_component_": opt.torch_class}
    if setup.optimizer == "adamw":
        out["fused"] = True
    elif setup.optimizer == "adamw_foreach":
        out |= {"fused": False, "foreach": True}
    else:
        out |= opt.torch_init_kwargs
    for key in ("weight_decay", "lr"):
        if key in base.get("optimizer", {}):
            out[key] = base["optimizer"][key]
    return out


def _export_torchtune(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    _torchtune_notes(setup, notes)
    _offload_note(setup, notes, "the distributed recipes offload under FSDP's full shard")
    known = TORCHTUNE_CONFIGS.get(spec.source)
    placeholder = not (known and setup.method in known[1])
    prefix = _TORCHTUNE_TEMPLATE if placeholder else known[0]  # type: ignore[index]
    bases = _torchtune_bases()
    doc = json.loads(json.dumps(bases.get(f"{prefix}_{setup.method}") or bases[f"{_TORCHTUNE_TEMPLATE}_lora"]))
    if setup.method != "full":
        switches = _adapter_switches(setup, notes, "torchtune")
        builder = doc["model"]["_component_"]
        doc["model"] = {"_component_": builder,
                        "lora_attn_modules": [tt for name, (tt, _) in _ATTN_TARGETS.items() if switches[name]],
                        "apply_lora_to_mlp": switches["mlp"], "apply_lora_to_output": switches["lm_head"],
                        "lora_rank": setup.lora_rank, "lora_alpha": 2 * setup.lora_rank, "lora_dropout": 0.0}
    doc["tokenizer"]["max_seq_len"] = setup.seq_len
    doc["batch_size"] = setup.batch
    doc["gradient_accumulation_steps"] = setup.grad_accum
    doc["optimizer"] = _torchtune_optimizer(setup, doc)
    doc["loss"] = {"_component_": _TORCHTUNE_LOSS[loss_impl_id(setup)]}
    doc["clip_grad_norm"] = float(setup.max_grad_norm) if setup.max_grad_norm > 0 else None
    doc["compile"] = setup.compile
    doc["dtype"] = TORCHTUNE_DTYPES[setup.precision]
    doc["enable_activation_checkpointing"] = setup.grad_ckpt
    doc["enable_activation_offloading"] = setup.offload_activations
    if setup.method == "full":
        doc["optimizer_in_bwd"] = setup.optimizer_in_bwd
    else:
        doc.pop("optimizer_in_bwd", None)
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        # full_finetune_distributed.py / lora_finetune_distributed.py: FSDP; these keys make the importer read it
        doc["fsdp_reshard_after_forward"] = setup.sharding != "zero2"
        doc["fsdp_cpu_offload"] = setup.offload_optimizer or setup.offload_params
        if setup.offload_optimizer != (setup.offload_params and setup.sharding == "zero3"):
            notes.append("fsdp_cpu_offload offloads the parameters and the optimizer state together; the estimate "
                         "offloads " + ("the optimizer state only." if setup.offload_optimizer else "the parameters "
                                                                                                    "only."))
    extra: dict[str, object] = {}
    if placeholder and _model_id(spec) != PLACEHOLDER_MODEL_ID:
        extra["model"] = _model_id(spec)  # the builder below is a template's: the marker names the real model
    extra |= _trainer_marker(tr, ("beta", "precompute_ref", "num_generations", "prompt_len", "completion_len",
                                  "generation", "vllm_gpu_util", "vllm_sleep"))
    if tr.trainer != "sft":
        notes.append(f"the {tr.option.label} trainer: the estimate prices TRL's {tr.option.trainer_class}; this is "
                     "torchtune's SFT recipe config (the trainer is carried in the first line).")
    recipe = _TORCHTUNE_RECIPES[setup.method]
    if setup.gpus > 1 or setup.sharding != "none":
        recipe = recipe.replace("single_device", "distributed")
    filename = f"torchtune_{setup.method}.yaml"
    run = (f"tune run --nproc_per_node {setup.gpus} {recipe} --config {filename}" if "distributed" in recipe
           else f"tune run {recipe} --config {filename}")
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if placeholder:
        lines += _comment(f"torchtune 0.6.1 ships no single-device {setup.method} config for this model: this is "
                          f"{prefix}'s; set model._component_, tokenizer and checkpointer for your model.")
    else:
        lines += _comment(f"torchtune 0.6.1's recipes/configs/{prefix}_{setup.method}_single_device.yaml with the "
                          "estimate's values; download the weights to checkpointer.checkpoint_dir first.")
    lines.append(yaml.safe_dump(doc, sort_keys=False, width=120).rstrip("\n"))
    return ExportedConfig("torchtune", filename, _text(lines), run, tuple(notes))


# ---- LitGPT -------------------------------------------------------------------------------------------------------

def _export_litgpt(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    notes: list[str] = []
    _common_notes(setup, "litgpt", notes)
    precision = _litgpt_precision(setup, notes)
    _litgpt_notes(setup, precision, notes)
    lora = setup.method != "full"
    model_id = _model_id(spec)
    doc: dict[str, Any] = {"checkpoint_dir": f"checkpoints/{model_id}", "out_dir": f"out/finetune/{setup.method}",
                           "precision": precision,
                           "quantize": ("bnb.nf4-dq" if setup.nf4_double_quant else "bnb.nf4")
                           if setup.method == "qlora" else None,
                           "devices": setup.gpus, "num_nodes": 1}
    if lora:
        switches = _adapter_switches(setup, notes, "LitGPT")
        doc |= {"lora_r": setup.lora_rank, "lora_alpha": 2 * setup.lora_rank,
                "lora_dropout": STACKS["litgpt"].lora_dropout}
        doc |= {f"lora_{flag}": switches[name] for name, (_, flag) in _ATTN_TARGETS.items()}
        doc |= {"lora_mlp": switches["mlp"], "lora_head": switches["lm_head"]}
    doc["data"] = {"class_path": "litgpt.data.JSON", "init_args": {"json_path": "train.json",
                                                                    "val_split_fraction": 0.05}}
    doc["train"] = {"global_batch_size": setup.batch * setup.grad_accum * setup.gpus,
                    "micro_batch_size": setup.batch, "max_seq_length": setup.seq_len, "epochs": 1}
    if setup.method != "qlora":  # with quantize LitGPT builds its PagedAdamW (utils.py instantiate_bnb_optimizer)
        opt = OPTIMIZERS[setup.optimizer]
        init = {"lr": _learning_rate(setup)}
        if setup.optimizer == "adamw":
            init["fused"] = True  # type: ignore[assignment]
        elif setup.optimizer != "adamw_foreach":
            init |= opt.torch_init_kwargs  # type: ignore[arg-type]
        doc["optimizer"] = {"class_path": opt.torch_class, "init_args": init}
    if tr.trainer != "sft":
        notes.append(f"the {tr.option.label} trainer: the estimate prices TRL's {tr.option.trainer_class}; LitGPT "
                     "fine-tunes with SFT (the trainer is carried in the first line).")
    extra = _trainer_marker(tr, ("beta", "precompute_ref", "num_generations", "prompt_len", "completion_len",
                                 "generation", "vllm_gpu_util", "vllm_sleep"))
    command = "finetune_lora" if lora else "finetune_full"
    filename = f"litgpt_{setup.method}.yaml"
    run = f"litgpt {command} --config {filename}"
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if model_id == PLACEHOLDER_MODEL_ID:
        lines.append("# checkpoint_dir: download your model with `litgpt download ORG/NAME` (checkpoints/ORG/NAME).")
    lines.append(yaml.safe_dump(doc, sort_keys=False, width=120).rstrip("\n"))
    return ExportedConfig("litgpt", filename, _text(lines), run, tuple(notes))


# ---- MLX-LM --------------------------------------------------------------------------------------------------------

def _mlx_notes(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> None:
    """What mlx-lm's LoRA YAML cannot hold for this setup."""
    if setup.method != "full" and LM_HEAD in setup.lora_targets:
        notes.append("LoRA target lm_head: left out of lora_parameters.keys; the estimate prices adapters inside the "
                     "trained blocks only (mlx-lm 0.32.2 would adapt a top-level lm_head named there, "
                     "tuner/utils.py:118-120).")
    if setup.backend == "cuda":
        notes.append("MLX's CUDA backend: install mlx[cuda] (pip install \"mlx[cuda]\" mlx-lm); the file is the "
                     "same.")
    if 0 < spec.num_layers < setup.lora_layers:
        notes.append(f"num_layers -1: {spec.num_layers} blocks, fewer than the {setup.lora_layers} asked for (mlx-lm "
                     "refuses more than the model has, lora.py:234-238).")


def _export_mlx(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    """mlx-lm's lora_config.yaml (mlx_lm/lora.py CONFIG_DEFAULTS' keys, 0.32.2) for `mlx_lm.lora --config`. A base
    to quantise or cast is converted first (mlx_lm.convert: the command in the header); the file then trains on the
    converted folder, and the marker names the model and the conversion, which the file has no key for."""
    check(setup, tr)  # mlx-lm trains SFT only (mlx_lm lora): the stack refuses another trainer (job/trainer.py)
    notes: list[str] = []
    _mlx_notes(spec, setup, notes)
    model_id = _model_id(spec)
    convert = convert_args(spec, setup)
    extra: dict[str, object] = {}
    if convert:
        extra = {"model": model_id, "dtype": convert[convert.index("--dtype") + 1]}
        if "-q" in convert:
            extra |= {"q_mode": setup.quant_mode, "q_bits": setup.quant_bits, "q_group": setup.quant_group}
    filename = "lora_config.yaml"
    run = f"mlx_lm.lora --config {filename}"
    lines = [_marker(setup, tr, extra), *_header(spec, setup, notes), f"# Run with: {run}"]
    if convert:
        lines += ["# First convert the checkpoint to the base the estimate prices (the marker above names it):",
                  f"#   mlx_lm.convert {' '.join(convert)}"]
    elif spec.quantization:
        mode, bits, group = spec.quantization
        lines += _comment(f"The checkpoint is already MLX-quantised ({mode} {bits}-bit, group {group}, its "
                          "config.json): it trains as it is.")
    else:
        lines += _comment(f"mlx-lm trains in the checkpoint's own dtype (mlx_lm/utils.py load() casts nothing): this "
                          "assumes a bfloat16 checkpoint; for another, convert it first (mlx_lm.convert --hf-path "
                          f"{model_id} --mlx-path ./mlx_model --dtype bfloat16) and set model: ./mlx_model.")
    if model_id == PLACEHOLDER_MODEL_ID:
        lines.append("# model: the Hub id (or local folder) of the model you estimated.")
    if setup.method == "full":
        lines += _comment("fine_tune_type full trains the last num_layers blocks in full (lora.py:240-244); "
                          "embeddings, the final norm and the head stay frozen.")
    lines += [mlx_line(k, v) for k, v in config_pairs(spec, setup, "./mlx_model" if convert else model_id)]
    return ExportedConfig("mlx", filename, _text(lines), run, tuple(notes))


_WRITERS = {"axolotl": _export_axolotl, "mlx": _export_mlx, "torchtune": _export_torchtune, "litgpt": _export_litgpt,
            "trl": _export_hf, "trainer": _export_hf, "unsloth": _export_hf, "plain": _export_hf}


def export_config(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None = None) -> ExportedConfig:
    """The setup's stack's config file (a setup without a stack: the HF Trainer's), which import_config reads back
    to the same setup and trainer wherever `notes` is empty."""
    return _WRITERS[_stack_id(setup)](spec, setup, trainer or TrainerSetup())
