"""The shared sidebar and the live part every page runs in (live_page). Widgets live in the sidebar, are keyed,
and are bound to the URL (bind="query-params"), so any view is a shareable link and survives page switches.
Invalid URL values fall back to defaults with a visible note; nothing from the URL or an uploaded file is ever
rendered as HTML or Markdown.

The parts, each in its own module, imported in one direction (none imports this one): ui/params.py (the
table of URL parameters), ui/url_state.py (the address: notes, page switches, the share link), ui/text.py
(plain text, notes, presentation), ui/values.py (Inputs, TrainerBox), ui/trainer_inputs.py (the Trainer box),
ui/model_box.py (the Model section), ui/sliders.py (size, batch, max length)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, TypeVar

import streamlit as st

from estimator import (
    Device,
    ModelSpec,
    TrainingSetup,
    find_devices,
    generic_spec,
    get_device,
    load_preset,
)
from estimator.i18n import _, localised_error, set_language
from estimator.job.settings import from_widgets, key_of
from estimator.job.stack import default_settings, resolve_setup, setup_summary
from estimator.job.tower import check_tower
from estimator.job.versions import Versions
from estimator.memory.adapters import lora_targets
from estimator.memory.price import check_model
from estimator.options.backends import device_backend
from estimator.options.stacks import DEFAULT_STACK, STACKS, UNIFIED_STACK, get_stack
from ui.config_box import draw_config_box
from ui.lang import language_switch
from ui.model_box import DEFAULT_MODEL, draw_model_section
from ui.model_box import model_options as model_options  # re-exported: tests read it here
from ui.params import AUTO, CUSTOM, TABLE, device_for, help_text, typed, widget
from ui.params import CKPT_CHOICES as CKPT_CHOICES  # re-exported: pages and tests read it here
from ui.sliders import MAX_LEN_MAX as MAX_LEN_MAX  # re-exported: pages and tests read them here
from ui.sliders import POW2_LENGTHS as POW2_LENGTHS
from ui.sliders import SIZE_STEPS as SIZE_STEPS
from ui.sliders import draw_batch_and_length, draw_size, slider_values, typed_size
from ui.text import PRESENT_CSS, plain
from ui.trainer_inputs import draw_trainer_box
from ui.url_state import DEFAULTS as DEFAULTS  # re-exported: tests read them here
from ui.url_state import PAGE_PARAMS as PAGE_PARAMS
from ui.url_state import PARAMS as PARAMS
from ui.url_state import (
    RUN_DEFAULTS,
    follow_run_defaults,
    held,
    held_run_defaults,
    link_notes_due,
    read_link,
    remember_inputs,
)
from ui.values import Inputs, TrainerBox
from ui.versions_box import Releases, draw_versions_box

# Names other modules and tests read; each is the table's value (ui/params.py), not a second copy.
BATCH_MAX = int(TABLE["batch"].high)  # type: ignore[arg-type]
RANKS: tuple[int, ...] = TABLE["rank"].choices
LOSS_CHOICES: tuple[str, ...] = TABLE["loss"].choices
OPTIMIZER_CHOICES: tuple[str, ...] = TABLE["optimizer"].choices

_FIND_NOTE = "_device_find_note"
_SLIDERS_RERAN = "_sliders_reran"  # the live part reran once because a slider's widget disagreed with its value


def _find_device() -> None:
    """The 'Find a device' box: point the Device selectbox at the best catalog match (estimator.find_devices)."""
    query = str(st.session_state.get("device_find", "")).strip()
    if not query:
        st.session_state[_FIND_NOTE] = ""
        return
    matches = find_devices(query)
    if matches:
        st.session_state["device"] = matches[0].id
        others = ", ".join(d.name for d in matches[1:4])
        st.session_state[_FIND_NOTE] = _("Found {device}").format(device=matches[0].name) + (
            _(" (also: {others})").format(others=others) if others else "")
    else:
        st.session_state[_FIND_NOTE] = _("No device matches '{query}'.").format(query=query[:40])


def _leave_legacy_pages_mode() -> None:
    """A deep link (/compare) on a freshly started server: Streamlit serves it straight from pages/ with file-name
    navigation until some session has run app.py's st.navigation (streamlit 1.67: PagesManager sets
    uses_pages_directory when a pages/ folder sits next to the main script, script_runner.py runs _mpa_v1 while it
    is set, and commands/navigation.py clears it). Clear it as st.navigation would and rerun, so app.py's
    navigation serves this page too."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


