"""LLaMA-Factory's YAML for `llamafactory-cli train FILE` (0.9.5; SFT only: the stack refuses the other trainers, whose
steps are LLaMA-Factory's own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup, check
from ..snippets.common import _header
from ..snippets.llamafactory import CONFIG_FILE, config_lines, run_command
from ._common import ExportedConfig, _marker, _offload_note, _text

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _export_llamafactory(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    """The snippet's YAML with the marker first: the GPU count is the launcher's (NPROC_PER_NODE), not a key."""
    check(setup, tr)  # SFT only: LLaMA-Factory's DPO/KTO/RM steps are its own (options.stacks Stack.trainers)
    notes: list[str] = []
    body = config_lines(spec, setup, notes)
    _offload_note(setup, notes, "DeepSpeed offloads under ZeRO stage 2 here")
    lines = [_marker(setup, tr), *_header(spec, setup, notes), *body]
    return ExportedConfig("llamafactory", CONFIG_FILE, _text(lines), run_command(setup), tuple(notes))
