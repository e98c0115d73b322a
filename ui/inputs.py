"""The shared inputs panel: the one function every page calls. Widgets live in the sidebar, are keyed,
and are bound to the URL (bind="query-params"), so any view is a shareable link and survives page
switches. Invalid URL values fall back to defaults with a visible note; nothing from the URL or an
uploaded file is ever rendered as HTML or Markdown."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.scriptrunner import get_script_run_ctx

from estimator import (
    MAX_SIZE_B,
    MIN_SIZE_B,
    Device,
    ModelSpec,
    TrainingSetup,
    custom_device,
    find_devices,
    generic_spec,
    get_device,
    list_presets,
    load_preset,
    parse_config_text,
)
from estimator.i18n import _, error_message, localised_error, set_language
from estimator.job.stack import resolve_setup, setup_summary
from estimator.job.tower import check_tower
from estimator.memory.adapters import lora_targets
from estimator.models.hub import HubError, fetch_model, is_model_id, normalise_model_id
from estimator.options.stacks import DEFAULT_STACK, STACKS, get_stack
from ui.lang import PARAM as LANG_PARAM
from ui.lang import language_note, language_switch
from ui.params import (
    AUTO,
    BY_SIZE,
    CUSTOM,
    PAGE_ONLY_PARAMS,
    SIDEBAR_PARAMS,
    TABLE,
    TRAINER_PARAMS,
    UPLOAD,
    url_value,
    widget,
)
from ui.params import CKPT_CHOICES as CKPT_CHOICES  # re-exported: pages and tests read it here
from ui.report import VIEWER_PARAMS, share_url
from ui.trainer_inputs import GENERATES_NOTE, TRAINER_DEFAULTS, TrainerBox, draw_trainer_box, trainer_generates

# Names other modules and tests read; each is the table's value (ui/params.py), not a second copy.
DEFAULT_MODEL: str = TABLE["model"].default
DEFAULT_DEVICE: str = TABLE["device"].default

# The size slider: a log-like ladder from 0.1B to 1000B (integral values as ints so the URL reads size=7).
SIZE_STEPS: tuple[float, ...] = (
    0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9, 10, 12,
    14, 16, 20, 24, 27, 32, 40, 48, 56, 70, 80, 100, 120, 140, 175, 200, 235, 280, 340, 405, 500, 700, 1000,
)
assert SIZE_STEPS[0] == MIN_SIZE_B and SIZE_STEPS[-1] == MAX_SIZE_B
BATCH_MAX = int(TABLE["batch"].high)  # type: ignore[arg-type]
MAX_LEN_MAX = int(TABLE["max_len"].high)  # type: ignore[arg-type]
# The max-length slider: powers of two (the exact value, up to MAX_LEN_MAX, goes in the number input).
POW2_LENGTHS: tuple[int, ...] = tuple(2**k for k in range(7, 18))  # 128 … 131072
assert POW2_LENGTHS[-1] <= MAX_LEN_MAX
RANKS: tuple[int, ...] = TABLE["rank"].choices
GPUS_MAX = int(TABLE["gpus"].high)  # type: ignore[arg-type]
CAPACITY_MAX_GB = float(TABLE["capacity"].high)  # type: ignore[arg-type]
LOSS_CHOICES: tuple[str, ...] = TABLE["loss"].choices
OPTIMIZER_CHOICES: tuple[str, ...] = TABLE["optimizer"].choices

DEFAULTS: dict[str, object] = {key: TABLE[key].default for key in SIDEBAR_PARAMS}
# Every URL parameter the shared sidebar binds, in the README's order.
PARAMS: tuple[str, ...] = SIDEBAR_PARAMS
# Scale out's own controls: the largest GPU count searched, and GPUs per node (counts in whole nodes).
MAX_GPU_CHOICES: tuple[int, ...] = TABLE["maxgpus"].choices
PER_NODE_CHOICES: tuple[int, ...] = TABLE["pernode"].choices
# Link parameters that single pages bind to their own widgets (compare: methods, variants; fits: models,
# methods; scale out: offload, maxgpus, pernode) and the values each accepts (as the address writes them): known,
# so never "unknown" here (nor Streamlit's VIEWER_PARAMS); a value the page's widget would refuse gets a note
# (Streamlit drops it silently). A page that binds a new widget adds its row to ui/params.py.
PAGE_PARAM_CHOICES: dict[str, tuple[str, ...]] = {
    key: tuple(url_value(c) for c in TABLE[key].choices) if TABLE[key].choices else ("true", "false")
    for key in PAGE_ONLY_PARAMS}
PAGE_PARAMS: frozenset[str] = frozenset(PAGE_ONLY_PARAMS) | frozenset(
    TRAINER_PARAMS)  # the calculator's trainer controls (ui/trainer_inputs.py checks their values)


@dataclass(frozen=True)
class Inputs:
    """Everything a page needs: the model, the setup, the device and the mode, plus notes to show."""

    model: ModelSpec
    setup: TrainingSetup
    device: Device
    rule: str | None  # "seed" when the rule of thumb is on
    presentation: bool
    notes: tuple[str, ...]  # plain-text notes (invalid URL values, upload errors): render with st.text/caption
    model_choice: str  # preset id, BY_SIZE or UPLOAD
    trainer_box: TrainerBox  # the Trainer box's values (ui.trainer_inputs.resolve_box prices them for the setup)


def model_options(hub_model: str | None = None) -> list[str]:
    """The Model picker's options: the presets, by-size, upload, and the Hub model id in use, if any."""
    return list(TABLE["model"].choices) + ([hub_model] if hub_model else [])


