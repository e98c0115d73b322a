"""One name per setting. A setting of the job is named in code by its dataclass field, TrainingSetup's or
TrainerSetup's: the name `resolve_setup`, the config readers (`Reader.set(name, …)`), the merge of an imported config
with the user's own settings (`estimator.job.configs.merge`) and the JSON document use. This table gives each
setting's other names, written once: the link parameter, which is also the sidebar widget's key (kept as they were,
so shared links keep working); the CLI flag, whose argparse dest is the field's name; the JSON document's key (the
field's name, but for three trainer options written as TRL names them); and how a widget's value converts to the
field's value and back (`from_widgets`, `widget_value`): 'auto' is "left to the stack or the trainer" (None), the
checkpointing control's auto/true/false/offload is two fields, the LoRA targets are comma-separated text.

Read by ui/params.py (the link parameters' defaults), ui/inputs.py, ui/trainer_inputs.py and ui/config_box.py
(widgets ↔ settings), the CLI (report/cli_flags.py declares each flag under its setting, report/cli_args.py reads
the flags given by these names), job/trainer.py's JSON and the config readers (the lists' names for a setting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..i18n import N_
from .setup import parse_targets

if TYPE_CHECKING:
    from collections.abc import Mapping

AUTO = "auto"  # a widget's "the stack's (or the trainer's) default": the setting left out (None)
CKPT_CHOICES: tuple[str, ...] = (AUTO, "true", "false", "offload")  # offload = on, the layer inputs in CPU RAM
# The checkpointing control's value → (grad_ckpt, offload_activations); auto leaves both to the stack.
_CKPT: dict[str, tuple[bool | None, bool | None]] = {AUTO: (None, None), "true": (True, False),
                                                     "false": (False, False), "offload": (True, True)}


@dataclass(frozen=True)
class Setting:
    """One setting and its names. `convert` says how the widget's value becomes the field's value: same (as it
    is), auto (AUTO → None), ckpt (one control for grad_ckpt and offload_activations), tristate (auto/true/false →
    None/True/False), targets (comma-separated text → tuple), zero_auto (0 → None: the stack's), auto_text (a text
    box where AUTO → None; the text is parsed where it is read, with its own note)."""

    name: str  # the dataclass field
    owner: str  # "setup" (TrainingSetup, resolve_setup's keyword) or "trainer" (TrainerSetup)
    key: str | None = None  # the link parameter and sidebar widget key; None: the sidebar has no control for it
    flag: str | None = None  # the CLI flag; None: the CLI has none (a training config can still set it)
    convert: str = "same"
    label: str = ""  # the setting as the config import's lists name it (marked N_, translated where shown)
    json: str = ""  # its key in the JSON document's trainer object where that is TRL's config name; "": `name`

    @property
    def json_key(self) -> str:
        return self.json or self.name


SETTINGS: tuple[Setting, ...] = (
    # --- TrainingSetup (resolve_setup's keywords; `stack` is resolve_setup's first argument) ---
    Setting("stack", "setup", "stack", "--stack", "auto", N_("training stack")),
    Setting("method", "setup", "method", "--method", label=N_("method")),
    Setting("precision", "setup", "precision", "--precision", label=N_("precision")),
    Setting("optimizer", "setup", "optimizer", "--optimizer", "auto", N_("optimizer")),
    Setting("batch", "setup", "batch", "--batch", label=N_("batch per GPU")),
    Setting("seq_len", "setup", "max_len", "--seq-len", label=N_("max length")),
    Setting("image_tokens", "setup", "images", "--image-tokens"),
    Setting("train_tower", "setup", "tower", "--train-tower", label=N_("vision tower trained")),
    Setting("grad_ckpt", "setup", "ckpt", "--grad-ckpt", "ckpt", N_("gradient checkpointing")),
    Setting("offload_activations", "setup", "ckpt", "--offload-activations", "ckpt", N_("checkpoint offload to CPU")),
    Setting("attention", "setup", "attn", "--attention", label=N_("attention")),
    Setting("loss", "setup", "loss", "--loss", "auto", N_("loss")),
    Setting("lora_rank", "setup", "rank", "--lora-rank", label=N_("LoRA rank")),
    Setting("lora_targets", "setup", "targets", "--lora-targets", "targets", N_("LoRA targets")),
    Setting("lora_layers", "setup", "lora_layers", "--lora-layers", "zero_auto",
            N_("trained blocks (the last N; 0 = all)")),
    Setting("dora", "setup", "dora", "--dora", label=N_("DoRA")),
    Setting("quant_mode", "setup", "quant", "--quant", "auto", N_("QLoRA quantisation")),
    Setting("quant_bits", "setup", None, "--quant-bits", label=N_("quantisation bits")),
    Setting("quant_group", "setup", None, "--quant-group", label=N_("quantisation group size")),
    Setting("nf4_double_quant", "setup", "dq", None, "tristate", N_("NF4 double quantisation")),
    Setting("backend", "setup", None, "--backend"),
    Setting("gpus", "setup", "gpus", "--gpus", label=N_("GPUs")),
    Setting("sharding", "setup", "sharding", "--sharding", label=N_("sharding")),
    Setting("offload_params", "setup", "offload_params", "--offload-params", label=N_("parameters in CPU RAM")),
    Setting("grad_accum", "setup", "accum", "--grad-accum", label=N_("gradient accumulation")),
    Setting("offload_optimizer", "setup", "opt_offload", "--offload-optimizer",
            label=N_("optimizer state in CPU RAM")),
    Setting("compile", "setup", "compile", "--compile", label=N_("compile")),
    Setting("optimizer_in_bwd", "setup", "in_bwd", "--optimizer-in-bwd", label=N_("optimizer step in backward")),
    # set by a training config only (no control, no flag)
    Setting("adapter_dtype", "setup", label=N_("adapter dtype")),
    Setting("qlora_prep", "setup", label=N_("QLoRA preparation")),
    Setting("load_16bit_first", "setup"),
    Setting("max_grad_norm", "setup", label=N_("gradient clipping")),
    # the releases installed (issue 28): resolve_setup's `versions`, from a package list and pins, not one value (the
    # CLI's --installed and --installed-from, report/cli_args.py read_installed; the app's releases box,
    # ui/versions_box.py, keeps them as pins in its own link parameter `versions`, which a config import leaves as is)
    Setting("versions", "setup"),
    # --- TrainerSetup ---
    Setting("trainer", "trainer", "trainer", "--trainer", label=N_("trainer")),
    Setting("beta", "trainer", "beta", "--beta", "auto_text", N_("beta")),
    Setting("precompute_ref", "trainer", "precompute_ref", "--precompute-ref",
            label=N_("precomputed reference log-probs"), json="precompute_ref_log_probs"),
    Setting("num_generations", "trainer", "gens", "--num-generations", label=N_("generations per prompt")),
    Setting("prompt_len", "trainer", "prompt_len", "--prompt-len", label=N_("prompt length")),
    Setting("completion_len", "trainer", "completion_len", "--completion-len", label=N_("max completion length")),
    Setting("generation", "trainer", "gen", "--generation", label=N_("generation")),
    Setting("vllm_gpu_util", "trainer", "vllm_util", "--vllm-gpu-util", label=N_("vLLM memory share"),
            json="vllm_gpu_memory_utilization"),
    Setting("vllm_sleep", "trainer", "vllm_sleep", "--vllm-sleep", label=N_("vLLM sleep mode"),
            json="vllm_enable_sleep_mode"),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
# A widget key → the settings its control sets (the checkpointing control sets two).
BY_KEY: dict[str, tuple[Setting, ...]] = {}
for _s in SETTINGS:
    if _s.key is not None:
        BY_KEY[_s.key] = (*BY_KEY.get(_s.key, ()), _s)
del _s
SETUP_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.owner == "setup")
TRAINER_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.owner == "trainer")


def key_of(name: str) -> str:
    """The link parameter (the widget's key) of a setting: 'seq_len' → 'max_len'."""
    key = BY_NAME[name].key
    if key is None:
        raise KeyError(name)  # the sidebar has no control for it (code asks; never a link or a flag)
    return key


def from_widget(key: str, value: Any) -> dict[str, Any]:
    """A widget's value as the settings it stands for, by field name; None = left to the stack or the trainer."""
    settings = BY_KEY[key]
    convert = settings[0].convert
    if convert == "ckpt":
        grad_ckpt, offload = _CKPT.get(str(value), (None, None))
        return {"grad_ckpt": grad_ckpt, "offload_activations": offload}
    name = settings[0].name
    if convert == "auto":
        return {name: None if value == AUTO else value}
    if convert == "auto_text":
        return {name: None if str(value).strip() == AUTO else value}
    if convert == "tristate":
        return {name: {"true": True, "false": False}.get(str(value))}
    if convert == "targets":
        return {name: parse_targets(value)}
    if convert == "zero_auto":
        return {name: value or None}
    return {name: value}


def from_widgets(values: Mapping[str, Any]) -> dict[str, Any]:
    """Widgets' values by key → the settings by field name (`from_widget` each)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out.update(from_widget(key, value))
    return out


def widget_value(key: str, settings: Mapping[str, Any], default: Any) -> Any:
    """The value a widget shows for settings given by field name (not None), `default` where they leave it open."""
    first = BY_KEY[key][0]
    convert, value = first.convert, settings.get(first.name)
    if convert == "ckpt":
        if settings.get("grad_ckpt") is None:
            return "offload" if settings.get("offload_activations") else AUTO
        if not settings["grad_ckpt"]:
            return "false"
        return "offload" if settings.get("offload_activations") else "true"
    if convert in ("auto", "auto_text"):
        return AUTO if value is None else (str(value) if convert == "auto_text" else value)
    if convert == "tristate":
        return AUTO if value is None else ("true" if value else "false")
    if value is None:
        return default
    if convert == "targets":
        return ",".join(value)
    return value


def from_flag(name: str, value: Any) -> Any:
    """A CLI flag's value as the setting's (argparse has typed the others): the LoRA targets' comma-separated text
    → a tuple. Raises ValueError on malformed text."""
    return parse_targets(value) if BY_NAME[name].convert == "targets" and value is not None else value


__all__ = ["AUTO", "BY_KEY", "BY_NAME", "CKPT_CHOICES", "SETTINGS", "SETUP_NAMES", "TRAINER_NAMES", "Setting",
           "from_flag", "from_widget", "from_widgets", "key_of", "widget_value"]
