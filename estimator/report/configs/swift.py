"""ms-swift's YAML for `swift sft FILE` (4.6.0; SFT only: the stack refuses the other trainers, whose steps are its own
swift rlhf trainers): the snippet's arguments as keys, and the launch's environment as its ENV block."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.trainer import TrainerSetup, check
from ..snippets.axolotl import _line
from ..snippets.common import _header
from ..snippets.swift import CONFIG_FILE, config_pairs, env_pairs, explanation, run_command
from ._common import ExportedConfig, _marker, _text

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec


def _export_swift(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup) -> ExportedConfig:
    """The marker, the header, the ENV block (the GPUs: swift/cli/main.py:53-59 sets them before the launch) and the
    arguments."""
    check(setup, tr)  # SFT only: ms-swift's rlhf trainers are its own (options.stacks Stack.trainers)
    notes: list[str] = []
    pairs = config_pairs(spec, setup, notes)
    lines = [_marker(setup, tr), *_header(spec, setup, notes), *explanation(spec, setup),
             _line("ENV", dict(env_pairs(setup))), *(_line(k, v) for k, v in pairs),
             "", f"# Run with: {run_command()}"]
    return ExportedConfig("swift", CONFIG_FILE, _text(lines), run_command(), tuple(notes))
