"""A stack's defaults applied to the user's settings (`resolve_setup`), the method switch, the attention and loss
implementations the stack runs for a model, and the setup's JSON and one-line summary."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text, _
from ..options.losses import LOSS_IMPLS, LOSSES
from ..options.optimizers import OPTIMIZERS
from ..options.precisions import QLORA_PREPS
from ..options.stacks import DEFAULT_STACK, NO_SDPA_FAMILIES, STACK_FIELDS, get_stack
from .setup import TrainingSetup

if TYPE_CHECKING:
    from typing import Any

    from ..options.stacks import Stack


def _stack_value(stack: Stack, name: str, method: str) -> Any:
    if name == "adapter_dtype":
        return stack.qlora_adapter_dtype if method == "qlora" else stack.adapter_dtype
    if name == "optimizer" and method == "qlora" and stack.qlora_optimizer:
        return stack.qlora_optimizer
    return getattr(stack, name)


def resolve_setup(stack_id: str = DEFAULT_STACK, **settings: Any) -> TrainingSetup:
    """The effective setup: every setting given (not None) wins; every other stack setting comes from the
    stack. The result records the stack and which fields came from it (TrainingSetup.from_stack).

    Raises ValueError for an unknown stack, a loss the stack does not offer, or offloading without
    checkpointing asked for explicitly."""
    stack = get_stack(stack_id)
    known = {f.name for f in fields(TrainingSetup)} - {"stack", "from_stack"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}")
    given = {k: v for k, v in settings.items() if v is not None}
    method = given.get("method", "lora")
    from_stack: list[str] = []
    values = dict(given)
    for name in STACK_FIELDS:
        if name in given:
            continue
        if name == "offload_activations" and given.get("grad_ckpt") is False:
            values[name] = False  # offloading rides on checkpointing: off with it
        else:
            values[name] = _stack_value(stack, name, method)
        from_stack.append(name)
    if values.get("offload_activations") and not values.get("grad_ckpt"):
        raise ValueError(Text(N_("activation offloading needs gradient checkpointing (it offloads the checkpointed "
                                 "layer inputs); turn checkpointing on or offloading off")))
    stack.loss_impl(values["loss"])  # raises when the stack cannot do this loss
    for name in ("compile", "optimizer_in_bwd"):
        if values.get(name) and stack.id != "torchtune":
            raise ValueError(Text(N_("'{name}' is modelled for the torchtune stack only (its recipes' compile and "
                                     "optimizer_in_bwd switches); choose --stack torchtune or leave it off"),
                                  name=name))
    return TrainingSetup(stack=stack.id, from_stack=tuple(from_stack), **values)


def with_method(setup: TrainingSetup, method: str) -> TrainingSetup:
    """The same setup trained another way. A stack's defaults can depend on the method (TRL: fp32 LoRA
    adapters, bf16 ones on a 4-bit base), so the values the stack chose are chosen again for this method;
    the user's own choices are kept."""
    if setup.stack is None:
        return replace(setup, method=method)
    given = {f.name: getattr(setup, f.name) for f in fields(setup)
             if f.name not in setup.from_stack and f.name not in ("stack", "from_stack")}
    if method != "full":  # torchtune's LoRA recipes have no optimizer_in_bwd (lora_finetune_single_device.py)
        given["optimizer_in_bwd"] = False
    return resolve_setup(setup.stack, **{**given, "method": method})


def attention_impl(setup: TrainingSetup, family: str) -> str:
    """The attention the run really uses: "sdpa" becomes "eager" for a family transformers cannot run with SDPA,
    on a stack that loads the model through transformers (Stack.transformers_attention)."""
    stack_dispatch = setup.stack is None or get_stack(setup.stack).transformers_attention
    if setup.attention == "sdpa" and family in NO_SDPA_FAMILIES and stack_dispatch:
        return "eager"
    return setup.attention


def loss_impl_id(setup: TrainingSetup) -> str:
    """Which implementation the estimate counts for this setup's loss kind."""
    if setup.stack is not None:
        return get_stack(setup.stack).loss_impl(setup.loss)
    return LOSSES[setup.loss].default_impl


def setup_json(setup: TrainingSetup) -> dict[str, Any]:
    """Every effective value of the setup, for the JSON echo: the user sees what was assumed."""
    doc: dict[str, Any] = {f.name: getattr(setup, f.name) for f in fields(TrainingSetup)}
    doc = {k: (list(v) if isinstance(v, tuple) else v) for k, v in doc.items()}
    doc["stack_version"] = get_stack(setup.stack).version if setup.stack else None
    doc["loss_impl"] = loss_impl_id(setup)
    doc["loss_impl_label"] = LOSS_IMPLS[doc["loss_impl"]].label
    doc["optimizer_label"] = OPTIMIZERS[setup.optimizer].label
    doc["hf_optim"] = OPTIMIZERS[setup.optimizer].hf_optim
    doc["loss_label"] = LOSSES[setup.loss].label
    if setup.method == "qlora":
        doc["qlora_prep_label"] = QLORA_PREPS[setup.qlora_prep].label
    doc["checkpointing"] = "offload" if setup.offload_activations else ("on" if setup.grad_ckpt else "off")
    return doc


def setup_summary(setup: TrainingSetup) -> str:
    """One line naming the settings a stack decides, each marked with where it came from, e.g.
    'TRL 1.16.0: checkpointing on (stack) · loss: TRL fused chunked LM head (stack) · AdamW (fused) (stack)'."""
    label = get_stack(setup.stack).label if setup.stack else _("explicit settings")

    def mark(field: str, text: str) -> str:
        if setup.stack is None:
            return text
        if field in setup.from_stack:
            return _("{setting} ({stack} default)").format(setting=text, stack=label)
        return _("{setting} (your choice)").format(setting=text)

    ckpt = _("checkpointing offloaded to CPU") if setup.offload_activations else (
        _("checkpointing on") if setup.grad_ckpt else _("checkpointing off"))
    parts = [mark("grad_ckpt", ckpt),
             mark("loss", _("loss: {loss}").format(loss=_(LOSS_IMPLS[loss_impl_id(setup)].label))),
             mark("optimizer", _("optimizer: {optimizer}").format(optimizer=_(OPTIMIZERS[setup.optimizer].label)))]
    if setup.method != "full":
        parts.append(mark("adapter_dtype", _("{dtype} adapters").format(dtype=setup.adapter_dtype)))
    if setup.method == "qlora":
        parts.append(mark("qlora_prep", _(QLORA_PREPS[setup.qlora_prep].label)))
    head = get_stack(setup.stack).version if setup.stack else _("Explicit settings")
    return f"{head}: " + " · ".join(parts)
