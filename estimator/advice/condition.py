"""The verdict's condition and its way out: the batch × length a verdict holds at (every example padded to the max
length), and the longest length per example that fits at this batch on the device (issue 29 item 1). The search is
the calculator's own (solvers.max_seq_len / max_completion_len with advise()'s estimate function), so the answer is
the one its "longest max length that fits" line gives, capped at the model's own context length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.setup import MAX_SEQ_LEN
from ..job.trainer import TrainerSetup
from ..memory.price import needs_capacity
from .search import _default_estimate, solver_estimate_fn
from .solvers import max_completion_len, max_seq_len

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from ..options.devices import Device
    from .search import EstimateFn

# What the estimate assumes about the examples, said beside every verdict: each example is padded to the max length.
# mlx-lm pads a batch to its longest example (mlx_lm/tuner/trainer.py:158-161, 0.32.2: 32·ceil(longest/32), at most
# max_seq_length); TRL's and the transformers Trainer's collators, torchtune's padded_collate_sft, LitGPT's SFT collate
# and LLaMA-Factory's pad to the longest example of the batch too, so a batch of shorter examples uses less.
PADDING_SENTENCE = N_("every example padded to the max length; mlx-lm and most stacks pad a batch to its longest "
                      "example, so shorter examples use less")

STATUSES = ("fits_up_to", "none_fits", "all_fit")


@dataclass(frozen=True)
class LongestLength:
    """The longest length per example that fits this device at the setup's batch (the verdict's way out)."""

    tokens: int | None  # the longest max length (GRPO: max completion length) that fits; None when not even 1 token
    kind: str  # "seq_len" (tokens per example) or "completion_len" (GRPO's max completion length)
    batch: int  # the micro-batch it holds at
    current: int  # the setup's own length (max length, or GRPO's max completion length)
    limit: int  # the longest length searched: the model's context length (config max_position_embeddings), or
    # MAX_SEQ_LEN when the config does not state one
    status: str  # "fits_up_to", "none_fits" (not even the shortest length) or "all_fit" (every length to the limit)
    priced: str  # "detailed" (the rule of thumb has no length: the detailed estimate answers under it too)

    def sentence(self) -> Text:
        """'fits up to 1,340 tokens per example at batch 4', or why there is no such length."""
        unit = N_("tokens of completion") if self.kind == "completion_len" else N_("tokens per example")
        if self.status == "none_fits":
            return Text(N_("no length fits at batch {batch}: even 1 token per example is too big"), batch=self.batch)
        if self.status == "all_fit":
            return Text(N_("every length up to the model's {limit} {unit} fits at batch {batch}"), limit=self.limit,
                        unit=Text(unit), batch=self.batch)
        return Text(N_("fits up to {tokens} {unit} at batch {batch}"), tokens=self.tokens, unit=Text(unit),
                    batch=self.batch)

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "batch": self.batch, "current": self.current, "limit": self.limit,
                "status": self.status, "priced": self.priced}


def model_length_limit(spec: ModelSpec, setup: TrainingSetup) -> int:
    """The longest max length the model takes per example: its config's max_position_embeddings less the image
    tokens each example adds (MAX_SEQ_LEN when the config states none)."""
    if spec.max_position_embeddings <= 0:
        return MAX_SEQ_LEN
    return max(1, min(MAX_SEQ_LEN, spec.max_position_embeddings - setup.image_tokens))


def solver_fn(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None) -> EstimateFn:
    """The estimate function advise() prices the solvers with: the detailed SFT estimate (on this card when the stack
    decides by its memory, as Unsloth does), or the trainer's step without TRL's batch-shape checks."""
    tr = trainer or TrainerSetup("sft")
    if tr.trainer == "sft" and not needs_capacity(spec, setup):
        return _default_estimate
    return solver_estimate_fn(tr, device.runtime_total_bytes)


def search_length(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
                  length_limit: int = MAX_SEQ_LEN, fn: EstimateFn | None = None) -> int | None:
    """advise()'s longest length: the longest max length that fits at this batch (GRPO: the longest max completion
    length), searched up to length_limit with the calculator's estimate function; None when not even 1 fits."""
    tr = trainer or TrainerSetup("sft")
    if tr.option.generates:
        return max_completion_len(spec, setup, tr, device.usable_bytes, device.runtime_total_bytes)
    return max_seq_len(spec, setup, device.usable_bytes, fn or solver_fn(spec, setup, device, tr), limit=length_limit)


def longest_length(spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup | None = None,
                   rule: str | None = None) -> LongestLength:
    """The verdict's way out: the longest length per example that fits at the setup's batch on this device, capped
    at the model's own context length. The same search as advise()'s "longest max length that fits" (its estimates
    are cached, so beside the calculator's advice it costs nothing more). The rule of thumb has no length: with
    rule='seed' the detailed estimate answers, as advise() does."""
    tr = trainer or TrainerSetup("sft")
    found = search_length(spec, setup, device, tr)
    generates = tr.option.generates
    limit = model_length_limit(spec, setup)
    if generates:
        limit = max(1, limit - tr.prompt_length)
    if found is None:
        status = "none_fits"
    elif found >= limit:
        status, found = "all_fit", limit
    else:
        status = "fits_up_to"
    return LongestLength(tokens=found, kind="completion_len" if generates else "seq_len", batch=setup.batch,
                         current=tr.completion_length if generates else setup.seq_len, limit=limit, status=status,
                         priced="detailed")


def condition_sentence(setup: TrainingSetup, trainer: TrainerSetup | None = None) -> Text:
    """What a verdict holds at: 'batch 4 × 2,048 tokens per example, every example padded to the max length; …'."""
    tr = trainer or TrainerSetup("sft")
    if tr.option.generates:
        return Text(N_("batch {batch} completions × ({prompt} + {completion}) tokens, {padding}"), batch=setup.batch,
                    prompt=tr.prompt_length, completion=tr.completion_length, padding=Text(PADDING_SENTENCE))
    return Text(N_("batch {batch} × {length} tokens per example, {padding}"), batch=setup.batch, length=setup.seq_len,
                padding=Text(PADDING_SENTENCE))
