"""An mlx-lm 0.32.2 LoRA config (`mlx_lm.lora --config FILE`) → the estimate's settings (stack "mlx"). mlx-lm loads
the YAML with a safe loader and merges it into its argparse namespace: a key the command line did not give takes the
file's value, and a key still unset (or null) takes CONFIG_DEFAULTS' (mlx_lm/lora.py:379-391). Every key below is
read as mlx_lm/lora.py (CONFIG_DEFAULTS :45-82, train_model :225-313) and mlx_lm/tuner/utils.py
(linear_to_lora_layers :40-120) use it; the line numbers are those of the installed 0.32.2 sources
(requirements-mlx.txt; docs/mlx.md).

The model: a Hub repo (an mlx-community conversion keeps its original's architecture; its config.json's
`quantization` block makes the base quantised, which the repo's name usually says: `-4bit`, `-8bit`, `-mxfp4`), or
a local folder (its config.json is needed). An export of this calculator names the model and the mlx_lm.convert step
in its marker line, since the file trains on the converted folder."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ...options.optimizers import OPTIMIZERS
from ...options.precisions import MLX_CONVERT_DTYPES
from ...options.quantization import QUANT_MODES, check_quant
from ...options.stacks import STACKS as STACK_TABLE
from ...options.stacks import stacks_in_format
from ..setup import ALL_LINEAR, MAX_BATCH, MAX_GRAD_ACCUM, MAX_LORA_LAYERS, MAX_RANK, MAX_SEQ_LEN
from ._common import lora_dropout, no_memory
from ._fields import MISSING, load_keys
from ._models import ModelRef, ref_from_name
from ._read import printable

if TYPE_CHECKING:
    from ._fields import ReadContext, Reader

ID = "mlx_lm"
LABEL = "mlx-lm 0.32.2 LoRA YAML (mlx_lm.lora --config)"
TOOL = "mlx-lm 0.32.2"
STACKS = stacks_in_format(ID)  # the stacks whose file this is (options/stacks.py Stack.config_format)
SCHEMA = load_keys("mlx_lm")
_L = "mlx_lm/lora.py"  # the 0.32.2 release's files, cited below
_U = "mlx_lm/tuner/utils.py"
DEFAULT_MODEL = "Qwen/Qwen3-0.6b"  # mlx_lm/lora.py:46 CONFIG_DEFAULTS["model"]

# Keys only mlx-lm's LoRA config has (a TRL, Axolotl, torchtune or LitGPT file has none of them); the first two
# weigh more: no other tool names them.
_OWN_KEYS = ("fine_tune_type", "lora_parameters", "num_layers", "grad_checkpoint", "iters", "val_batches",
             "steps_per_report", "resume_adapter_file", "adapter_path", "grad_accumulation_steps", "test_batches")
# --optimizer (lora.py:117 choices; :288 lower-cased; :290-301 the class) → the estimate's optimizer option.
_OPTIMIZERS = {o.mlx_name: k for k, o in OPTIMIZERS.items() if o.mlx_name}
# mlx_lm.convert --dtype (MODEL_CONVERSION_DTYPES) and the checkpoint dtypes a repo's name says → precision.
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32",
          "f16": "fp16", "f32": "fp32"}
# mlx-community's repo names end in the conversion: -4bit, -8bit (mlx_lm.convert -q: affine, group 64), -mxfp4,
# -bf16, optionally with -mlx / -MLX or a -DWQ/-AWQ distillation of the same affine layout.
_QUANT_NAME = re.compile(r"(?i)-(?:mlx-)?(?:(\d)bit|(mxfp4|nvfp4|mxfp8))(?:-(?:dwq|awq|gptq|mlx))*$")
_DTYPE_NAME = re.compile(r"(?i)-(?:mlx-)?(bf16|fp16|fp32|bfloat16|float16|float32)(?:-mlx)?$")
_MLX_NAME = re.compile(r"(?i)-mlx$")

_NO_MEMORY = {
    "iters": N_("the number of steps: no memory"),
    "val_batches": N_("validation batches run forward only, between training steps"),
    "steps_per_report": N_("logging: no memory"),
    "resume_adapter_file": N_("loading saved adapter weights: the same adapters, no more memory"),
    "test": N_("the test-set evaluation after training runs forward only"),
    "test_batches": N_("the test-set evaluation after training runs forward only"),
    "config": N_("the --config flag itself"),
    "mask_prompt": N_("masks the prompt out of the loss (mlx_lm/lora.py:78): the batch keeps its shape"),
    "prompt_feature": N_("the dataset's column names: the estimate prices full-length batches"),
    "completion_feature": N_("the dataset's column names: the estimate prices full-length batches"),
    "text_feature": N_("the dataset's column names: the estimate prices full-length batches"),
    "chat_feature": N_("the dataset's column names: the estimate prices full-length batches"),
    "clear_cache_threshold": N_("mlx-lm 0.32.2 does not pass it to the trainer (mlx_lm/lora.py:272-283): the cache is "
                                "emptied after every step, as the estimate assumes"),
    "lora_parameters": N_("read key by key"), "optimizer_config": N_("read with optimizer"),
    "model": N_("read as the model"),
    # keys of older releases' example configs (mlx-examples llms/mlx_lm/examples/lora_config.yaml)
    "adapter_file": N_("saving adapters (an older release's key)"), "wandb": N_("logging (an older release's key)"),
}
# Keys older releases read that 0.32.2 no longer does: it leaves them in its namespace unread, so its own default
# applies instead (the value is not honoured, with the reason).
_RENAMED = {
    "lora_layers": N_("renamed num_layers in mlx-lm 0.19 (mlx-examples commit 50e5ca81, #903): mlx-lm 0.32.2 does not "
                      "read it, so num_layers applies (default 16)"),
    "use_dora": N_("replaced by fine_tune_type: dora (mlx-examples commit 50e5ca81, #903): mlx-lm 0.32.2 does not read "
                   "it, so fine_tune_type applies (default lora)"),
}


def score(doc: dict[str, Any]) -> int:
    points = sum(3 if k in ("fine_tune_type", "lora_parameters") else 1 for k in _OWN_KEYS if k in doc)
    if isinstance(doc.get("model"), str) and ("batch_size" in doc or "max_seq_length" in doc):
        points += 1  # torchtune's model is a block with a _component_; LitGPT nests max_seq_length under train
    return points + sum(1 for k in _RENAMED if k in doc)


# ---- the model ----------------------------------------------------------------------------------------------------

def name_hints(name: str) -> tuple[str, str | None, tuple[str, int, int] | None]:
    """What an MLX repo's name says: the name of the original it was converted from (for the same-architecture
    preset), the checkpoint's dtype (-bf16) and its quantisation (-4bit: mlx_lm.convert -q's affine, group 64;
    -mxfp4 …; group sizes are the mode's default)."""
    base, dtype, quant = name, None, None
    m = _QUANT_NAME.search(base)
    if m:
        if m.group(1):
            bits = int(m.group(1))
            if bits in QUANT_MODES["affine"].bits:
                quant = ("affine", bits, QUANT_MODES["affine"].groups[0])
        else:
            mode = QUANT_MODES[m.group(2).lower()]
            quant = (mode.id, mode.bits[0], mode.groups[0])
        base = base[: m.start()]
    m = _DTYPE_NAME.search(base)
    if m:
        dtype = DTYPES[m.group(1).lower()]
        base = base[: m.start()]
    return _MLX_NAME.sub("", base), dtype, quant