def _model_label(option: str) -> str:
    names = {p.id: p.name for p in list_presets()}
    return names.get(option, {"by-size": _("By size (generic decoder)"), "upload": _("Upload config.json")}.get(
        option, option))


def is_hub_choice(value: object) -> bool:
    """A Hub model id in its canonical form 'org/name[@revision]' (what the Model picker and the URL carry)."""
    return isinstance(value, str) and "/" in value and is_model_id(value) and normalise_model_id(value) == value


HUB_BOX = "hub_id"  # the "Hugging Face model id" text box (not in the URL: the Model picker carries the id)
_HUB_NOTE = "_hub_id_note"


def _hub_model_option() -> str | None:
    """The Hub id the Model picker offers this run: the current choice, else the link's, else the box's."""
    for raw in (st.session_state.get("model"), st.query_params.get("model"), st.session_state.get(HUB_BOX)):
        if is_hub_choice(raw):
            return str(raw)
    return None


def _use_hub_id() -> None:
    """The Hugging Face model id box: point the Model picker (and so the URL's `model`) at the typed id."""
    raw = str(st.session_state.get(HUB_BOX, "")).strip()
    st.session_state[_HUB_NOTE] = ""
    if not raw:
        if is_hub_choice(st.session_state.get("model")):
            st.session_state["model"] = DEFAULT_MODEL  # the box emptied: back to the default model
        return
    try:
        canonical = normalise_model_id(raw)
    except HubError as exc:
        st.session_state[_HUB_NOTE] = error_message(exc)  # a Text: translated where shown
        return
    st.session_state[HUB_BOX] = canonical
    st.session_state["model"] = canonical
    _model_changed()


def hub_token() -> str | None:
    """The server's Hugging Face token for gated or private models: Streamlit secrets' HF_TOKEN, else None
    (estimator.models.hub then reads the HF_TOKEN environment variable). Never shown, logged or put in a link."""
    try:
        value = st.secrets.get("HF_TOKEN")
    except Exception:  # no secrets file: st.secrets raises when read
        return None
    return str(value) if value else None


