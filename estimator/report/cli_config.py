"""The CLI's training-config flags: `--from-config PATH` (an Axolotl, TRL, torchtune, LitGPT, mlx-lm, LLaMA-Factory or
ms-swift file; the flags given beside it win), `--override KEY=VALUE` (torchtune's command-line overrides) and
`--export-config PATH` (the stack's config file for the estimate; '-' prints it instead of the report).

Flags given beside the config win: every setting's flag defaults to None, so a flag the user typed is told from one
left out; `read_config` reads the config (and its model, where no model flag is given), and cli_args.read_job merges
its settings with the flags' (estimator.job.configs.merge, the same merge as the app's config box)."""

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


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training configs (Axolotl 0.19.0, TRL 1.16.0 / transformers 5.24, torchtune 0.6.1, "
                             "LitGPT 0.5.13, mlx-lm 0.32.2, LLaMA-Factory 0.9.5, ms-swift 4.6.0)")
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


def read_config(args: argparse.Namespace) -> None:
    """Read --from-config, and take its model unless a model flag is given. Sets args.config_import (the
    ImportedConfig, or None), args.config_model and args.config_notes; its settings are merged with the flags' by
    cli_args.read_job."""
    args.config_import, args.config_notes, args.config_model = None, [], None
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
    _model(args, imported, args.config_notes)


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


__all__ = ["HubError", "add_flags", "config_json", "config_lines", "fit_config_targets", "read_config",
           "write_export"]