def model_ref(name: object) -> ModelRef:
    """A model as mlx-lm's `model` names it: a Hub repo (an MLX conversion keeps its original's preset as the offline
    stand-in), a local folder, or nothing."""
    ref = ref_from_name(name)
    if ref.kind == "hub":
        base = ref_from_name(name_hints(str(name).strip())[0])
        return ModelRef("hub", ref.name, base.preset or ref.preset)
    return ref


def _model(r: Reader, ctx: ReadContext) -> tuple[ModelRef, str | None, tuple[str, int, int] | None, str]:
    """The model, the precision and quantisation it implies, and the key that says so. The export's marker names the
    model it converted to the folder the file trains on (`model: ./mlx_model`)."""
    written = r.get("model") if r.given("model") else None
    marked = ctx.marker.get("model")
    if marked and (written is None or model_ref(written).kind == "local"):
        r.used.add("# will-it-fit: model")
        if written is not None:
            r.ignore("model", Text(N_("the folder mlx_lm.convert writes from {model} (the marker's model)"),
                                   model=printable(marked, 80)))
        ref, key = model_ref(marked), "# will-it-fit: model"
    elif written is None:
        ref, key = model_ref(DEFAULT_MODEL), "model"
    else:
        ref, key = model_ref(written), "model"
    dtype = quant = None
    if ref.kind == "hub":
        _base, dtype, quant = name_hints(ref.name.split("@", 1)[0])
    return ref, dtype, quant, key


