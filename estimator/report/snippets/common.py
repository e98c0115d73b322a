"""What every snippet shares: the model id, targets, comments, and the lines for bitsandbytes, PEFT, QLoRA
preparation, a frozen tower, DeepSpeed and the HF optimizer flags."""

from __future__ import annotations

import json
import shlex
import textwrap
from typing import TYPE_CHECKING

from ...job.setup import ALL_LINEAR
from ...job.stack import attention_impl
from ...models.hub import is_model_id, parse_model_id
from ...models.presets import list_presets
from ...models.spec import TOWER_MODULES
from ...options.methods import METHOD_LABELS
from ...options.optimizers import OPTIMIZERS, SGD_MOMENTUM
from ...options.precisions import PRECISIONS, QLORA_PREPS
from ...options.stacks import STACKS

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


PLACEHOLDER_MODEL_ID = "your-org/your-model"
DEFAULT_SNIPPET_STACK = "trainer"  # a setup without a stack is the neutral HF Trainer + PEFT baseline
LANGUAGES = {"axolotl": "yaml", "torchtune": "bash", "litgpt": "bash", "mlx": "yaml",
             "llamafactory": "yaml", "swift": "bash"}  # others: "python"


# HF module names → the LoRA switches of torchtune (lora_attn_modules / apply_lora_to_*) and LitGPT (--lora_*).
_ATTN_TARGETS = {"q_proj": ("q_proj", "query"), "k_proj": ("k_proj", "key"), "v_proj": ("v_proj", "value"),
                 "o_proj": ("output_proj", "projection")}
_MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")

# torchtune 0.6.1 recipes/configs with a single-device config per method (preset → family/size prefix).
TORCHTUNE_CONFIGS: dict[str, tuple[str, frozenset[str]]] = {
    "llama-3.2-1b": ("llama3_2/1B", frozenset({"full", "lora", "qlora"})),
    "llama-3.2-3b": ("llama3_2/3B", frozenset({"full", "lora", "qlora"})),
    "llama-3.1-8b": ("llama3_1/8B", frozenset({"full", "lora", "qlora"})),
    "qwen2.5-0.5b": ("qwen2_5/0.5B", frozenset({"full", "lora"})),
    "qwen2.5-1.5b": ("qwen2_5/1.5B", frozenset({"full", "lora"})),
    "qwen2.5-3b": ("qwen2_5/3B", frozenset({"full", "lora"})),
    "qwen2.5-7b": ("qwen2_5/7B", frozenset({"full", "lora"})),
    "qwen2.5-14b": ("qwen2_5/14B", frozenset({"lora"})),
    "gemma-7b": ("gemma/7B", frozenset({"lora", "qlora"})),
    "gemma-2-2b": ("gemma2/2B", frozenset({"lora", "qlora"})),
    "gemma-2-9b": ("gemma2/9B", frozenset({"lora", "qlora"})),
}
# Full single-device configs whose optimizer block already has `fused` (the others use bitsandbytes' paged
# AdamW and no `fused` key); every LoRA/QLoRA config has `fused: True`.
_TORCHTUNE_FULL_WITH_FUSED = frozenset({"qwen2_5/0.5B"})
_TORCHTUNE_TEMPLATE = "llama3_1/8B"  # the config to copy (tune cp) for a model without its own
_TORCHTUNE_RECIPES = {"full": "full_finetune_single_device", "lora": "lora_finetune_single_device",
                      "qlora": "lora_finetune_single_device"}
TORCHTUNE_DTYPES = {"bf16": "bf16", "fp16": "bf16", "mixed": "fp32", "fp32": "fp32"}  # recipes: bf16 or fp32
LITGPT_PRECISIONS = {"bf16": "bf16-true", "fp16": "16-true", "mixed": "bf16-mixed", "fp32": "32-true"}

_DEEPSPEED_STAGES = {"zero1": 1, "zero2": 2, "zero3": 3}


def _model_id(spec: ModelSpec) -> str:
    """The Hub id the snippet loads: a preset's repo, the id a Hub model was fetched by (without its revision,
    which from_pretrained takes separately), or a placeholder for an uploaded config or a size."""
    if spec.source == "hub" and is_model_id(spec.name):
        return parse_model_id(spec.name)[0]
    repos = {p.id: p.hf_repo for p in list_presets()}
    return repos.get(spec.source) or PLACEHOLDER_MODEL_ID


