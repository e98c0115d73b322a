"""A stack's defaults applied to the user's settings (`resolve_setup`), the method switch, the attention and loss
implementations the stack runs for a model, and the setup's JSON and one-line summary."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from ..i18n import N_, Text, _
from ..options.backends import (
    DEFAULT_BACKEND,
    MPS_NO_8BIT_OPTIMIZER,
    MPS_NO_PAGED,
    MPS_NO_TRITON,
    check_stack_backend,
)
from ..options.losses import LOSS_IMPLS, LOSSES
from ..options.optimizers import OPTIMIZERS
from ..options.precisions import QLORA_PREPS
from ..options.quantization import QUANT_MODES
from ..options.stacks import (
    DEFAULT_STACK,
    NO_SDPA_FAMILIES,
    STACK_FIELDS,
    STACK_SIZE_FIELDS,
    default_stack,
    get_stack,
)
from ..options.trainers import TRAINERS
from .setup import TrainingSetup
from .versions import older, resolve_versions

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..options.devices import Device
    from ..options.stacks import Stack
    from .versions import Installed, Versions


def _version_default(stack: Stack, name: str, versions: Versions | None, trainer: str) -> tuple[bool, Any]:
    """(True, the value) when an older release of the stack's packages had another default for this field
    (Stack.version_defaults: the first entry whose fork these versions are on the old side of); else (False, None)."""
    if versions is None:
        return False, None
    for vd in stack.version_defaults:
        if vd.field != name or (vd.trainers and trainer not in vd.trainers):
            continue
        if older(vd.fork, versions):
            return True, vd.value
    return False, None


def _stack_value(stack: Stack, name: str, method: str, versions: Versions | None = None, trainer: str = "sft") -> Any:
    older, value = _version_default(stack, name, versions, trainer)
    if older:
        return value
    if name == "adapter_dtype":
        return stack.qlora_adapter_dtype if method == "qlora" else stack.adapter_dtype
    if name == "optimizer" and method == "qlora" and stack.qlora_optimizer:
        return stack.qlora_optimizer
    return getattr(stack, name)


def default_batch(stack: Stack, trainer: str = "sft") -> int:
    """The micro-batch a run gets when the user gives none: a preference/RL trainer's own default (GRPO: TRL's 8
    completions), never below the smallest it accepts (KTO: 2, kto_trainer.py), else the stack's (mlx-lm: 4; the
    PyTorch stacks: 1, the calculator's smallest run)."""
    if trainer != "sft" and trainer in TRAINERS:
        return max(TRAINERS[trainer].default_batch, TRAINERS[trainer].min_batch)
    return stack.batch


AUTO_STACK = "auto"  # "the stack this device and trainer get" (default_stack), as the CLI and the app's picker say it


@dataclass(frozen=True)
class RunDefaults:
    """The run a user gets for what they leave open: the stack a device and trainer get, and that stack's (or the
    trainer's) batch, length, rank, trained blocks and quantisation. The one source of these defaults: the CLI
    (report/cli_args.py), resolve_setup and the app's sidebar (ui/inputs.py) all read default_settings."""

    stack: str  # the stack's id
    trainer: str
    batch: int  # micro-batch per device
    seq_len: int
    lora_rank: int
    lora_layers: int  # 0 = every block
    quant_mode: str
    batch_from: str  # "trainer" (a preference/RL trainer's own default) or "stack"


def default_settings(stack: str | None = None, device: Device | None = None, trainer: str = "sft") -> RunDefaults:
    """The defaults of a run on this device: `stack` None or "auto" is the device's default stack (MLX-LM for a
    trainer it has on a unified-memory Apple device, TRL otherwise: options.stacks.default_stack); the batch is a
    preference/RL trainer's own (GRPO: 8), else the stack's (mlx_lm lora: 4, mlx_lm/lora.py:60; the PyTorch stacks:
    1); length, rank, trained blocks and quantisation are the stack's (Stack.seq_len … quant_mode, each cited there).
    ValueError for an unknown stack."""
    if stack is None or stack == AUTO_STACK:
        stack = default_stack(device is not None and device.kind == "unified", trainer)
    caps = get_stack(stack)
    from_trainer = trainer != "sft" and trainer in TRAINERS
    return RunDefaults(stack=caps.id, trainer=trainer, batch=default_batch(caps, trainer), seq_len=caps.seq_len,
                       lora_rank=caps.lora_rank, lora_layers=caps.lora_layers, quant_mode=caps.quant_mode,
                       batch_from="trainer" if from_trainer else "stack")