def _precision(r: Reader, ctx: ReadContext, dtype: str | None, key: str) -> None:
    """mlx-lm has no dtype key: the model trains in its checkpoint's dtype (mlx_lm/utils.py load() casts nothing)."""
    marked = ctx.marker.get("dtype")
    if marked is not None:
        if marked in MLX_CONVERT_DTYPES.values():
            r.set("precision", DTYPES[marked], "# will-it-fit: dtype", raw=marked,
                  why=Text(N_("mlx_lm.convert --dtype, the marker's")))
        else:
            r.refuse("# will-it-fit: dtype", Text(N_("not a dtype mlx_lm.convert writes (bfloat16, float16, "
                                                     "float32)")), raw=marked)
    elif dtype is not None:
        r.set("precision", dtype, key, raw=r.lookup(key) if key == "model" and r.has(key) else ctx.marker.get("model"),
              why=Text(N_("the repo's name: the checkpoint's dtype, which mlx-lm trains in")))
    if "precision" not in r.settings:
        r.default("precision", "bf16", "model",
                  Text(N_("mlx-lm trains in the checkpoint's own dtype (mlx_lm/utils.py load() casts nothing); bf16 "
                          "assumed, most checkpoints' dtype")))


def _quantisation(r: Reader, ctx: ReadContext, quant: tuple[str, int, int] | None, key: str,
                  full: bool) -> Text | None:
    """A quantised base: the marker's mlx_lm.convert -q settings, else the repo's name (its config.json decides when
    read from the Hub). LoRA or DoRA on it is QLoRA (the reason is returned for the method's entry); full fine-tuning
    cannot train it."""
    mark = ctx.marker
    if "q_mode" in mark:
        values = (mark.get("q_mode", ""), mark.get("q_bits", ""), mark.get("q_group", ""))
        try:
            quant = (values[0], int(values[1]), int(values[2]))
            check_quant(*quant)
        except ValueError:
            r.refuse("# will-it-fit: q_mode", Text(N_("not an MLX quantisation (mode, bits, group) mlx_lm.convert "
                                                      "writes")), raw=" ".join(values))
            return None
        if QUANT_MODES[quant[0]].framework != "mlx":
            r.refuse("# will-it-fit: q_mode", Text(N_("not an MLX quantisation mode")), raw=quant[0])
            return None
        key, why = "# will-it-fit: q_mode", Text(N_("the base mlx_lm.convert -q writes (the marker's)"))
        raw: Any = " ".join(values)
    elif quant is not None:
        why = Text(N_("the repo's name says an MLX-quantised checkpoint (its config.json's quantization decides when "
                      "read from the Hub)"))
        raw = r.lookup(key) if key == "model" and r.has(key) else mark.get("model")
    else:
        return None
    if full:
        r.refuse(key, Text(N_("full fine-tuning cannot train a quantised base (MLX's quantised layers freeze "
                              "themselves, mlx/nn/layers/quantized.py); the estimate refuses it: choose a float "
                              "checkpoint or lora")), raw=raw)
        return None
    r.set("quant_mode", quant[0], key, raw=raw, why=why)
    r.set("quant_bits", quant[1], key, raw=raw)
    r.set("quant_group", quant[2], key, raw=raw)
    return Text(N_("LoRA on the quantised base"))


