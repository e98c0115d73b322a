"""A torchtune 0.6.1 recipe config (YAML, with `tune run`'s key=value overrides applied first) → the estimate's
settings (stack "torchtune"). The keys are what the recipes read (recipes/lora_finetune_single_device.py,
full_finetune_single_device.py and their distributed twins, 0.6.1) and the model builders' arguments
(torchtune/models/*/_model_builders.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

from ...i18n import N_, Text
from ...options.optimizers import OPTIMIZERS
from ...options.stacks import stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GRAD_ACCUM, MAX_RANK, MAX_SEQ_LEN
from ._common import fsdp_offload, gpus_from_marker, gpus_note, lora_dropout, no_memory
from ._fields import MISSING, as_bool, load_keys, shown
from ._models import ref_from_name, ref_from_torchtune
from ._read import ConfigError, printable

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader
    from ._models import ModelRef

ID = "torchtune"
LABEL = "torchtune 0.6.1 recipe YAML"
TOOL = "torchtune 0.6.1"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("torchtune")
_R = "recipes/lora_finetune_single_device.py (0.6.1)"
MAX_OVERRIDES = 200

# torch / bitsandbytes optimizer classes (options/optimizers.py torch_class) → ids; torch.optim.AdamW is decided by
# its fused/foreach arguments (torch/optim/adamw.py: foreach is the CUDA default unless fused=True).
_OPTIMIZER_CLASSES = {o.torch_class: k for k, o in OPTIMIZERS.items() if o.torch_class and k != "adamw_foreach"} | {
    "bitsandbytes.optim.PagedAdamW": "paged_adamw", "bitsandbytes.optim.PagedAdamW32bit": "paged_adamw",
    "bitsandbytes.optim.AdamW8bit": "adamw_8bit", "bitsandbytes.optim.PagedAdamW8bit": "paged_adamw_8bit",
    "torch.optim.AdamW": "adamw_foreach", "torch.optim.Adam": "adamw_foreach", "torch.optim.SGD": "sgd"}
_LOSSES = {"torchtune.modules.loss.CEWithChunkedOutputLoss": "chunked", "torch.nn.CrossEntropyLoss": "standard"}
_ATTN = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
_MLP = ("gate_proj", "up_proj", "down_proj")  # torchtune's w1, w3, w2 (FeedForward) in Llama's names
_DISTRIBUTED_KEYS = ("fsdp_cpu_offload", "fsdp_reshard_after_forward", "custom_sharded_layers",
                     "tensor_parallel_dim", "tensor_parallel_plan", "data_parallel_shard_dim", "fsdp")

_NO_MEMORY = {
    "checkpointer": N_("where the weights are read and written: the model is the builder's"),
    "device": N_("the device: the estimate prices one GPU"), "shuffle": N_("the data order"),
    "save_adapter_weights_only": N_("saving"), "low_cpu_ram": N_("saving on CPU RAM while saving checkpoints"),
    "dataset": N_("the dataset (packed or not, the estimate prices full sequences)"),
    "lr_scheduler": N_("the schedule"), "enable_kv_cache": N_("generation during evaluation"),
    "max_new_tokens": N_("generation during evaluation"), "log_level": N_("logging"),
    "memory_efficient_fsdp_wrap": N_("read with the FSDP keys"),
}
_NOT_MODELLED = {
    "tensor_parallel_dim": N_("tensor parallelism is not modelled"),
    "tensor_parallel_plan": N_("tensor parallelism is not modelled"),
    "custom_sharded_layers": N_("read as FSDP full shard"), "quantizer": N_("quantisation-aware training is not "
                                                                           "modelled"),
    "ac_mode": N_("selective activation checkpointing is not modelled"),
    "ac_option": N_("selective activation checkpointing is not modelled"),
}


def score(doc: dict[str, Any]) -> int:
    """torchtune configs build their parts from `_component_` paths; the model's is the fingerprint."""
    component = doc.get("model", {}).get("_component_") if isinstance(doc.get("model"), dict) else None
    points = 4 if isinstance(component, str) and component.startswith("torchtune.") else 0
    points += sum(1 for v in doc.values() if isinstance(v, dict) and "_component_" in v)
    return points + sum(1 for k in ("enable_activation_checkpointing", "optimizer_in_bwd", "dtype", "batch_size",
                                    "tokenizer", "checkpointer") if k in doc)