def check_stack_setup(setup: TrainingSetup) -> None:
    """ValueError with the reason when the setup asks the stack for something it cannot do: run on this backend,
    a quantisation of another framework, DoRA, adapters on the last N blocks, an optimizer it lacks, or (on MLX)
    the PyTorch-only switches. Model-independent; the estimate checks the rest against the model."""
    if setup.stack is None:
        return
    stack = get_stack(setup.stack)
    check_stack_backend(stack.backend_refusals, stack.label, setup.backend)
    mode = QUANT_MODES[setup.quant_mode]
    opt = OPTIMIZERS[setup.optimizer]
    if stack.framework == "mlx":
        _check_mlx(setup, stack)
    else:
        if mode.framework != stack.quantizer:
            raise ValueError(Text(N_("{mode} is an MLX quantisation; the {stack} stack quantises with bitsandbytes "
                                     "NF4 (choose --quant nf4, or the MLX-LM stack)"), mode=mode.id, stack=stack.label))
        if opt.mlx_only:
            raise ValueError(Text(N_("{optimizer} is mlx-lm's optimizer; the {stack} stack builds torch or "
                                     "bitsandbytes optimizers"), optimizer=Text(opt.label), stack=stack.label))
        if setup.dora and not stack.dora:
            raise ValueError(Text(N_("DoRA is modelled for the MLX-LM stack only: PEFT's use_dora adds per-layer "
                                     "weight-norm terms this estimate does not count for {stack}"), stack=stack.label))
        if setup.lora_layers and stack.no_layer_selection:
            raise ValueError(Text(N_("--lora-layers needs per-layer LoRA: {why}"), why=Text(stack.no_layer_selection)))
        if setup.lora_layers and setup.method == "full" and not stack.full_trains_last_layers:
            raise ValueError(Text(N_("--lora-layers selects the blocks that carry adapters; full fine-tuning on the "
                                     "{stack} stack trains every layer"), stack=stack.label))
        if setup.backend == "metal":
            _check_mps(setup)


def _check_mps(setup: TrainingSetup) -> None:
    """What PyTorch's MPS backend lacks (options.backends)."""
    opt = OPTIMIZERS[setup.optimizer]
    if opt.state_dtype == "8bit":
        raise ValueError(Text(N_("{optimizer} on a Mac: {why}"), optimizer=Text(opt.label), why=Text(MPS_NO_8BIT_OPTIMIZER)))
    if opt.paged:
        raise ValueError(Text(N_("{optimizer} on a Mac: {why}"), optimizer=Text(opt.label), why=Text(MPS_NO_PAGED)))
    if loss_impl_id(setup) in ("liger", "cce"):
        raise ValueError(Text(N_("the fused loss on a Mac: {why}"), why=Text(MPS_NO_TRITON)))


def _check_mlx(setup: TrainingSetup, stack: Stack) -> None:
    """What mlx_lm lora cannot be asked for."""
    opt = OPTIMIZERS[setup.optimizer]
    if not opt.mlx_name:
        raise ValueError(Text(N_("mlx-lm's --optimizer offers adam, adamw, muon, sgd and adafactor "
                                 "(mlx_lm/lora.py:49-56); {optimizer} is not one of them"), optimizer=Text(opt.label)))
    if setup.method == "qlora" and QUANT_MODES[setup.quant_mode].framework != stack.quantizer:
        raise ValueError(Text(N_("bitsandbytes NF4 does not run under MLX: an MLX QLoRA base is quantised by MLX "
                                 "(--quant affine, mxfp4, nvfp4 or mxfp8)")))
    if setup.precision == "mixed" and not stack.mixed_precision:
        raise ValueError(Text(N_("mlx-lm has no mixed precision: the model trains in its checkpoint's dtype "
                                 "(choose bf16, fp16 or fp32)")))
    if setup.attention != "sdpa":
        raise ValueError(Text(N_("mlx-lm runs its own attention (mx.fast.scaled_dot_product_attention, unfused in "
                                 "training); the attention switch is for the PyTorch stacks")))
    for name, on in (("--gpus > 1", setup.gpus > 1), ("--sharding", setup.sharding != "none"),
                     ("--offload-optimizer", setup.offload_optimizer), ("--offload-activations",
                                                                         setup.offload_activations),
                     ("--image-tokens", bool(setup.image_tokens)), ("--train-tower", setup.train_tower)):
        if on:
            raise ValueError(Text(N_("{flag} is not modelled for the {stack} stack (one device, text models, "
                                     "nothing offloaded)"), flag=name, stack=stack.label))