@dataclass(frozen=True)
class _Drawn:
    """What the full run's widgets decided (everything but the sliders, which the live part draws), and where
    the live part draws into the sidebar: the sliders' slots and the resolved-setup line at its end."""

    language: str
    link_notes: tuple[str, ...]  # about the address's values: shown once, by the run that read them
    notes: tuple[str, ...]  # about the settled inputs (an upload, a Hub id…): shown on every run
    choice: str
    spec: ModelSpec | None  # None for 'by-size': the live part builds it from the size slider
    settings: dict[str, object]  # resolve_setup's arguments, except batch and max length
    stack_id: str
    targets_text: str
    device: Device
    host_ram: float | None
    rule_on: bool
    present: bool
    size_slot: Any
    length_slot: Any
    summary_slot: Any
    trainer_box: TrainerBox
    run_defaults: dict[str, Any]  # the batch and rank defaults of this run (job.stack.default_settings)
    releases: Releases  # the releases installed (ui/versions_box.py), for the setup
    page: Any = None  # what the page's own sidebar box returned (live_page's `sidebar`)


# ---- the full run: the settled part of the sidebar ----------------------------------------------------------

def _multimodal_inputs(sb: Any, named: ModelSpec, notes: list[str]) -> dict[str, Any]:
    """Image tokens and the vision tower by their keys, for multimodal wrappers only (image tokens lengthen the
    language model's sequence); a text model notes a link's values for them instead."""
    if named.tower_kind:
        return {"images": widget("images", sb), "tower": widget("tower", sb)}
    if st.query_params.get("images", "0") not in ("0", ""):
        notes.append(_("Image tokens apply to multimodal models only; {model} is a text model, so the link's "
                       "'images' value is not used.").format(model=named.name))
    if st.query_params.get("tower", "false") not in ("false", ""):
        notes.append(_("Training the vision tower applies to multimodal models only; {model} is a text model, "
                       "so the link's 'tower' value is not used.").format(model=named.name))
    return {"images": 0, "tower": False}


@dataclass(frozen=True)
class _Training:
    """The training section's choices: resolve_setup's arguments but batch and max length, the stack, the LoRA
    targets as typed, and the slot kept for batch and max length."""

    settings: dict[str, object]
    stack_id: str
    targets_text: str
    length_slot: Any


def effective_stack(stack_choice: str, device: Device, trainer: str = "sft") -> str:
    """The stack a choice means on this device: 'auto' is the estimator's default (job.stack.default_settings, as
    the CLI's: MLX-LM for SFT on a unified-memory Apple device, TRL elsewhere and for the preference/RL trainers); a
    named stack is itself."""
    return default_settings(stack_choice if stack_choice in STACKS else None, device, trainer).stack


def _stack_chosen() -> None:
    """When the user picks a stack, its own run size comes with it (mlx-lm: batch 4, rank 8; a GRPO run: batch 8):
    the batch and rank controls move to the run's defaults (job.stack.default_settings), which the user can then
    change."""
    choice = st.session_state.get("stack")
    if choice in STACKS:
        trainer = held("trainer")
        run = default_settings(choice, trainer=str(trainer) if trainer in TABLE["trainer"].choices else "sft")
        # forgotten, the two controls are drawn again at the run's defaults (no Session State API write: Streamlit
        # would warn that a widget with a default had its value set that way)
        st.session_state.pop(key_of("batch"), None)
        st.session_state.pop(key_of("lora_rank"), None)
        st.session_state[RUN_DEFAULTS] = {key_of("batch"): run.batch, key_of("lora_rank"): run.lora_rank}


