"""What every config writer shares: the result type, the marker line every file starts with, the trainer's options
a format has no key for, and small text helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup
from ...models.hub import parse_model_id
from ..snippets.common import _stack_id

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


@dataclass(frozen=True)
class ExportedConfig:
    """A stack's config file for the estimate: its name, text and language, the command that runs it, and what the
    file cannot express (the run differs from the estimate there; also written in the file's header)."""

    stack: str
    filename: str
    text: str
    command: str
    notes: tuple[str, ...]
    language: str = "yaml"


def _marker(setup: TrainingSetup, tr: TrainerSetup, extra: dict[str, object] | None = None) -> str:
    parts = {"stack": _stack_id(setup), "trainer": tr.trainer, "gpus": setup.gpus, **(extra or {})}
    return "# will-it-fit: " + " ".join(f"{k}={_token(v)}" for k, v in parts.items())


def _token(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value).replace(" ", "")


def _trainer_marker(tr: TrainerSetup, carried: tuple[str, ...]) -> dict[str, object]:
    """The trainer's options a format has no key for, carried in the marker (TrainerSetup field names)."""
    values = {"beta": tr.beta_value, "precompute_ref": tr.precompute_ref, "num_generations": tr.gens,
              "prompt_len": tr.prompt_length, "completion_len": tr.completion_length,
              "generation": tr.generation_mode, "vllm_gpu_util": tr.vllm_util, "vllm_sleep": tr.vllm_sleep}
    opt = tr.option
    applies = {"beta": opt.beta_default is not None, "precompute_ref": opt.can_precompute}
    applies |= {k: opt.generates for k in ("num_generations", "prompt_len", "completion_len", "generation")}
    applies |= {k: opt.generates and tr.generation_mode == "vllm-colocate" for k in ("vllm_gpu_util", "vllm_sleep")}
    return {k: values[k] for k in carried if applies[k]}


def _hub_revision(spec: ModelSpec) -> str | None:
    if spec.source == "hub":
        try:
            return parse_model_id(spec.name)[1]
        except ValueError:
            return None
    return None


def _offload_note(setup: TrainingSetup, notes: list[str], how: str) -> None:
    """Optimizer offload without sharding: the tools offload under a sharding strategy; over one GPU it shards
    nothing, so the memory is the same, but the file reads back with that sharding."""
    if setup.offload_optimizer and setup.sharding == "none":
        notes.append(f"optimizer offload without sharding: {how} (over one GPU it shards nothing).")


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"