def apply_overrides(doc: dict[str, Any], overrides: tuple[str, ...], refused: list[tuple[str, str, str]]
                    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """`tune run`'s command-line overrides on the config (torchtune/config/_parse.py: OmegaConf dotlist, `~key`
    deletes, `key=value` sets, values read as YAML scalars). Returns the new document and the overrides applied
    (key, value); a malformed one is added to `refused` (key, value, reason)."""
    import copy

    doc = copy.deepcopy(doc)
    applied: list[tuple[str, str]] = []
    for raw in overrides[:MAX_OVERRIDES]:
        text = str(raw).strip()
        if not text:
            continue
        delete = text.startswith("~")
        key, eq, value = text.lstrip("~+").partition("=")
        key = key.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,7}", key) or (not eq and not delete):
            refused.append((printable(text, 60), "", Text(N_("not a key=value override"))))
            continue
        parts = key.split(".")
        node = doc
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if delete:
            node.pop(parts[-1], None)
            applied.append((key, "~"))
            continue
        try:
            parsed = yaml.load(value, Loader=yaml.SafeLoader) if value.strip() else None  # noqa: S506
        except (yaml.YAMLError, ValueError, RecursionError):
            parsed = value
        if isinstance(parsed, (dict, list)) and len(str(parsed)) > 2000:
            refused.append((key, printable(value, 40), Text(N_("override value too large"))))
            continue
        node[parts[-1]] = parsed
        applied.append((key, printable(value, 60)))
    if len(overrides) > MAX_OVERRIDES:
        raise ConfigError(Text(N_("more than {n} overrides"), n=MAX_OVERRIDES))
    return doc, applied


def _method_and_model(r: Reader, ctx: ReadContext) -> tuple[str, ModelRef]:
    """model._component_: the builder names the model and the method (lora_ / qlora_ builders; quantize_base)."""
    component = r.get("model._component_") if r.given("model._component_") else None
    model = ref_from_torchtune(component)
    if ctx.marker.get("model"):  # the export names the model here when the builder is a template's (no builder)
        model = ref_from_name(ctx.marker["model"])
        r.used.add("# will-it-fit: model")
    builder = str(component or "").rsplit(".", 1)[-1]
    if builder.startswith("qlora_") or (r.given("model.quantize_base") and r.boolean("model.quantize_base")):
        method = "qlora"
    elif builder.startswith("lora_"):
        method = "lora"
    else:
        method = "full"
    if component is None:
        r.refuse("model._component_", Text(N_("no model builder: the model and the method are unknown; full "
                                              "fine-tuning assumed")), raw=MISSING)
    else:
        r.set("method", method, "model._component_", why=Text(N_("the builder's {kind}"), kind={
            "qlora": "qlora_ prefix or quantize_base", "lora": "lora_ prefix", "full": "full model"}[method]))
    return method, model


def _lora(r: Reader) -> None:
    """lora_attn_modules, apply_lora_to_mlp, apply_lora_to_output (builder defaults False), lora_rank (8),
    lora_dropout (0.0), use_dora (lora_llama3_1_8b in torchtune/models/llama3_1/_model_builders.py)."""
    attn = r.get("model.lora_attn_modules") if r.given("model.lora_attn_modules") else []
    if not isinstance(attn, list) or not all(isinstance(a, str) and a in _ATTN for a in attn):
        r.refuse("model.lora_attn_modules", Text(N_("takes a list of q_proj, k_proj, v_proj, output_proj")))
        attn = [a for a in attn if isinstance(a, str) and a in _ATTN] if isinstance(attn, list) else []
    mlp = bool(as_bool(r.get("model.apply_lora_to_mlp", False)))
    head = bool(as_bool(r.get("model.apply_lora_to_output", False)))
    names = [_ATTN[a] for a in attn] + (list(_MLP) if mlp else []) + (["lm_head"] if head else [])
    if set(names) == {*_ATTN.values(), *_MLP}:
        targets: tuple[str, ...] = (ALL_LINEAR,)  # every linear of the decoder layers
    elif names:
        targets = tuple(dict.fromkeys(names))
    else:
        r.refuse("model.lora_attn_modules", Text(N_("no module gets an adapter; all-linear assumed")))
        targets = (ALL_LINEAR,)
    r.set("lora_targets", targets, "model.lora_attn_modules",
          why=Text(N_("with apply_lora_to_mlp {mlp}, apply_lora_to_output {head}"), mlp=shown(mlp), head=shown(head)),
          raw=attn)
    for key in ("model.apply_lora_to_mlp", "model.apply_lora_to_output"):
        r.used.add(key)
    if not r.take_int("lora_rank", "model.lora_rank", 1, MAX_RANK):
        r.default("lora_rank", 8, "model.lora_rank", Text(N_("the builders' default 8")))
    lora_dropout(r, "model.lora_dropout", 0.0, Text(N_("the builders' lora_dropout")))
    if r.given("model.use_dora") and r.boolean("model.use_dora"):
        r.refuse("model.use_dora", Text(N_("DoRA keeps a weight-norm vector and a second forward per adapted layer: "
                                           "not modelled")))
    for key in ("model.lora_alpha", "model.quantize_base"):
        if r.has(key):
            r.used.add(key)


