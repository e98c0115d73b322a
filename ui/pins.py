"""Setups side by side (issue 30): the sidebar's setup pinned as one short link value, up to four of them in one link
(`pins=…&pins=…`), each priced for memory, time and cost. Pure functions (no Streamlit): the Compare page draws them
(ui/pins_view.py) with ui.page_charts.pins_chart_spec.

A pin is the setup's link parameters (the sidebar's keys, estimator/job/settings.py: the same names as the sidebar's
own link) joined as `key.value` pairs by `~`, both characters a link keeps as they are:

    model.llama-3.1-8b~device.a100-80gb~stack.trl~method.lora~batch.4~max_len.2048~ckpt.false

It always holds the model (with `size` for a generic model by size), the device (with `capacity` and `kind` for a
custom one), the stack the setup resolved to, the method, the batch and the max length; then every other setting
whose value differs from what the stack gives that method, batch and length (`resolve_setup`), the trainer box's
settings away from their defaults, and `rule.true` when the rule of thumb priced it. Encoded from the resolved setup,
not from the widgets, so a pin resolves to the same setup the page priced: the same numbers wherever it is opened.

A pin the page cannot read (an unknown key, a value its sidebar control would refuse, a setup the stack refuses, more
than four) is left out with one note saying why; nothing raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from estimator import Device, Estimate, ModelSpec, TrainingSetup, estimate, generic_spec, load_preset, verdict
from estimator.i18n import _, format_int, format_number, localised_error
from estimator.job.settings import BY_KEY, SETTINGS, from_widgets, widget_value
from estimator.job.stack import resolve_setup
from estimator.job.tower import check_tower
from estimator.job.trainer import TrainerSetup
from estimator.memory.adapters import lora_targets
from estimator.memory.price import check_model
from estimator.options.backends import device_backend
from estimator.options.methods import METHOD_LABELS
from estimator.options.stacks import STACKS, get_stack
from estimator.speed import Cost, DatasetSize, RunTime, StepTime, run_cost, run_time, time_of
from ui.params import BY_SIZE, CUSTOM, TABLE, TRAINER_PARAMS, UPLOAD, device_for, url_value
from ui.trainer_inputs import parse_beta, resolve_trainer
from ui.url_state import is_hub_choice
from ui.versions_box import link_value as versions_link_value
from ui.versions_box import read_link_value as read_versions_link
from ui.versions_box import resolve_for_stack

PARAM = "pins"  # the link parameter, one value per pin
MAX_PINS = 4
MAX_PIN_CHARS = int(TABLE[PARAM].max_chars or 600)  # (the link row's limit; a pin with every setting changed is ~350)
PAIR_SEP = "~"  # between settings: unreserved in a URL (RFC 3986 §2.3), so a link keeps it as it is
KEY_SEP = "."  # between a key and its value: no link key has one; a value may (llama-3.1-8b: split at the first)
# Always in a pin, in this order; the rest follow in the sidebar's order (ui/params.py).
REQUIRED = ("model", "device", "stack", "method", "batch", "max_len")
# The sidebar's keys that are not the setup (the page's view, the machine's RAM) and never go into a pin.
NOT_SETUP = frozenset({"present", "host_ram"})
PIN_KEYS: tuple[str, ...] = (
    *REQUIRED, "size", "capacity", "kind",
    *(k for k in TABLE if TABLE[k].group == "sidebar" and k not in NOT_SETUP
      and k not in {*REQUIRED, "size", "capacity", "kind"}),
    *TRAINER_PARAMS)
# The setup's settings a pin writes by their link key (the settings table; the stack is written always).
_SETUP_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    s.key for s in SETTINGS if s.owner == "setup" and s.key in TABLE and s.key not in ("stack", "method", "batch",
                                                                                       "max_len")))
_TRAINER_KEYS: tuple[str, ...] = tuple(s.key for s in SETTINGS if s.owner == "trainer" and s.key in TABLE
                                       and s.key != "trainer")
# TrainingSetup fields the sidebar has no control for (set by an imported training config): a pin cannot hold them.
_UNLINKED: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.owner == "setup" and s.key is None
                                   and s.name not in ("backend", "quant_bits", "quant_group"))


@dataclass(frozen=True)
class PinnedJob:
    """A pin resolved: what the page prices for it."""

    text: str  # the pin as the link holds it
    spec: ModelSpec
    setup: TrainingSetup
    device: Device
    trainer: TrainerSetup
    rule: str | None  # "seed" where the rule of thumb priced it (SFT only)
    notes: tuple[str, ...]  # what the trainer box's checks changed (as the calculator says it)


@dataclass(frozen=True)
class PinResult:
    """A pin priced: its estimate and verdict as the calculator gives them, its step time (None: unknown, `time_note`
    says why), and with a dataset size its run (and with a price its cost)."""

    job: PinnedJob
    estimate: Estimate
    fits: bool
    band: str  # the calculator's verdict band: fits, close call, borderline, too big
    usable_bytes: float
    step: StepTime | None
    time_note: str = ""
    run: RunTime | None = None
    cost: Cost | None = None

    @property
    def tokens_per_second(self) -> float | None:
        return None if self.step is None else self.step.tokens_per_second


# ---- the link value ---------------------------------------------------------------------------------------------

def encode_pin(values: Mapping[str, str]) -> str:
    """The pin's link value: its `key.value` pairs in PIN_KEYS' order, joined by `~`."""
    return PAIR_SEP.join(f"{k}{KEY_SEP}{values[k]}" for k in PIN_KEYS if k in values)


def _accepts(key: str, raw: str) -> bool:
    """Would the sidebar's control take this value? (The model also takes a Hub id; never an upload, which a link
    cannot carry; beta takes auto or a number.)"""
    if key == "model":
        return raw != UPLOAD and (TABLE[key].accepts(raw) or is_hub_choice(raw))
    if key == "beta":
        return raw == "auto" or parse_beta(raw) is not None
    return TABLE[key].accepts(raw)


def decode_pin(text: str) -> dict[str, str]:
    """A pin's link value → its settings by link key (the raw values). ValueError with the reason, in the page's
    language, for anything the sidebar would not take."""
    if len(text) > MAX_PIN_CHARS:
        raise ValueError(_("longer than {n} characters").format(n=format_int(MAX_PIN_CHARS)))
    values: dict[str, str] = {}
    for part in text.split(PAIR_SEP):
        key, sep, raw = part.partition(KEY_SEP)
        if not sep or not key:
            raise ValueError(_("'{part}' is not a key.value pair").format(part=part[:40]))
        if key not in PIN_KEYS:
            raise ValueError(_("'{key}' is not a setting a pin holds").format(key=key[:40]))
        if key in values:
            raise ValueError(_("'{key}' is given twice").format(key=key))
        if not _accepts(key, raw):
            raise ValueError(_("'{value}' is not a valid value for '{key}'").format(value=raw[:40], key=key))
        values[key] = raw
    missing = [k for k in REQUIRED if k not in values]
    if missing:
        raise ValueError(_("it lacks {keys}").format(keys=", ".join(missing)))
    return values


def link_value(key: str, raw: str) -> Any:
    """A link value as the control holds it: a toggle's bool, a number, the option itself, the text."""
    p = TABLE[key]
    if p.widget == "toggle":
        return raw.lower() == "true"
    if p.low is not None:  # a number box or a slider
        return int(float(raw)) if p.integer or p.widget == "slider" else float(raw)
    if p.choices:
        return next((c for c in p.choices if url_value(c) == raw), raw)  # (a Hub id is the model's own value)
    return raw