def _is_valid(key: str, raw: str) -> bool:
    """Would the bound widget accept this URL value? (Streamlit drops invalid ones silently; we say so.)"""
    if key == "model" and is_hub_choice(raw):
        return True
    return key in TABLE and TABLE[key].accepts(raw)


def url_notes() -> list[str]:
    """Plain-text notes for invalid or unknown URL parameters (checked before the widgets consume them)."""
    notes: list[str] = []
    unknown = 0
    for key in list(st.query_params.keys()):
        if key == LANG_PARAM:  # the language (ui/lang.py says when its value is not valid)
            lang_note = language_note()
            if lang_note:
                notes.append(lang_note)
            continue
        if key in PAGE_PARAMS:
            refused = [raw for raw in st.query_params.get_all(key)
                       if key in PAGE_ONLY_PARAMS and not TABLE[key].accepts(raw)]
            if refused:
                notes.append(_("The link's value for '{key}' was not valid ({values}); this page uses its default "
                               "for it.").format(key=key, values=", ".join(refused)[:60]))
            continue
        if key not in PARAMS:
            if key not in VIEWER_PARAMS:
                unknown += 1
            continue
        for raw in st.query_params.get_all(key):
            if not _is_valid(key, raw):
                notes.append(_("The link's value for '{key}' was not valid; using the default ({default}).").format(
                    key=key, default=TABLE[key].default_text))
                break
    if unknown:
        notes.append(_("Ignored {n} unknown link parameter(s).").format(n=unknown))
    return notes


# Whole-number inputs bound to the URL. Streamlit 1.67 seeds them with int(float(value)), which raises
# OverflowError (not the ValueError it catches) for ?max_len=inf, 1e309 or a 400-digit number.
INT_NUMBER_PARAMS = tuple(k for k in SIDEBAR_PARAMS if TABLE[k].widget == "number" and TABLE[k].integer)
_PENDING_NOTES = "_url_notes_before_rerun"
_LINK_NOTES_SHOWN = "_link_notes_shown"  # the fragment has shown this full run's link notes


def _overflowing_params() -> list[str]:
    """Whole-number parameters whose link value is not a finite number Streamlit can convert."""
    bad = []
    for key in INT_NUMBER_PARAMS:
        for raw in st.query_params.get_all(key):
            try:
                finite = math.isfinite(float(raw))
            except ValueError:
                continue  # not a number at all: Streamlit rejects it cleanly
            if not finite:
                bad.append(key)
                break
    return bad


def _drop_overflowing_params(notes: list[str]) -> None:
    """On a link's first run, before any widget binds them, remove the values Streamlit would crash on and
    start again (the widgets seed from the URL of the run's request, so removing them is not enough);
    the notes of this run are kept for the next."""
    bad = _overflowing_params()
    if not bad:
        return
    try:
        for key in bad:
            del st.query_params[key]
    except StreamlitAPIException:  # already bound (not a fresh link): nothing safe to do
        return
    st.session_state[_PENDING_NOTES] = notes
    st.rerun()


_FIND_NOTE = "_device_find_note"


def _find_device() -> None:
    """The 'Find a device' box: point the Device selectbox at the best catalog match (estimator.find_devices)."""
    query = str(st.session_state.get("device_find", "")).strip()
    if not query:
        st.session_state[_FIND_NOTE] = ""
        return
    matches = find_devices(query)
    if matches:
        st.session_state["device"] = matches[0].id
        others = ", ".join(d.id for d in matches[1:4])
        st.session_state[_FIND_NOTE] = _("Found {device}").format(device=matches[0].name) + (
            _(" (also: {others})").format(others=others) if others else "")
    else:
        st.session_state[_FIND_NOTE] = _("No device matches '{query}'.").format(query=query[:40])


_LAST_RUN = "_inputs_last_run"  # {"page": hash, "values": {param: value}, "pages": {hash: {param: [raw]}}}


