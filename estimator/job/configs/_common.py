"""Pieces several formats share: the keys that change no memory (with the reason shown), the transformers
optimizer names, DeepSpeed configs (a shipped file by name, an attached one, or inline), the attention switches,
LoRA dropout, Liger's loss switch and switches that turn on what no estimate models. Every fact cites the project file it comes from."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.optimizers import OPTIMIZERS
from ..setup import MAX_GPUS
from ._fields import MISSING
from ._read import ConfigError, decode, printable

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._fields import Reader

# ---- keys that change no memory ------------------------------------------------------------------------------
# (pattern, reason): a key matching the pattern changes nothing the estimate prices. First match wins.
_NO_MEMORY: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"(learning_rate|lr|.*_lr|lr_.*|.*_lr_.*|warmup.*|.*_warmup.*|weight_decay|adam_.*|cosine_.*|num_epochs|"
     r"num_train_epochs|epochs|max_steps|max_steps_per_epoch|max_time|max_tokens|min_lr|eta_min|.*_scheduler.*|"
     r"lr_scheduler|optim_args|loraplus_.*|lora_alpha|lora_alpha_pattern|peft_use_rslora|use_rslora|"
     r"lora_fan_in_fan_out|early_stopping_.*|peft_init_lora_weights|init_lora_weights)",
     N_("a training hyper-parameter or the schedule: it changes no memory")),
    (r"(wandb_.*|mlflow_.*|comet_.*|swanlab_.*|trackio_.*|otel_.*|use_wandb|use_mlflow|use_tensorboard|use_swanlab|"
     r"use_otel_metrics|report_to|run_name|project_name|logging_.*|log_.*|.*_log_.*|logger_name|metric_logger|"
     r"profiler|loss_watchdog_.*|disable_tqdm|include_.*tokens.*|log|gradio_.*|eval_table_.*)",
     N_("logging and experiment tracking: no memory on the GPU")),
    (r"(datasets|test_datasets|dataset|dataset_.*|.*_dataset|data|data_.*|val_set_size|shuffle.*|chat_template.*|"
     r"special_tokens|tokens|added_tokens_overrides|eot_tokens|train_on_inputs|default_system_message|.*_split|"
     r"skip_prepare_dataset|push_dataset_to_hub|dataloader_.*|remove_unused_columns|group_by_length|"
     r"completion_only_loss|assistant_only_loss|collate_fn|num_proc|num_workers|tokenizer|tokenizer_.*|"
     r"processor_type|trust_remote_code|model_type|model_revision|revision_of_model|base_model_ignore_patterns|"
     r"hf_use_auth_token|access_token|prompt_style|min_sample_len|excess_length_strategy|truncation_mode|"
     r"sample_packing_.*|curriculum_sampling|streaming.*|pretraining_.*|reward_funcs|reward_weights|"
     r"shuffle_dataset|ignore_index|label_names)",
     N_("the dataset, the tokenizer and how examples are read: the estimate prices full-length batches")),
    (r"(eval.*|.*_eval|.*_eval_.*|evals_per_epoch|do_eval|do_bench_eval|bench_.*|do_causal_lm_eval|"
     r"metric_for_best_model|greater_is_better|load_best_model_at_end|prediction_loss_only|"
     r"per_device_eval_batch_size|batch_eval_metrics|run_val_every_n_steps)",
     N_("evaluation: it runs between training steps, without gradients")),
    (r"(output_dir|out_dir|save.*|.*_save_.*|saves_per_epoch|hub_.*|push_to_hub|resume_from_checkpoint|resume|"
     r"auto_resume_from_checkpoints|overwrite_output_dir|checkpoint_files|recipe_checkpoint|final_state_dict_type|"
     r"lora_model_dir|adapter_path|enable_async_checkpointing)",
     N_("saving and loading checkpoints: after or before the training steps")),
    (r"(env|strict|debug|seed|data_seed|ddp_timeout|ddp_bucket_cap_mb|ddp_find_unused_parameters|"
     r"ddp_broadcast_buffers|local_rank|tf32|cudnn_deterministic_mode|accelerator_config|torch_empty_cache_steps|"
     r"gc_steps|gc_collect_steps|use_cpu|full_determinism|dynamo_.*|main_process_.*|machine_rank|"
     r"same_network|rdzv_.*|max_restarts|monitor_interval|gpu_ids|quiet|debug_.*|tpu_.*|"
     r"log_peak_memory_stats|profile_memory|device|num_cpu_threads_per_process|enable_cpu_affinity|"
     r"timeout|timeout_preprocess|memory_preprocess|dockerfile_commands|volumes|secrets|branch|gpu|gpu_count|"
     r"node_count|provider|memory)",
     N_("run bookkeeping: it changes no memory the estimate prices")),
))


def no_memory(key: str, extra: dict[str, str] | None = None) -> str | None:
    """Why a (top-level) key changes no memory, or None when it may."""
    if extra and key in extra:
        return extra[key]
    for pattern, reason in _NO_MEMORY:
        if pattern.fullmatch(key):
            return Text(reason)
    return None


# ---- optimizers by transformers' name (TrainingArguments.optim, Axolotl's optimizer) -------------------------
# transformers 5.24 training_args.py OptimizerNames → options.OPTIMIZERS ids (each option's hf_optim, plus the
# aliases that build the same optimizer: adamw_8bit = adamw_bnb_8bit in trainer.py get_optimizer_cls_and_kwargs).
HF_OPTIMIZERS: dict[str, str] = {o.hf_optim: k for k, o in OPTIMIZERS.items()} | {
    "adamw_8bit": "adamw_8bit",  # transformers 5.24 OptimizerNames.ADAMW_8BIT: bitsandbytes AdamW 8-bit
    "paged_adamw": "paged_adamw",  # bitsandbytes PagedAdamW (32-bit states), Axolotl's spelling
}


def hf_optimizer(reader: Reader, key: str, value: Any) -> None:
    """An optimizer by its transformers name; a name the estimate has no state formula for is not honoured (the
    stack's default is counted)."""
    name = str(value).strip().lower() if isinstance(value, str) else ""
    if name in HF_OPTIMIZERS:
        reader.set("optimizer", HF_OPTIMIZERS[name], key)
        if name == "sgd" and "momentum" not in str(reader.lookup("optim_args")):
            reader.refuse(key, Text(N_("transformers' optim='sgd' has no momentum unless optim_args gives one; the "
                                       "estimate counts one momentum buffer (an upper bound)")))
        return
    reader.refuse(key, Text(N_("optimizer {name} is not modelled (its state size is unknown here); the stack's "
                               "default optimizer is counted"), name=printable(value, 40)))


# ---- DeepSpeed ---------------------------------------------------------------------------------------------------
# The DeepSpeed configs Axolotl 0.19.0 ships (deepspeed_configs/*.json): ZeRO stage, optimizer offload, parameter
# offload, read from each file's zero_optimization block.
SHIPPED_DEEPSPEED: dict[str, tuple[int, bool, bool]] = {
    "zero1.json": (1, False, False), "zero1_torch_compile.json": (1, False, False),
    "zero2.json": (2, True, False), "zero2_torch_compile.json": (2, True, False),  # offload_optimizer: cpu
    "zero3.json": (3, False, False), "zero3_bf16.json": (3, False, False),
    "zero3_bf16_cpuoffload_all.json": (3, True, True), "zero3_bf16_cpuoffload_params.json": (3, False, True),
}
_STAGE_SHARDING = {0: "none", 1: "zero1", 2: "zero2", 3: "zero3"}


def _zero_block(doc: Any) -> tuple[int, bool, bool] | None:
    zero = doc.get("zero_optimization") if isinstance(doc, dict) else None
    if not isinstance(zero, dict):
        return None
    stage = zero.get("stage", 0)
    if isinstance(stage, bool) or stage not in _STAGE_SHARDING:
        return None

    def offloaded(name: str) -> bool:
        block = zero.get(name)
        return isinstance(block, dict) and str(block.get("device", "none")).lower() in ("cpu", "nvme")

    return stage, offloaded("offload_optimizer"), offloaded("offload_param")


def deepspeed(reader: Reader, key: str, attachment: Callable[[str], bytes | None],
              shipped: dict[str, tuple[int, bool, bool]] | None = None,
              shipped_label: str = N_("Axolotl's deepspeed_configs/{name}")) -> None:
    """A `deepspeed:` value: the name of a shipped config (`shipped`, by file name: Axolotl's unless told), a path to
    a JSON file attached with the config, or the config itself inline → sharding, optimizer and parameter offload."""
    shipped = SHIPPED_DEEPSPEED if shipped is None else shipped
    value = reader.get(key)
    block = None
    if isinstance(value, dict):
        block = _zero_block(value)
        where = Text(N_("inline DeepSpeed config"))
    elif isinstance(value, str) and value.strip():
        name = value.strip().replace("\\", "/").rsplit("/", 1)[-1]
        data = attachment(value.strip())
        if data is not None:
            try:
                block = _zero_block(json.loads(decode(data)))
            except (ConfigError, ValueError, RecursionError):
                reader.refuse(key, Text(N_("the attached {name} is not a DeepSpeed JSON config"), name=name))
                return
            where = Text(N_("the attached {name}"), name=name)
        elif name in shipped:
            block = shipped[name]
            where = Text(shipped_label, name=name)
        else:
            reader.refuse(key, Text(N_("the DeepSpeed file {name} was not given: upload it with the config (CLI: "
                                       "keep it beside the config) to read its ZeRO stage and offload"),
                                    name=printable(name, 60)))
            return
    else:
        reader.refuse(key, Text(N_("not a DeepSpeed config (a file name or a mapping)")))
        return
    if block is None:
        reader.refuse(key, Text(N_("no zero_optimization stage 0–3 in it: sharding left off")))
        return
    stage, opt_off, param_off = block
    reader.set("sharding", _STAGE_SHARDING[stage], key, why=Text(N_("ZeRO stage {stage}, {where}"), stage=stage,
                                                                   where=where))
    if opt_off:
        reader.set("offload_optimizer", True, key, why=Text(N_("offload_optimizer to CPU, {where}"), where=where))
    if param_off and stage == 3:  # zero_optimization.offload_param: the parameters live in CPU RAM
        reader.set("offload_params", True, key, why=Text(N_("offload_param to CPU, {where}"), where=where))
    elif param_off:
        reader.refuse(key, Text(N_("offload_param works with ZeRO stage 3 only (DeepSpeed ignores it below); not "
                                   "applied")))


def fsdp_offload(reader: Reader, key: str, sharding: str) -> None:
    """FSDP's CPU offload (Axolotl offload_params, transformers' fsdp 'offload', torchtune fsdp_cpu_offload) keeps
    the parameter shards and the optimizer state in CPU RAM, and the gradient shards too."""
    reader.set("offload_optimizer", True, key, why=Text(N_("FSDP CPU offload")))
    if sharding == "zero3":
        reader.set("offload_params", True, key, why=Text(N_("FSDP CPU offload")))
    reader.refuse(key, Text(N_("FSDP's CPU offload also keeps the gradient shards in CPU RAM; the estimate keeps "
                               "them on the GPU (an upper bound)")))


def gpus_note(reader: Reader) -> None:
    """Sharding without a GPU count in the file: say the estimate runs on one GPU unless told."""
    if reader.settings.get("sharding", "none") != "none" and "gpus" not in reader.settings:
        reader.refuse("gpus", Text(N_("the file does not say how many GPUs (the launcher does): estimated on 1 GPU; "
                                      "set the GPU count")), raw=MISSING)


def gpus_from_marker(reader: Reader, marker: dict[str, str]) -> None:
    """The export's marker may carry the GPU count the file itself has no field for."""
    if "gpus" in marker and "gpus" not in reader.settings:
        count = reader.integer("# will-it-fit: gpus", 1, MAX_GPUS, value=marker["gpus"])
        if count is not None:
            reader.set("gpus", count, "# will-it-fit: gpus", raw=marker["gpus"])


# ---- GRPO's generation -------------------------------------------------------------------------------------------

def vllm_generation(reader: Reader, use: str, mode: str, util: str, sleep: str) -> None:
    """GRPO's generation mode from TRL's use_vllm / vllm_mode (grpo_config.py: colocate by default) and, colocated,
    vllm_gpu_memory_utilization and vllm_enable_sleep_mode (Axolotl names them in its trl: and vllm: blocks)."""
    if not (reader.given(use) and reader.boolean(use)):
        if reader.has(use):
            reader.set("generation", "hf", use)
        return
    name = str(reader.get(mode, None) or "colocate").lower()
    reader.set("generation", "vllm-server" if name == "server" else "vllm-colocate", use,
               why=Text(N_("vllm_mode {mode}"), mode=name[:20]))
    if name != "server":
        reader.take_number("vllm_gpu_util", util, 0.01, 0.99)
        reader.take_bool("vllm_sleep", sleep)


# ---- attention and LoRA dropout --------------------------------------------------------------------------------

def attention(reader: Reader, key: str = "attn_implementation") -> bool:
    """transformers' attn_implementation (Axolotl and TRL pass it to from_pretrained) → the estimate's attention;
    an implementation it does not know is refused (SDPA is counted). Returns whether the key was given."""
    if not reader.given(key):
        return False
    attn = attention_from_impl(reader.get(key))
    if attn:
        reader.set("attention", attn, key)
    else:
        reader.refuse(key, Text(N_("not an attention implementation the estimate knows; SDPA assumed")))
    return True


def attention_from_impl(value: Any) -> str | None:
    """transformers' attn_implementation → the estimate's attention: eager materialises the scores; SDPA,
    flash-attention, flex and kernels-hub implementations do not. None: not an implementation name."""
    if not isinstance(value, str) or not value.strip():
        return None
    name = value.strip().lower()
    if name == "eager":
        return "eager"
    if name.startswith(("sdpa", "flash", "flex", "kernels-community/", "paged")) or "flash" in name:
        return "sdpa"
    return None


def lora_dropout(reader: Reader, key: str, default: float, source: str, counted: float = 0.0) -> None:
    """LoRA dropout > 0 keeps a mask and a dropped copy of each adapter input, whatever p is; the estimate counts them
    where the stack's scripts use a dropout (Stack.lora_dropout, `counted`) and assumes none elsewhere (the snippets
    then set lora_dropout=0.0). A value that keeps the same tensors as the stack's is read."""
    value = reader.get(key) if reader.given(key) else default
    number = reader.number(key, 0.0, 1.0, value=value)
    if number is None:
        return
    if (number > 0) == (counted > 0):  # the same tensors: masks and copies, or neither
        if reader.given(key):
            reader.ignore(key, Text(N_("LoRA dropout {p}: as the estimate counts"), p=str(number)))
        return
    if counted > 0:  # no dropout where the stack's default has one: the estimate's masks are an upper bound
        reader.refuse(key, Text(N_("LoRA dropout {p}: no masks, but the estimate counts the stack's dropout "
                                   "({counted}): an upper bound; {source}"),
                                p=str(number), counted=str(counted), source=source), raw=value)
        return
    reader.refuse(key, Text(N_("LoRA dropout {p} keeps a mask and a copy of each adapter input, which this "
                               "stack's estimate does not count (it assumes {counted}); {source}"),
                            p=str(number), counted=str(counted), source=source), raw=value)


def liger_loss(reader: Reader, key: str) -> None:
    """A Liger kernel switch (LLaMA-Factory's enable_liger_kernel, ms-swift's use_liger_kernel): on, Liger's fused
    linear cross-entropy (no logits tensor) and kernels the estimate does not model; off, the standard loss."""
    if not reader.given(key):
        return
    on = reader.boolean(key)
    if on:
        reader.set("loss", "fused", key, why=Text(N_("Liger's fused linear cross-entropy; its RMSNorm, SwiGLU and "
                                                     "RoPE kernels are not modelled")))
    elif on is False:
        reader.set("loss", "standard", key)


def unmodelled_switches(reader: Reader, reasons: dict[str, str]) -> None:
    """Boolean keys whose `on` turns on something the estimate does not model: refused with its reason when on,
    read as 'off' when off."""
    for key, reason in reasons.items():
        if not reader.given(key):
            continue
        on = reader.boolean(key)
        if on:
            reader.refuse(key, Text(reason))
        elif on is False:
            reader.ignore(key, Text(N_("off")))
