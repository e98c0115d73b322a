"""A preference/RL trainer's options as the user gave them (`TrainerSetup`), TRL's checks and fallbacks, and the
training forward the trainer runs (`policy_setup`). Facts per trainer live in estimator/options/trainers.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text, _
from ..options.stacks import get_stack
from ..options.trainers import (
    DEFAULT_PROMPT_LEN,
    GENERATION_IDS,
    GENERATION_MODES,
    GRPO_MAX_COMPLETION_LENGTH,
    GRPO_NUM_GENERATIONS,
    MAX_BETA,
    MAX_GENERATIONS,
    MIN_GENERATIONS,
    TRAINER_IDS,
    TRAINERS,
    TRL_VERSION,
    VLLM_GPU_MEMORY_UTILIZATION,
)
from .settings import BY_NAME
from .setup import MAX_BATCH, MAX_SEQ_LEN

if TYPE_CHECKING:
    from ..options.trainers import TrainerOption
    from .setup import TrainingSetup


@dataclass(frozen=True)
class TrainerSetup:
    """The trainer and its options. None means "not given": the trainer's default applies, and an option the
    trainer cannot use is an error only when it was given."""

    trainer: str = "sft"
    beta: float | None = None
    precompute_ref: bool = False
    num_generations: int | None = None
    prompt_len: int | None = None
    completion_len: int | None = None
    generation: str | None = None
    vllm_gpu_util: float | None = None
    vllm_sleep: bool = False

    def __post_init__(self) -> None:
        if self.trainer not in TRAINERS:
            raise ValueError(Text(N_("{name} must be one of {choices}; got {value}"), name="trainer",
                                  choices=", ".join(TRAINER_IDS), value=repr(str(self.trainer)[:40])))
        opt = TRAINERS[self.trainer]
        if self.beta is not None:
            if opt.beta_default is None:
                raise ValueError(Text(N_("the {trainer} trainer has no beta"), trainer=Text(opt.label)))
            if isinstance(self.beta, bool) or not isinstance(self.beta, (int, float)) or not (
                    0 <= self.beta < MAX_BETA):
                raise ValueError(Text(N_("{name} must be a number ≥ 0, got {value}"), name="beta",
                                      value=repr(str(self.beta)[:20])))
        if self.precompute_ref and not opt.can_precompute:
            raise ValueError(Text(N_("the {trainer} trainer has no reference log-probs to precompute "
                                     "(precompute_ref_log_probs is a DPO/KTO option)"), trainer=Text(opt.label)))
        grpo_only = {"num_generations": self.num_generations, "prompt_len": self.prompt_len,
                     "completion_len": self.completion_len, "generation": self.generation,
                     "vllm_gpu_util": self.vllm_gpu_util}
        if not opt.generates:
            given = [k for k, v in grpo_only.items() if v is not None] + (["vllm_sleep"] if self.vllm_sleep else [])
            if given:
                raise ValueError(Text(N_("{option} is a GRPO option; the {trainer} trainer does not generate"),
                                      option=given[0], trainer=Text(opt.label)))
            return
        for key, value, low, high in (("num_generations", self.num_generations, MIN_GENERATIONS, MAX_GENERATIONS),
                                      ("prompt_len", self.prompt_len, 1, MAX_SEQ_LEN),
                                      ("completion_len", self.completion_len, 1, MAX_SEQ_LEN)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(Text(N_("{name} must be a whole number, got {value}"), name=key,
                                      value=repr(str(value)[:20])))
            if not low <= value <= high:
                if key == "num_generations" and value < MIN_GENERATIONS:
                    raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value} (GRPO needs at "
                                             "least 2 completions per prompt to compute advantages)"), name=key,
                                          low=low, high=high, value=value))
                raise ValueError(Text(N_("{name} must be between {low} and {high}, got {value}"), name=key, low=low,
                                      high=high, value=value))
        if self.prompt_length + self.completion_length > MAX_SEQ_LEN:
            raise ValueError(Text(N_("prompt + completion must be at most {limit} tokens"), limit=MAX_SEQ_LEN))
        if self.generation is not None and self.generation not in GENERATION_MODES:
            raise ValueError(Text(N_("{name} must be one of {choices}; got {value}"), name="generation",
                                  choices=", ".join(GENERATION_IDS), value=repr(str(self.generation)[:40])))
        if self.vllm_gpu_util is not None:
            if self.generation_mode != "vllm-colocate":
                raise ValueError(Text(N_("vllm_gpu_memory_utilization applies to vLLM colocate mode only "
                                         "(generation vllm-colocate)")))
            if isinstance(self.vllm_gpu_util, bool) or not isinstance(self.vllm_gpu_util, (int, float)) or not (
                    0 < self.vllm_gpu_util < 1):
                raise ValueError(Text(N_("vllm_gpu_memory_utilization must be between 0 and 1 (exclusive), got "
                                         "{value}"), value=repr(str(self.vllm_gpu_util)[:20])))
        if self.vllm_sleep and self.generation_mode != "vllm-colocate":
            raise ValueError(Text(N_("vLLM sleep mode applies to vLLM colocate mode only")))

    @property
    def option(self) -> TrainerOption:
        return TRAINERS[self.trainer]

    @property
    def beta_value(self) -> float | None:
        return self.beta if self.beta is not None else self.option.beta_default

    @property
    def gens(self) -> int:
        return self.num_generations if self.num_generations is not None else GRPO_NUM_GENERATIONS

    @property
    def prompt_length(self) -> int:
        return self.prompt_len if self.prompt_len is not None else DEFAULT_PROMPT_LEN

    @property
    def completion_length(self) -> int:
        return self.completion_len if self.completion_len is not None else GRPO_MAX_COMPLETION_LENGTH

    @property
    def generation_mode(self) -> str:
        return self.generation if self.generation is not None else "hf"

    @property
    def vllm_util(self) -> float:
        return self.vllm_gpu_util if self.vllm_gpu_util is not None else VLLM_GPU_MEMORY_UTILIZATION

    def uses_reference(self) -> bool:
        """Does a reference model run during training (a copy or the adapter-off base)?"""
        opt = self.option
        if opt.reference == "always":
            return not self.precompute_ref
        if opt.reference == "beta":
            return bool(self.beta_value)
        return False


def generation_batch(setup: TrainingSetup) -> int:
    """GRPO's global generation batch: per_device_train_batch_size × processes × steps_per_generation
    (= gradient_accumulation_steps by default; trl/trainer/grpo_config.py __post_init__, TRL 1.16.0)."""
    return setup.batch * setup.gpus * setup.grad_accum


def check(setup: TrainingSetup, tr: TrainerSetup, strict: bool = True) -> None:
    """The checks TRL makes that depend on the batch and the stack. ValueError with a clear message.
    strict=False skips the batch-shape rules the memory does not depend on (for the solvers)."""
    opt = tr.option
    stack = get_stack(setup.stack) if setup.stack else None
    if stack is not None and opt.id not in stack.trainers:  # Stack.trainers: the trainers the stack has
        raise ValueError(Text(stack.trainers_refusal, trainer=Text(opt.label)))
    if strict and setup.batch < opt.min_batch:
        raise ValueError(Text(N_("{trainer} needs a per-device batch of at least {batch} (TRL: 'Actual (not "
                                 "effective) batch size must be > 1', kto_trainer.py)"), trainer=Text(opt.label),
                              batch=str(opt.min_batch)))
    if setup.batch * opt.sequences > MAX_BATCH:
        raise ValueError(Text(N_("{trainer} runs {n} × batch sequences per forward; batch must be at most {limit}"),
                              trainer=Text(opt.label), n=str(opt.sequences), limit=MAX_BATCH // opt.sequences))
    if opt.generates and strict:
        gb = generation_batch(setup)
        if gb % tr.gens:
            raise ValueError(Text(N_("GRPO needs the generation batch (batch {batch} × GPUs {gpus} × gradient "
                                     "accumulation {accum} = {total}) to be divisible by num_generations ({gens}); "
                                     "TRL raises the same (grpo_config.py)"), batch=str(setup.batch),
                                  gpus=str(setup.gpus), accum=str(setup.grad_accum), total=str(gb),
                                  gens=str(tr.gens)))
    if stack is not None and stack.trainer_decides_loss and opt.id != "sft" and "loss" not in setup.from_stack:
        wanted = trainer_loss(setup, tr)
        if wanted != setup.loss:
            why = (Text(N_("it always scores through the fused chunked head (fused_lm_head=True)"))
                   if trainer_head(setup, tr) == "fused" else Text(N_("it builds the full logits itself")))
            raise ValueError(Text(N_("TRL's {trainer_class} cannot use the '{loss}' loss: {why}; use '{wanted}' or "
                                     "leave the loss to the stack"), trainer_class=opt.trainer_class,
                                  loss=setup.loss, why=why, wanted=wanted))


def trainer_head(setup: TrainingSetup, tr: TrainerSetup) -> str:
    """How the trainer scores its tokens on the setup's TRL release (TrainerOption.head): DPO, KTO and GRPO build the
    full-vocabulary logits before TRL 1.15 (version fork trl_fused_logprob_head: trl/trainer/dpo_trainer.py:1347,
    1.14.0, shift_logits = outputs.logits[..., :-1, :]), the fused chunked head from it (:1275, 1.15.0)."""
    opt = tr.option
    if opt.head == "fused" and opt.id != "sft" and setup.older("trl_fused_logprob_head"):
        return "logits"
    return opt.head


def trainer_loss(setup: TrainingSetup, tr: TrainerSetup) -> str:
    """The loss kind the trainer runs. Under the TRL stack the trainer decides it: DPO, KTO and GRPO score
    through the fused chunked head (loss 'chunked'), ORPO and SimPO build full logits ('standard'). Other
    stacks (Unsloth patches TRL's trainers with its own losses) keep the stack's loss."""
    opt = tr.option
    if not (setup.stack and get_stack(setup.stack).trainer_decides_loss) or opt.head == "score" or opt.id == "sft":
        return setup.loss  # SFT: the stack's (or the user's) loss
    return "standard" if trainer_head(setup, tr) == "logits" else "chunked"


def policy_setup(setup: TrainingSetup, tr: TrainerSetup) -> TrainingSetup:
    """The SFT-equivalent setup of the trainer's training forward: batch × sequences per example, GRPO's
    prompt + completion length, the trainer's loss."""
    opt = tr.option
    seq = tr.prompt_length + tr.completion_length if opt.generates else setup.seq_len
    return replace(setup, batch=setup.batch * opt.sequences, seq_len=seq, loss=trainer_loss(setup, tr))


def fix_generations(setup: TrainingSetup, tr: TrainerSetup) -> tuple[TrainingSetup, TrainerSetup, str]:
    """For the app: when num_generations does not divide the generation batch, the closest setting TRL accepts
    (the largest divisor ≥ 2 of the generation batch, else a batch of num_generations) and a note saying so."""
    if not tr.option.generates:
        return setup, tr, ""
    gb = generation_batch(setup)
    if gb % tr.gens == 0:
        return setup, tr, ""
    divisors = [k for k in range(2, min(gb, tr.gens) + 1) if gb % k == 0]
    if divisors:
        fixed = replace(tr, num_generations=max(divisors))
        return setup, fixed, _("TRL needs the generation batch ({gb}) divisible by num_generations ({gens}); shown "
                               "with {fixed} generations.").format(gb=gb, gens=tr.gens, fixed=fixed.gens)
    batch = tr.gens * math.ceil(setup.batch / tr.gens)
    return replace(setup, batch=batch), tr, _(
        "TRL needs the generation batch ({gb}) divisible by num_generations ({gens}); shown with batch {batch}."
    ).format(gb=gb, gens=tr.gens, batch=batch)


def trainer_json(tr: TrainerSetup) -> dict[str, object]:
    """The effective trainer settings for the JSON echo."""
    opt = tr.option
    doc: dict[str, object] = {"trainer": opt.id, "trainer_version": TRL_VERSION, "config_class": opt.config_class,
                              "sequences_per_example": opt.sequences, "reference_model": tr.uses_reference()}
    if opt.beta_default is not None:
        doc["beta"] = tr.beta_value
    effective: dict[str, object] = {}  # by setting name; the JSON keys come from the settings table
    if opt.can_precompute:
        effective["precompute_ref"] = tr.precompute_ref
    if opt.generates:
        effective.update(num_generations=tr.gens, prompt_len=tr.prompt_length, completion_len=tr.completion_length,
                         generation=tr.generation_mode)
        if tr.generation_mode == "vllm-colocate":
            effective.update(vllm_gpu_util=tr.vllm_util, vllm_sleep=tr.vllm_sleep)
    return doc | {BY_NAME[name].json_key: value for name, value in effective.items()}
