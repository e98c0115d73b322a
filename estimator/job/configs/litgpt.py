"""A LitGPT 0.5.13 finetune YAML (`litgpt finetune_lora|finetune_full --config`) → the estimate's settings (stack
"litgpt"). The keys are litgpt/finetune/lora.py and full.py's setup() parameters and litgpt/args.py's TrainArgs,
with setup()'s defaults (0.5.13). The file does not name its command: lora_* keys mean finetune_lora, none mean
finetune_full."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.optimizers import OPTIMIZERS
from ...options.stacks import stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GPUS, MAX_RANK, MAX_SEQ_LEN
from ._common import gpus_from_marker, lora_dropout, no_memory
from ._fields import as_bool, load_keys
from ._models import ref_from_litgpt
from ._read import printable

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader
    from ._models import ModelRef

ID = "litgpt"
LABEL = "LitGPT 0.5.13 finetune YAML"
TOOL = "LitGPT 0.5.13"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("litgpt")
_F = "litgpt/finetune/lora.py (0.5.13) setup()"

_SWITCHES = (("lora_query", "q_proj", True), ("lora_key", "k_proj", False), ("lora_value", "v_proj", True),
             ("lora_projection", "o_proj", False), ("lora_mlp", "mlp", False), ("lora_head", "lm_head", False))
# --precision (lightning fabric) → the estimate's precision: "-true" is pure 16-bit, "-mixed" fp32 weights under
# autocast (report/snippets/common.py LITGPT_PRECISIONS, the other direction).
_PRECISIONS = {"bf16-true": "bf16", "16-true": "fp16", "bf16-mixed": "mixed", "16-mixed": "mixed", "32-true": "fp32",
               "32": "fp32", "bf16": "bf16", "16": "fp16"}
# --optimizer: a torch.optim name or {class_path, init_args} (litgpt/utils.py instantiate_torch_optimizer).
_OPTIMIZERS = {o.torch_class: k for k, o in OPTIMIZERS.items() if o.torch_class and k != "adamw"} | {
    "AdamW": "adamw_foreach", "torch.optim.AdamW": "adamw_foreach", "SGD": "sgd", "Adam": "adamw_foreach",
    "torch.optim.Adam": "adamw_foreach"}
_NO_MEMORY = {
    "checkpoint_dir": N_("read as the model"), "lora_alpha": N_("a scaling factor: no memory"),
    "num_nodes": N_("read with devices"), "optimizer": N_("read as the optimizer"),
    "train": N_("read key by key"),
}


def score(doc: dict[str, Any]) -> int:
    train = doc.get("train")
    points = 3 if isinstance(train, dict) and ("micro_batch_size" in train or "global_batch_size" in train) else 0
    points += 3 if "checkpoint_dir" in doc else 0
    return points + sum(1 for k in ("lora_query", "lora_value", "lora_mlp", "out_dir", "precision", "quantize",
                                    "logger_name", "devices") if k in doc)


def _method(r: Reader) -> str:
    """quantize (bnb.nf4, bnb.nf4-dq, bnb.fp4, bnb.fp4-dq, bnb.int8-training) and the lora_* keys."""
    lora = any(r.has(k) for k in ("lora_r", "lora_alpha", "lora_dropout", *(s[0] for s in _SWITCHES)))
    quantize = r.get("quantize") if r.given("quantize") else None
    if quantize is not None:
        name = str(quantize).strip().lower()
        if name in ("bnb.nf4", "bnb.nf4-dq", "bnb.fp4", "bnb.fp4-dq") and lora:
            r.set("method", "qlora", "quantize",
                  why=Text(N_("fp4 stores the same 4 bits per weight as nf4")) if "fp4" in name else "")
            r.set("nf4_double_quant", name.endswith("-dq"), "quantize")
            return "qlora"
        if not lora:
            r.refuse("quantize", Text(N_("LitGPT quantises only under finetune_lora (finetune_full has no "
                                         "--quantize)")))
        else:
            r.refuse("quantize", Text(N_("{name} is not modelled; estimated as LoRA on a 16-bit base"),
                                      name=printable(quantize, 30)))
    if lora:
        r.set("method", "lora", next(k for k in ("lora_r", *(s[0] for s in _SWITCHES), "lora_alpha", "lora_dropout")
                                     if r.has(k)), why=Text(N_("lora_* keys: finetune_lora")))
        return "lora"
    r.default("method", "full", "lora_r", Text(N_("no lora_* keys: finetune_full")))
    return "full"


def _lora(r: Reader) -> None:
    """lora_r (8), the lora_query/key/value/projection/mlp/head switches (True, False, True, False, False, False)."""
    if not r.take_int("lora_rank", "lora_r", 1, MAX_RANK):
        r.default("lora_rank", 8, "lora_r", Text(N_("{src} default 8"), src=_F))
    names: list[str] = []
    for key, name, default in _SWITCHES:
        on = as_bool(r.get(key)) if r.given(key) else default
        if r.given(key) and on is None:
            r.refuse(key, Text(N_("not true or false")))
            on = default
        if on:
            names += ["gate_proj", "up_proj", "down_proj"] if name == "mlp" else [name]
    if set(names) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}:
        targets: tuple[str, ...] = (ALL_LINEAR,)
    else:
        targets = tuple(names) or (ALL_LINEAR,)
    shown_keys = [k for k, _, _ in _SWITCHES if r.given(k)]
    r.set("lora_targets", targets, shown_keys[0] if shown_keys else "lora_query",
          why=Text(N_("from the lora_* switches")), raw={k: r.lookup(k) for k in shown_keys} or "defaults")
    from ...options.stacks import STACKS as STACK_TABLE

    lora_dropout(r, "lora_dropout", 0.05, Text(N_("{src} default 0.05"), src=_F),
                 counted=STACK_TABLE["litgpt"].lora_dropout)


def _optimizer(r: Reader, method: str) -> None:
    value = r.get("optimizer")
    if method == "qlora":  # litgpt/utils.py instantiate_bnb_optimizer: PagedAdamW whatever the config says
        r.ignore("optimizer", Text(N_("with quantize, LitGPT builds bitsandbytes' PagedAdamW (utils.py "
                                      "instantiate_bnb_optimizer)")))
        return
    if isinstance(value, dict):
        name = value.get("class_path")
        init = value.get("init_args") if isinstance(value.get("init_args"), dict) else {}
    else:
        name, init = value, {}
    optimizer = _OPTIMIZERS.get(str(name))
    if optimizer == "adamw_foreach" and as_bool(init.get("fused")):
        optimizer = "adamw"
    if optimizer is None:
        r.refuse("optimizer", Text(N_("optimizer {name} is not modelled; LitGPT's default AdamW is counted"),
                                   name=printable(name, 60)))
        return
    r.set("optimizer", optimizer, "optimizer", raw=name)


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of a LitGPT finetune config into the three lists; returns the model its checkpoint_dir names."""
    model = ref_from_litgpt(r.get("checkpoint_dir"))
    method = _method(r)
    if method != "full":
        _lora(r)
    _precision(r, method)
    gpus = _devices(r, ctx, method)
    _batches(r, gpus)
    if not r.take_int("seq_len", "train.max_seq_length", 1, MAX_SEQ_LEN):
        r.refuse("train.max_seq_length", Text(N_("null: LitGPT uses the longest example (up to the model's block "
                                                 "size); the estimate uses 2,048 tokens (set max length)")),
                 raw=r.lookup("train.max_seq_length"))
    if r.given("train.max_norm"):  # finetune/*.py validate_args: 'max_norm' is not supported in finetuning
        r.refuse("train.max_norm", Text(N_("LitGPT's finetune scripts refuse train.max_norm (validate_args)")))
    if r.given("train.tie_embeddings") and r.boolean("train.tie_embeddings"):
        r.refuse("train.tie_embeddings", Text(N_("LitGPT's finetune scripts refuse tie_embeddings (validate_args)")))
    if r.given("optimizer"):
        _optimizer(r, method)
    _rest_of_train(r)
    extra = {k: Text(v) for k, v in _NO_MEMORY.items()}
    r.finish(list(doc), SCHEMA, lambda key: no_memory(key, extra))
    return model