def _draw_training_section(sb: Any, named: ModelSpec, notes: list[str], held_defaults: dict[str, Any]) -> _Training:
    """Method, stack, precision, a slot for batch and max length, images, checkpointing and the two expanders
    (optimizer, loss, attention, LoRA; GPUs and sharding). The controls' values, by their keys, become the settings
    by their names through the settings table (estimator/job/settings.py). `held_defaults`: the run's batch and
    rank defaults (job.stack.default_settings)."""
    values: dict[str, Any] = {}

    def draw(key: str, container: Any = None, **overrides: Any) -> Any:
        values[key] = typed(key, widget(key, container, **overrides))
        return values[key]

    method = draw("method", sb)
    stack_id = widget("stack", sb, on_change=_stack_chosen)
    sb.caption(plain(get_stack(str(stack_id)).version if stack_id in STACKS else
                     _("auto: MLX-LM on an Apple device, TRL elsewhere")))
    draw("precision", sb)
    length_slot = sb.container()  # batch and max length (ui/sliders.py)
    values.update({key: typed(key, value) for key, value in _multimodal_inputs(sb, named, notes).items()})
    draw("ckpt", sb)
    lora_off = method == "full"
    caps = STACKS.get(str(stack_id))  # the switches the chosen stack has (Stack.compile, Stack.optimizer_in_bwd)
    can_compile = caps is not None and caps.compile
    can_step_in_bwd = caps is not None and caps.optimizer_in_bwd
    with sb.expander(_("Optimizer, loss, attention, LoRA")):
        for key in ("optimizer", "loss", "attn"):
            draw(key)
        draw("rank", disabled=lora_off, default=held_defaults["rank"])
        targets_text = widget("targets", disabled=lora_off,
                              help=_("'all-linear' or names: {names}").format(names=", ".join(named.linear_names())))
        draw("lora_layers")
        draw("dora", disabled=lora_off)
        draw("quant", disabled=method != "qlora")
        draw("dq", disabled=method != "qlora")
        draw("compile", disabled=not can_compile)
        draw("in_bwd", disabled=not can_step_in_bwd or method != "full")
    with sb.expander(_("GPUs and sharding")):
        draw("gpus")
        sharding = draw("sharding")
        draw("accum")
        draw("opt_offload")
        draw("offload_params", disabled=sharding != "zero3")
    settings = from_widgets(values)
    if settings["offload_params"] and sharding != "zero3":
        notes.append(_("Parameter offload needs sharding zero3; it is off until you choose zero3."))
        settings["offload_params"] = False
    # what the controls that are off leave to the stack: DoRA without adapters, the NF4 base's double quantisation
    # without QLoRA, the compile and optimizer-in-backward switches on a stack without them (Stack.compile,
    # Stack.optimizer_in_bwd; the latter for full fine-tuning only)
    settings["dora"] = settings["dora"] and not lora_off
    if method != "qlora":
        settings["nf4_double_quant"] = None
    if not can_compile:
        settings["compile"] = None
    if not (can_step_in_bwd and method == "full"):
        settings["optimizer_in_bwd"] = None
    _settle_scale(settings, notes)
    return _Training(settings, str(stack_id) if stack_id in STACKS else AUTO, str(targets_text), length_slot)


def _settle_scale(settings: dict[str, object], notes: list[str]) -> None:
    """Combinations the setup refuses, set aside with a note (the page keeps working): the optimizer step in
    backward with gradient accumulation (torchtune's recipes raise), optimizer offload over several GPUs without
    sharding (estimator.job.setup)."""
    if settings["optimizer_in_bwd"] and int(settings["grad_accum"]) > 1:  # type: ignore[call-overload]
        notes.append(_("The optimizer step in backward needs gradient accumulation 1 (torchtune refuses both); "
                       "shown without it."))
        settings["optimizer_in_bwd"] = False
    if settings["offload_optimizer"] and settings["sharding"] == "none" and int(settings["gpus"]) > 1:  # type: ignore[call-overload]
        notes.append(_("Optimizer offload over several GPUs needs ZeRO or FSDP sharding; shown without it."))
        settings["offload_optimizer"] = False