def _current_page() -> str:
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def _page_param_value(key: str, raw: list[str]) -> object:
    """A page parameter's address value as its widget holds it (its table row says how: multiselects hold
    lists, toggles a bool, select sliders and segmented controls the option itself, maxgpus an int)."""
    p = TABLE[key]
    if p.widget == "multiselect":
        return list(raw)
    if p.widget == "toggle":
        return raw[-1].lower() == "true"
    return next((c for c in p.choices if url_value(c) == raw[-1]), p.default)


def _restore(key: str, value: object, raw: list[str]) -> None:
    """Seed a widget through Session State and put its value back into the address. Runs before the widget
    exists this run; the previous page's bindings are gone after a switch, so the key is free."""
    st.session_state[key] = value
    try:
        st.query_params[key] = raw if len(raw) > 1 or isinstance(value, list) else raw[0]
    except StreamlitAPIException:  # still bound (not a page switch): the widget keeps the address itself
        pass


def _carry_over_after_page_switch() -> None:
    """Keep the whole state in the address across a page switch. Streamlit 1.67's page navigation carries
    only the bound parameters its frontend has seen change, so a link-seeded value would leave the address
    (and a reload would lose it) and the new page's widgets would start at their defaults. On the first run
    of a new page, before any widget exists: put the last page's inputs back into Session State and the
    address, for the parameters the address lacks, and the page's own controls (compare's methods, scale
    out's GPUs…) as they were when the user last left this page."""
    last = st.session_state.get(_LAST_RUN)
    page = _current_page()
    if not last or last["page"] == page:
        return
    defaults = {**DEFAULTS, **TRAINER_DEFAULTS}  # the trainer controls are in every page's sidebar too
    for key, value in last["values"].items():
        if key not in st.query_params and value is not None and value != defaults.get(key):
            _restore(key, value, [url_value(value)])
    for key, raw in last["pages"].get(page, {}).items():
        if key not in st.query_params:
            _restore(key, _page_param_value(key, raw), raw)


def _remember_inputs() -> None:
    """This run's inputs, and this page's own parameters as the address holds them, for the next switch.
    A page parameter is remembered only when its widget holds the address's value (so a refused value is
    never put back)."""
    last = st.session_state.get(_LAST_RUN) or {"pages": {}}
    page = _current_page()
    own = {}
    for key in PAGE_PARAM_CHOICES:  # (the trainer controls keep their own values: ui/trainer_inputs.py)
        raw = st.query_params.get_all(key)
        held = st.session_state.get(key)
        if raw and held is not None and raw == (
                [url_value(v) for v in held] if isinstance(held, list) else [url_value(held)]):
            own[key] = raw
    values = {key: st.session_state.get(key) for key in PARAMS}
    for key in TRAINER_PARAMS:  # drawn after this (ui/trainer_inputs.py remembers them then): keep the last ones
        values[key] = st.session_state.get(key, last.get("values", {}).get(key))
    st.session_state[_LAST_RUN] = {"page": page, "values": values, "pages": {**last["pages"], page: own}}


def remember_values(values: dict[str, object]) -> None:
    """Controls drawn after the shared panel (the trainer box) remember their values for the next page switch."""
    last = st.session_state.get(_LAST_RUN)
    if last is not None:
        last["values"].update({k: v for k, v in values.items() if v is not None})


def link_params() -> dict[str, list[str]]:
    """The current inputs as link parameters, as Streamlit writes them (defaults left out), then this page's
    own parameters as the address holds them. Built from the widgets' values, not the address bar."""
    params: dict[str, list[str]] = {}
    for key in PARAMS:
        value = st.session_state.get(key)
        if value is None or value == DEFAULTS[key]:
            continue
        params[key] = [url_value(value)]
    for key in sorted(PAGE_PARAMS | {LANG_PARAM}):
        if key in st.query_params:
            params[key] = st.query_params.get_all(key)
    return params


