"""A copyable training script, config or command for the setup's training stack (TRL, the HF Trainer, Unsloth,
Axolotl, torchtune, LitGPT or a plain PyTorch loop) that runs what the estimate describes: the same micro-batch,
max length, checkpointing and offloading, dtypes, optimizer, loss, LoRA rank and targets, QLoRA settings and
sharding. Every fact about an option is read from estimator.options and estimator.stacks; a setting the stack's
tool cannot express is said in a comment, never dropped. Pure text generation: no imports beyond the estimator."""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Callable

from .hub import is_model_id, parse_model_id
from .model import TOWER_MODULES, ModelSpec, list_presets
from .options import LOSS_IMPLS, OPTIMIZERS, PRECISIONS, QLORA_PREPS, SGD_MOMENTUM
from .stacks import STACKS, attention_impl, loss_impl_id
from .training import ALL_LINEAR, METHOD_LABELS, TrainingSetup

PLACEHOLDER_MODEL_ID = "your-org/your-model"
DEFAULT_SNIPPET_STACK = "trainer"  # a setup without a stack is the neutral HF Trainer + PEFT baseline
LANGUAGES = {"axolotl": "yaml", "torchtune": "bash", "litgpt": "bash"}  # others: "python"


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
    return out + ['    task_type="CAUSAL_LM",', ")"]


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


def _deepspeed_lines(setup: TrainingSetup, indent: str = "    ") -> list[str]:
    if setup.sharding == "none" and not setup.offload_optimizer:
        return []
    stage = _DEEPSPEED_STAGES.get(setup.sharding, 2)  # optimizer offload alone: ZeRO-Offload, stage 2
    offload = ', "offload_optimizer": {"device": "cpu"}' if setup.offload_optimizer else ""
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


def _trl(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    impl = loss_impl_id(setup)
    _common_notes(setup, "trl", notes)
    # TRL 1.16 sft_trainer.py: adapters on a 4-bit base are cast to bf16; under ZeRO-3 a 16-bit base keeps them
    # in its dtype (autocast_adapter_dtype=False); otherwise PEFT's fp32.
    trl_adapter = "bf16" if qlora or setup.sharding == "zero3" else "fp32"
    if lora and setup.adapter_dtype != trl_adapter:
        notes.append(f"TRL 1.16 makes the LoRA adapters {trl_adapter} here (sft_trainer.py); the estimate "
                     f"counts {setup.adapter_dtype} adapters.")
    out: list[str] = []
    if setup.gpus > 1:
        out.append(f"# Launch with: accelerate launch --num_processes {setup.gpus} train.py")
    out += ["import torch", "from datasets import load_dataset"]
    if qlora and setup.qlora_prep == "peft":
        out.append("from peft import LoraConfig, prepare_model_for_kbit_training")
    elif lora:
        out.append("from peft import LoraConfig")
    out.append("from transformers import AutoModelForCausalLM" + (", BitsAndBytesConfig" if qlora else ""))
    if impl == "hf":
        out.append("from transformers.loss.loss_utils import ForCausalLMLoss")
    out += ["from trl import SFTConfig, SFTTrainer", ""]
    out += _model_id_lines(_model_id(spec)) + [""]
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    out.append("")
    if lora:
        out += _lora_config_lines(setup, spec) + [""]
    loss = LOSS_IMPLS[impl]
    if impl == "hf":
        out += [
            f"# Loss: {loss.label}. TRL 1.16 runs every SFT loss through its fused chunked LM head (no full logits);",
            "# only a compute_loss_func sees the full logits (deprecated, removed in TRL 2.0). TRL then also runs a",
            "# no-grad fused forward for its token-accuracy metrics.",
            "def full_logits_loss(outputs, labels, num_items_in_batch=None):",
            "    logits = outputs.logits",
            "    return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1], num_items_in_batch=num_items_in_batch)",
            "",
        ]
    else:
        out.append(f"# Loss: {loss.label} (TRL's default for every SFT loss; no full logits).")
    out += [
        "training_args = SFTConfig(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    max_length={setup.seq_len},  # older TRL: max_seq_length",
        f"    gradient_checkpointing={setup.grad_ckpt},",
    ]
    if setup.grad_ckpt:
        # TRL forces reentrant checkpointing for PEFT under ZeRO-3; non-reentrant elsewhere.
        reentrant = lora and setup.sharding == "zero3"
        out.append(f'    gradient_checkpointing_kwargs={{"use_reentrant": {reentrant}}},')
    if setup.offload_activations:
        out.append("    activation_offloading=True,  # checkpointed layer inputs in CPU RAM")
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},"]
    out += _deepspeed_lines(setup)
    out += [")", ""]
    out += [
        "trainer = SFTTrainer(",
        "    model=model,",
        "    args=training_args,",
        '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data',
    ]
    if lora:
        out.append("    peft_config=peft_config,")
    if impl == "hf":
        out.append("    compute_loss_func=full_logits_loss,")
    out += [")", "trainer.train()"]
    return out