def read_pins(raws: Sequence[str]) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """The link's pins: (text, settings) for each one read, in order, at most MAX_PINS and none twice; a note for each
    one left out and why."""
    pins: list[tuple[str, dict[str, str]]] = []
    notes: list[str] = []
    for i, text in enumerate(raws, start=1):
        if len(pins) == MAX_PINS:
            notes.append(_("The link has {n} pinned setups; the page shows the first {max}.").format(
                n=len(raws), max=MAX_PINS))
            break
        if any(text == seen for seen, _values in pins):
            notes.append(_("Pinned setup {i} is the same as an earlier one; shown once.").format(i=i))
            continue
        try:
            pins.append((text, decode_pin(text)))
        except ValueError as exc:
            notes.append(_("Pinned setup {i} of the link could not be read ({reason}); it is left out.").format(
                i=i, reason=exc))
    return pins, notes


# ---- a pin from the page's setup --------------------------------------------------------------------------------

def pin_values(choice: str, spec: ModelSpec, setup: TrainingSetup, device: Device, trainer: TrainerSetup,
               rule: str | None = None, size: float | None = None) -> tuple[dict[str, str], list[str]]:
    """The pin of a priced setup: `choice` is the Model control's value (a preset id, BY_SIZE with `size`, a Hub id),
    `setup` and `trainer` what the page priced (after the trainer box's checks). Returns the settings by link key and
    the notes on what a pin cannot hold (those are priced at the stack's values when it is opened). ValueError for a
    model a link cannot carry (an uploaded config.json)."""
    if choice == UPLOAD:
        raise ValueError(_("an uploaded config.json cannot travel in a link: choose a preset, a size or a Hub model "
                           "to pin this setup"))
    values: dict[str, str] = {"model": choice, "device": device.id if device.id in TABLE["device"].choices else CUSTOM}
    if choice == BY_SIZE:
        values["size"] = url_value(float(size if size is not None else spec.params_total / 1e9))
    if values["device"] == CUSTOM:
        values["capacity"] = url_value(round(device.capacity_bytes / 1e9, 3))
        values["kind"] = device.kind
    values.update(stack=str(setup.stack), method=setup.method, batch=url_value(setup.batch),
                  max_len=url_value(setup.seq_len))
    mine = {f.name: getattr(setup, f.name) for f in fields(setup)}
    try:  # what the stack gives this method, batch and length: a pin holds what differs from it
        base = resolve_setup(str(setup.stack), method=setup.method, batch=setup.batch, seq_len=setup.seq_len,
                             backend=setup.backend)
        stacks = {f.name: getattr(base, f.name) for f in fields(base)}
    except ValueError:  # (the stack's own defaults refused here: the pin holds every setting)
        stacks = {}
    notes: list[str] = []
    for key in _SETUP_KEYS:
        names = [s.name for s in BY_KEY[key]]
        if stacks and all(mine[n] == stacks[n] for n in names):
            continue
        raw = url_value(widget_value(key, mine, TABLE[key].default))
        if _accepts(key, raw):
            values[key] = raw
        else:  # (a training config can set a value the control does not offer: a LoRA rank of 10)
            notes.append(_("{setting} {value} cannot be held in a pin's link (its control does not offer it).").format(
                setting=key, value=raw[:20]))
    if setup.versions is not None and setup.versions.found:  # the releases given (ui/versions_box.py's link value)
        values["versions"] = versions_link_value({p: str(setup.versions[p]) for p in setup.versions.found})
    left_out = [n for n in _UNLINKED if n != "versions" and mine[n] != stacks.get(n, mine[n])]
    if left_out:
        notes.append(_("A pin holds the sidebar's settings; {names} (from an imported config) cannot travel in its "
                       "link and are the stack's when it is opened.").format(names=", ".join(left_out)))
    if trainer.trainer != "sft":
        values["trainer"] = trainer.trainer
        shown = {s.name: getattr(trainer, s.name) for s in SETTINGS if s.owner == "trainer"}
        for key in _TRAINER_KEYS:
            value = shown[BY_KEY[key][0].name]
            if value is None or value is False:
                continue  # the trainer's own default
            raw = url_value(widget_value(key, shown, TABLE[key].default))
            if raw != TABLE[key].default_text and _accepts(key, raw):
                values[key] = raw
    if rule and trainer.trainer == "sft":
        values["rule"] = "true"
    return values, notes


