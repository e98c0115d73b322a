"""The CLI's flags: the parser (one clear line and exit 2 on a bad flag, the nearest choice named) and the flag groups
in the order --help lists them (the model, the training setup, scale-out, the trainers, the training configs, the
device and the output, then time and cost: cli_time.py). What the flags name is read in cli_args.py."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any

from ..job.settings import BY_NAME
from ..options.backends import BACKEND_IDS
from ..options.losses import LOSS_IDS
from ..options.methods import ATTENTIONS, METHODS, SHARDINGS
from ..options.optimizers import OPTIMIZER_IDS
from ..options.precisions import PRECISION_IDS
from ..options.quantization import QUANT_MODE_IDS
from ..options.stacks import DEFAULT_STACK, MLX_STACK, STACK_IDS
from ..options.trainers import GENERATION_IDS, TRAINER_IDS, TRL_VERSION
from . import cli_config, cli_time

EPILOG = """examples:
  python -m estimator --model llama-3.1-8b --batch 8 --seq-len 4096 --device rtx-4090 --advice
  python -m estimator --model qwen2.5-7b --trainer grpo --generation vllm-colocate --device h100-80gb --json
  python -m estimator --size 7 --method qlora --rule seed --device laptop-36gb --advice
  python -m estimator --model llama-3.1-8b --device rtx-4090 --tokens 50000000 --price-per-gpu-hour 0.7
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, exit 2
        sys.stderr.write(f"estimator: error: {message}\n")
        raise SystemExit(2)

    def _check_value(self, action: argparse.Action, value: Any) -> None:  # the nearest choice, not only the list
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise argparse.ArgumentError(action, f"invalid choice: '{str(value)[:60]}'{hint} (choose from "
                                                 f"{', '.join(choices)})")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The epilog's examples as written; every option's default shown where its help does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)".strip()


def _setting(group: Any, name: str, **kwargs: Any) -> None:
    """A setting's flag, as the settings table names it (estimator/job/settings.py), stored under the setting's
    own name: args.seq_len for --seq-len, args.quant_mode for --quant. Every one defaults to None (not given)."""
    group.add_argument(BY_NAME[name].flag, dest=name, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags, in the order --help lists them."""
    p = _Parser(prog="python -m estimator", description="Peak GPU memory of one fine-tuning step.",
                formatter_class=_HelpFormatter, epilog=EPILOG)
    _model_flags(p)
    _setup_flags(p)
    _scale_flags(p)
    _trainer_flags(p)
    _installed_flags(p)
    cli_config.add_flags(p)
    _output_flags(p)
    cli_time.add_flags(p)
    return p


def _model_flags(p: argparse.ArgumentParser) -> None:
    """Where the model comes from: a preset or Hub id, a config.json, or a size (one of them)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="preset id (see --list-presets), or a Hugging Face model id ORG/NAME[@REVISION] "
                                      "(HF_TOKEN for gated or private models); default: llama-3.1-8b")
    src.add_argument("--config", help="path to a Hugging Face config.json")
    src.add_argument("--size", type=float, help="model size in billions of parameters (generic decoder)")