def _switch(r: Reader, key: str, name: str, default: bool) -> bool:
    if r.has(key):
        value = r.boolean(key)
        if value is not None:
            r.set(name, value, key)
            return value
    r.default(name, default, key, Text(N_("the recipe's default ({src})"), src=_R))
    return default


def _optimizer(r: Reader, method: str) -> None:
    component = r.get("optimizer._component_") if r.given("optimizer._component_") else None
    if component is None:
        r.refuse("optimizer._component_", Text(N_("no optimizer component: the stack's fused AdamW is counted")),
                 raw=MISSING)
        return
    name = _OPTIMIZER_CLASSES.get(str(component))
    if name == "adamw_foreach" and as_bool(r.get("optimizer.fused", False)):
        name = "adamw"
    if name is None:
        r.refuse("optimizer._component_", Text(N_("optimizer {name} is not modelled; the stack's fused AdamW is "
                                                  "counted"), name=printable(component, 60)))
        return
    r.set("optimizer", name, "optimizer._component_",
          why=Text(N_("fused=True")) if name == "adamw" else "")
    if name == "sgd" and not r.given("optimizer.momentum"):
        r.refuse("optimizer.momentum", Text(N_("torch's SGD has no momentum buffer without momentum; the estimate "
                                               "counts one (an upper bound)")), raw=MISSING)
    r.used.add("optimizer")


