"""The CLI's flags: the parser (one clear line and exit 2 on a bad flag, the nearest choice named) and the flag groups
in the order --help lists them (the model, the training setup, scale-out, the trainers, the training configs, the
device and the output). What the flags name is read in cli_args.py."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING

from ..options.backends import BACKEND_IDS
from ..options.losses import LOSS_IDS
from ..options.methods import ATTENTIONS, METHODS, SHARDINGS
from ..options.optimizers import OPTIMIZER_IDS
from ..options.precisions import PRECISION_IDS
from ..options.quantization import QUANT_MODE_IDS
from ..options.stacks import DEFAULT_STACK, MLX_STACK, STACK_IDS
from ..options.trainers import GENERATION_IDS, TRAINER_IDS, TRL_VERSION
from . import cli_config

if TYPE_CHECKING:
    from typing import Any

EPILOG = """examples:
  python -m estimator --model llama-3.1-8b --batch 8 --seq-len 4096 --device rtx-4090 --advice
  python -m estimator --model qwen2.5-7b --trainer grpo --generation vllm-colocate --device h100-80gb --json
  python -m estimator --size 7 --method qlora --rule seed --device laptop-36gb --advice
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


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags, in the order --help lists them."""
    p = _Parser(prog="python -m estimator", description="Peak GPU memory of one fine-tuning step.",
                formatter_class=_HelpFormatter, epilog=EPILOG)
    _model_flags(p)
    _setup_flags(p)
    _scale_flags(p)
    _trainer_flags(p)
    cli_config.add_flags(p)
    _output_flags(p)
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
    p.add_argument("--stack", choices=STACK_IDS, default=None,
                   help=f"training stack whose defaults fill every setting not given (default: {MLX_STACK} for SFT "
                        f"on a unified-memory Apple device, {DEFAULT_STACK} otherwise)")
    p.add_argument("--method", choices=METHODS, default=None, help="full fine-tuning, LoRA or QLoRA (default: lora)")
    p.add_argument("--rule", choices=("seed",), help="use the rule of thumb instead of the detailed estimate "
                                                      "(SFT only; default: the detailed estimate)")
    p.add_argument("--precision", choices=PRECISION_IDS, default=None, help="weights' precision (default: bf16)")
    p.add_argument("--optimizer", choices=OPTIMIZER_IDS, default=None, help="default: the stack's")
    p.add_argument("--batch", type=int, default=None,
                   help="per-device batch (default: the stack's: 1, mlx 4; GRPO 8, TRL's per_device_train_batch_size, "
                        "counted in completions; KTO 2, the least TRL accepts)")
    p.add_argument("--seq-len", type=int, default=None, help="max length in tokens (default: the stack's, 2048; "
                                                             "GRPO: --prompt-len + --completion-len)")
    p.add_argument("--image-tokens", type=int, default=None,
                   help="image tokens per example, for a multimodal model trained on images (Gemma 3: 256 per "
                        "image); they lengthen the language model's sequence (default: 0)")
    p.add_argument("--train-tower", action="store_true", default=None,
                   help="train the multimodal model's vision tower and projector too (full: all their weights; "
                        "LoRA: adapters on their linears); default: frozen")
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None,
                   help="gradient checkpointing on/off (default: the stack's)")
    p.add_argument("--offload-activations", action=argparse.BooleanOptionalAction, default=None,
                   help="offload the checkpointed layer inputs to CPU RAM (default: the stack's)")
    p.add_argument("--attention", choices=ATTENTIONS, default=None, help="attention implementation (default: sdpa)")
    p.add_argument("--loss", choices=LOSS_IDS, default=None, help="default: the stack's")
    p.add_argument("--lora-rank", type=int, default=None,
                   help="LoRA/QLoRA adapter rank (default: the stack's: 16, mlx 8)")
    p.add_argument("--lora-targets", default=None,
                   help="LoRA/QLoRA target modules, comma-separated (default: all-linear)")
    p.add_argument("--lora-layers", type=int, default=None,
                   help="adapters on the last N decoder blocks only (mlx-lm --num-layers, PEFT layers_to_transform; "
                        "on mlx, full fine-tuning trains those N blocks; default: the stack's: every block, mlx 16)")
    p.add_argument("--dora", action="store_true", help="weight-decomposed LoRA (DoRA; the mlx stack)")
    p.add_argument("--quant", choices=QUANT_MODE_IDS, default=None,
                   help="how a QLoRA base is quantised (default: the stack's: nf4 = bitsandbytes; mlx: affine)")
    p.add_argument("--quant-bits", type=int, default=None, help="bits per weight of --quant (default: the mode's)")
    p.add_argument("--quant-group", type=int, default=None, help="group size of --quant (default: the mode's)")
    p.add_argument("--backend", choices=BACKEND_IDS, default=None,
                   help="the runtime (default: the device's: metal on an Apple device, rocm on AMD, cuda otherwise; "
                        "cpu: MLX's CPU backend)")


def _scale_flags(p: argparse.ArgumentParser) -> None:
    """GPUs and sharding, optimizer offload, gradient accumulation and torchtune's memory switches."""
    p.add_argument("--gpus", type=int, default=None, help="GPUs of this kind the run spreads over (default: 1)")
    p.add_argument("--sharding", choices=SHARDINGS, default=None,
                   help="ZeRO stage / FSDP sharding over --gpus (over 1 GPU it changes nothing: a note says so; "
                        "default: none)")
    p.add_argument("--offload-optimizer", action="store_true", default=None,
                   help="keep the optimizer state in CPU RAM")
    p.add_argument("--offload-params", action="store_true", default=None,
                   help="ZeRO-3 parameter offload (DeepSpeed offload_param): the parameters live in CPU RAM and the "
                        "GPU gathers one layer at a time (needs --sharding zero3; on one GPU too)")
    p.add_argument("--grad-accum", type=int, default=None,
                   help="micro-steps per optimizer step (>1 keeps gradients; GRPO: steps per generation; default: 1)")
    p.add_argument("--compile", action="store_true", default=None,
                   help="torchtune compile=True: its compiled cross-entropy keeps 16-bit logits (torchtune stack)")
    p.add_argument("--optimizer-in-bwd", action="store_true", default=None,
                   help="torchtune optimizer_in_bwd=True: each gradient is applied and freed in backward "
                        "(torchtune stack, full fine-tuning)")