# ---- the run -----------------------------------------------------------------------------------------------------

def _fine_tune(r: Reader) -> str:
    """fine_tune_type as written (lora.py:48 default lora; :111 choices lora, dora, full; :253-254 anything else
    raises): "lora", "dora", "full", or "" when absent or refused (mlx-lm's default applies)."""
    if not r.given("fine_tune_type"):
        return ""
    value = r.get("fine_tune_type")
    name = value.strip().lower() if isinstance(value, str) else ""
    if name not in ("lora", "dora", "full"):
        r.refuse("fine_tune_type", Text(N_("mlx-lm raises 'Received unknown fine-tune-type' ({src}:253-254); lora "
                                           "assumed"), src=_L))
        return ""
    return name


def _method(r: Reader, name: str, qlora: Text | None) -> str:
    """The method from fine_tune_type and the base: full, lora, or qlora on a quantised base; DoRA rides on either
    adapter method (lora.py:251 use_dora)."""
    method = "full" if name == "full" else ("qlora" if qlora else "lora")
    if name:
        r.set("method", method, "fine_tune_type", why=qlora or "")
    else:
        default = Text(N_("{src}:48 default lora"), src=_L)
        r.default("method", method, "fine_tune_type", Text(N_("{default}, {then}"), default=default, then=qlora)
                  if qlora else default)
    if name == "dora":
        r.set("dora", True, "fine_tune_type", why=Text(N_("{src}:251 use_dora"), src=_L))
    return method


def _layers(r: Reader) -> None:
    """num_layers: the last N blocks (lora.py:59 default 16); any N ≤ 0 is every block (layers[-max(N, 0):] is
    layers[0:], :241 and tuner/utils.py:113); more than the model has raises (:234-238, the estimate's check)."""
    if not r.given("num_layers"):
        r.default("lora_layers", 16, "num_layers", Text(N_("{src}:59 default 16: the last 16 blocks"), src=_L))
        return
    n = r.integer("num_layers", -MAX_LORA_LAYERS, MAX_LORA_LAYERS)
    if n is None:
        return
    if n <= 0:
        r.set("lora_layers", 0, "num_layers", why=Text(N_("every block")))
    else:
        r.set("lora_layers", n, "num_layers", why=Text(N_("the last {n} blocks"), n=n))


def _targets(r: Reader, keys: Any) -> None:
    """lora_parameters.keys: module paths inside each trained block (tuner/utils.py:113-116: self_attn.q_proj,
    mlp.down_proj …; none: every linear of the block, :95-111) → the module names the estimate adapts. A top-level
    path (lm_head) is adapted in the whole model (:118-120), which the estimate does not price."""
    key = "lora_parameters.keys"
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
        r.refuse(key, Text(N_("not a list of module paths (self_attn.q_proj, mlp.down_proj …); every linear of "
                              "the block assumed")))
        return
    names: list[str] = []
    outside: list[str] = []
    for path in (k.strip() for k in keys):
        parts = path.split(".")
        if len(parts) == 1 or parts[0] == "model" or "layers" in parts:
            outside.append(path)
        else:
            names.append(parts[-1])
    if outside:
        r.refuse(key, Text(N_("{paths}: outside the blocks, mlx-lm adapts the module of that path in the whole model "
                              "({src}:118-120); the estimate prices adapters inside the trained blocks only"),
                           paths=printable(", ".join(outside), 60), src=_U), raw=outside)
    if not names:
        return
    clean = tuple(dict.fromkeys(names))
    llama = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    targets = (ALL_LINEAR,) if set(clean) == llama else clean
    r.set("lora_targets", targets, key, raw=keys, why=Text(N_("the module names of the block paths")))