def _parallel(r: Reader, ctx: ReadContext) -> None:
    """The distributed recipes' FSDP keys (full_finetune_distributed.py, lora_finetune_distributed.py):
    fsdp_reshard_after_forward (True: full shard), fsdp_cpu_offload."""
    if not any(r.has(k) for k in _DISTRIBUTED_KEYS):
        # recipes/configs: the distributed recipes' configs are named <size>_<method>.yaml, the single-device ones
        # <size>_<method>_single_device.yaml (recipes/configs/llama3_1/8B_lora.yaml → lora_finetune_distributed)
        if re.fullmatch(r"[0-9.]+B_(full|lora|qlora|dora)(_multinode)?\.ya?ml", ctx.name):
            r.set("sharding", "zero3", "(file name)", raw=ctx.name,
                  why=Text(N_("a distributed recipe's config: FSDP full shard")))
        return
    reshard = as_bool(r.get("fsdp_reshard_after_forward", True))
    key = "fsdp_reshard_after_forward" if r.has("fsdp_reshard_after_forward") else next(
        k for k in _DISTRIBUTED_KEYS if r.has(k))
    r.set("sharding", "zero2" if reshard is False else "zero3", key,
          why=Text(N_("a distributed recipe's FSDP")))
    if r.given("fsdp_cpu_offload") and r.boolean("fsdp_cpu_offload"):
        fsdp_offload(r, "fsdp_cpu_offload", r.settings.get("sharding", "none"))


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of a torchtune config into the three lists; returns the model its builder names."""
    method, model = _method_and_model(r, ctx)
    if method != "full":
        _lora(r)
    if not r.take_int("batch", "batch_size", 1, MAX_BATCH):
        r.refuse("batch_size", Text(N_("the recipes require batch_size; the estimate uses 1")), raw=MISSING)
    if not r.take_int("seq_len", "tokenizer.max_seq_len", 1, MAX_SEQ_LEN):
        r.refuse("tokenizer.max_seq_len", Text(N_("null: no truncation, sequences are as long as the data; the "
                                                  "estimate uses 2,048 tokens (set max length)")))
    r.take_int("grad_accum", "gradient_accumulation_steps", 1, MAX_GRAD_ACCUM)
    ckpt = _switch(r, "enable_activation_checkpointing", "grad_ckpt", False)
    if r.has("enable_activation_offloading") and as_bool(r.lookup("enable_activation_offloading")) and not ckpt:
        r.refuse("enable_activation_offloading", Text(N_("the recipes refuse offloading without activation "
                                                         "checkpointing")))
    else:
        _switch(r, "enable_activation_offloading", "offload_activations", False)
    _switch(r, "compile", "compile", False)
    _optimizer_in_bwd(r, method)
    _dtype(r)
    _optimizer(r, method)
    _loss_and_clipping(r)
    r.used.add("tokenizer")
    _parallel(r, ctx)
    gpus_from_marker(r, ctx.marker)
    gpus_note(r)
    block = r.lookup("model")
    model_keys = [f"model.{k}" for k in block] if isinstance(block, dict) else []
    for key in model_keys:
        if key not in r.used:
            r.refuse(key, Text(N_("a model builder argument the estimate does not read")))
    extra = {k: Text(v) for k, v in _NO_MEMORY.items()}
    r.finish(list(doc), SCHEMA, lambda key: no_memory(key, extra),
             lambda key: Text(_NOT_MODELLED[key]) if key in _NOT_MODELLED else None)
    return model


def _optimizer_in_bwd(r: Reader, method: str) -> None:
    """optimizer_in_bwd: the full recipes only, and not with gradient accumulation."""
    if method == "full":
        if r.has("optimizer_in_bwd"):
            in_bwd = r.boolean("optimizer_in_bwd")
            accum = r.settings.get("grad_accum", 1)
            if in_bwd and accum > 1:  # full_finetune_single_device.py raises for the combination
                r.refuse("optimizer_in_bwd", Text(N_("the recipe refuses optimizer_in_bwd with gradient accumulation")))
            elif in_bwd is not None:
                r.set("optimizer_in_bwd", in_bwd, "optimizer_in_bwd")
    elif r.has("optimizer_in_bwd"):
        r.refuse("optimizer_in_bwd", Text(N_("the LoRA recipes have no optimizer_in_bwd")))


def _dtype(r: Reader) -> None:
    """dtype → precision (bf16 or fp32; the recipes require it)."""
    dtype = str(r.get("dtype", "bf16")).lower() if r.given("dtype") else None
    if dtype in ("bf16", "fp32"):
        r.set("precision", dtype, "dtype")
    elif dtype is None:
        r.refuse("dtype", Text(N_("the recipes require dtype; bf16 assumed")), raw=MISSING)
    else:  # training/precision.py get_dtype: the single-device recipes refuse fp16 training
        r.refuse("dtype", Text(N_("torchtune trains in bf16 or fp32; bf16 assumed")))
        r.settings["precision"] = "bf16"


def _loss_and_clipping(r: Reader) -> None:
    """loss._component_ → the loss; clip_grad_norm → the clipping norm (null: none)."""
    loss = r.get("loss._component_") if r.given("loss._component_") else None
    if isinstance(loss, str) and loss in _LOSSES:
        r.set("loss", _LOSSES[loss], "loss._component_")
    elif loss is not None:
        r.refuse("loss._component_", Text(N_("loss {name} is not modelled; the chunked loss is counted"),
                                          name=printable(loss, 60)))
    r.used.add("loss")
    if r.has("clip_grad_norm"):
        value = r.lookup("clip_grad_norm")
        if value is None:
            r.set("max_grad_norm", 0.0, "clip_grad_norm", why=Text(N_("null: no clipping")))
        else:
            norm = r.number("clip_grad_norm", 0.0, 1e6)
            if norm is not None:
                r.set("max_grad_norm", norm, "clip_grad_norm")