def _setup_flags(p: argparse.ArgumentParser) -> None:
    """The training setup: stack, method, precision, optimizer, batch and length, checkpointing, loss, LoRA."""
    _setting(p, "stack", choices=STACK_IDS, default=None,
                   help=f"training stack whose defaults fill every setting not given (default: {MLX_STACK} for SFT "
                        f"on a unified-memory Apple device, {DEFAULT_STACK} otherwise)")
    _setting(p, "method", choices=METHODS, default=None, help="full fine-tuning, LoRA or QLoRA (default: lora)")
    p.add_argument("--rule", choices=("seed",), help="use the rule of thumb instead of the detailed estimate "
                                                      "(SFT only; default: the detailed estimate)")
    _setting(p, "precision", choices=PRECISION_IDS, default=None, help="weights' precision (default: bf16)")
    _setting(p, "optimizer", choices=OPTIMIZER_IDS, default=None, help="default: the stack's")
    _setting(p, "batch", type=int, default=None,
                   help="per-device batch (default: the stack's: 1, mlx 4; GRPO 8, TRL's per_device_train_batch_size, "
                        "counted in completions; KTO 2, the least TRL accepts)")
    _setting(p, "seq_len", type=int, default=None, help="max length in tokens (default: the stack's, 2048; "
                                                             "GRPO: --prompt-len + --completion-len)")
    _setting(p, "image_tokens", type=int, default=None,
                   help="image tokens per example, for a multimodal model trained on images (Gemma 3: 256 per "
                        "image); they lengthen the language model's sequence (default: 0)")
    _setting(p, "train_tower", action="store_true", default=None,
                   help="train the multimodal model's vision tower and projector too (full: all their weights; "
                        "LoRA: adapters on their linears); default: frozen")
    _setting(p, "grad_ckpt", action=argparse.BooleanOptionalAction, default=None,
                   help="gradient checkpointing on/off (default: the stack's)")
    _setting(p, "offload_activations", action=argparse.BooleanOptionalAction, default=None,
                   help="offload the checkpointed layer inputs to CPU RAM (default: the stack's)")
    _setting(p, "attention", choices=ATTENTIONS, default=None, help="attention implementation (default: sdpa)")
    _setting(p, "loss", choices=LOSS_IDS, default=None, help="default: the stack's")
    _setting(p, "lora_rank", type=int, default=None,
                   help="LoRA/QLoRA adapter rank (default: the stack's: 16, mlx 8)")
    _setting(p, "lora_targets", default=None,
                   help="LoRA/QLoRA target modules, comma-separated (default: all-linear)")
    _setting(p, "lora_layers", type=int, default=None,
                   help="adapters on the last N decoder blocks only (mlx-lm --num-layers, PEFT layers_to_transform; "
                        "on mlx, full fine-tuning trains those N blocks; default: the stack's: every block, mlx 16)")
    _setting(p, "dora", action="store_true", default=None, help="weight-decomposed LoRA (DoRA; the mlx stack)")
    _setting(p, "quant_mode", choices=QUANT_MODE_IDS, default=None,
                   help="how a QLoRA base is quantised (default: the stack's: nf4 = bitsandbytes; mlx: affine)")
    _setting(p, "quant_bits", type=int, default=None, help="bits per weight of --quant (default: the mode's)")
    _setting(p, "quant_group", type=int, default=None, help="group size of --quant (default: the mode's)")
    _setting(p, "backend", choices=BACKEND_IDS, default=None,
                   help="the runtime (default: the device's: metal on an Apple device, rocm on AMD, cuda otherwise; "
                        "cpu: MLX's CPU backend)")


def _scale_flags(p: argparse.ArgumentParser) -> None:
    """GPUs and sharding, optimizer offload, gradient accumulation and torchtune's memory switches."""
    _setting(p, "gpus", type=int, default=None, help="GPUs of this kind the run spreads over (default: 1)")
    _setting(p, "sharding", choices=SHARDINGS, default=None,
                   help="ZeRO stage / FSDP sharding over --gpus (over 1 GPU it changes nothing: a note says so; "
                        "default: none)")
    _setting(p, "offload_optimizer", action="store_true", default=None,
                   help="keep the optimizer state in CPU RAM")
    _setting(p, "offload_params", action="store_true", default=None,
                   help="ZeRO-3 parameter offload (DeepSpeed offload_param): the parameters live in CPU RAM and the "
                        "GPU gathers one layer at a time (needs --sharding zero3; on one GPU too)")
    _setting(p, "grad_accum", type=int, default=None,
                   help="micro-steps per optimizer step (>1 keeps gradients; GRPO: steps per generation; default: 1)")
    _setting(p, "compile", action="store_true", default=None,
                   help="torchtune compile=True: its compiled cross-entropy keeps 16-bit logits (torchtune stack)")
    _setting(p, "optimizer_in_bwd", action="store_true", default=None,
                   help="torchtune optimizer_in_bwd=True: each gradient is applied and freed in backward "
                        "(torchtune stack, full fine-tuning)")