# ---- a pin priced -----------------------------------------------------------------------------------------------

def _model(values: Mapping[str, str], hub: Callable[[str], ModelSpec] | None) -> ModelSpec:
    choice = values["model"]
    if choice == BY_SIZE:
        return generic_spec(float(link_value("size", values.get("size", TABLE["size"].default_text))))
    if choice in TABLE["model"].choices:
        return load_preset(choice)
    if hub is None:
        raise ValueError(_("the Hub model {model} cannot be read here").format(model=choice))
    return hub(choice)


def resolve_pin(text: str, values: Mapping[str, str], hub: Callable[[str], ModelSpec] | None = None) -> PinnedJob:
    """A read pin → the model, setup, device and trainer the page prices, as the sidebar resolves the same settings
    (resolve_setup with the device's backend, then the trainer box's checks). `hub` reads a Hub model id (None: not
    read). ValueError with the reason (a setup the stack or the model refuses, a Hub model that cannot be read)."""
    typed = {k: link_value(k, raw) for k, raw in values.items() if k != "model"}
    device = device_for(values["device"], float(typed.get("capacity", TABLE["capacity"].default)),
                        str(typed.get("kind", TABLE["kind"].default)))
    spec = _model(values, hub)
    widgets = {k: typed[k] for k in (*_SETUP_KEYS, "method", "batch", "max_len") if k in typed}
    settings = from_widgets(widgets)
    if "targets" in typed:
        settings["lora_targets"] = lora_targets(spec, str(typed["targets"]))
    stack = str(typed["stack"])
    if stack not in STACKS:
        raise ValueError(_("'{stack}' is not a stack").format(stack=stack))
    versions = None
    if "versions" in values:  # the releases given: read as the sidebar's box reads its link value
        given, _errors = read_versions_link(values["versions"])
        versions = resolve_for_stack(stack, given)[0]
    setup = resolve_setup(stack, backend=device_backend(device), versions=versions, **settings)
    check_model(spec, setup)
    if setup.train_tower:
        check_tower(spec, setup)
    trainer_id = str(typed.get("trainer", "sft"))
    box = {k: typed[k] for k in _TRAINER_KEYS if k in typed}
    result = resolve_trainer(setup, trainer_id, **box)
    rule = "seed" if typed.get("rule") and result.trainer.trainer == "sft" else None
    return PinnedJob(text, spec, result.setup, device, result.trainer, rule, result.notes)