def _lora(r: Reader, method: str) -> None:
    """lora_parameters (lora.py:77 default {rank 8, dropout 0.0, scale 20.0}). A block given in the file replaces the
    default whole (:384-391): tuner/utils.py reads config['rank'], ['scale'] and ['dropout'] (:58-93), so a key left
    out makes mlx-lm raise."""
    block = r.get("lora_parameters") if r.given("lora_parameters") else None
    if method == "full":
        if block is not None:
            r.ignore("lora_parameters", Text(N_("full fine-tuning: mlx-lm sets lora_parameters to None ({src}:244)"),
                                             src=_L))
        return
    if block is None:
        r.default("lora_rank", 8, "lora_parameters.rank", Text(N_("{src}:77 default 8"), src=_L))
        r.default("lora_targets", (ALL_LINEAR,), "lora_parameters.keys",
                  Text(N_("no keys: every linear inside the trained blocks ({src}:95-111)"), src=_U))
        return
    if not isinstance(block, dict):
        r.refuse("lora_parameters", Text(N_("not a mapping (rank, scale, dropout, keys); mlx-lm's defaults assumed")))
        return
    missing = [k for k in ("rank", "scale", "dropout") if k not in block]
    if missing:
        hint = Text(N_(" (it has alpha: mlx-lm takes scale, not alpha)")) if "scale" in missing and "alpha" in block \
            else ""
        r.refuse("lora_parameters", Text(N_("mlx-lm raises a KeyError without {keys} ({src}:58-93){hint}; the missing "
                                            "ones are taken as mlx-lm's defaults"), keys=", ".join(missing), src=_U,
                                         hint=hint), raw=block)
    if not r.take_int("lora_rank", "lora_parameters.rank", 1, MAX_RANK):
        r.default("lora_rank", 8, "lora_parameters.rank", Text(N_("{src}:77 default 8"), src=_L))
    if "keys" in block and block["keys"] is not None:
        _targets(r, r.get("lora_parameters.keys"))
    if "lora_targets" not in r.settings:
        r.default("lora_targets", (ALL_LINEAR,), "lora_parameters.keys",
                  Text(N_("no keys: every linear inside the trained blocks ({src}:95-111)"), src=_U))
    if "scale" in block:
        number = r.number("lora_parameters.scale", -1e6, 1e6)
        if number is not None:
            r.ignore("lora_parameters.scale", Text(N_("a scaling factor: no memory")))
    if "alpha" in block:
        r.ignore("lora_parameters.alpha", Text(N_("mlx-lm does not read alpha (it takes scale): no memory")))
    if "dropout" in block:
        lora_dropout(r, "lora_parameters.dropout", 0.0, Text(N_("{src}:77 default 0.0"), src=_L),
                     counted=STACK_TABLE["mlx"].lora_dropout)
    for sub in block:
        dotted = f"lora_parameters.{sub}"
        if dotted not in r.used:
            r.refuse(dotted, Text(N_("unknown key: not in {tool}'s config schema (a typo?)"), tool=TOOL))