def _trainer_flags(p: argparse.ArgumentParser) -> None:
    """The preference and RL trainers (TRL)."""
    tg = p.add_argument_group(f"preference and RL trainers ({TRL_VERSION})")
    _setting(tg, "trainer", choices=TRAINER_IDS, default=None, help="(default: sft)")
    _setting(tg, "precompute_ref", action="store_true", default=None,
                    help="DPO/KTO: precompute_ref_log_probs=True")
    _setting(tg, "beta", type=float, help="DPO/ORPO/SimPO/KTO/GRPO beta (GRPO: > 0 loads a reference)")
    _setting(tg, "num_generations", type=int, help="GRPO: completions per prompt (default 8)")
    _setting(tg, "prompt_len", type=int, help="GRPO: prompt tokens (default 512)")
    _setting(tg, "completion_len", type=int, help="GRPO: max_completion_length (default 512)")
    _setting(tg, "generation", choices=GENERATION_IDS, help="GRPO: where completions are generated (default hf)")
    _setting(tg, "vllm_gpu_util", type=float, help="GRPO vllm-colocate: vllm_gpu_memory_utilization (0.3)")
    _setting(tg, "vllm_sleep", action="store_true", default=None,
                    help="GRPO vllm-colocate: vllm_enable_sleep_mode=True")


def _installed_flags(p: argparse.ArgumentParser) -> None:
    """The releases installed (issue 28; read in cli_args.read_versions): the estimate prices a release's own behaviour
    where it differs from the newest's (docs/versions.md)."""
    g = p.add_argument_group("installed versions (default: each stack's newest modelled releases; docs/versions.md)")
    g.add_argument("--installed", metavar="PKG==VERSION", action="append", default=None,
                   help="a package's installed release, e.g. trl==0.16.1 (repeat the flag; wins over --installed-from)")
    g.add_argument("--installed-from", metavar="FILE",
                   help="the output of `pip freeze` or `pip list` (its table, --format=freeze or --format=json); "
                        "'-' reads it from stdin; packages the stack does not use are ignored")


def _output_flags(p: argparse.ArgumentParser) -> None:
    """The device, what to add (advice, the exact trace) and how to print (JSON, lists)."""
    p.add_argument("--device", help="device id, or a name that means one device ('4090', 'A6000'; see "
                                     "--list-devices), or custom; default: none (no verdict)")
    p.add_argument("--capacity", type=float, help="custom device capacity in GB (with --device custom)")
    p.add_argument("--unified", action="store_true", help="custom device shares RAM (75 %% usable)")
    p.add_argument("--host-ram", type=float, metavar="GB",
                   help="the machine's RAM in GB: adds the host verdict (the CPU RAM the setup needs: processes, "
                        "model load, offloaded state); on unified memory the device's RAM is the machine's")
    p.add_argument("--oom-log", metavar="PATH",
                   help="a file holding an out-of-memory message (PyTorch CUDA/MPS, MLX): what it says in bytes, "
                        "the device it names, why it failed, and this job priced on that device (at most 1 MB)")
    p.add_argument("--advice", action="store_true",
                   help="add what to change: the remedies with what each saves (and its time factor), the fastest "
                        "setup that fits, the largest batch, the longest length and the smallest catalog device that "
                        "fit (needs --device)")
    p.add_argument("--exact", action="store_true",
                   help="also trace the step with PyTorch (needs requirements-exact.txt; minutes on a CPU)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--list-presets", action="store_true", help="list the model presets and exit")
    p.add_argument("--list-devices", action="store_true", help="list the catalog devices and exit")
