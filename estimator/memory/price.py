"""Which estimate to call: the one place that chooses between the detailed SFT step (the stack's runtime), a trainer's
step and the rule of thumb, and that keeps the estimates computed (pure functions of frozen dataclasses)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.trainer import check as check_trainer
from .assemble import assemble
from .rule import seed_estimate
from .runtimes import runtime_for
from .trainers import trainer_parts

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..job.trainer import TrainerSetup
    from ..models.spec import ModelSpec
    from .result import Estimate

# Estimates are pure functions of two frozen (hashable) dataclasses, and one calculator rerun asks for the same
# ones again (the page, its remedies and its solvers; the next rerun mostly the same probes): keep the latest
# few thousand (a few kB each). detailed_estimate.cache_info().misses counts the estimates actually computed.
ESTIMATE_CACHE_SIZE = 4096


@lru_cache(maxsize=ESTIMATE_CACHE_SIZE)
def detailed_estimate(spec: ModelSpec, setup: TrainingSetup, device_capacity: float | None = None) -> Estimate:
    """Peak per-GPU memory of one steady-state SFT step on the setup's stack, broken into components at the peak
    phase. `device_capacity` (bytes) is read only where the runtime decides by the card's memory (Unsloth; callers
    pass it when needs_capacity says so)."""
    return assemble(runtime_for(setup).parts(spec, setup, device_capacity))


@lru_cache(maxsize=1024)
def estimate_trainer(spec: ModelSpec, setup: TrainingSetup, tr: TrainerSetup,
                     device_capacity: float | None = None, strict: bool = True) -> Estimate:
    """Peak per-GPU memory of one step of the trainer (docs/formulas.md §9). strict=False prices batches TRL would
    refuse (KTO batch 1, num_generations not dividing the batch): the solvers' use."""
    check_trainer(setup, tr, strict)
    if tr.option.id == "sft":
        return detailed_estimate(spec, setup)
    return assemble(trainer_parts(spec, setup, tr, device_capacity))


def needs_capacity(spec: ModelSpec, setup: TrainingSetup) -> bool:
    """Does the estimate read the card's memory? Unsloth decides three things by it (the embedding offload, double
    buffering, the loss pass); every other runtime prices the same step on any card."""
    return runtime_for(setup).needs_capacity(spec, setup)


def check_model(spec: ModelSpec, setup: TrainingSetup) -> None:
    """ValueError with the reason when the setup's runtime cannot train this model this way (MLX-LM's supported
    models, an MLX-quantised checkpoint on a PyTorch stack, more LoRA layers than the model has). estimate() raises
    the same."""
    runtime_for(setup).check_model(spec, setup)


def estimate(model: ModelSpec, setup: TrainingSetup, rule: str | None = None, trainer: TrainerSetup | None = None,
             device_capacity: float | None = None, strict: bool = True) -> Estimate:
    """The one entry point pages and the CLI call: the detailed estimate, or the seed's rule of thumb
    with rule='seed'. `trainer` prices a preference/RL trainer's step (estimator/memory/trainers.py); vLLM colocate
    mode and Unsloth's own decisions need the device's total memory in `device_capacity`, as CUDA reports it to the process
    (Device.runtime_total_bytes: torch.cuda's total, which both read); strict=False skips TRL's batch-shape checks the
    memory does not depend on (the solvers try every batch)."""
    if trainer is not None and trainer.trainer != "sft":
        if rule == "seed":
            raise ValueError(Text(N_("the rule of thumb covers SFT only; drop it to estimate the {trainer} trainer"),
                                  trainer=Text(trainer.option.label)))
        return estimate_trainer(model, setup, trainer, device_capacity, strict)
    if trainer is not None:
        check_trainer(setup, trainer, strict)  # SFT: only the checks (no second estimate)
    if rule is None or rule == "detailed":
        if needs_capacity(model, setup):  # Unsloth decides its embedding offload, double buffering and loss pass
            return detailed_estimate(model, setup, device_capacity)  # by the card's memory
        return detailed_estimate(model, setup)  # the same cache entry as the solvers' estimate(spec, setup)
    if rule == "seed":
        return seed_estimate(model, setup)
    raise ValueError(f"rule must be 'seed' or omitted, got {str(rule)[:20]!r}")