def resolve_setup(stack_id: str = DEFAULT_STACK, trainer: str = "sft", *, versions: Versions | None = None,
                  installed: Installed | str | None = None, pins: Iterable[str] = (), stack_given: bool = True,
                  **settings: Any) -> TrainingSetup:
    """The effective setup: every setting given (not None) wins; every other stack setting (STACK_FIELDS and the
    run's size, STACK_SIZE_FIELDS) comes from the stack, the batch from a preference/RL trainer's own default
    (`default_batch`). The result records the stack and which fields came from it (TrainingSetup.from_stack).

    The releases installed (issue 28): `installed` (the text of `pip freeze` / `pip list`, or its parse) and `pins`
    (`PKG==VERSION` strings, which win over the list) are resolved against the stack (job.versions.resolve_versions;
    `stack_given=False` when the user did not choose the stack, so a list of a framework no stack models is refused),
    or `versions` is such a resolution already (for this stack). A stack default an older release had otherwise
    (Stack.version_defaults: TRL's checkpointing, loss, QLoRA preparation, the Trainer's AdamW) is that release's,
    and the setup keeps the versions (TrainingSetup.versions; none given: None, the newest releases).

    Raises ValueError for an unknown stack, a loss the stack does not offer, offloading without checkpointing
    asked for explicitly, a package list or pin resolve_versions refuses, or anything check_stack_setup refuses."""
    stack = get_stack(stack_id)
    if installed is not None or pins:
        if versions is not None:
            raise TypeError("give resolve_setup the versions or a package list and pins, not both")
        versions = resolve_versions(stack.id, installed, pins, stack_given=stack_given)
    elif versions is not None and versions.stack != stack.id:
        raise ValueError(Text(N_("the installed versions were read for the {other} stack; read them again for the "
                                 "{stack} stack"), other=get_stack(versions.stack).label, stack=stack.label))
    known = {f.name for f in fields(TrainingSetup)} - {"stack", "from_stack", "versions"}
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
            values[name] = _stack_value(stack, name, method, versions, trainer)
        from_stack.append(name)
    run = default_settings(stack.id, trainer=trainer)  # the one source of the run's size (the app reads it too)
    for name in STACK_SIZE_FIELDS:
        if name in given:
            continue
        values[name] = getattr(run, name)
        from_stack.append(name)
    if "backend" not in given and stack.backend != DEFAULT_BACKEND:
        # the stack's own backend when no device names one (Stack.backend): MLX is "an array framework for machine
        # learning on Apple silicon" (ml-explore/mlx README), so an mlx-lm run is a Mac's (Metal); its CUDA backend
        # needs an NVIDIA device or --backend cuda
        values["backend"] = stack.backend
    quant = QUANT_MODES.get(values["quant_mode"])
    if quant is not None:  # bits and group size follow the mode unless given (TrainingSetup checks them)
        values.setdefault("quant_bits", quant.bits[0])
        values.setdefault("quant_group", quant.groups[0])
    if values.get("offload_activations") and not values.get("grad_ckpt"):
        raise ValueError(Text(N_("activation offloading needs gradient checkpointing (it offloads the checkpointed "
                                 "layer inputs); turn checkpointing on or offloading off")))
    stack.loss_impl(values["loss"])  # raises when the stack cannot do this loss
    if values.get("dora") and method == "full":
        raise ValueError(Text(N_("DoRA decomposes LoRA adapters; full fine-tuning has none (use lora or qlora)")))
    for name in ("compile", "optimizer_in_bwd"):
        if values.get(name) and not getattr(stack, name):  # Stack.compile, Stack.optimizer_in_bwd
            raise ValueError(Text(N_("'{name}' is modelled for the torchtune stack only (its recipes' compile and "
                                     "optimizer_in_bwd switches); choose --stack torchtune or leave it off"),
                                  name=name))
    setup = TrainingSetup(stack=stack.id, from_stack=tuple(from_stack), versions=versions, **values)
    check_stack_setup(setup)
    return setup