def share_box() -> None:
    """Every page's last section: the link that reproduces this view, every input included."""
    st.subheader(_("Share"), anchor=False)
    st.code(share_url(st.context.url, link_params()), language=None)
    st.caption(_("This link holds every input of this page (settings at their default are left out), so a "
                 "teammate who opens it sees this view; the address bar holds them too."))


def _typed_number(key: str) -> float:
    """The value a slider's twin number input holds (or is about to hold): on a link's first run the bound input has
    not read the URL yet, so take it from there; an unreadable value counts as the default."""
    from_url = st.query_params.get(key)
    if key not in st.session_state and from_url is not None and _is_valid(key, from_url):
        current: object = from_url
    else:
        current = st.session_state.get(key, DEFAULTS[key])
    try:
        return float(current)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float(DEFAULTS[key])  # type: ignore[arg-type]


def _sync_length_slider() -> None:
    """Before the slider renders: point it at the power of two nearest the typed max length."""
    value = int(_typed_number("max_len"))
    st.session_state["max_len_pow2"] = min(POW2_LENGTHS, key=lambda p: abs(math.log2(max(value, 1)) - math.log2(p)))


def _sync_size_slider() -> None:
    """Before the size slider renders: point it at the ladder step nearest the typed size (log scale)."""
    value = min(max(_typed_number("size"), MIN_SIZE_B), MAX_SIZE_B)
    st.session_state["size_step"] = min(SIZE_STEPS, key=lambda p: abs(math.log(value) - math.log(p)))


def _size_from_slider() -> None:
    st.session_state["size"] = float(st.session_state["size_step"])


def _size_means_by_size() -> None:
    """A hand-written link with size= but no model= means a model of that size: on a link's first run (before
    the Model picker binds), choose 'by-size' and write it into the address."""
    size = st.query_params.get("size")
    if size is not None and _is_valid("size", size) and "model" not in st.query_params \
            and "model" not in st.session_state:
        st.session_state["model"] = BY_SIZE
        try:
            st.query_params["model"] = BY_SIZE
        except StreamlitAPIException:
            pass


def _model_changed() -> None:
    """Leaving 'by-size' puts the size back to its default, so no address ever holds a size without the
    by-size model it belongs to (a link with size= alone means by size)."""
    if st.session_state.get("model") != BY_SIZE:
        st.session_state["size"] = float(DEFAULTS["size"])  # type: ignore[arg-type]


def _length_from_slider() -> None:
    st.session_state["max_len"] = int(st.session_state["max_len_pow2"])


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
    rule_on: bool
    present: bool
    size_slot: Any
    length_slot: Any
    summary_slot: Any
    trainer_box: TrainerBox