_DEVICE_PICK = "device_pick"  # the Device picker a visitor sees (names); the link's `device` widget keeps the id
_HIDE_LINK_DEVICE = "<style>.st-key-device { display: none; }</style>"


def _picked_device() -> None:
    """The visible picker moved: the link's `device` widget (the catalog id, bound to the address) follows."""
    st.session_state["device"] = st.session_state[_DEVICE_PICK]


def _device_names() -> dict[str, str]:
    """What the Device picker shows for each option, in this run's language: the device's name (the option itself,
    its id, is the link's value). Read from a dict, not worked out when Streamlit (or a test) formats an option."""
    return {choice: _("Custom capacity") if choice == CUSTOM else get_device(choice).name
            for choice in TABLE["device"].choices}


def _draw_device_section(sb: Any) -> Device:
    """The 'Find a device' box, the Device picker (names shown, ids in the link) and a custom device's capacity and
    kind: drawn right under the model, where a visitor looks first."""
    sb.text_input(_("Find a device"), key="device_find", on_change=_find_device, max_chars=60,
                  placeholder="4090, H100, MacBook 36 GB…",
                  help=_("Type a card's or a Mac's name, a nickname or its memory: the Device box below jumps to the "
                         "first match."))
    if st.session_state.get(_FIND_NOTE):
        sb.caption(plain(st.session_state[_FIND_NOTE]))
    # A selectbox bound to the address writes the label it shows there (streamlit 1.67 SelectboxSerde: the
    # format_func's text), so the bound `device` widget shows ids and stays hidden; the picker shows the names and
    # moves it (a link keeps `device=rtx-4090`, whatever the language).
    # Its options start with the default: Streamlit then sees no default index (0) and does not log "created with
    # a default value but also had its value set via the Session State API" when the find box, the picker or the
    # Out-of-memory page's buttons set it (streamlit/elements/lib/policies.py check_session_state_rules; a default
    # at index 0 is passed as None). The link's default is the same, so a default device still leaves the address.
    row = TABLE["device"]
    device_choice = widget("device", sb, options=[row.default, *(c for c in row.choices if c != row.default)])
    sb.html(_HIDE_LINK_DEVICE)
    names = _device_names()
    st.session_state[_DEVICE_PICK] = device_choice  # before the picker is drawn: it shows the link's device
    sb.selectbox(_(row.label), list(names), format_func=names.__getitem__, key=_DEVICE_PICK,
                 on_change=_picked_device, help=help_text(row))
    capacity = widget("capacity", sb, disabled=device_choice != CUSTOM)
    kind = widget("kind", sb, disabled=device_choice != CUSTOM)
    return device_for(device_choice, capacity, kind)


def _draw_host_ram(sb: Any, device: Device) -> float | None:
    """The machine's RAM, in bytes: None when not given, or on unified memory where the device's RAM is the
    machine's."""
    unified = device.kind == "unified"
    ram = widget("host_ram", sb, disabled=unified)
    if unified:
        sb.caption(plain(_("On unified memory the machine's RAM is the device's: the GPU side and the host side "
                           "add up against it.")))
    return float(ram) * 1e9 if ram and not unified else None


