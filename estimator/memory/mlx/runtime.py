"""MLX-LM's runtime (Stack.model_code "mlx"): `mlx_lm lora`'s step (memory/mlx/step.py) on the model mlx-lm builds
(memory/mlx/model.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...job.stack import check_stack_setup
from ..runtime import Runtime
from .model import check_mlx_model
from .step import mlx_parts

if TYPE_CHECKING:
    from ...job.setup import TrainingSetup
    from ...models.spec import ModelSpec
    from ..parts import StepParts


class MlxRuntime(Runtime):
    """mlx 0.32.4, mlx-lm 0.32.2: dense gated decoders, one device, MLX's own quantisation."""

    id = "mlx"

    def check_model(self, spec: ModelSpec, setup: TrainingSetup) -> None:
        """What mlx_lm lora cannot be asked for (a setup built without resolve_setup is checked here too), then what
        it cannot train or this estimate does not model."""
        check_stack_setup(setup)
        check_mlx_model(spec, setup)

    def parts(self, spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> StepParts:
        self.check(spec, setup)
        return mlx_parts(spec, setup)