def _comment_text(text: str, limit: int = 80) -> str:
    """Text safe inside a one-line # comment (the model name may come from an uploaded file)."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:limit]


def _py(value: object) -> str:
    """A Python literal for a string, a list of strings or a number (JSON's syntax is Python's here)."""
    return json.dumps(value)


def _learning_rate(setup: TrainingSetup) -> float:
    return 2e-5 if setup.method == "full" else 2e-4


def _stack_id(setup: TrainingSetup) -> str:
    return setup.stack or DEFAULT_SNIPPET_STACK


def snippet_language(setup: TrainingSetup) -> str:
    """The language of training_snippet's text, for st.code: "python", "yaml" or "bash"."""
    return LANGUAGES.get(_stack_id(setup), "python")


def _targets(setup: TrainingSetup) -> str | list[str]:
    return ALL_LINEAR if setup.lora_targets == (ALL_LINEAR,) else list(setup.lora_targets)


def _adapter_switches(setup: TrainingSetup, notes: list[str], tool: str) -> dict[str, bool]:
    """The LoRA targets as per-layer switches (attention q/k/v/o, the whole MLP, the head). Named targets a
    switch cannot express are noted."""
    if setup.lora_targets == (ALL_LINEAR,):
        return {"q_proj": True, "k_proj": True, "v_proj": True, "o_proj": True, "mlp": True, "lm_head": False}
    names = set(setup.lora_targets)
    switches = {name: name in names for name in _ATTN_TARGETS}
    mlp = names & set(_MLP_TARGETS)
    switches["mlp"] = mlp == set(_MLP_TARGETS)
    switches["lm_head"] = "lm_head" in names
    if mlp and not switches["mlp"]:
        notes.append(f"LoRA targets {', '.join(sorted(mlp))}: {tool} adapts the whole MLP or none of it; "
                     "these are left out, so the run has fewer adapters than the estimate counts.")
    unknown = sorted(names - set(_ATTN_TARGETS) - set(_MLP_TARGETS) - {"lm_head"})
    if unknown:
        notes.append(f"LoRA targets {', '.join(unknown)}: {tool} has no switch for them (it names the "
                     "attention projections, the MLP and the output head only).")
    return switches


def _comment(text: str, indent: str = "") -> list[str]:
    """A comment of any length as # lines of at most ~110 characters."""
    return [f"{indent}# {part}" for part in textwrap.wrap(text, width=108)]