def _trainer(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    impl = loss_impl_id(setup)
    _common_notes(setup, "trainer", notes)
    out: list[str] = []
    if setup.gpus > 1:
        out.append(f"# Launch with: accelerate launch --num_processes {setup.gpus} train.py")
    out += ["import torch", "from datasets import load_dataset"]
    if lora:
        out.append("from peft import LoraConfig, get_peft_model"
                   + (", prepare_model_for_kbit_training" if qlora and setup.qlora_prep == "peft" else ""))
    out += [
        "from transformers import (",
        "    AutoModelForCausalLM,",
        "    AutoTokenizer,",
    ]
    if qlora:
        out.append("    BitsAndBytesConfig,")
    out += [
        "    DataCollatorForLanguageModeling,",
        "    Trainer,",
        "    TrainingArguments,",
        ")",
        "",
    ]
    out += _model_id_lines(_model_id(spec))
    out += ["tokenizer = AutoTokenizer.from_pretrained(model_id)",
            "tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token", ""]
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    out.append("")
    if lora:
        out += _lora_config_lines(setup, spec)
        out += ["model = get_peft_model(model, peft_config)"] + _adapter_cast_lines(setup) + [""]
    out += [
        "def tokenize(row):  # every example padded to max length, as the estimate assumes",
        f'    return tokenizer(row["text"], max_length={setup.seq_len}, truncation=True, padding="max_length")',
        "",
        'train_dataset = load_dataset("json", data_files="train.jsonl", split="train")  # your data',
        'train_dataset = train_dataset.map(tokenize, remove_columns=train_dataset.column_names)',
        "",
    ]
    loss = LOSS_IMPLS[impl]
    out += [
        f"# Loss: {loss.label}.",
        "training_args = TrainingArguments(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    activation_checkpointing={setup.grad_ckpt},  # older transformers: gradient_checkpointing",
    ]
    if setup.grad_ckpt:
        offload = ', "offload": True' if setup.offload_activations else ""
        out.append(f'    activation_checkpointing_kwargs={{"use_reentrant": False{offload}}},')
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},"]
    if setup.loss == "fused":
        out.append("    use_liger_kernel=True,  # Liger's fused linear + cross-entropy: logits never materialised")
    out += _deepspeed_lines(setup)
    out += [
        ")",
        "",
        "trainer = Trainer(",
        "    model=model,",
        "    args=training_args,",
        "    train_dataset=train_dataset,",
        "    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),",
        ")",
        "trainer.train()",
    ]
    return out