def _trainer_flags(p: argparse.ArgumentParser) -> None:
    """The preference and RL trainers (TRL)."""
    tg = p.add_argument_group(f"preference and RL trainers ({TRL_VERSION})")
    tg.add_argument("--trainer", choices=TRAINER_IDS, default=None, help="(default: sft)")
    tg.add_argument("--precompute-ref", action="store_true", default=None,
                    help="DPO/KTO: precompute_ref_log_probs=True")
    tg.add_argument("--beta", type=float, help="DPO/ORPO/SimPO/KTO/GRPO beta (GRPO: > 0 loads a reference)")
    tg.add_argument("--num-generations", type=int, help="GRPO: completions per prompt (default 8)")
    tg.add_argument("--prompt-len", type=int, help="GRPO: prompt tokens (default 512)")
    tg.add_argument("--completion-len", type=int, help="GRPO: max_completion_length (default 512)")
    tg.add_argument("--generation", choices=GENERATION_IDS, help="GRPO: where completions are generated (default hf)")
    tg.add_argument("--vllm-gpu-util", type=float, help="GRPO vllm-colocate: vllm_gpu_memory_utilization (0.3)")
    tg.add_argument("--vllm-sleep", action="store_true", default=None,
                    help="GRPO vllm-colocate: vllm_enable_sleep_mode=True")


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
                   help="add what to change: the remedies with what each saves, the largest batch, the longest "
                        "length and the smallest catalog device that fit (needs --device)")
    p.add_argument("--exact", action="store_true",
                   help="also trace the step with PyTorch (needs requirements-exact.txt; minutes on a CPU)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--list-presets", action="store_true", help="list the model presets and exit")
    p.add_argument("--list-devices", action="store_true", help="list the catalog devices and exit")