def _header(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    stack = STACKS[_stack_id(setup)]
    gpus = f", {setup.gpus} GPUs ({setup.sharding})" if setup.gpus > 1 else ""
    lines = [
        f"# Training setup matching the 'Will it fit?' estimate: {_comment_text(spec.name)}.",
        f"# Stack: {stack.label}, {stack.version}.",
        f"# {METHOD_LABELS[setup.method]}, {setup.precision}, micro-batch {setup.batch} × max length "
        f"{setup.seq_len:,} tokens{gpus}.",
        "# The estimate assumes every example is max length tokens long (the worst batch).",
    ]
    if notes:
        lines.append(f"# Not expressible in {stack.label} (the run differs from the estimate here):")
        for note in notes:
            wrapped = textwrap.wrap(note, width=110)
            lines.append(f"# - {wrapped[0]}")
            lines += [f"#   {rest}" for rest in wrapped[1:]]
    return lines


def _common_notes(setup: TrainingSetup, stack_id: str, notes: list[str]) -> None:
    """Settings outside what a Python stack configures through its trainer: the QLoRA loading path."""
    if setup.method == "qlora" and setup.load_16bit_first != STACKS[stack_id].load_16bit_first:
        if setup.load_16bit_first:
            notes.append("the estimate counts the 16-bit checkpoint on the GPU before quantisation (LitGPT's "
                         "way); this stack quantises while loading.")
        else:
            notes.append("the estimate assumes the weights are quantised while loading; this stack puts the "
                         "16-bit checkpoint on the GPU first.")


def _launch_lines(setup: TrainingSetup, command: str = "train.py") -> list[str]:
    """The launch line for several GPUs (Accelerate starts one process per GPU); none for one GPU."""
    return [f"# Launch with: accelerate launch --num_processes {setup.gpus} {command}"] if setup.gpus > 1 else []


# --- Python stacks built on transformers + PEFT (TRL, Trainer, plain loop) -----------------------------------

def _bnb_lines(setup: TrainingSetup) -> list[str]:
    precision = PRECISIONS[setup.precision]
    out = [
        "bnb_config = BitsAndBytesConfig(",
        "    load_in_4bit=True,",
        '    bnb_4bit_quant_type="nf4",',
        f"    bnb_4bit_use_double_quant={setup.nf4_double_quant},",
        f"    bnb_4bit_compute_dtype=torch.{precision.compute_dtype},",
    ]
    if setup.sharding == "zero3":
        out.append(f"    bnb_4bit_quant_storage=torch.{precision.model_dtype},  # lets ZeRO-3 shard the 4-bit weights")
    return out + [")"]


def _from_pretrained_lines(spec: ModelSpec, setup: TrainingSetup, device_map: bool = False) -> list[str]:
    out = [
        "model = AutoModelForCausalLM.from_pretrained(",
        "    model_id,",
        f"    dtype=torch.{PRECISIONS[setup.precision].model_dtype},  # transformers < 4.56: torch_dtype=",
        # what the estimate counts: "sdpa" on a class without SDPA would raise; transformers' default is eager
        f"    attn_implementation={_py(attention_impl(setup, spec.family))},",
    ]
    if setup.method == "qlora":
        out.append("    quantization_config=bnb_config,")
    if device_map:
        out.append('    device_map="cuda",')
    return out + [")"]


def _qlora_prep_lines(setup: TrainingSetup) -> list[str]:
    """What happens to the non-4-bit weights, per options.QLORA_PREPS."""
    prep = QLORA_PREPS[setup.qlora_prep]
    if setup.qlora_prep == "peft":
        kwargs = ', gradient_checkpointing_kwargs={"use_reentrant": False}' if setup.grad_ckpt else ""
        return _comment(f"QLoRA preparation: {prep.label}. {prep.summary}") + [
                f"model = prepare_model_for_kbit_training(model, use_gradient_checkpointing={setup.grad_ckpt}{kwargs})"]
    if setup.qlora_prep == "norms":
        return [f"# QLoRA preparation: {prep.label} (Axolotl's patched prepare_model_for_kbit_training).",
                "for name, param in model.named_parameters():",
                "    if param.dtype in (torch.float16, torch.bfloat16) and not any(",
                '            skip in name for skip in ("embed_tokens", "lm_head")):',
                "        param.data = param.data.float()"]
    return _comment(f"QLoRA preparation: {prep.label}: no prepare_model_for_kbit_training. {prep.summary}")


def _frozen_tower(spec: ModelSpec | None, setup: TrainingSetup) -> bool:
    """A multimodal wrapper whose towers the estimate keeps frozen (the default; --train-tower trains them)."""
    return spec is not None and spec.params_tower > 0 and not setup.train_tower


def _lora_config_lines(setup: TrainingSetup, spec: ModelSpec | None = None) -> list[str]:
    out = [
        "peft_config = LoraConfig(",
        f"    r={setup.lora_rank},",
        f"    lora_alpha={2 * setup.lora_rank},",
        "    lora_dropout=0.0,  # the estimate counts no dropout masks",
        f"    target_modules={_py(_targets(setup))},",
    ]
    if _frozen_tower(spec, setup):
        # PEFT's all-linear (and names like q_proj) would also wrap the towers' linears: the estimate gives them none
        out.append(f"    exclude_modules=r{_py(TOWER_MODULES)},  # the {spec.tower_kind} tower keeps no adapters")
    layers = last_layers(spec, setup)
    if layers:
        out.append(f"    layers_to_transform={_py(layers)},  # adapters on the last {len(layers)} layers only")
    return out + ['    task_type="CAUSAL_LM",', ")"]


def last_layers(spec: ModelSpec | None, setup: TrainingSetup) -> list[int]:
    """PEFT's layers_to_transform for setup.lora_layers = N: the indices of the last N decoder layers ([] = all)."""
    if spec is None or not setup.lora_layers or setup.lora_layers >= spec.num_layers:
        return []
    return list(range(spec.num_layers - setup.lora_layers, spec.num_layers))


def _freeze_tower_lines(spec: ModelSpec, setup: TrainingSetup) -> list[str]:
    """Full fine-tuning trains every parameter unless told (TRL 1.16 SFTTrainer freezes nothing): the estimate
    keeps a multimodal wrapper's towers frozen, so the script freezes them too."""
    if setup.method != "full" or not _frozen_tower(spec, setup):
        return []
    return [
        f"# The estimate keeps the {spec.tower_kind} tower frozen (--train-tower would train it):",
        "import re",
        "for name, param in model.named_parameters():",
        f"    if re.fullmatch(r{_py(TOWER_MODULES)}, name):",
        "        param.requires_grad_(False)",
    ]


def _adapter_cast_lines(setup: TrainingSetup, model: str = "model") -> list[str]:
    """PEFT keeps LoRA weights in fp32 (autocast_adapter_dtype=True, and fp32 layers on a 4-bit base); bf16
    adapters need an explicit cast."""
    if setup.adapter_dtype != "bf16":
        return ["# LoRA adapters stay fp32 (PEFT's autocast_adapter_dtype=True), as the estimate counts."]
    return ["# bf16 LoRA adapters, as the estimate counts (PEFT would keep them fp32).",
            f"for param in {model}.parameters():",
            "    if param.requires_grad:",
            "        param.data = param.data.to(torch.bfloat16)"]


def _deepspeed_dict(setup: TrainingSetup, stage: int) -> dict[str, object]:
    """An inline DeepSpeed config at this ZeRO stage with the setup's offloads, every size left to the HF Trainer
    ("auto"): what LLaMA-Factory's and ms-swift's files take where no shipped config matches."""
    zero: dict[str, object] = {"stage": stage}
    if setup.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if setup.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
            "zero_allow_untested_optimizer": True, "fp16": {"enabled": "auto"},
            "bf16": {"enabled": "auto"}, "zero_optimization": zero}