def _optimizer(r: Reader) -> None:
    """optimizer (lora.py:49 default adam) with optimizer_config[<name>] as its keyword arguments (:288-303). Only
    Adafactor's beta_1 changes the state (an exp_avg per parameter, mlx/optimizers/optimizers.py:795-796); betas, eps,
    weight decay, momentum, nesterov … change none: every optimizer allocates its state whatever they are (Adam m and
    v :521-524, SGD v even without momentum :269-271, Muon v :909-911)."""
    name = "adam"
    if r.given("optimizer"):
        value = r.get("optimizer")
        text = value.strip().lower() if isinstance(value, str) else ""
        if text in _OPTIMIZERS:
            name = text
            r.set("optimizer", _OPTIMIZERS[text], "optimizer")
        else:
            r.refuse("optimizer", Text(N_("mlx-lm raises 'Unsupported optimizer' (it offers adam, adamw, muon, sgd, "
                                          "adafactor; {src}:288-301); Adam assumed"), src=_L))
    if "optimizer" not in r.settings:
        r.default("optimizer", _OPTIMIZERS["adam"], "optimizer", Text(N_("{src}:49 default adam"), src=_L))
    if not r.given("optimizer_config"):
        return
    block = r.get("optimizer_config")
    if not isinstance(block, dict):
        r.refuse("optimizer_config", Text(N_("not a mapping of optimizer names to their arguments")))
        return
    for opt, kwargs in block.items():
        dotted = f"optimizer_config.{opt}"
        if str(opt) not in _OPTIMIZERS:
            r.refuse(dotted, Text(N_("unknown key: not in {tool}'s config schema (a typo?)"), tool=TOOL))
        elif str(opt) != name:
            r.ignore(dotted, Text(N_("the arguments of another optimizer: unused")))
        elif kwargs is not None and not isinstance(kwargs, dict):
            r.refuse(dotted, Text(N_("not a mapping of keyword arguments: mlx-lm raises")))
        elif isinstance(kwargs, dict) and name == "adafactor" and kwargs.get("beta_1") not in (None, MISSING):
            r.refuse(dotted, Text(N_("Adafactor with beta_1 keeps a first moment (exp_avg) per parameter "
                                     "(mlx/optimizers/optimizers.py:795-796), which the estimate does not count")))
        else:
            r.ignore(dotted, Text(N_("the optimizer's hyper-parameters: its state is the same size")))


def sft_only(r: Reader) -> None:
    """mlx_lm lora trains supervised fine-tuning only: a trainer the export's marker names otherwise is not honoured,
    nor are its options (the estimate refuses the MLX stack with another trainer, job/trainer.py check)."""
    trainer = r.trainer.get("trainer", "sft")
    if trainer == "sft":
        return
    reason = Text(N_("mlx-lm trains supervised fine-tuning only (mlx_lm lora); {trainer} is TRL's: SFT assumed"),
                  trainer=printable(trainer, 20))
    for name in list(r.trainer):
        r.withdraw(name, reason)


def read(doc: dict[str, Any], r: Reader, ctx: ReadContext) -> ModelRef:
    """Every key of an mlx-lm LoRA config into the three lists; returns the model it names."""
    model, dtype, quant, model_key = _model(r, ctx)
    name = _fine_tune(r)
    method = _method(r, name, _quantisation(r, ctx, quant, model_key, name == "full"))
    _precision(r, ctx, dtype, model_key)
    _layers(r)
    _lora(r, method)
    _optimizer(r)
    if not r.take_int("batch", "batch_size", 1, MAX_BATCH):
        r.default("batch", 4, "batch_size", Text(N_("{src}:60 default 4"), src=_L))
    if not r.take_int("seq_len", "max_seq_length", 2, MAX_SEQ_LEN):
        r.default("seq_len", 2048, "max_seq_length", Text(N_("{src}:71 default 2048"), src=_L))
    if not r.take_bool("grad_ckpt", "grad_checkpoint"):
        r.default("grad_ckpt", False, "grad_checkpoint", Text(N_("{src}:73 default false"), src=_L))
    if not r.take_int("grad_accum", "grad_accumulation_steps", 1, MAX_GRAD_ACCUM):
        r.default("grad_accum", 1, "grad_accumulation_steps", Text(N_("{src}:74 default 1"), src=_L))
    if r.has("train") and r.given("train"):
        on = r.boolean("train")
        if on is False:
            r.refuse("train", Text(N_("train: false: mlx_lm.lora only evaluates unless --train is given "
                                      "({src}:357-366); the estimate prices the training step"), src=_L))
        elif on:
            r.ignore("train", Text(N_("trains (the step the estimate prices)")))
    for key, reason in _RENAMED.items():
        if r.has(key):
            r.refuse(key, Text(reason))
    extra = {k: Text(v) for k, v in _NO_MEMORY.items()}
    r.finish(list(doc), SCHEMA, lambda key: no_memory(key, extra))
    return model