def _draw_settled() -> _Drawn:
    """The sidebar's widgets that change the page's structure (model, method, stack, device, options…): a change
    reruns the whole page. The sliders go into slots kept free for the live part (_draw_live)."""
    _leave_legacy_pages_mode()
    code = language_switch()  # lang=es|en (ui/lang.py): before any text this page draws
    link_notes = url_notes()
    _drop_overflowing_params(link_notes)
    link_notes = st.session_state.pop(_PENDING_NOTES, link_notes)  # after that rerun: the first run's notes
    st.session_state[_LINK_NOTES_SHOWN] = False
    notes: list[str] = []
    _carry_over_after_page_switch()
    sb = st.sidebar
    sb.header(_("Your setup"))
    rule_on = widget("rule", sb)
    # Bound selectboxes carry their *displayed* option in the URL (Streamlit serialises the format_func
    # label), so the options are shown as their stable ids (?model=by-size) and the name goes underneath.
    hub_option = _hub_model_option()
    if hub_option and HUB_BOX not in st.session_state:
        st.session_state[HUB_BOX] = hub_option  # a link to a Hub model shows its id in the box
    options = model_options(hub_option)
    _size_means_by_size()
    choice = widget("model", sb, options=options, on_change=_model_changed)
    model_caption = sb.empty()
    model_caption.caption(plain(_model_label(choice)))
    sb.text_input(_("…or a Hugging Face model id"), key=HUB_BOX, on_change=_use_hub_id, max_chars=200,
                  placeholder=_("org/name or org/name@revision"),
                  help=_("Reads the model's config.json (and its safetensors headers for the exact parameter count) "
                         "from the Hugging Face Hub. The link then carries the id. Gated and private models need a "
                         "token on the server (HF_TOKEN)."))
    if st.session_state.get(_HUB_NOTE):
        sb.caption(plain(_(st.session_state[_HUB_NOTE])))
    size_slot = sb.container()  # the size slider and its number box (_draw_live)
    spec: ModelSpec | None = None  # stays None for 'by-size': _draw_live builds it from the size slider
    if choice == UPLOAD:
        upload = sb.file_uploader("config.json", type=["json"], key="upload",
                                  help=_("A Hugging Face config.json (llama, mistral, qwen2/3, qwen3_5, gemma 1–4, "
                                         "gemma3n, phi3, gpt_oss, deepseek_v3, llama4 and the other families the "
                                         "README lists; other decoders get a Llama-like estimate with a caveat)."))
        spec = load_preset(DEFAULT_MODEL)
        if upload is None:
            notes.append(_("No config.json uploaded yet; showing {model}.").format(model=spec.name))
        else:
            try:
                spec = parse_config_text(upload.getvalue(), name=str(upload.name)[:60])
            except ValueError as exc:
                notes.append(_("That config.json could not be used: {error}. Showing {model}.").format(
                    error=localised_error(exc), model=spec.name))
    elif is_hub_choice(choice):
        try:
            with st.spinner(_("Reading {model} from the Hugging Face Hub…").format(model=choice)):
                spec, hub = fetch_model(str(choice), token=hub_token())
            model_caption.caption(plain(hub.label) + (f"  \n{plain(hub.stored)}" if hub.stored else ""))
        except HubError as exc:
            spec = load_preset(DEFAULT_MODEL)
            model_caption.caption(plain(_("{model}: not read from the Hub").format(model=choice)))
            notes.append(_("The Hub model '{model}' could not be used: {error}. Showing {fallback}.").format(
                model=choice, error=localised_error(exc), fallback=spec.name))
    elif choice != BY_SIZE:
        spec = load_preset(choice)
    # For the controls below (LoRA's names, a tower's): a by-size model is the generic decoder of the typed size.
    named = spec if spec is not None else generic_spec(min(max(_typed_number("size"), MIN_SIZE_B), MAX_SIZE_B))

    method = widget("method", sb)
    stack_id = widget("stack", sb)
    sb.caption(plain(get_stack(str(stack_id)).version if stack_id in STACKS else ""))
    precision = widget("precision", sb)
    length_slot = sb.container()  # batch and max length (_draw_live)
    images, tower = 0, False
    if named.tower_kind:  # multimodal wrappers only: image tokens lengthen the language model's sequence
        images = widget("images", sb)
        tower = widget("tower", sb)
    else:
        if st.query_params.get("images", "0") not in ("0", ""):
            notes.append(_("Image tokens apply to multimodal models only; {model} is a text model, so the link's "
                           "'images' value is not used.").format(model=named.name))
        if st.query_params.get("tower", "false") not in ("false", ""):
            notes.append(_("Training the vision tower applies to multimodal models only; {model} is a text model, "
                           "so the link's 'tower' value is not used.").format(model=named.name))
    ckpt = widget("ckpt", sb)

    with sb.expander(_("Optimizer, loss, attention, LoRA")):
        optimizer = widget("optimizer")
        loss = widget("loss")
        attn = widget("attn")
        lora_off = method == "full"
        rank = widget("rank", disabled=lora_off)
        targets_text = widget("targets", disabled=lora_off,
                              help=_("'all-linear' or names: {names}").format(names=", ".join(named.linear_names())))
    with sb.expander(_("GPUs and sharding")):
        gpus = widget("gpus")
        sharding = widget("sharding")

    sb.text_input(_("Find a device"), key="device_find", on_change=_find_device, max_chars=60,
                  placeholder="4080, A6000, T4, H100, M3 Max…",
                  help=_("Type a card's name or a nickname: the Device box below jumps to the first match."))
    if st.session_state.get(_FIND_NOTE):
        sb.caption(plain(st.session_state[_FIND_NOTE]))
    device_choice = widget("device", sb)  # its options: the catalog's ids and CUSTOM (ui/params.py)
    sb.caption(plain(_("Custom capacity") if device_choice == CUSTOM else get_device(device_choice).name))
    capacity = widget("capacity", sb, disabled=device_choice != CUSTOM)
    kind = widget("kind", sb, disabled=device_choice != CUSTOM)
    present = widget("present", sb)
    if present:
        st.html(PRESENT_CSS)
    summary_slot = sb.container()  # the resolved setup's line (_draw_live)
    trainer_box = draw_trainer_box()  # the sidebar's last section
    device = custom_device(float(capacity), str(kind)) if device_choice == CUSTOM else get_device(device_choice)
    settings = dict(
        method=str(method), precision=str(precision),
        attention=str(attn), lora_rank=int(rank), gpus=int(gpus), sharding=str(sharding),
        optimizer=None if optimizer == AUTO else str(optimizer),
        grad_ckpt={"true": True, "false": False, "offload": True}.get(str(ckpt)),
        offload_activations={"offload": True, "false": False, "true": False}.get(str(ckpt)),
        loss=None if loss == AUTO else str(loss), image_tokens=int(images), train_tower=bool(tower),
    )
    return _Drawn(language=code, link_notes=tuple(link_notes), notes=tuple(notes), choice=str(choice), spec=spec,
                  settings=settings,
                  stack_id=str(stack_id) if stack_id in STACKS else DEFAULT_STACK, targets_text=str(targets_text),
                  device=device, rule_on=bool(rule_on), present=bool(present), size_slot=size_slot,
                  length_slot=length_slot, summary_slot=summary_slot, trainer_box=trainer_box)