def _draw_settled(page_box: Callable[[Any, Device], Any] | None = None) -> _Drawn:
    """The sidebar's widgets that change the page's structure (model, method, stack, device, options…): a change
    reruns the whole page. The sliders go into slots kept free for the live part (_draw_sliders). `page_box(sidebar,
    device)`: a page's own box, drawn last (the calculator's run time and cost)."""
    _leave_legacy_pages_mode()
    code = language_switch()  # lang=es|en (ui/lang.py): before any text this page draws
    link_notes = read_link()  # the link's notes; the last page's inputs after a page switch
    # batch and rank default to the run the CLI would give for this stack, device and trainer (job.stack.
    # default_settings); a value still at the last run's default follows a change of device, stack or trainer
    run_defaults = held_run_defaults()
    follow_run_defaults(run_defaults)
    notes: list[str] = []
    sb = st.sidebar
    sb.header(_("Your setup"))
    draw_config_box(sb)  # before the widgets it sets (its callbacks run before this run's widgets)
    rule_on = widget("rule", sb)
    choice, size_slot, spec = draw_model_section(sb, notes)  # spec stays None for 'by-size' (the live part's)
    device = _draw_device_section(sb)  # the device right under the model: the two things a visitor brings
    # For the controls below (LoRA's names, a tower's): a by-size model is the generic decoder of the typed size.
    named = spec if spec is not None else generic_spec(typed_size())
    training = _draw_training_section(sb, named, notes, run_defaults)
    trainer = str(held("trainer"))  # the Trainer box is drawn last; its value (or the link's) is known
    releases = draw_versions_box(sb, effective_stack(training.stack_id, device, trainer), training.stack_id in STACKS)
    host_ram = _draw_host_ram(sb, device)
    present = widget("present", sb)
    if present:
        st.html(PRESENT_CSS)
    summary_slot = sb.container()  # the resolved setup's line (_draw_sliders)
    trainer_box = draw_trainer_box()  # the sidebar's last shared section
    page = page_box(sb, device) if page_box is not None else None
    return _Drawn(language=code, link_notes=tuple(link_notes), notes=tuple(notes), choice=choice, spec=spec,
                  settings=training.settings, stack_id=training.stack_id, targets_text=training.targets_text,
                  device=device, host_ram=host_ram, rule_on=bool(rule_on), present=bool(present), size_slot=size_slot,
                  length_slot=training.length_slot, summary_slot=summary_slot, trainer_box=trainer_box,
                  run_defaults=run_defaults, releases=releases, page=page)


# ---- the live part: the sliders' values, then the setup they complete ----------------------------------------

def _live_model(drawn: _Drawn, size: float, notes: list[str]) -> ModelSpec:
    """The model: the settled one, or for 'by-size' the generic decoder of the slider's size."""
    if drawn.spec is not None:
        return drawn.spec
    try:
        return generic_spec(float(size))
    except ValueError as exc:
        spec = load_preset(DEFAULT_MODEL)
        notes.append(_("A generic {size}B model could not be built ({error}); showing {model}.").format(
            size=size, error=localised_error(exc), model=spec.name))
        return spec