def _precision(r: Reader, method: str) -> None:
    """precision (lora.py: precision or get_default_supported_precision(training=True))."""
    precision = r.get("precision") if r.given("precision") else None
    if precision is None:  # lora.py: precision or get_default_supported_precision(training=True)
        r.default("precision", "bf16", "precision", Text(N_("bf16-true on a GPU with bf16 (utils.py "
                                                            "get_default_supported_precision)")))
    elif str(precision) in _PRECISIONS:
        value = _PRECISIONS[str(precision)]
        if method == "qlora" and value == "mixed":  # lora.py: 'Quantization and mixed precision is not supported.'
            r.refuse("precision", Text(N_("LitGPT refuses mixed precision with quantize; bf16-true assumed")))
            r.settings["precision"] = "bf16"
        else:
            r.set("precision", value, "precision")
    else:
        r.refuse("precision", Text(N_("precision {name} is not modelled; bf16-true assumed"),
                                   name=printable(precision, 30)))


def _devices(r: Reader, ctx: ReadContext, method: str) -> int:
    """devices × num_nodes → GPUs (else the marker's); several: FSDP with checkpointing. Returns the GPU count."""
    devices = r.get("devices", 1)
    nodes = r.get("num_nodes", 1)
    d = r.integer("devices", 1, MAX_GPUS, value=devices) if r.has("devices") else 1
    n = r.integer("num_nodes", 1, MAX_GPUS, value=nodes) if r.has("num_nodes") else 1
    gpus = (d or 1) * (n or 1)
    key = "devices" if r.has("devices") or not r.has("num_nodes") else "num_nodes"  # num_nodes alone: 1 device each
    if r.has("devices") or r.has("num_nodes"):
        if gpus > MAX_GPUS:
            r.refuse(key, Text(N_("more than {n} GPUs"), n=MAX_GPUS))
            gpus = 1
        r.set("gpus", gpus, key, why=Text(N_("devices × num_nodes")) if n and n > 1 else "")
    else:
        gpus_from_marker(r, ctx.marker)
        gpus = r.settings.get("gpus", 1)
    if gpus > 1:  # lora.py / full.py: FSDP (ModelParallelStrategy) with activation checkpointing on several devices
        r.set("sharding", "zero3", key, why=Text(N_("LitGPT shards fully on several devices")))
        r.set("grad_ckpt", True, key, why=Text(N_("LitGPT checkpoints each block under FSDP")))
        if method == "qlora":
            r.refuse(key, Text(N_("LitGPT refuses quantize on more than one device")))
    return gpus


