"""The assumptions that move the number most (issue 29 item 3): the settings this estimate rests on (the length every
example is padded to, the batch, the precision recipe, checkpointing, the method, the trained blocks, the optimizer,
the loss, the attention), each with where its value came from (the stack's default, a trainer's, the calculator's
default or the user's), one alternative setting as a TrainingSetup delta, and what that change would move the total
by, priced with the same estimate as the verdict. The page shows the few largest as buttons that apply the change."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from ..i18n import N_, Text
from ..job.setup import MAX_BATCH, TrainingSetup
from ..job.stack import check_stack_setup, loss_impl_id, with_method
from ..job.trainer import TrainerSetup
from ..memory.rule import seed_estimate
from ..options.losses import LOSS_IMPLS
from ..options.methods import METHOD_LABELS
from ..options.optimizers import OPTIMIZERS
from ..options.precisions import PRECISIONS
from ..options.stacks import get_stack
from ..options.trainers import TRAINERS
from .search import _default_estimate, solver_estimate_fn

if TYPE_CHECKING:
    from ..models.spec import ModelSpec
    from .search import EstimateFn

# The settings an assumption can be about (Assumption.key), in the order ties are broken.
ASSUMPTION_KEYS = ("seq_len", "batch", "precision", "grad_ckpt", "method", "lora_layers", "optimizer", "loss",
                   "attention")
SOURCES = ("stack", "trainer", "default", "user")  # Assumption.source
DEFAULT_COUNT = 4  # how many the page shows (3 to 5)


@dataclass(frozen=True)
class Assumption:
    """One setting the estimate rests on, where it came from, and what its alternative moves the total by."""

    key: str  # ASSUMPTION_KEYS: the setting's stable id
    label: Text  # "examples 2,048 tokens · MLX-LM default"
    setting: Text  # "examples 2,048 tokens" (the label without its source)
    source: str  # SOURCES: the stack's default, a trainer's, the calculator's default (TrainingSetup) or the user's
    source_label: Text  # "MLX-LM default", "GRPO default", "default", "your choice"
    change: dict[str, Any]  # the alternative as a TrainingSetup delta ({"seq_len": 1024}); apply with apply_change
    change_label: Text  # "examples 1,024 tokens"
    delta_bytes: int  # total after the change − total now (negative: the change frees memory)

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": str(self.label), "setting": str(self.setting), "source": self.source,
                "source_label": str(self.source_label), "change": self.change, "change_label": str(self.change_label),
                "delta_bytes": self.delta_bytes}


def apply_change(setup: TrainingSetup, change: dict[str, Any]) -> TrainingSetup:
    """The setup with an assumption's alternative applied (a method change re-resolves the stack's method-dependent
    defaults, as the sidebar's method switch does); the changed fields no longer count as the stack's."""
    if "method" in change:
        return with_method(setup, change["method"])
    return replace(setup, **change, from_stack=tuple(f for f in setup.from_stack if f not in change))


_SETUP_DEFAULTS = {f.name: f.default for f in fields(TrainingSetup)}


def _source(setup: TrainingSetup, trainer: TrainerSetup, field: str) -> tuple[str, Text]:
    """Where a setting's value came from, and how a chip says it ('MLX-LM default', 'GRPO default')."""
    if field in setup.from_stack and setup.stack is not None:
        if field == "batch" and trainer.trainer != "sft":
            return "trainer", Text(N_("{who} default"), who=TRAINERS[trainer.trainer].label)
        return "stack", Text(N_("{who} default"), who=get_stack(setup.stack).label)
    if field not in setup.from_stack and getattr(setup, field) == _SETUP_DEFAULTS.get(field, object()) and (
            field not in ("batch", "seq_len", "lora_layers") or setup.stack is None):
        return "default", Text(N_("default"))
    return "user", Text(N_("your choice"))


def _ckpt(setup: TrainingSetup) -> Text:
    if setup.offload_activations:
        return Text(N_("checkpointing offloaded to CPU"))
    return Text(N_("checkpointing on")) if setup.grad_ckpt else Text(N_("checkpointing off"))


