"""Import a training config: an Axolotl, TRL (and transformers TrainingArguments), torchtune, LitGPT, mlx-lm,
LLaMA-Factory or ms-swift file → the user's job as the estimate takes it: the model it names, the stack (which follows from the
format), the settings for `resolve_setup`, the trainer's settings, and three lists: what was read (key → value → our
setting), what was ignored because it changes no memory, and what could not be honoured, with the reason.

One module per format (axolotl.py, trl.py, torchtune.py, litgpt.py, mlx_lm.py, llamafactory.py, swift.py), each mapped from
that project's own config schema at the version the stack models; a new format is one more module in FORMATS. Reading is safe: at most 1 MB, PyYAML's safe loader or json, limits on depth and size (_read.py).

Pure Python; no network: a model named by Hub id is returned as a reference (ModelRef) for the caller to read
through estimator.models.hub (`model_choice`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text, error_message
from ...models.presets import list_presets
from ...options.stacks import STACK_IDS, STACKS
from ...options.trainers import GENERATION_MODES, TRAINERS
from ..settings import BY_NAME
from ..setup import MAX_SEQ_LEN
from ..stack import resolve_setup
from ..trainer import TrainerSetup
from . import axolotl, litgpt, llamafactory, mlx_lm, swift, torchtune, trl
from ._fields import MISSING, Entry, ReadContext, Reader
from ._models import ModelRef, fit_targets, ref_from_name
from ._read import MAX_CONFIG_BYTES, ConfigError, decode, marker, parse_text, printable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType

    from ..setup import TrainingSetup

__all__ = ["FORMATS", "MAX_CONFIG_BYTES", "ConfigError", "Entry", "ImportedConfig", "Merged", "ModelRef",
           "fit_targets", "import_config", "merge", "model_choice"]

FORMATS: tuple[ModuleType, ...] = (axolotl, trl, torchtune, litgpt, mlx_lm, llamafactory, swift)
FORMAT_IDS: tuple[str, ...] = tuple(f.ID for f in FORMATS)
_MODEL_KEYS = {"axolotl": "base_model", "trl": "model_name_or_path", "torchtune": "model._component_",
               "litgpt": "checkpoint_dir", "mlx_lm": "model", "llamafactory": "model_name_or_path",
               "swift": "model"}
# Formats whose reader may take the model from the export's marker over the file's own key (torchtune's template
# config, mlx-lm's converted folder).
_MARKER_MODEL = ("torchtune", "mlx_lm")

# Files of other tools, recognised so the message can say what they are (key sets that identify each).
_OTHER_TOOLS: tuple[tuple[Callable[[dict[str, Any]], bool], str], ...] = (
    (lambda d: "zero_optimization" in d or "train_micro_batch_size_per_gpu" in d,
     N_("a DeepSpeed config: import the training config that names it (Axolotl's or TRL's deepspeed key) and give "
        "this file with it")),
    (lambda d: "distributed_type" in d and "compute_environment" in d,
     N_("an accelerate config: import the TRL config that names it (accelerate_config)")),
    (lambda d: "model_type" in d and any(k in d for k in ("hidden_size", "architectures", "num_hidden_layers",
                                                          "text_config")),
     N_("a model's config.json, not a training config: choose it in the Model section (upload) or pass --config")),
)


@dataclass(frozen=True)
class ImportedConfig:
    """A training config as the estimate reads it. `settings` are resolve_setup's keyword arguments the config
    decides (the stack fills the rest), `trainer` TrainerSetup's; flags given beside the config win over both
    (`setup`, `trainer_setup`)."""

    format: str  # a FORMAT_IDS entry
    format_label: str
    stack: str
    model: ModelRef
    settings: tuple[tuple[str, Any], ...]
    trainer: tuple[tuple[str, Any], ...]
    read: tuple[Entry, ...]
    ignored: tuple[Entry, ...]
    not_honoured: tuple[Entry, ...]
    overrides: tuple[tuple[str, str], ...] = field(default=())  # torchtune key=value overrides applied

    @property
    def setup_kwargs(self) -> dict[str, Any]:
        return dict(self.settings)

    @property
    def trainer_kwargs(self) -> dict[str, Any]:
        return dict(self.trainer)

    def setup(self, stack: str | None = None, **flags: Any) -> TrainingSetup:
        """The setup: the config's settings under its stack (or `stack`), the flags given (not None) winning
        (`merge`)."""
        merged = merge(self, {"stack": stack, **flags})
        return resolve_setup(merged.stack or self.stack, **merged.setup)

    def trainer_setup(self, **flags: Any) -> TrainerSetup:
        """The trainer: the config's, or the flag's trainer (then only the flags' options apply; `merge`)."""
        return TrainerSetup(**merge(self, flags).trainer)

    def as_json(self) -> dict[str, Any]:
        return {"format": self.format, "format_label": self.format_label, "stack": self.stack,
                "model": self.model.as_json(), "settings": {k: (list(v) if isinstance(v, tuple) else v)
                                                            for k, v in self.settings},
                "trainer": dict(self.trainer), "overrides": [list(o) for o in self.overrides],
                "read": [e.as_json() for e in self.read], "ignored": [e.as_json() for e in self.ignored],
                "not_honoured": [e.as_json() for e in self.not_honoured]}


@dataclass(frozen=True)
class Merged:
    """A job's settings by field name (estimator/job/settings.py): a training config's, the flags given winning."""

    stack: str | None  # the flag's stack, else the config's; None: neither names one (the device's default)
    setup: dict[str, Any]  # resolve_setup's keyword arguments
    trainer: dict[str, Any]  # TrainerSetup's keyword arguments
    # The config's settings this job leaves out: its LoRA settings under full fine-tuning, its max length under a
    # trainer that generates (GRPO trains on prompt + completion), its checkpoint offload with checkpointing off.
    unused: dict[str, Any] = field(default_factory=dict)


_LORA_SETTINGS = ("lora_rank", "lora_targets", "dora")


def merge(imported: ImportedConfig | None, flags: Mapping[str, Any] | None = None) -> Merged:
    """The one merge of a training config with the user's own settings. `flags` are the settings the user gave
    (CLI flags, by their dataclass names; None = not given), and they win: over the config's settings, and a flag
    that names another trainer than the config's drops the config's trainer options. The config's LoRA settings
    do not apply under full fine-tuning, nor its max length under a trainer that generates, nor its checkpoint
    offload when the flags turn checkpointing off (it offloads the checkpointed inputs): they are kept in `unused`.
    Without a config, the flags alone."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}  # a name the table lacks: KeyError
    config_setup = dict(imported.settings) if imported is not None else {}
    config_trainer = dict(imported.trainer) if imported is not None else {}
    owner = {k: BY_NAME[k].owner for k in given}
    trainer_flags = {k: v for k, v in given.items() if owner[k] == "trainer"}
    if trainer_flags.get("trainer", config_trainer.get("trainer", "sft")) != config_trainer.get("trainer", "sft"):
        config_trainer = {}  # another trainer than the config's: only the flags' options
    trainer = {**config_trainer, **trainer_flags}
    method = given.get("method", config_setup.get("method", "lora"))
    option = TRAINERS.get(trainer.get("trainer", "sft"))
    generates = option is not None and option.generates
    unused = {k: v for k, v in config_setup.items() if k not in given and (
        (k in _LORA_SETTINGS and method == "full") or (k == "seq_len" and generates)
        or (k == "offload_activations" and v and given.get("grad_ckpt") is False))}
    setup = {k: v for k, v in config_setup.items() if k not in unused}
    setup.update((k, v) for k, v in given.items() if owner[k] == "setup" and k != "stack")
    stack = given.get("stack") or (imported.stack if imported is not None else None)
    return Merged(stack, setup, trainer, unused)


def _detect(doc: dict[str, Any], mark: dict[str, str]) -> tuple[ModuleType, str]:
    """The format (and the stack) from the export's marker, else from the keys only one tool writes."""
    stack = mark.get("stack")
    if stack in STACK_IDS:
        fmt = next((f for f in FORMATS if stack in f.STACKS), None)
        if fmt is not None:
            return fmt, stack
    for test, message in _OTHER_TOOLS:
        if test(doc):
            raise ConfigError(Text(N_("this is {what}"), what=Text(message)))
    scores = sorted(((f.score(doc), i) for i, f in enumerate(FORMATS)), reverse=True)
    (best, i), (second, j) = scores[0], scores[1]
    if best < 2:
        raise ConfigError(Text(N_("not a training config of Axolotl, TRL (or transformers), torchtune, LitGPT, "
                                  "mlx-lm, LLaMA-Factory or ms-swift: none of their keys is in it")))
    if best == second:
        raise ConfigError(Text(N_("the keys fit both {a} and {b}; add the export's marker line (# will-it-fit: "
                                  "stack=…) to say which"), a=FORMATS[i].TOOL, b=FORMATS[j].TOOL))
    return FORMATS[i], FORMATS[i].STACKS[0]


def _model_entry(r: Reader, fmt: ModuleType, model: ModelRef) -> None:
    own_key = _MODEL_KEYS[fmt.ID]
    marked = fmt.ID in _MARKER_MODEL and "# will-it-fit: model" in r.used
    key = own_key if r.has(own_key) and not marked else "# will-it-fit: model"
    tool_default = getattr(fmt, "DEFAULT_MODEL", None)  # mlx-lm names a model when the file does not (lora.py:46)
    if tool_default and not marked and not r.given(own_key):
        key = own_key
    r.ignored = [e for e in r.ignored if e.key != key]  # listed as the model below, not as "read, nothing set"
    if tool_default and key == own_key and not r.given(own_key) and model.kind == "preset":
        r.default("model", model.preset, key, Text(N_("{tool}'s default {name}"), tool=fmt.TOOL, name=tool_default))
    elif model.kind == "preset":
        own = {p.hf_repo.lower() for p in list_presets() if p.id == model.preset} | {str(model.preset)}
        why = "" if model.name.lower() in own or model.name == model.preset else Text(
            N_("same architecture as the preset"))
        r.set("model", model.preset, key, why=why, raw=model.name)
    elif model.kind == "hub":
        why = Text(N_("read from the Hugging Face Hub; {preset} stands in offline"), preset=model.preset) \
            if model.preset else Text(N_("read from the Hugging Face Hub"))
        r.set("model", model.name, key, why=why)
    elif model.kind == "local":
        r.refuse(key, Text(N_("a local path: give the model's config.json (the Model section's upload; CLI: --config "
                              "PATH/config.json)")), raw=model.name)
    else:
        r.refuse(key, Text(N_("no model the estimate knows is named here: choose the model")),
                 raw=model.name or MISSING)


_SETUP_DROP_ORDER = ("optimizer_in_bwd", "compile", "offload_activations", "loss", "offload_params",
                     "offload_optimizer",
                     "adapter_dtype", "nf4_double_quant", "attention", "lora_targets", "sharding", "optimizer",
                     "grad_accum")
_TRAINER_DROP_ORDER = ("vllm_sleep", "vllm_gpu_util", "generation", "completion_len", "prompt_len", "num_generations",
                       "precompute_ref", "beta")


def _settle(r: Reader, stack: str) -> None:
    """The setup's and the trainer's own checks on the combination read: a setting that makes them refuse moves to
    the not-honoured list with their message (the others still apply)."""
    for _ in range(len(_SETUP_DROP_ORDER) + 1):
        try:
            resolve_setup(stack, **r.settings)
            break
        except ValueError as exc:
            culprit = next((k for k in _SETUP_DROP_ORDER if k in r.settings and _resolves(
                stack, {n: v for n, v in r.settings.items() if n != k})), None)
            culprit = culprit or next((k for k in _SETUP_DROP_ORDER if k in r.settings), None)
            if culprit is None:
                raise ConfigError(Text(N_("the settings read cannot make a setup: {error}"),
                                       error=error_message(exc))) from None
            r.withdraw(culprit, Text(N_("not applied: {error}"), error=error_message(exc)))
    for _ in range(len(_TRAINER_DROP_ORDER) + 1):
        try:
            TrainerSetup(**r.trainer)
            break
        except ValueError as exc:
            culprit = next((k for k in _TRAINER_DROP_ORDER if k in r.trainer), None)
            if culprit is None:
                r.withdraw("trainer", Text(N_("not applied: {error}"), error=error_message(exc)))
                break
            r.withdraw(culprit, Text(N_("not applied: {error}"), error=error_message(exc)))


def _resolves(stack: str, settings: dict[str, Any]) -> bool:
    try:
        resolve_setup(stack, **settings)
    except ValueError:
        return False
    return True


def _marker_trainer(r: Reader, mark: dict[str, str]) -> None:
    """The trainer and its options from the export's marker, where the format has no key for them (torchtune's and
    LitGPT's SFT recipes, GRPO's prompt length): only what the file's own keys left unset."""
    key = "# will-it-fit: {}".format
    if "trainer" in mark and "trainer" not in r.trainer:
        if mark["trainer"] in TRAINERS:
            r.set("trainer", mark["trainer"], key("trainer"), raw=mark["trainer"])
        else:
            r.refuse(key("trainer"), Text(N_("unknown trainer; SFT assumed")), raw=mark["trainer"])
    for name, kind in (("beta", "number"), ("precompute_ref", "bool"), ("num_generations", "int"),
                       ("prompt_len", "int"), ("completion_len", "int"), ("generation", "choice"),
                       ("vllm_gpu_util", "number"), ("vllm_sleep", "bool")):
        if name not in mark or name in r.trainer:
            continue
        raw = mark[name]
        if kind == "int":
            value: Any = r.integer(key(name), 1, MAX_SEQ_LEN, value=raw)
        elif kind == "number":
            value = r.number(key(name), 0.0, 1e6, value=raw)
        elif kind == "bool":
            value = r.boolean(key(name), value=raw)
        else:
            value = raw if raw in GENERATION_MODES else None
            if value is None:
                r.refuse(key(name), Text(N_("not a generation mode")), raw=raw)
        if value is not None:
            r.set(name, value, key(name), raw=raw)


def _no_attachment(path: str) -> bytes | None:
    return None


def import_config(data: bytes | str, *, name: str = "", overrides: tuple[str, ...] = (),
                  attachments: Mapping[str, bytes] | Callable[[str], bytes | None] | None = None) -> ImportedConfig:
    """Read a training config (YAML or JSON text or bytes); `name` is its file name (a hint: TRL's docs name a
    config after its command, dpo_config.yaml). `overrides` are torchtune's `key=value` command-line
    overrides; `attachments` gives the files the config names (a DeepSpeed JSON), by file name or through a
    function of the path as written. Raises ConfigError (one line) when nothing can be read; every per-key problem
    is an entry of `not_honoured` instead, and the rest still applies."""
    raw = decode(data)
    doc = parse_text(raw)
    mark = marker(raw)
    if not name:  # pasted text: TRL's docs write the file's name as its first line (# dpo_config.yaml)
        first = re.match(r"\s*#\s*([\w.-]{1,80}\.(?:ya?ml|json))\s*(?:\n|$)", raw)
        name = first.group(1) if first else ""
    fmt, stack = _detect(doc, mark)
    if callable(attachments):
        fetch = attachments
    elif attachments:
        files = dict(attachments)

        def fetch(path: str) -> bytes | None:
            return files.get(path.replace("\\", "/").rsplit("/", 1)[-1])
    else:
        fetch = _no_attachment
    refused: list[tuple[str, str, str]] = []
    applied: list[tuple[str, str]] = []
    if overrides:
        if fmt is not torchtune:
            raise ConfigError(Text(N_("key=value overrides are torchtune's (tune run); this is {fmt}: edit the file "
                                      "or give the flags"), fmt=fmt.LABEL))
        doc, applied = torchtune.apply_overrides(doc, tuple(overrides), refused)
    r = Reader(doc, fmt.TOOL)
    for key, value, reason in refused:
        r.refuse(key, reason, raw=value)
    if mark.get("stack") == stack:
        r.set("stack", stack, "# will-it-fit: stack", why=Text(N_("the export's marker")), raw=stack)
    else:
        if mark.get("stack"):
            r.refuse("# will-it-fit: stack", Text(N_("not a stack this format runs; read as {stack}"), stack=stack),
                     raw=mark["stack"])
        r.default("stack", stack, "(format)", Text(N_("the format: {fmt}"), fmt=fmt.LABEL))
    model = fmt.read(doc, r, ReadContext(stack, mark, fetch, printable(str(name).replace("\\", "/").rsplit("/", 1)[-1],
                                                                        100)))
    if model.kind == "none" and mark.get("model") and fmt is not torchtune:
        model = ref_from_name(mark["model"])
    _marker_trainer(r, mark)
    if fmt is mlx_lm:
        mlx_lm.sft_only(r)
    _model_entry(r, fmt, model)
    r.read.insert(1, r.read.pop())  # the model right after the stack
    for key, value in applied:
        r.read.insert(0, Entry(key, value, Text(N_("override applied before reading")), setting=""))
    _settle(r, stack)
    trainer = dict(r.trainer)
    if trainer.get("trainer", "sft") != "sft" and trainer["trainer"] not in TRAINERS:
        trainer.pop("trainer")
    return ImportedConfig(
        format=fmt.ID, format_label=fmt.LABEL, stack=stack, model=model,
        settings=tuple(sorted(r.settings.items())), trainer=tuple(sorted(trainer.items())),
        read=tuple(r.read), ignored=tuple(r.ignored), not_honoured=tuple(r.refused), overrides=tuple(applied))


def model_choice(ref: ModelRef, fetch: Callable[[str], object]) -> tuple[str | None, str]:
    """The model to use for a config's reference: (the Model picker's / --model's value, a note). A Hub id is
    tried through `fetch` (estimator.models.hub.fetch_model); when it fails and a preset has the same
    architecture, that preset stands in and the note says why. None: the config names no usable model."""
    if ref.kind == "preset":
        return ref.preset, ""
    if ref.kind == "hub":
        choice = ref.choice
        if ref.preset is None:
            return choice, ""
        try:
            fetch(str(choice))
        except ValueError as exc:
            return ref.preset, Text(N_("{model} could not be read from the Hub ({error}); {preset} has the same "
                                       "architecture and stands in"), model=printable(ref.name, 80),
                                    error=printable(str(exc), 120), preset=ref.preset)
        return choice, ""
    if ref.kind == "local":
        return None, Text(N_("the config names a local path ({path}): give the model's config.json"),
                          path=printable(ref.name, 80))
    return None, Text(N_("the config names no model the estimate knows: choose the model"))


def stack_label(stack: str) -> str:
    return STACKS[stack].label


def entry_line(entry: Entry) -> str:
    """One list row as plain text: 'key: value → what became of it'."""
    value = f": {entry.value}" if entry.value else ""
    return f"{entry.key}{value} → {entry.detail}"

