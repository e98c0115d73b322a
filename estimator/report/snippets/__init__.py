"""A copyable training script, config or command for the setup's training stack (TRL, the HF Trainer, Unsloth,
Axolotl, torchtune, LitGPT, a plain PyTorch loop, mlx_lm lora, LLaMA-Factory or ms-swift) that runs what the estimate
describes: the same micro-batch, max length, checkpointing and offloading, dtypes, optimizer, loss, LoRA rank and
targets, QLoRA settings and sharding. Every fact about an option is read from estimator.options (its stacks too); a
setting the stack's tool cannot express is said in a comment, never dropped. Pure text generation: no imports beyond
the estimator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .axolotl import _axolotl
from .common import _header, _stack_id
from .hf_trainer import _trainer
from .litgpt import _litgpt
from .llamafactory import _llamafactory
from .mlx import _mlx
from .plain import _plain
from .swift import _swift
from .torchtune import _torchtune
from .trl import _trl
from .unsloth import _unsloth

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


_WRITERS: dict[str, Callable[[ModelSpec, TrainingSetup, list[str]], list[str]]] = {
    "trl": _trl, "trainer": _trainer, "unsloth": _unsloth, "axolotl": _axolotl, "torchtune": _torchtune,
    "litgpt": _litgpt, "plain": _plain, "mlx": _mlx, "llamafactory": _llamafactory, "swift": _swift,
}


def training_snippet(spec: ModelSpec, setup: TrainingSetup) -> str:
    """The training script (Python), config (YAML) or command (bash) of the setup's stack, with exactly the
    estimate's assumptions; a setup without a stack gets the HF Trainer script. Python compiles, YAML parses
    (every value in JSON syntax) and bash is one command. Run it once a dataset path is filled in."""
    notes: list[str] = []
    body = _WRITERS[_stack_id(setup)](spec, setup, notes)
    return "\n".join(_header(spec, setup, notes) + body) + "\n"
