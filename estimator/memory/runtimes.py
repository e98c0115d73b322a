"""One runtime per model code, hung on the Stack row (Stack.model_code): the only place a stack meets the code that
prices its step. A stack that runs its own model code adds its runtime folder under memory/ and one entry here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..options.stacks import get_stack
from .hf.runtime import HfRuntime
from .litgpt.runtime import LitgptRuntime
from .mlx.runtime import MlxRuntime
from .unsloth.runtime import UnslothRuntime

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from .runtime import Runtime

RUNTIMES: dict[str, Runtime] = {r.id: r for r in (HfRuntime(), UnslothRuntime(), LitgptRuntime(), MlxRuntime())}


def runtime_for(setup: TrainingSetup) -> Runtime:
    """The runtime of the setup's stack (transformers' modules for explicit settings without a stack)."""
    return RUNTIMES[get_stack(setup.stack).model_code if setup.stack else HfRuntime.id]