def _draw_live(drawn: _Drawn) -> Inputs:
    """The sliders (model size, batch, max length) into their slots, then the setup they complete. Runs in
    live_page's fragment: a slider change reruns only it and the page's body."""
    set_language(drawn.language)  # a fragment's rerun does not pass through app.py or the switch
    # The link's notes once, with the full run that read the link; a slider's fragment rerun repeats the rest.
    first = not st.session_state.get(_LINK_NOTES_SHOWN)
    notes = list(drawn.link_notes + drawn.notes if first else drawn.notes)
    box = drawn.trainer_box if first else replace(drawn.trainer_box, notes=())
    st.session_state[_LINK_NOTES_SHOWN] = True
    slot = drawn.size_slot
    _sync_size_slider()
    slot.select_slider(_("Model size (billions of parameters)"), options=list(SIZE_STEPS), key="size_step",
                       on_change=_size_from_slider, disabled=drawn.choice != BY_SIZE,
                       help=_("Used when Model is 'by-size': a Llama-style decoder of this size. Type any size "
                              "below."))
    size = widget("size", slot, disabled=drawn.choice != BY_SIZE)
    spec = drawn.spec
    if spec is None:
        try:
            spec = generic_spec(float(size))  # type: ignore[arg-type]
        except ValueError as exc:
            spec = load_preset(DEFAULT_MODEL)
            notes.append(_("A generic {size}B model could not be built ({error}); showing {model}.").format(
                size=size, error=localised_error(exc), model=spec.name))
    slot = drawn.length_slot
    batch = widget("batch", slot)
    _sync_length_slider()
    generates = trainer_generates()  # GRPO: the length is prompt + completion, set in the Trainer box
    slot.select_slider(_("Max length (tokens)"), options=list(POW2_LENGTHS), key="max_len_pow2",
                       on_change=_length_from_slider, disabled=generates,
                       help=_("Powers of two; type an exact length below."))
    max_len = widget("max_len", slot, disabled=generates)
    if generates:
        slot.caption(_(GENERATES_NOTE))
    _remember_inputs()

    targets: tuple[str, ...] = ("all-linear",)
    if drawn.settings["method"] != "full":
        try:
            targets = lora_targets(spec, drawn.targets_text)
        except ValueError as exc:
            notes.append(_("LoRA targets: {error}. Using all-linear.").format(error=localised_error(exc)))
            targets = ("all-linear",)
    settings = {**drawn.settings, "batch": int(batch), "seq_len": int(max_len), "lora_targets": targets}
    try:
        setup = resolve_setup(drawn.stack_id, **settings)
    except ValueError as exc:
        notes.append(_("{error}. Using the stack's own loss.").format(error=localised_error(exc)))
        try:
            setup = resolve_setup(drawn.stack_id, **{**settings, "loss": None})
        except ValueError as exc2:
            notes.append(_("Setup not valid ({error}); using defaults.").format(error=localised_error(exc2)))
            setup = resolve_setup(DEFAULT_STACK)
    if setup.train_tower:
        try:
            check_tower(spec, setup)
        except ValueError as exc:
            notes.append(_("{error}. Using a frozen tower.").format(error=localised_error(exc)))
            setup = replace(setup, train_tower=False)
    drawn.summary_slot.caption(plain(setup_summary(setup)))
    return Inputs(model=spec, setup=setup, device=drawn.device, rule="seed" if drawn.rule_on else None,
                  presentation=drawn.present, notes=tuple(notes), model_choice=drawn.choice, trainer_box=box)