def _plain(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    _common_notes(setup, "plain", notes)
    if setup.gpus > 1 or setup.sharding != "none":
        notes.append(f"{setup.gpus} GPUs with {setup.sharding} sharding: this loop runs on one GPU; wrap the model "
                     "in DDP or FSDP (torchrun) to match the estimate's parallel setup.")
    if setup.offload_optimizer:
        notes.append("optimizer offload to CPU: a plain torch optimizer keeps its states on the GPU.")
    optimizer_cls = OPTIMIZERS[setup.optimizer].torch_class
    optimizer_kwargs = OPTIMIZERS[setup.optimizer].torch_init_kwargs
    module, _, cls_name = optimizer_cls.rpartition(".")
    out = ["import torch"]
    if module != "torch.optim":
        out.append(f"from {module} import {cls_name}")
    out.append("from datasets import load_dataset")
    if lora:
        out.append("from peft import LoraConfig, get_peft_model"
                   + (", prepare_model_for_kbit_training" if qlora and setup.qlora_prep == "peft" else ""))
    out.append("from transformers import AutoModelForCausalLM, AutoTokenizer"
               + (", BitsAndBytesConfig" if qlora else ""))
    out += [""]
    out += _model_id_lines(_model_id(spec))
    out += [
        f"BATCH_SIZE = {setup.batch}",
        f"MAX_LENGTH = {setup.seq_len}",
        f"GRAD_ACCUM = {setup.grad_accum}",
        "",
        "tokenizer = AutoTokenizer.from_pretrained(model_id)",
        "tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token",
    ]
    if qlora:
        out += _bnb_lines(setup)
    out += _from_pretrained_lines(spec, setup, device_map=True) + _freeze_tower_lines(spec, setup)
    if qlora:
        out += _qlora_prep_lines(setup)
    if setup.grad_ckpt:
        out += [
            "# Activation checkpointing" + (", checkpointed layer inputs in CPU RAM" if setup.offload_activations
                                            else "") + " (transformers 5.24 modeling_utils.py).",
            'model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False}, '
            f"offload={setup.offload_activations})",
        ]
    else:
        out.append("# No activation checkpointing: every layer keeps its saved tensors until backward.")
    if lora:
        out += _lora_config_lines(setup, spec)
        out += ["model = get_peft_model(model, peft_config)"] + _adapter_cast_lines(setup)
    kwargs = "".join(f", {key}={_py(value) if isinstance(value, str) else value}"
                     for key, value in optimizer_kwargs.items())
    cls_ref = optimizer_cls if module == "torch.optim" else cls_name
    out += [
        "",
        *_comment(f"{OPTIMIZERS[setup.optimizer].label}: {OPTIMIZERS[setup.optimizer].summary}"),
        "params = [p for p in model.parameters() if p.requires_grad]",
        f"optimizer = {cls_ref}(params, lr={_learning_rate(setup)}{kwargs})",
        'dataset = load_dataset("json", data_files="train.jsonl", split="train")  # your data',
        "",
        "",
        "def batches():",
        "    rows = []",
        "    for row in dataset:",
        '        rows.append(row["text"])',
        "        if len(rows) == BATCH_SIZE:  # every example padded to max length, as the estimate assumes",
        '            batch = tokenizer(rows, max_length=MAX_LENGTH, truncation=True, padding="max_length",',
        '                              return_tensors="pt").to("cuda")',
        '            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)',
        "            yield batch",
        "            rows = []",
        "",
        "",
        "model.train()",
        "for step, batch in enumerate(batches(), start=1):",
        f'    with torch.autocast("cuda", dtype=torch.{precision.compute_dtype}, enabled={setup.autocast}):',
        f"        # {LOSS_IMPLS[loss_impl_id(setup)].label}: the model's own loss; the logits are not kept",
        "        loss = model(**batch).loss / GRAD_ACCUM",
        "    loss.backward()",
        "    if step % GRAD_ACCUM == 0:",
    ]
    if setup.max_grad_norm > 0:
        out.append(f"        torch.nn.utils.clip_grad_norm_(params, max_norm={float(setup.max_grad_norm)})")
    out += ["        optimizer.step()", "        optimizer.zero_grad(set_to_none=True)"]
    return out


def _unsloth(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    precision = PRECISIONS[setup.precision]
    impl = loss_impl_id(setup)
    _common_notes(setup, "unsloth", notes)
    if setup.attention == "eager":
        notes.append("eager attention: Unsloth chooses its own attention kernels (no s × s scores).")
    if qlora and not setup.nf4_double_quant:
        notes.append("NF4 without double quantisation: Unsloth's 4-bit loading always double-quantises.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': Unsloth keeps embeddings and "
                     "norms in 16-bit.")
    if qlora and precision.compute_dtype != precision.model_dtype:
        notes.append(f"Unsloth computes the 4-bit matmuls in the load dtype ({precision.model_dtype}); the "
                     f"estimate assumes {precision.compute_dtype}.")
    if lora and setup.adapter_dtype != "fp32":
        notes.append(f"{setup.adapter_dtype} LoRA adapters: Unsloth keeps PEFT's fp32 adapters.")
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        notes.append(f"{setup.gpus} GPUs, {setup.sharding} sharding"
                     + (", optimizer offload" if setup.offload_optimizer else "")
                     + ": launch with accelerate/torchrun for data parallel; Unsloth has no ZeRO setting here.")
    if setup.offload_activations:
        checkpointing: object = "unsloth"
    else:
        checkpointing = setup.grad_ckpt
    ckpt_literal = _py(checkpointing) if isinstance(checkpointing, str) else str(checkpointing)
    ckpt_comment = {"unsloth": "checkpointing with layer inputs offloaded to CPU RAM",
                    "True": "checkpointing, inputs kept on the GPU", "False": "no checkpointing"}
    out: list[str] = []
    if impl == "hf":
        out += ["import os", "",
                f"# Loss: {LOSS_IMPLS[impl].label} on the full logits (Unsloth's fused cross-entropy off).",
                'os.environ["UNSLOTH_RETURN_LOGITS"] = "1"']
    else:
        out.append(f"# Loss: {LOSS_IMPLS[impl].label} (Unsloth's default: no logits tensor).")
    out += [
        "from unsloth import FastLanguageModel  # import Unsloth before trl and transformers",
        "import torch",
        "from datasets import load_dataset",
        "from trl import SFTConfig, SFTTrainer",
        "",
    ]
    out += _model_id_lines(_model_id(spec))
    out += [
        "model, tokenizer = FastLanguageModel.from_pretrained(",
        "    model_name=model_id,",
        f"    max_seq_length={setup.seq_len},",
        f"    dtype=torch.{precision.model_dtype},",
        f"    load_in_4bit={qlora},  # Unsloth's default is True",
    ]
    if setup.method == "lora":
        out.append("    load_in_16bit=True,")
    if setup.method == "full":
        out.append("    full_finetuning=True,")
    out += [
        f"    use_gradient_checkpointing={ckpt_literal},  # {ckpt_comment[str(checkpointing)]}",
        "    offload_embedding=False,  # keep the embeddings on the GPU, as the estimate counts them",
        ")",
    ]
    if lora:
        out += [
            "model = FastLanguageModel.get_peft_model(",
            "    model,",
            f"    r={setup.lora_rank},",
            f"    target_modules={_py(_targets(setup))},",
            f"    lora_alpha={2 * setup.lora_rank},",
            "    lora_dropout=0.0,",
            f"    use_gradient_checkpointing={ckpt_literal},",
            ")",
        ]
    out += [
        "",
        "training_args = SFTConfig(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={setup.batch},",
        f"    gradient_accumulation_steps={setup.grad_accum},",
        f"    max_length={setup.seq_len},",
        "    # checkpointing is the model's (use_gradient_checkpointing above)",
    ]
    out += _precision_flag_lines(setup) + _hf_optim_lines(setup)
    out += [f"    learning_rate={_learning_rate(setup)},", f"    max_grad_norm={float(setup.max_grad_norm)},", ")"]
    out += [
        "trainer = SFTTrainer(",
        "    model=model,",
        "    processing_class=tokenizer,",
        "    args=training_args,",
        '    train_dataset=load_dataset("json", data_files="train.jsonl", split="train"),  # your data',
        ")",
        "trainer.train()",
    ]
    return out


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


# --- torchtune and LitGPT: one command line --------------------------------------------------------------

def _command(groups: list[list[str]]) -> list[str]:
    """One shell command: each group of arguments on its own continued line, every argument shell-quoted."""
    lines = [" ".join(shlex.quote(token) for token in group) for group in groups]
    if len(lines) == 1:
        return lines
    return [lines[0] + " \\"] + [f"  {line} \\" for line in lines[1:-1]] + [f"  {lines[-1]}"]


def _torchtune(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    _common_notes(setup, "torchtune", notes)
    known = TORCHTUNE_CONFIGS.get(spec.source)
    if known and setup.method in known[1]:
        prefix, placeholder = known[0], False
        config = f"{prefix}_{setup.method}_single_device"
    else:
        prefix, placeholder = _TORCHTUNE_TEMPLATE, True
        config = f"./your_model_{setup.method}_single_device.yaml"
    dtype = TORCHTUNE_DTYPES[setup.precision]
    if setup.precision == "fp16":
        notes.append("fp16: torchtune's recipes run bf16 or fp32 only; bf16 is used (same bytes).")
    if setup.precision == "mixed":
        notes.append("mixed precision: torchtune has no autocast; dtype=fp32 keeps fp32 weights but computes and "
                     "stores activations in fp32 (more than the estimate's bf16 activations).")
    model_dtype = "fp32" if dtype == "fp32" else "bf16"
    if lora and setup.adapter_dtype != model_dtype:
        notes.append(f"{setup.adapter_dtype} LoRA adapters: torchtune keeps adapters in the model dtype "
                     f"({model_dtype}).")
    if setup.attention == "eager":
        notes.append("eager attention: torchtune uses SDPA (no s × s scores).")
    if qlora and not setup.nf4_double_quant:
        notes.append("NF4 without double quantisation: torchao's NF4 always quantises its scalers.")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': torchtune keeps norms and "
                     "embeddings in the model dtype.")
    if setup.gpus > 1 or setup.sharding != "none" or setup.offload_optimizer:
        notes.append(f"{setup.gpus} GPUs, {setup.sharding} sharding"
                     + (", optimizer offload" if setup.offload_optimizer else "")
                     + f": use `tune run --nproc_per_node {setup.gpus} {setup.method.replace('qlora', 'lora')}"
                       "_finetune_distributed` (FSDP, ZeRO-3-like; fsdp_cpu_offload=True for offload) with the "
                       "same overrides; the command below is the single-device recipe.")
    tokens = [f"batch_size={setup.batch}",
              f"tokenizer.max_seq_len={setup.seq_len}",
              f"gradient_accumulation_steps={setup.grad_accum}",
              f"enable_activation_checkpointing={setup.grad_ckpt}",
              f"enable_activation_offloading={setup.offload_activations}",
              f"dtype={dtype}"]
    component, kwargs = OPTIMIZERS[setup.optimizer].torch_class, OPTIMIZERS[setup.optimizer].torch_init_kwargs
    base_has_fused = lora or prefix in _TORCHTUNE_FULL_WITH_FUSED
    tokens.append(f"optimizer={component}")
    if setup.optimizer == "adamw":
        tokens.append("optimizer.fused=True")
    elif setup.optimizer == "adamw_foreach":
        tokens += ["optimizer.fused=False", "optimizer.foreach=True"]
    else:
        if base_has_fused:
            tokens.append("~optimizer.fused")
        tokens += [f"optimizer.{key}={value}" for key, value in kwargs.items()]
    if setup.method == "full":  # the estimate frees each gradient in backward only with optimizer_in_bwd
        tokens.append(f"optimizer_in_bwd={setup.optimizer_in_bwd}")
    tokens.append(f"compile={setup.compile}")  # compiled losses keep 16-bit logits (activations.loss_memory)
    tokens.append(f"clip_grad_norm={float(setup.max_grad_norm) if setup.max_grad_norm > 0 else None}")
    impl = loss_impl_id(setup)
    if impl == "torchtune":
        tokens.append("loss=torchtune.modules.loss.CEWithChunkedOutputLoss")
    else:  # the standard loss: full logits, one cross-entropy
        tokens.append("loss=torch.nn.CrossEntropyLoss")  # on the model's fp32 logits: "torchtune_full"
    if lora:
        switches = _adapter_switches(setup, notes, "torchtune")
        attn = [tt for name, (tt, _) in _ATTN_TARGETS.items() if switches[name]]
        tokens += [f"model.lora_attn_modules=[{','.join(attn)}]",
                   f"model.apply_lora_to_mlp={switches['mlp']}",
                   f"model.apply_lora_to_output={switches['lm_head']}",
                   f"model.lora_rank={setup.lora_rank}",
                   f"model.lora_alpha={2 * setup.lora_rank}",
                   "model.lora_dropout=0.0"]
    out: list[str] = []
    if placeholder:
        out += [f"# torchtune 0.6.1 ships no single-device {setup.method} config for this model: copy one with",
                f"#   tune cp {prefix}_{setup.method}_single_device {config}",
                "# and set its model, tokenizer and checkpointer for your model; the overrides below still apply."]
    else:
        out += _comment("First download the weights to the config's checkpointer.checkpoint_dir (tune download "
                        f"{_model_id(spec)}), or override checkpointer.checkpoint_dir.")
    out.append(f"# Loss: {LOSS_IMPLS[impl].label}; optimizer: {OPTIMIZERS[setup.optimizer].label}.")
    return out + _command([["tune", "run", _TORCHTUNE_RECIPES[setup.method], "--config", config]]
                          + [[token] for token in tokens])


def _litgpt(spec: ModelSpec, setup: TrainingSetup, notes: list[str]) -> list[str]:
    lora = setup.method != "full"
    qlora = setup.method == "qlora"
    _common_notes(setup, "litgpt", notes)
    precision = LITGPT_PRECISIONS[setup.precision]
    if qlora and precision.endswith("-mixed"):
        notes.append("mixed precision with --quantize: LitGPT refuses the combination; bf16-true is used "
                     "(16-bit non-4-bit weights, no autocast).")
        precision = "bf16-true"
    multi = setup.gpus > 1
    if setup.grad_ckpt != multi:
        notes.append("activation checkpointing " + ("on" if setup.grad_ckpt else "off") + ": LitGPT's finetune "
                     "scripts checkpoint only under FSDP on several GPUs and never on one.")
    if setup.offload_activations:
        notes.append("activation offloading: LitGPT 0.5.13 has none in finetune.")
    if setup.max_grad_norm > 0:
        notes.append(f"gradient clipping (max norm {setup.max_grad_norm:g}): LitGPT's finetune scripts reject "
                     "train.max_norm.")
    if setup.attention == "eager":
        notes.append("eager attention: LitGPT uses SDPA (no s × s scores).")
    model_dtype = "fp32" if precision == "32-true" or precision.endswith("-mixed") else "bf16"
    if lora and setup.adapter_dtype != model_dtype:
        notes.append(f"{setup.adapter_dtype} LoRA adapters: LitGPT keeps adapters in the model dtype "
                     f"({model_dtype}).")
    if qlora and setup.qlora_prep != "none":
        notes.append(f"QLoRA preparation '{QLORA_PREPS[setup.qlora_prep].label}': LitGPT keeps the non-4-bit "
                     "weights in the model dtype.")
    if qlora and setup.optimizer != "paged_adamw":
        notes.append(f"{OPTIMIZERS[setup.optimizer].label}: with --quantize LitGPT always builds bitsandbytes' "
                     "PagedAdamW (32-bit states; utils.py instantiate_bnb_optimizer).")
    if qlora and multi:
        notes.append(f"{setup.gpus} GPUs: LitGPT 0.5.13 raises for --quantize on more than one device.")
    if multi and setup.sharding != "zero3":
        notes.append(f"{setup.sharding} sharding: LitGPT shards fully on several devices (FSDP, like ZeRO-3).")
    if setup.offload_optimizer:
        notes.append("optimizer offload: LitGPT's finetune scripts set cpu_offload=False.")
    model_id = _model_id(spec)
    tokens = ["--precision", precision,
              "--devices", str(setup.gpus),
              "--train.micro_batch_size", str(setup.batch),
              "--train.global_batch_size", str(setup.batch * setup.grad_accum * setup.gpus),
              "--train.max_seq_length", str(setup.seq_len)]
    if setup.optimizer == "adamw_foreach":
        tokens += ["--optimizer", "AdamW"]
    else:
        component, kwargs = OPTIMIZERS[setup.optimizer].torch_class, OPTIMIZERS[setup.optimizer].torch_init_kwargs
        init_args = {"lr": _learning_rate(setup), **kwargs}
        tokens += ["--optimizer", json.dumps({"class_path": component, "init_args": init_args})]
    if lora:
        switches = _adapter_switches(setup, notes, "LitGPT")
        tokens += ["--lora_r", str(setup.lora_rank), "--lora_alpha", str(2 * setup.lora_rank),
                   "--lora_dropout", str(STACKS["litgpt"].lora_dropout)]  # the dropout the estimate counts
        for name, (_, flag) in _ATTN_TARGETS.items():
            tokens += [f"--lora_{flag}", str(switches[name]).lower()]
        tokens += ["--lora_mlp", str(switches["mlp"]).lower(), "--lora_head", str(switches["lm_head"]).lower()]
    if qlora:
        tokens += ["--quantize", "bnb.nf4-dq" if setup.nf4_double_quant else "bnb.nf4"]
    tokens += ["--data", "JSON", "--data.json_path", "train.json", "--data.val_split_fraction", "0.05"]
    out: list[str] = []
    if model_id == PLACEHOLDER_MODEL_ID:
        out.append("# your-org/your-model: the Hub id (or checkpoint folder) of the model you estimated.")
    out.append(f"# Loss: {LOSS_IMPLS[loss_impl_id(setup)].label} (lm_head_chunk_size=128, always on).")
    out += _comment("--optimizer takes a torch.optim name or a {class_path, init_args} dict (utils.py "
                    "instantiate_torch_optimizer); the global batch is micro-batch × accumulation × devices.")
    pairs = [tokens[i:i + 2] for i in range(0, len(tokens), 2)]
    return out + _command([["litgpt", "finetune_lora" if lora else "finetune_full", model_id]] + pairs)


_WRITERS: dict[str, Callable[[ModelSpec, TrainingSetup, list[str]], list[str]]] = {
    "trl": _trl, "trainer": _trainer, "unsloth": _unsloth, "axolotl": _axolotl, "torchtune": _torchtune,
    "litgpt": _litgpt, "plain": _plain,
}


def training_snippet(spec: ModelSpec, setup: TrainingSetup) -> str:
    """The training script (Python), config (YAML) or command (bash) of the setup's stack, with exactly the
    estimate's assumptions; a setup without a stack gets the HF Trainer script. Python compiles, YAML parses
    (every value in JSON syntax) and bash is one command. Run it once a dataset path is filled in."""
    notes: list[str] = []
    body = _WRITERS[_stack_id(setup)](spec, setup, notes)
    return "\n".join(_header(spec, setup, notes) + body) + "\n"
