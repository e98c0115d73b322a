"""The CLI's training-config flags: `--from-config PATH` (an Axolotl, TRL, torchtune, LitGPT, mlx-lm or LLaMA-Factory
file; the flags given beside it win), `--override KEY=VALUE` (torchtune's command-line overrides) and `--export-config PATH`
(the stack's config file for the estimate; '-' prints it instead of the report).

Flags given beside the config win: every setup and trainer flag defaults to None, so a flag the user typed is told
from one left out; `apply_config` fills the ones left out from the config, then `fill_defaults` the rest with the
CLI's own defaults."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..job.configs import MAX_CONFIG_BYTES, ConfigError, entry_line, fit_targets, import_config, model_choice
from ..models.hub import HubError, fetch_model
from .configs import export_config

if TYPE_CHECKING:
    from ..job.configs import ImportedConfig
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec

# The CLI's defaults for the flags that default to None (so that a flag given is told from one left out).
FLAG_DEFAULTS: dict[str, Any] = {
    "method": "lora", "precision": "bf16", "attention": "sdpa", "gpus": 1, "sharding": "none",
    "grad_accum": 1, "image_tokens": 0, "trainer": "sft", "offload_optimizer": False, "compile": False,
    "optimizer_in_bwd": False, "train_tower": False, "precompute_ref": False, "vllm_sleep": False,
    "offload_params": False,
}
# Settings a flag carries (resolve_setup's name = the flag's dest); the others go to resolve_setup as they are.
_SETUP_FLAGS = ("method", "precision", "optimizer", "batch", "seq_len", "grad_ckpt", "offload_activations",
                "attention", "loss", "lora_rank", "lora_targets", "gpus", "sharding", "offload_optimizer",
                "grad_accum", "compile", "optimizer_in_bwd", "offload_params", "lora_layers", "dora", "quant_mode",
                "quant_bits", "quant_group", "train_tower")
_FLAG_DEST = {"quant_mode": "quant"}  # settings whose flag has another dest (--quant)
_LORA_FLAGS = ("lora_rank", "lora_targets", "dora")
_TRAINER_FLAGS = ("trainer", "beta", "precompute_ref", "num_generations", "prompt_len", "completion_len",
                  "generation", "vllm_gpu_util", "vllm_sleep")


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training configs (Axolotl 0.19.0, TRL 1.16.0 / transformers 5.24, torchtune 0.6.1, "
                             "LitGPT 0.5.13, mlx-lm 0.32.2, LLaMA-Factory 0.9.5)")
    g.add_argument("--from-config", metavar="PATH",
                   help="read the setup from a training config (YAML or JSON); flags given beside it win")
    g.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                   help="torchtune override applied to --from-config before reading (as `tune run` takes them; "
                        "repeat the flag)")
    g.add_argument("--export-config", metavar="PATH",
                   help="write the stack's config file for this estimate to PATH ('-': print it instead of the "
                        "report)")


def _read_file(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {str(path)[:80]}: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{what} {str(path)[:80]} is larger than 1 MB; a training config is a few kB")
    return data


def _attachment(config_path: Path) -> Any:
    """A file the config names (a DeepSpeed JSON), looked for as written, beside the config, then by its name."""

    def fetch(name: str) -> bytes | None:
        for candidate in (Path(name), config_path.parent / name, config_path.parent / Path(name).name):
            try:
                if candidate.is_file() and candidate.stat().st_size <= MAX_CONFIG_BYTES:
                    return candidate.read_bytes()
            except OSError:
                continue
        return None

    return fetch


def _model(args: argparse.Namespace, imported: ImportedConfig, notes: list[str]) -> None:
    """The config's model unless --model, --config or --size is given: a preset, a Hub id (a same-architecture
    preset stands in when the Hub cannot be read), or a local folder's config.json."""
    if args.model or args.config or args.size is not None:
        return
    ref = imported.model
    choice, note = model_choice(ref, lambda model: fetch_model(model))
    if choice is not None:
        args.model = choice
        args.config_model = choice
        if note:
            notes.append(str(note))
        return
    if ref.kind == "local":
        local = Path(ref.name).expanduser() / "config.json"
        if local.is_file():
            args.config = str(local)
            return
        raise ValueError(f"the config names the local path {ref.name[:80]}; give its config.json with --config "
                         "PATH/config.json (or --model); the rest of the config applies")
    raise ValueError("the config names no model the estimate knows; give --model, --config or --size (the rest of "
                     "the config applies)")