def _live_setup(drawn: _Drawn, spec: ModelSpec, batch: int, max_len: int, notes: list[str]) -> TrainingSetup:
    """The settled settings with the sliders' batch and max length, resolved by the stack; each fallback noted."""
    targets: tuple[str, ...] = ("all-linear",)
    if drawn.settings["method"] != "full":
        try:
            targets = lora_targets(spec, drawn.targets_text)
        except ValueError as exc:
            notes.append(_("LoRA targets: {error}. Using all-linear.").format(error=localised_error(exc)))
            targets = ("all-linear",)
    stack_id = effective_stack(drawn.stack_id, drawn.device, drawn.trainer_box.trainer)
    settings = {**drawn.settings, **from_widgets({"batch": int(batch), "max_len": int(max_len)}),
                "lora_targets": targets, "backend": device_backend(drawn.device)}
    trainer = drawn.trainer_box.trainer  # a stack default an older release had may be the trainer's (TRL's DPO)
    versions = drawn.releases.for_stack(stack_id)  # the releases installed (ui/versions_box.py; None: the newest)
    # The run's size at the stack's own values is left to the stack, as the CLI leaves an absent flag: the setup
    # then records them as the stack's (TrainingSetup.from_stack), and the page says "batch 4 · MLX-LM default"
    # rather than "your choice" (estimator/advice/assumptions.py). The same values, the same estimate.
    own = _stack_size(stack_id, trainer, versions, settings["backend"])
    settings = {k: v for k, v in settings.items() if not (k in own and own[k] == v)}
    try:
        setup = resolve_setup(stack_id, trainer, versions=versions, **settings)
    except ValueError as exc:
        # the stack's own choices for what it refused (its loss, optimizer, quantisation; MLX-LM's attention,
        # one device, no offloading), the user's batch, length, method and rank kept
        notes.append(_("{error}. Using the stack's own settings for it.").format(error=localised_error(exc)))
        keep = {k: settings[k] for k in ("method", "precision", "batch", "seq_len", "lora_rank", "lora_targets",
                                          "lora_layers", "backend") if k in settings}
        if not get_stack(stack_id).mixed_precision and keep["precision"] == "mixed":
            keep["precision"] = "bf16"
        try:
            setup = resolve_setup(stack_id, trainer, versions=versions, **keep)
        except ValueError as exc2:  # the stack cannot run here at all (MLX-LM on ROCm, Unsloth on a Mac)
            fallback = effective_stack(AUTO, drawn.device, drawn.trainer_box.trainer)
            notes.append(_("Setup not valid ({error}); using {stack}'s defaults.").format(
                error=localised_error(exc2), stack=get_stack(fallback).label))
            setup = resolve_setup(fallback, backend=keep["backend"])
    if setup.train_tower:
        try:
            check_tower(spec, setup)
        except ValueError as exc:
            notes.append(_("{error}. Using a frozen tower.").format(error=localised_error(exc)))
            setup = replace(setup, train_tower=False)
    return setup


@lru_cache(maxsize=64)
def _stack_size(stack_id: str, trainer: str, versions: Versions | None, backend: str | None) -> dict[str, int]:
    """The batch, max length and LoRA rank a stack gives by itself for this trainer and these releases
    (job.stack.resolve_setup without them); none when the stack cannot run on this backend (the caller's fallbacks
    say why)."""
    try:
        own = resolve_setup(stack_id, trainer, versions=versions, backend=backend)
    except ValueError:
        return {}
    return {"batch": own.batch, "seq_len": own.seq_len, "lora_rank": own.lora_rank}


def _fit_to_model(spec: ModelSpec, setup: TrainingSetup, notes: list[str], releases: Releases | None = None
                  ) -> tuple[ModelSpec, TrainingSetup]:
    """What this model allows of the setup, each change noted: no more LoRA layers than it has; another stack when
    this one cannot train it (MLX-LM: a mixture-of-experts or other unmodelled family → TRL; an MLX-quantised
    checkpoint on a PyTorch stack → MLX-LM); failing both, the checkpoint priced unquantised."""
    if setup.lora_layers > spec.num_layers and "lora_layers" not in setup.from_stack:
        notes.append(_("LoRA layers: {model} has {layers} decoder layers, not {n}; training all of them.").format(
            model=spec.name, layers=spec.num_layers, n=setup.lora_layers))
        setup = replace(setup, lora_layers=spec.num_layers)
    try:
        check_model(spec, setup)
        return spec, setup
    except ValueError as exc:
        # the other framework's default: TRL for a model MLX-LM cannot train, MLX-LM for an MLX-quantised checkpoint
        other = DEFAULT_STACK if get_stack(setup.stack).framework == "mlx" else UNIFIED_STACK
        keep = {k: getattr(setup, k) for k in ("method", "batch", "seq_len", "lora_rank", "lora_targets", "backend")}
        try:
            alt = resolve_setup(other, versions=releases.for_stack(other) if releases else None, **keep)
            check_model(spec, alt)
            notes.append(_("{error}. Using the {stack} stack.").format(error=localised_error(exc),
                                                                       stack=get_stack(other).label))
            return spec, alt
        except ValueError:
            pass
        try:
            check_model(replace(spec, quantization=None), setup)
            notes.append(_("{error}. Priced as its unquantised weights.").format(error=localised_error(exc)))
            return replace(spec, quantization=None), setup
        except ValueError:
            fallback = load_preset(DEFAULT_MODEL)  # a dense decoder every stack trains
            notes.append(_("{error}. Showing {model}.").format(error=localised_error(exc), model=fallback.name))
            return fallback, replace(setup, lora_layers=min(setup.lora_layers, fallback.num_layers))


