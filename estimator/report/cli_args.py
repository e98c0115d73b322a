"""What the CLI's flags name, read into the estimator's inputs: the model (a preset, a Hub id, a config.json or a
size), the device (a catalog id, a name that means one device, or custom), the host RAM, an out-of-memory message,
the training setup (the stack's defaults filling the rest) and the trainer; and the flags a setup accepts but that
change nothing, said as notes. Every refusal is a ValueError with one line (cli.py prints it and exits 2)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING

from ..i18n import Text
from ..job.setup import parse_targets
from ..job.stack import default_settings, resolve_setup
from ..job.trainer import TrainerSetup
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

    from ..job.setup import TrainingSetup
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


def flag_notes(args: argparse.Namespace, device: Device | None = None) -> list[str]:
    """Flags this setup accepts but that change nothing here: said, not ignored."""
    notes = []
    if args.sharding != "none" and args.gpus == 1 and not args.offload_params:  # valid: a note, not an error
        notes.append(f"--sharding {args.sharding} over 1 GPU changes nothing: one GPU keeps every weight, "
                     "gradient and optimizer state (give --gpus N to shard)")
    if args.method == "full" and (args.lora_rank is not None or args.lora_targets is not None):
        notes.append("--lora-rank and --lora-targets shape LoRA adapters; full fine-tuning has none")
    if args.host_ram is not None and device is not None and device.kind == "unified":
        notes.append(f"--host-ram {args.host_ram:g} is not used: on {device.id} the device's RAM is the machine's "
                     "RAM, so the GPU and the host add up against it")
    return notes


def hub_config_refused(args: argparse.Namespace, exc: Exception) -> bool:
    """A Hub id whose config.json was read but that the fast estimator cannot use (hub.HubConfigRefused)."""
    return bool(args.model and "/" in args.model and isinstance(exc, HubConfigRefused))


def _backend(args: argparse.Namespace, device: Device | None) -> str | None:
    """The runtime: --backend, or the device's (device_backend); without either, None (the stack's: Metal for
    mlx-lm, CUDA otherwise). A --backend the device does not run is refused."""
    derived = device_backend(device)
    if args.backend is None:
        return derived if device is not None else None
    if device is not None and args.backend not in (derived, "cpu"):
        raise ValueError(f"--backend {args.backend} does not match {device.id}, which runs "
                         f"{BACKENDS[derived].runtime}; drop --backend")
    return args.backend


def _stack_id(args: argparse.Namespace, device: Device | None) -> str:
    """--stack, else the device's default stack (job.stack.default_settings, which the app reads too: MLX-LM on a
    unified-memory Apple device, TRL elsewhere)."""
    if args.stack is not None:
        return args.stack
    return default_settings(None, device, args.trainer).stack


def read_setup(args: argparse.Namespace, device: Device | None = None) -> TrainingSetup:
    """The training setup the flags describe, the stack's defaults filling the rest (batch, length, rank, trained
    blocks and quantisation included; a preference/RL trainer's own batch default wins)."""
    stack = _stack_id(args, device)
    caps = get_stack(stack)
    if args.trainer not in caps.trainers:  # the trainers the stack has (mlx-lm and LLaMA-Factory: SFT only)
        raise ValueError(Text(caps.trainers_refusal, trainer=Text(TRAINERS[args.trainer].label)))
    return resolve_setup(
        stack, trainer=args.trainer, method=args.method, precision=args.precision, optimizer=args.optimizer,
        batch=args.batch, seq_len=args.seq_len, grad_ckpt=args.grad_ckpt,
        offload_activations=args.offload_activations, attention=args.attention, loss=args.loss,
        lora_rank=args.lora_rank,
        lora_targets=parse_targets("all-linear" if args.lora_targets is None else args.lora_targets),
        gpus=args.gpus,
        sharding=args.sharding, offload_optimizer=args.offload_optimizer, grad_accum=args.grad_accum,
        offload_params=args.offload_params or None,
        compile=args.compile or None, optimizer_in_bwd=args.optimizer_in_bwd or None,
        image_tokens=args.image_tokens, train_tower=args.train_tower, lora_layers=args.lora_layers,
        dora=args.dora or None, quant_mode=args.quant, quant_bits=args.quant_bits, quant_group=args.quant_group,
        backend=_backend(args, device), **args.config_extra,
    )


def read_trainer(args: argparse.Namespace) -> TrainerSetup:
    """The trainer the flags describe (SFT unless --trainer)."""
    return TrainerSetup(
        args.trainer, beta=args.beta, precompute_ref=args.precompute_ref, num_generations=args.num_generations,
        prompt_len=args.prompt_len, completion_len=args.completion_len, generation=args.generation,
        vllm_gpu_util=args.vllm_gpu_util, vllm_sleep=args.vllm_sleep,
    )