def price_pin(job: PinnedJob, tokens: int | None = None, price: float | None = None,
              epochs: float = 1.0) -> PinResult:
    """The pin's estimate and verdict (the calculator's: the same call), its step time and, with a dataset of `tokens`
    per epoch and its `epochs` (the calculator's and the CLI's meaning), the run's time, and with a `price` per
    GPU-hour its cost. A time the model cannot give (a custom
    device has no compute figures) is None with the reason; the memory answer stands."""
    est = estimate(job.spec, job.setup, rule=job.rule, trainer=job.trainer, device_capacity=job.device.runtime_total_bytes)
    v = verdict(est.total_bytes, job.device, est.high_bytes, est.low_bytes)
    trainer = None if job.trainer.trainer == "sft" else job.trainer
    try:
        step = time_of(job.spec, job.setup, job.device, trainer)
    except ValueError as exc:
        return PinResult(job, est, v.fits, v.band, v.usable_bytes, None, localised_error(exc))
    run = cost = None
    note = ""
    if tokens:
        try:
            run = run_time(job.spec, job.setup, job.device, DatasetSize(tokens=int(tokens), epochs=float(epochs)),
                           trainer)
            cost = run_cost(run, float(price)) if price else None
        except ValueError as exc:
            note = localised_error(exc)
    return PinResult(job, est, v.fits, v.band, v.usable_bytes, step, note, run, cost)


# ---- what the page writes ----------------------------------------------------------------------------------------

def pin_title(job: PinnedJob) -> str:
    """'Llama 3.1 8B · LoRA' (plain text)."""
    return f"{job.spec.name} · {_(METHOD_LABELS.get(job.setup.method, job.setup.method))}"


def pin_setup_line(job: PinnedJob) -> str:
    """'TRL · batch 4 × 2,048 · A100 80GB' (plain text), with the trainer and the GPUs when there are any, and the
    rule of thumb when it priced the pin."""
    parts = [get_stack(job.setup.stack).label,
             _("batch {batch} × {length}").format(batch=format_int(job.setup.batch),
                                                  length=format_int(job.setup.seq_len))]
    if job.trainer.trainer != "sft":
        parts.append(job.trainer.option.label)
    if job.setup.gpus > 1:
        parts.append(_("{n} GPUs").format(n=format_int(job.setup.gpus)))
    parts.append(short_device(job.device))
    if job.rule:
        parts.append(_("rule of thumb"))
    return " · ".join(parts)


# Vendor words a chart's narrow column can do without (the table keeps the device's whole name).
_VENDOR_PREFIXES = ("NVIDIA GeForce ", "NVIDIA Tesla ", "NVIDIA ", "AMD Instinct ")


def short_device(device: Device) -> str:
    """The device as a chart column names it: 'RTX 4090', 'A100 80GB', 'Mac 32 GB', 'Custom 24 GB (GPU)'."""
    name = device.model or device.name
    if name.startswith("Apple silicon ") and name.endswith(" unified"):
        return "Mac " + name.removeprefix("Apple silicon ").removesuffix(" unified")
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            return name.removeprefix(prefix)
    return name


def duration(seconds: float) -> str:
    """A run's length in the page's language: '45 min', '3.4 h', '2.1 days'."""
    if seconds < 3600:
        return _("{n} min").format(n=format_number(seconds / 60, 0 if seconds >= 600 else 1))
    if seconds < 72 * 3600:
        return _("{n} h").format(n=format_number(seconds / 3600, 1))
    return _("{n} days").format(n=format_number(seconds / 86400, 1))


def money(amount: float) -> str:
    """A cost in the user's currency (none is assumed): '1,234' above 100, '12.50' below."""
    return format_number(amount, 0 if amount >= 100 else 2)


__all__ = ["MAX_PINS", "PARAM", "PIN_KEYS", "PinResult", "PinnedJob", "decode_pin", "duration", "encode_pin",
           "link_value", "money", "pin_setup_line", "pin_title", "pin_values", "price_pin", "read_pins",
           "resolve_pin", "short_device"]