def _live_inputs(drawn: _Drawn, values: tuple[float, int, int]) -> Inputs:
    """The page's inputs from the settled sidebar and the sliders' values (read before the sliders are drawn)."""
    set_language(drawn.language)  # a fragment's rerun does not pass through app.py or the switch
    # The link's notes once, with the full run that read the link; a slider's fragment rerun repeats the rest.
    first = link_notes_due()
    notes = list(drawn.link_notes + drawn.notes if first else drawn.notes)
    box = drawn.trainer_box if first else replace(drawn.trainer_box, notes=())
    size, batch, max_len = values
    spec = _live_model(drawn, size, notes)
    spec, setup = _fit_to_model(spec, _live_setup(drawn, spec, batch, max_len, notes), notes, drawn.releases)
    return Inputs(model=spec, setup=setup, device=drawn.device, rule="seed" if drawn.rule_on else None,
                  presentation=drawn.present, notes=tuple(notes), model_choice=drawn.choice, trainer_box=box,
                  host_ram_bytes=drawn.host_ram, page=drawn.page)


def _draw_sliders(drawn: _Drawn, setup: TrainingSetup, values: tuple[float, int, int]) -> None:
    """The sliders into their sidebar slots, the resolved setup's line, and this run's inputs remembered for the
    next page switch. Should a widget return other than the value read for it (a link value Streamlit reads
    differently), the page is drawn again once, from the widgets' values."""
    size = draw_size(drawn.size_slot, drawn.choice)
    batch, max_len = draw_batch_and_length(drawn.length_slot, int(drawn.run_defaults["batch"]))
    drawn.summary_slot.caption(plain(setup_summary(setup)))
    remember_inputs()
    if (float(size), batch, max_len) != (float(values[0]), values[1], values[2]) \
            and not st.session_state.get(_SLIDERS_RERAN):
        st.session_state[_SLIDERS_RERAN] = True
        st.rerun()
    st.session_state[_SLIDERS_RERAN] = False


T = TypeVar("T")


def live_page(answer: Callable[[Inputs], T] | None = None, rest: Callable[[Inputs, T | None], None] | None = None,
              sidebar: Callable[[Any, Device], Any] | None = None) -> None:
    """Every page: draw the shared sidebar, then, in a fragment, the page's answer first (`answer(inputs)`: the
    verdict, the chart), the sliders into their sidebar slots, and the rest of the page (`rest(inputs, what
    answer returned)`). The sliders' values are read from Session State before they are drawn, so a slider's
    rerun sends the answer's new verdict and chart before anything else. Moving a slider reruns only the
    fragment (the rest of the sidebar is not sent again); any other input reruns the whole page, which draws
    the fragment again with the new settings. Never raises for bad input: notes say what was replaced.
    `sidebar(st.sidebar, device)`, when given, draws the page's own box at the sidebar's end (outside the
    fragment: a slider's rerun does not send it again); what it returns is `inputs.page`."""
    drawn = _draw_settled(sidebar)

    @st.fragment
    def live() -> None:
        values = slider_values()
        inputs = _live_inputs(drawn, values)
        shown = answer(inputs) if answer is not None else None
        _draw_sliders(drawn, inputs.setup, values)
        if rest is not None:
            rest(inputs, shown)

    live()