def live_page(body: Callable[[Inputs], None]) -> None:
    """Every page: draw the shared sidebar, then run `body(inputs)` in a fragment with the sliders. Moving a
    slider reruns only the sliders and the page's body (the rest of the sidebar is not sent again); any other
    input reruns the whole page, which draws the fragment again with the new settings. Never raises for bad
    input: notes say what was replaced."""
    drawn = _draw_settled()

    @st.fragment
    def live() -> None:
        body(_draw_live(drawn))

    live()


# Presentation mode at 1920×1080: body text, notes, remedies, metric labels and tables at 20 px or more (the
# browser's 16 px root), so the room can read them; headings keep Streamlit's own sizes.
PRESENT_CSS = """<style>
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.375rem; }
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.25rem; }
[data-testid="stMain"] [data-testid="stMetricLabel"] p { font-size: 1.25rem; }
[data-testid="stMain"] [data-testid="stTable"] th,
[data-testid="stMain"] [data-testid="stTable"] td { font-size: 1.25rem; }
</style>"""


def present_table(frame: pd.DataFrame, digits: int = 1) -> None:
    """A table in presentation mode: a static HTML table (st.table), which the presentation fonts reach (the
    interactive grid draws on a canvas at its own size); numbers rounded for the room, labels whole."""
    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = [f"{v:,.{digits}f}" for v in shown[column]]
    st.table(shown, hide_index=True, border="horizontal")


_MD_SPECIAL = set("\\`*_{}[]()#+-.!|<>~$:")


def plain(text: str, limit: int = 300) -> str:
    """Escape Markdown so user-supplied text shows literally (st.warning renders Markdown; HTML is off)."""
    text = " ".join(str(text).split())[:limit]
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def show_notes(inputs: Inputs) -> None:
    """Render the input notes as literal text: they may quote the URL or an uploaded file."""
    for note in inputs.notes:
        st.warning(plain(note), icon=":material/info:")
