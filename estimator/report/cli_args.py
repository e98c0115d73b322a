"""What the CLI's flags name, read into the estimator's inputs: the model (a preset, a Hub id, a config.json or a
size), the device (a catalog id, a name that means one device, or custom), the host RAM, an out-of-memory message,
the training setup (the stack's defaults filling the rest) and the trainer; and the flags a setup accepts but that
change nothing, said as notes. Every refusal is a ValueError with one line (cli.py prints it and exits 2)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..i18n import Text
from ..job.configs import merge
from ..job.settings import SETTINGS, from_flag
from ..job.stack import default_settings, resolve_setup
from ..job.trainer import TrainerSetup
from ..job.versions import MAX_CHARS, parse_installed, resolve_versions
from ..models.config import parse_config_text
from ..models.hub import HubConfigRefused, HubError, fetch_model
from ..models.presets import generic_spec, load_preset, preset_ids
from ..oom_message import MAX_TEXT_CHARS, parse_oom
from ..options.backends import BACKENDS, device_backend
from ..options.devices import (
    CUSTOM_MAX_GB,
    CUSTOM_MIN_GB,
    custom_device,
    device_ids,
    get_device,
    lookup_devices,
    nearest_device_ids,
)
from ..options.stacks import get_stack
from ..options.trainers import TRAINERS

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from ..job.configs import Merged
    from ..job.setup import TrainingSetup
    from ..job.versions import Installed, Versions
    from ..models.hub import HubModel
    from ..models.spec import ModelSpec
    from ..oom_message import OomReading
    from ..options.devices import Device


def _nearest(value: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(value, list(choices), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def read_model(args: argparse.Namespace) -> tuple[ModelSpec, HubModel | None]:
    if args.config:
        path = Path(args.config)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {args.config}: {exc.strerror}") from None
        return parse_config_text(data, name=path.name), None
    if args.size is not None:
        return generic_spec(args.size), None
    if args.model and "/" in args.model:  # a Hugging Face model id (presets have no slash)
        try:
            return fetch_model(args.model)
        except HubError as exc:
            if args.model != getattr(args, "config_model", None):
                raise
            raise ValueError(f"the config's model {args.model[:80]}: {exc}; give --model or --config (the rest of "
                             "the config applies)") from None
    pid = args.model or "llama-3.1-8b"
    if pid not in preset_ids():  # the nearest presets, not all of them on one line
        raise ValueError(f"unknown model preset '{pid[:60]}'{_nearest(pid, preset_ids())} (see --list-presets); "
                         f"or a Hugging Face model id ORG/NAME[@REVISION]")
    return load_preset(pid), None


def read_device(args: argparse.Namespace) -> Device | None:
    """The device the flags name: custom (--capacity), a catalog id, or a name that means exactly one device."""
    if args.device == "custom" or (args.device is None and args.capacity is not None):
        if args.capacity is None:
            raise ValueError("--device custom needs --capacity GB")
        return custom_device(args.capacity, "unified" if args.unified else "discrete")
    if args.capacity is not None:
        raise ValueError(f"--capacity describes a custom device; '{args.device[:60]}' has its own memory "
                         "(drop --capacity, or use --device custom)")
    if args.unified:
        raise ValueError("--unified describes a custom device: use it with --device custom --capacity GB")
    if not args.device:
        return None
    if args.device in device_ids():
        return get_device(args.device)
    found = lookup_devices(args.device)  # a name or nickname ("4080", "A6000", "T4") finds its catalog entry
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"--device '{args.device[:60]}' matches several devices: {', '.join(d.id for d in found)}; "
                         "give one of these ids")
    near = nearest_device_ids(args.device)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise ValueError(f"unknown device '{args.device[:60]}'{hint} (see --list-devices)")


def read_host_ram(args: argparse.Namespace) -> float | None:
    """--host-ram GB in bytes (decimal GB, like --capacity), or None."""
    if args.host_ram is None:
        return None
    gb = args.host_ram
    if not (CUSTOM_MIN_GB <= gb <= CUSTOM_MAX_GB):  # also refuses nan and inf
        raise ValueError(f"--host-ram must be between {CUSTOM_MIN_GB:g} and {CUSTOM_MAX_GB:g} GB, got {gb:g}")
    return gb * 1e9


def read_oom_log(args: argparse.Namespace) -> OomReading | None:
    """--oom-log's message, read; every failure (missing file, too large, no message in it) is one line."""
    if not args.oom_log:
        return None
    path = Path(args.oom_log)
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_CHARS:
            raise ValueError(f"--oom-log {args.oom_log[:60]}: the file is {size:,} bytes; the limit is "
                             f"{MAX_TEXT_CHARS:,} (keep the error's last lines)")
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read --oom-log {args.oom_log[:60]}: {exc.strerror}") from None
    try:
        return parse_oom(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ValueError(f"--oom-log {args.oom_log[:60]}: {exc}") from None


def flag_notes(args: argparse.Namespace, setup: TrainingSetup, device: Device | None = None) -> list[str]:
    """Flags this setup accepts but that change nothing here: said, not ignored."""
    notes = []
    if setup.sharding != "none" and setup.gpus == 1 and not setup.offload_params:  # valid: a note, not an error
        notes.append(f"--sharding {setup.sharding} over 1 GPU changes nothing: one GPU keeps every weight, "
                     "gradient and optimizer state (give --gpus N to shard)")
    if setup.method == "full" and (args.lora_rank is not None or args.lora_targets is not None):
        notes.append("--lora-rank and --lora-targets shape LoRA adapters; full fine-tuning has none")
    if args.host_ram is not None and device is not None and device.kind == "unified":
        notes.append(f"--host-ram {args.host_ram:g} is not used: on {device.id} the device's RAM is the machine's "
                     "RAM, so the GPU and the host add up against it")
    return notes


def hub_config_refused(args: argparse.Namespace, exc: Exception) -> bool:
    """A Hub id whose config.json was read but that the fast estimator cannot use (hub.HubConfigRefused)."""
    return bool(args.model and "/" in args.model and isinstance(exc, HubConfigRefused))


def _backend(flag: str | None, device: Device | None) -> str | None:
    """The runtime: --backend, or the device's (device_backend); without either, None (the stack's: Metal for
    mlx-lm, CUDA otherwise). A --backend the device does not run is refused."""
    derived = device_backend(device)
    if flag is None:
        return derived if device is not None else None
    if device is not None and flag not in (derived, "cpu"):
        raise ValueError(f"--backend {flag} does not match {device.id}, which runs "
                         f"{BACKENDS[derived].runtime}; drop --backend")
    return flag


def read_job(args: argparse.Namespace) -> Merged:
    """The settings the flags give, by their settings' names (estimator/job/settings.py names each flag; None: not
    given), merged with --from-config's: the flags win (estimator.job.configs.merge). A malformed --lora-targets is a
    ValueError."""
    flags = {s.name: from_flag(s.name, getattr(args, s.name)) for s in SETTINGS if s.flag is not None}
    return merge(args.config_import, flags)


def _package_list(name: str) -> str:
    """--installed-from's text: the file (or stdin for '-'), at most MAX_CHARS; UTF-8, or UTF-16 with its byte-order
    mark (what `pip freeze > FILE` writes in Windows PowerShell)."""
    try:
        if name == "-":
            data = sys.stdin.buffer.read(4 * MAX_CHARS + 1)
        else:
            with Path(name).open("rb") as fh:
                data = fh.read(4 * MAX_CHARS + 1)
    except OSError as exc:
        raise ValueError(f"cannot read --installed-from {name[:80]}: {exc.strerror}") from None
    try:
        return data.decode("utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"--installed-from {name[:80]}: not a text file (pip freeze writes UTF-8 text)") from None


class InstalledFlags(NamedTuple):
    """--installed (repeated) and --installed-from as read, before the stack is known: the parsed list (None without
    --installed-from), its name, and the pins."""

    installed: Installed | None
    name: str | None
    pins: tuple[str, ...]

    def versions(self, stack: str, stack_given: bool) -> Versions:
        """Resolved against the stack (job.versions.resolve_versions). The list's own faults name the file; a list of
        a framework no stack models is refused only when the stack was not given (stack_given)."""
        if self.installed is not None:
            try:
                resolve_versions(stack, self.installed)  # the list alone: its faults are the file's
            except ValueError as exc:
                raise ValueError(f"--installed-from {str(self.name)[:80]}: {exc}") from None
        return resolve_versions(stack, self.installed, self.pins, stack_given=stack_given)


def read_installed(args: argparse.Namespace) -> InstalledFlags | None:
    """--installed and --installed-from (cli_flags._installed_flags): None when neither is given; a file that cannot
    be read or is not a package list is a ValueError naming it (and its line)."""
    pins = tuple(args.installed or ())
    if args.installed_from is None:
        return InstalledFlags(None, None, pins) if pins else None
    name = args.installed_from
    text = _package_list(name)
    try:
        return InstalledFlags(parse_installed(text), name, pins)
    except ValueError as exc:
        raise ValueError(f"--installed-from {name[:80]}: {exc}") from None


def job_trainer(job: Merged) -> str:
    """The trainer's id: the flag's, else the config's, else SFT (TrainerSetup's default)."""
    return str(job.trainer.get("trainer", TrainerSetup().trainer))


def read_setup(job: Merged, device: Device | None = None, installed: InstalledFlags | None = None) -> TrainingSetup:
    """The training setup the flags (and a config) describe, the stack's defaults filling the rest (batch, length,
    rank, trained blocks and quantisation included; a preference/RL trainer's own batch default wins). The stack:
    --stack or the config's, else MLX-LM for SFT on a unified-memory Apple device and TRL elsewhere. `installed`: the
    releases installed (read_installed), resolved against that stack."""
    trainer = job_trainer(job)
    stack = job.stack or default_settings(None, device, trainer).stack  # the device's (the app reads the same)
    caps = get_stack(stack)
    if trainer not in caps.trainers:  # the trainers the stack has (mlx-lm, LLaMA-Factory, ms-swift: SFT only)
        raise ValueError(Text(caps.trainers_refusal, trainer=Text(TRAINERS[trainer].label)))
    versions = installed.versions(stack, job.stack is not None) if installed is not None else None
    return resolve_setup(stack, trainer=trainer, versions=versions,
                         **{**job.setup, "backend": _backend(job.setup.get("backend"), device)})


def read_trainer(job: Merged) -> TrainerSetup:
    """The trainer the flags (and a config) describe (SFT unless --trainer or the config's)."""
    return TrainerSetup(**job.trainer)