def _batches(r: Reader, gpus: int) -> None:
    """train.micro_batch_size → batch; train.global_batch_size → accumulation."""
    micro = r.integer("train.micro_batch_size", 1, MAX_BATCH) if r.given("train.micro_batch_size") else None
    if micro is not None:
        r.set("batch", micro, "train.micro_batch_size")
    elif not r.given("train.micro_batch_size"):
        r.default("batch", 1, "train.micro_batch_size", Text(N_("{src} default 1"), src=_F))
    micro = r.settings.get("batch", 1)
    global_batch = r.integer("train.global_batch_size", 1, 1 << 24) if r.given("train.global_batch_size") else 16
    if global_batch is not None:
        # args.py TrainArgs.gradient_accumulation_iters: global // (devices × nodes) // micro_batch_size
        accum = max(1, global_batch // gpus // micro)
        if r.given("train.global_batch_size"):
            r.set("grad_accum", accum, "train.global_batch_size",
                  why=Text(N_("global ÷ (GPUs × micro-batch)")))
        else:
            r.default("grad_accum", accum, "train.global_batch_size",
                      Text(N_("{src} global_batch_size 16 ÷ (GPUs × micro-batch)"), src=_F))


def _rest_of_train(r: Reader) -> None:
    """The train block's other keys: a known one changes no memory, an unknown one is listed."""
    train = r.lookup("train")
    if isinstance(train, dict):
        for key in train:
            dotted = f"train.{key}"
            if dotted not in r.used:
                if dotted in SCHEMA:
                    r.ignore(dotted, no_memory(str(key)) or Text(N_("a training-loop setting: no memory")))
                else:
                    r.refuse(dotted, Text(N_("unknown key: not in {tool}'s config schema (a typo?)"), tool=TOOL))
    r.used.add("train")