def _setting(key: str, setup: TrainingSetup, spec: ModelSpec) -> Text:
    """A setting as a chip names it."""
    if key == "seq_len":
        return Text(N_("examples {n} tokens"), n=setup.seq_len)
    if key == "batch":
        return Text(N_("batch {n}"), n=setup.batch)
    if key == "precision":
        return Text(PRECISIONS[setup.precision].label)
    if key == "grad_ckpt":
        return _ckpt(setup)
    if key == "method":
        return Text(METHOD_LABELS[setup.method])
    if key == "lora_layers":
        if setup.lora_layers and setup.lora_layers < spec.num_layers:
            return Text(N_("the last {n} of {layers} blocks train"), n=setup.lora_layers, layers=spec.num_layers)
        return Text(N_("every block trains"))
    if key == "optimizer":
        return Text(OPTIMIZERS[setup.optimizer].label)
    if key == "loss":
        return Text(N_("loss: {loss}"), loss=Text(LOSS_IMPLS[loss_impl_id(setup)].label))
    return Text(N_("eager attention")) if setup.attention == "eager" else Text(N_("SDPA attention"))


def _alternatives(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup) -> list[tuple[str, dict[str, Any]]]:
    """Each setting's one alternative worth pricing: half the length, half the batch (or twice a batch of one), the
    other precision recipe, checkpointing switched, the next method, every block or the stack's count, 8-bit
    AdamW, the standard loss or the stack's, SDPA or eager."""
    stack = get_stack(setup.stack) if setup.stack else None
    out: list[tuple[str, dict[str, Any]]] = []
    if not trainer.option.generates and setup.seq_len > 1:  # GRPO's length is the trainer box's
        out.append(("seq_len", {"seq_len": max(1, setup.seq_len // 2)}))
    half = setup.batch // 2
    if half >= max(1, trainer.option.min_batch):
        out.append(("batch", {"batch": half}))
    elif setup.batch * 2 <= MAX_BATCH:
        out.append(("batch", {"batch": setup.batch * 2}))
    if setup.precision in ("bf16", "fp16") and (stack is None or stack.mixed_precision):
        out.append(("precision", {"precision": "mixed"}))
    elif setup.precision in ("mixed", "fp32"):
        out.append(("precision", {"precision": "bf16"}))
    if setup.grad_ckpt:
        out.append(("grad_ckpt", {"grad_ckpt": False, "offload_activations": False}))
    else:
        out.append(("grad_ckpt", {"grad_ckpt": True}))
    out.append(("method", {"method": {"full": "lora", "lora": "qlora", "qlora": "lora"}[setup.method]}))
    if stack is not None and stack.lora_layers and (setup.method != "full" or stack.full_trains_last_layers):
        out.append(("lora_layers", {"lora_layers": 0 if setup.lora_layers else stack.lora_layers}))
    if OPTIMIZERS[setup.optimizer].state_dtype != "8bit" and "adamw_8bit" in OPTIMIZERS:
        out.append(("optimizer", {"optimizer": "adamw_8bit"}))
    if stack is not None and setup.loss != stack.loss:
        out.append(("loss", {"loss": stack.loss}))
    elif setup.loss != "standard":
        out.append(("loss", {"loss": "standard"}))
    if stack is None or stack.framework == "torch":
        out.append(("attention", {"attention": "sdpa" if setup.attention == "eager" else "eager"}))
    return out


def _estimate_fn(trainer: TrainerSetup, rule: str | None, device_capacity: float | None) -> EstimateFn:
    if rule == "seed":
        return seed_estimate
    if trainer.trainer == "sft" and device_capacity is None:
        return _default_estimate
    return solver_estimate_fn(trainer, device_capacity)


def assumptions(spec: ModelSpec, setup: TrainingSetup, trainer: TrainerSetup | None = None, rule: str | None = None,
                device_capacity: float | None = None, count: int = DEFAULT_COUNT) -> tuple[Assumption, ...]:
    """The `count` settings whose alternative moves the total most (largest |change| first; a change that moves
    nothing, or that the stack or the trainer refuses, is left out), each priced with the verdict's estimate (the
    rule of thumb's with rule='seed', the trainer's step, on this card's capacity when the runtime reads it)."""
    tr = trainer or TrainerSetup("sft")
    fn = _estimate_fn(tr, rule, device_capacity)
    now = fn(spec, setup).total_bytes
    found: list[Assumption] = []
    for key, change in _alternatives(spec, setup, tr):
        try:
            changed = apply_change(setup, change)
            check_stack_setup(changed)
            after = fn(spec, changed).total_bytes
        except ValueError:
            continue
        delta = int(round(after - now))
        if delta == 0:
            continue
        source, source_label = _source(setup, tr, key)
        setting = _setting(key, setup, spec)
        found.append(Assumption(key, Text(N_("{setting} · {source}"), setting=setting, source=source_label), setting,
                                source, source_label, change, _setting(key, changed, spec), delta))
    found.sort(key=lambda a: (-abs(a.delta_bytes), ASSUMPTION_KEYS.index(a.key)))
    return tuple(found[:count])