def apply_config(args: argparse.Namespace) -> None:
    """Read --from-config and fill every flag left out from it (and the model). Sets args.config_import (the
    ImportedConfig, or None), args.config_extra (the settings no flag carries) and args.config_notes."""
    args.config_import, args.config_extra, args.config_notes, args.config_model = None, {}, [], None
    if not args.from_config:
        if args.override:
            raise ValueError("--override applies to --from-config (torchtune's key=value overrides)")
        return
    path = Path(args.from_config)
    try:
        imported = import_config(_read_file(path, "config"), name=path.name, overrides=tuple(args.override),
                                 attachments=_attachment(path))
    except ConfigError as exc:
        raise ValueError(f"{str(path)[:80]}: {exc}") from None
    args.config_import = imported
    notes: list[str] = []
    trainer = dict(imported.trainer)
    if args.trainer is None or args.trainer == trainer.get("trainer", "sft"):
        for name in _TRAINER_FLAGS:
            if getattr(args, name) in (None, False) and name in trainer:
                setattr(args, name, trainer[name])
    if args.stack is None:
        args.stack = imported.stack
    settings = dict(imported.settings)
    method = args.method or settings.get("method", FLAG_DEFAULTS["method"])
    generates = (args.trainer or "sft") == "grpo"
    for name in _SETUP_FLAGS:
        dest = _FLAG_DEST.get(name, name)
        if name not in settings or getattr(args, dest) not in (None, False):
            continue
        if (name in _LORA_FLAGS and method == "full") or (name == "seq_len" and generates):
            continue
        value = settings[name]
        setattr(args, dest, ",".join(value) if name == "lora_targets" else value)
    args.config_extra = {k: v for k, v in settings.items() if k not in _SETUP_FLAGS}
    _model(args, imported, notes)
    args.config_notes = notes


def fill_defaults(args: argparse.Namespace) -> None:
    for name, value in FLAG_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def fit_config_targets(args: argparse.Namespace, spec: ModelSpec | None, setup: TrainingSetup) -> TrainingSetup:
    """torchtune's and LitGPT's LoRA switches name Llama's modules: on another model they become its own. A config
    that trains the vision tower (LLaMA-Factory's freeze_vision_tower: false) names a model without one: the tool
    has nothing to unfreeze (model/model_utils/visual.py:173-193 acts on multimodal models only), so neither does
    the estimate."""
    if spec is None or args.config_import is None:
        return setup
    settings = dict(args.config_import.settings)
    if settings.get("train_tower") and setup.train_tower and not spec.tower_kind:
        args.config_notes.append(f"{spec.name[:80]} has no vision tower: the config's tower training changes nothing")
        setup = replace(setup, train_tower=False)
    if "lora_targets" not in settings:
        return setup
    fitted, note = fit_targets(spec, setup.lora_targets)
    if note:
        args.config_notes.append(str(note))
        return replace(setup, lora_targets=fitted)
    return setup


def config_json(args: argparse.Namespace) -> dict[str, Any] | None:
    imported = args.config_import
    if imported is None:
        return None
    return {"path": str(args.from_config), **imported.as_json(), "notes": list(args.config_notes)}


def config_lines(args: argparse.Namespace) -> list[str]:
    """The text report's lines about the config: format, stack, counts, and every key not honoured."""
    imported = args.config_import
    if imported is None:
        return []
    lines = [f"config {Path(args.from_config).name[:60]}: {imported.format_label} → stack {imported.stack}; "
             f"read {len(imported.read)}, ignored {len(imported.ignored)} (change no memory), not honoured "
             f"{len(imported.not_honoured)}"]
    lines += [f"  not honoured: {entry_line(e)}" for e in imported.not_honoured]
    lines += [f"  note: {n}" for n in args.config_notes]
    return lines


def write_export(args: argparse.Namespace, spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup) -> bool:
    """--export-config: write the stack's config file (or print it for '-'). True when it replaced the report."""
    if not args.export_config:
        return False
    exported = export_config(spec, setup, trainer)
    if args.export_config == "-":
        print(exported.text, end="")
        return True
    try:
        Path(args.export_config).write_text(exported.text, encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot write {args.export_config[:80]}: {exc.strerror}") from None
    return False


__all__ = ["FLAG_DEFAULTS", "HubError", "add_flags", "apply_config", "config_json", "config_lines",
           "fill_defaults", "fit_config_targets", "write_export"]