def with_method(setup: TrainingSetup, method: str) -> TrainingSetup:
    """The same setup trained another way. A stack's defaults can depend on the method (TRL: fp32 LoRA
    adapters, bf16 ones on a 4-bit base), so the values the stack chose are chosen again for this method;
    the user's own choices are kept."""
    if setup.stack is None:
        return replace(setup, method=method)
    given = {f.name: getattr(setup, f.name) for f in fields(setup)
             if f.name not in setup.from_stack and f.name not in ("stack", "from_stack")}
    if method == "full":  # the adapters' own choices do not carry over: full fine-tuning has no adapters (the
        given.pop("dora", None)  # MLX-LM stack keeps --num-layers: it trains the last N blocks in full too)
        if not get_stack(setup.stack).full_trains_last_layers:
            given.pop("lora_layers", None)
    if method != "full":  # torchtune's LoRA recipes have no optimizer_in_bwd (lora_finetune_single_device.py)
        given["optimizer_in_bwd"] = False
    # the batch does not depend on the method: a default one stays (a trainer's own, GRPO's 8, included), still
    # marked as the default
    kept = {"batch": setup.batch} if "batch" in setup.from_stack else {}
    changed = resolve_setup(setup.stack, **{**given, **kept, "method": method})
    if not kept:
        return changed
    order = STACK_FIELDS + STACK_SIZE_FIELDS
    return replace(changed, from_stack=tuple(f for f in order if f in changed.from_stack or f in kept))


def with_versions(setup: TrainingSetup, versions: Versions | None, trainer: str = "sft") -> TrainingSetup:
    """The same setup on other installed releases (None: the newest): the values the stack chose are chosen again for
    those releases (Stack.version_defaults), the user's own choices are kept. `trainer`: the trainer the setup runs
    (a stack default may depend on it: TRL's QLoRA preparation for DPO and KTO)."""
    if setup.stack is None:
        return setup
    given = {f.name: getattr(setup, f.name) for f in fields(setup)
             if f.name not in setup.from_stack and f.name not in ("stack", "from_stack", "versions")}
    return resolve_setup(setup.stack, trainer, versions=versions, **given)


def attention_impl(setup: TrainingSetup, family: str) -> str:
    """The attention the run really uses: "sdpa" becomes "eager" for a family transformers cannot run with SDPA,
    on a stack that loads the model through transformers (Stack.transformers_attention)."""
    stack_dispatch = setup.stack is None or get_stack(setup.stack).transformers_attention
    if setup.attention == "sdpa" and family in NO_SDPA_FAMILIES and stack_dispatch:
        return "eager"
    if setup.backend == "metal":  # PyTorch on MPS trains SDPA through the math path (options.backends.MPS_ATTENTION)
        return "eager"
    return setup.attention


def loss_impl_id(setup: TrainingSetup) -> str:
    """Which implementation the estimate counts for this setup's loss kind."""
    if setup.stack is not None:
        return get_stack(setup.stack).loss_impl(setup.loss)
    return LOSSES[setup.loss].default_impl


def setup_json(setup: TrainingSetup) -> dict[str, Any]:
    """Every effective value of the setup, for the JSON echo: the user sees what was assumed."""
    doc: dict[str, Any] = {f.name: getattr(setup, f.name) for f in fields(TrainingSetup) if f.name != "versions"}
    doc = {k: (list(v) if isinstance(v, tuple) else v) for k, v in doc.items()}
    if setup.versions is not None:  # the releases the estimate modelled, when the user gave any (issue 28)
        doc["versions"] = setup.versions.as_json()
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
    'TRL 1.16.0: checkpointing on (stack) · loss: TRL fused chunked LM head (stack) · AdamW (fused) (stack)'; with
    releases given, the stack's packages at the releases priced ('TRL (trl 0.21.0, transformers 4.57.6, …): …')."""
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
    if setup.lora_layers:
        parts.append(mark("lora_layers", _("last {n} layers").format(n=setup.lora_layers)))
    if setup.method == "qlora" and get_stack(setup.stack).quantizer == "mlx":
        parts.append(mark("quant_mode", f"{setup.quant_mode} {setup.quant_bits}-bit, group {setup.quant_group}"))
    elif setup.method == "qlora":
        parts.append(mark("qlora_prep", _(QLORA_PREPS[setup.qlora_prep].label)))
    head = get_stack(setup.stack).version if setup.stack else _("Explicit settings")
    if setup.versions is not None:  # the releases given (issue 28), every package of the stack at its resolved release
        head = f"{label} (" + ", ".join(f"{name} {version}" for name, version in setup.versions.packages) + ")"
    return f"{head}: " + " · ".join(parts)