def _deepspeed_lines(setup: TrainingSetup, indent: str = "    ") -> list[str]:
    if setup.sharding == "none" and not setup.offload_optimizer:
        return []
    stage = _DEEPSPEED_STAGES.get(setup.sharding, 2)  # optimizer offload alone: ZeRO-Offload, stage 2
    offload = ', "offload_optimizer": {"device": "cpu"}' if setup.offload_optimizer else ""
    if setup.offload_params:  # ZeRO-3 parameter offload (DeepSpeed zero_optimization.offload_param)
        offload += ', "offload_param": {"device": "cpu"}'
    return [
        f"{indent}deepspeed={{",
        f'{indent}    "zero_optimization": {{"stage": {stage}{offload}}},',
        f'{indent}    "bf16": {{"enabled": "auto"}},',
        f'{indent}    "fp16": {{"enabled": "auto"}},',
        f'{indent}    "train_micro_batch_size_per_gpu": "auto",',
        f'{indent}    "gradient_accumulation_steps": "auto",',
        f"{indent}}},",
    ]


def _hf_optim_lines(setup: TrainingSetup) -> list[str]:
    out = [f"    optim={_py(OPTIMIZERS[setup.optimizer].hf_optim)},"]
    if setup.optimizer == "sgd":
        out.append(f'    optim_args="momentum={SGD_MOMENTUM}",  # transformers\' SGD has no momentum otherwise; '
                   "the estimate counts one buffer")
    return out


def _precision_flag_lines(setup: TrainingSetup) -> list[str]:
    precision = PRECISIONS[setup.precision]
    return [f"    bf16={precision.bf16_flag},", f"    fp16={precision.fp16_flag},"]


def _model_id_lines(model_id: str, name: str = "model_id") -> list[str]:
    if model_id == PLACEHOLDER_MODEL_ID:
        return [f"{name} = {_py(model_id)}  # the Hub id of the model you estimated"]
    return [f"{name} = {_py(model_id)}"]


# --- torchtune and LitGPT: one command line --------------------------------------------------------------

def _command(groups: list[list[str]]) -> list[str]:
    """One shell command: each group of arguments on its own continued line, every argument shell-quoted."""
    lines = [" ".join(shlex.quote(token) for token in group) for group in groups]
    if len(lines) == 1:
        return lines
    return [lines[0] + " \\"] + [f"  {line} \\" for line in lines[1:-1]] + [f"  {lines[-1]}"]
