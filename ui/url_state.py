"""The address as the app's state: which link values the widgets will accept (and notes for the ones they
will not), values Streamlit would crash on removed before any widget binds, the inputs carried across a page
switch, and the share link built back from the widgets. Widgets themselves are drawn elsewhere (ui.inputs, the
trainer box, the pages) from the one table of parameters, ui/params.py."""

from __future__ import annotations

import math

import streamlit as st
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.scriptrunner import get_script_run_ctx

from estimator.i18n import _
from estimator.job.stack import default_settings
from estimator.models.hub import is_model_id, normalise_model_id
from estimator.options.stacks import STACKS
from ui.lang import PARAM as LANG_PARAM
from ui.lang import language_note
from ui.params import PAGE_ONLY_PARAMS, SIDEBAR_PARAMS, TABLE, TRAINER_PARAMS, device_for, url_value
from ui.report import VIEWER_PARAMS, share_url

# Every URL parameter the shared sidebar binds, in the README's order, and their defaults (the table's values).
PARAMS: tuple[str, ...] = SIDEBAR_PARAMS
DEFAULTS: dict[str, object] = {key: TABLE[key].default for key in SIDEBAR_PARAMS}
TRAINER_DEFAULTS: dict[str, object] = {key: TABLE[key].default for key in TRAINER_PARAMS}
# Link parameters that single pages bind to their own widgets (compare: methods, variants; fits: models,
# methods; scale out: maxgpus, pernode) and the values each accepts (as the address writes them): known,
# so never "unknown" here (nor Streamlit's VIEWER_PARAMS); a value the page's widget would refuse gets a note
# (Streamlit drops it silently). A page that binds a new widget adds its row to ui/params.py.
PAGE_PARAM_CHOICES: dict[str, tuple[str, ...]] = {
    key: tuple(url_value(c) for c in TABLE[key].choices) if TABLE[key].choices else ("true", "false")
    for key in PAGE_ONLY_PARAMS}
PAGE_PARAMS: frozenset[str] = frozenset(PAGE_ONLY_PARAMS) | frozenset(
    TRAINER_PARAMS)  # the calculator's trainer controls (ui/trainer_inputs.py checks their values)
# Whole-number inputs bound to the URL. Streamlit 1.67 seeds them with int(float(value)), which raises
# OverflowError (not the ValueError it catches) for ?max_len=inf, 1e309 or a 400-digit number.
# Widgets (and page-kept lists) that take a parameter given several times: the rest keep the last of a repeated one.
MULTI_VALUE = ("multiselect", "list")
INT_NUMBER_PARAMS = tuple(k for k in SIDEBAR_PARAMS if TABLE[k].widget == "number" and TABLE[k].integer)
# Link parameters of earlier releases → the parameter that replaced each. Scale out had its own "Optimizer state in
# CPU RAM" switch (offload=), which overrode the sidebar's; the page now follows the sidebar's (opt_offload=).
LEGACY_PARAMS: dict[str, str] = {"offload": "opt_offload"}
_PENDING_NOTES = "_url_notes_before_rerun"
_LEGACY_NOTES = "_rewritten_link_notes"  # _rewrite_link's notes, for the run after its rerun
_LINK_NOTES_SHOWN = "_link_notes_shown"  # the fragment has shown this full run's link notes
_LAST_RUN = "_inputs_last_run"  # {"page": hash, "values": {param: value}, "pages": {hash: {param: [raw]}}}


def is_hub_choice(value: object) -> bool:
    """A Hub model id in its canonical form 'org/name[@revision]' (what the Model picker and the URL carry)."""
    return isinstance(value, str) and "/" in value and is_model_id(value) and normalise_model_id(value) == value


def is_valid(key: str, raw: str) -> bool:
    """Would the bound widget accept this URL value? (Streamlit drops invalid ones silently; we say so.)"""
    if key == "model" and is_hub_choice(raw):
        return True
    return key in TABLE and TABLE[key].accepts(raw)


def _page_param_note(key: str) -> str | None:
    if key in PAGE_ONLY_PARAMS and TABLE[key].widget == "list":
        return None  # the page reads each value and notes each one it leaves out (the Compare page's pins)
    refused = [raw for raw in st.query_params.get_all(key) if key in PAGE_ONLY_PARAMS and not TABLE[key].accepts(raw)]
    if not refused:
        return None
    return _("The link's value for '{key}' was not valid ({values}); this page uses its default "
             "for it.").format(key=key, values=", ".join(refused)[:60])


def url_notes() -> list[str]:
    """Plain-text notes for invalid or unknown URL parameters (checked before the widgets consume them)."""
    notes: list[str] = []
    unknown = 0
    for key in list(st.query_params.keys()):
        if key == LANG_PARAM:  # the language (ui/lang.py says when its value is not valid)
            lang_note = language_note()
            if lang_note:
                notes.append(lang_note)
        elif key in PAGE_PARAMS:
            page_note = _page_param_note(key)
            if page_note:
                notes.append(page_note)
        elif key not in PARAMS:
            unknown += key not in VIEWER_PARAMS
        elif not all(is_valid(key, raw) for raw in st.query_params.get_all(key)):
            notes.append(_("The link's value for '{key}' was not valid; using the default ({default}).").format(
                key=key, default=TABLE[key].default_text))
    if unknown:
        notes.append(_("Ignored {n} unknown link parameter(s).").format(n=unknown))
    return notes


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


def _rewrite_link() -> None:
    """On a link's first run, before any widget binds, the address made one the widgets read as it says, then the
    run starts again so they read it (the notes are kept for that run):
    - an old link's parameter becomes the one that replaced it (LEGACY_PARAMS); where the link also gives the new
      one and the two disagree, the new one is used and a note says so;
    - a parameter given more than once whose widget takes one value keeps its last, with a note (Streamlit 1.67
      would read the last for some widgets and drop a repeated slider value for its default, silently)."""
    notes: list[str] = []
    changed = False
    try:
        for old, new in LEGACY_PARAMS.items():
            if old not in st.query_params:
                continue
            raw = st.query_params.get_all(old)[-1].strip()
            value = raw.lower()
            del st.query_params[old]
            changed = True
            if new in st.query_params:
                if st.query_params[new].strip().lower() != value:
                    notes.append(_("The link's '{old}={value}' (Scale out's old switch) is the sidebar's '{new}' "
                                   "now; the link also gives '{new}={kept}', which is used.").format(
                        old=old, value=raw[:20], new=new, kept=st.query_params[new][:20]))
            elif not TABLE[new].accepts(value):
                notes.append(_("The link's value for '{key}' was not valid; using the default ({default}).").format(
                    key=old, default=TABLE[new].default_text))
            elif value != TABLE[new].default_text:
                st.query_params[new] = value
        for key in list(st.query_params.keys()):
            values = st.query_params.get_all(key)
            if key in TABLE and TABLE[key].widget not in MULTI_VALUE and len(values) > 1:
                st.query_params[key] = values[-1]
                changed = True
                notes.append(_("The link gives '{key}' {n} times ({values}); using the last, {value}.").format(
                    key=key, n=len(values), values=", ".join(values)[:60], value=values[-1][:20]))
    except StreamlitAPIException:  # bound already (not a fresh link): nothing safe to do
        return
    if changed:
        st.session_state[_LEGACY_NOTES] = notes
        st.rerun()


def read_link() -> list[str]:
    """A full run's first step (before any widget): the notes about the link's values, after mapping an old
    link's parameters to today's, keeping one value of a repeated one, and removing the values Streamlit would
    crash on (each reruns once; the first
    run's notes are kept), and the inputs the last page had, carried over after a page switch. The live part
    shows the notes once (link_notes_due)."""
    _rewrite_link()
    legacy_notes = st.session_state.pop(_LEGACY_NOTES, [])
    link_notes = legacy_notes + url_notes()
    _drop_overflowing_params(link_notes)
    link_notes = st.session_state.pop(_PENDING_NOTES, link_notes)  # after that rerun: the first run's notes
    if legacy_notes and legacy_notes[0] not in link_notes:
        link_notes = legacy_notes + link_notes
    st.session_state[_LINK_NOTES_SHOWN] = False
    _carry_over_after_page_switch()
    return link_notes


def link_notes_due() -> bool:
    """Show the link's notes now? Once, with the full run that read the link; a slider's fragment rerun, which
    does not read the link again, does not repeat them."""
    first = not st.session_state.get(_LINK_NOTES_SHOWN)
    st.session_state[_LINK_NOTES_SHOWN] = True
    return first


# The sidebar settings whose default is the run's (estimator.job.stack.default_settings: the stack's or the trainer's,
# so that the app gives the CLI's run), not the table's fixed one: parameter → RunDefaults field. The values in use
# are kept in Session State under RUN_DEFAULTS by ui.inputs (follow_run_defaults).
RUN_DEFAULT_FIELDS: dict[str, str] = {"batch": "batch", "rank": "lora_rank"}
RUN_DEFAULTS = "_run_defaults"


def default_of(key: str) -> object:
    """A parameter's default now: the run's for batch and rank (RUN_DEFAULT_FIELDS), else the table's."""
    return st.session_state.get(RUN_DEFAULTS, {}).get(key, DEFAULTS.get(key, TRAINER_DEFAULTS.get(key)))


def held(key: str) -> object:
    """The value a sidebar widget holds, or is about to hold before it is drawn this run: Session State, or on a
    link's first run the link's value when the widget would take it, else its default."""
    from_url = st.query_params.get(key)
    if key not in st.session_state and from_url is not None and is_valid(key, from_url):
        return from_url
    return st.session_state.get(key, default_of(key))


def held_run_defaults() -> dict[str, object]:
    """Batch and rank defaults of the run the sidebar describes before its widgets are drawn: the stack it picks (or
    'auto': the device's), the device and the trainer, through estimator.job.stack.default_settings, the function
    the CLI reads (MLX-LM on an Apple device: batch 4, rank 8; a GRPO run: batch 8)."""
    choice = held("stack")
    try:
        device = device_for(str(held("device")), float(held("capacity")), str(held("kind")))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        device = device_for(str(DEFAULTS["device"]), float(DEFAULTS["capacity"]), str(DEFAULTS["kind"]))  # type: ignore[arg-type]
    trainer = str(held("trainer"))
    run = default_settings(choice if choice in STACKS else None, device, trainer if trainer in TABLE["trainer"].choices
                           else str(TRAINER_DEFAULTS["trainer"]))
    return {key: getattr(run, field) for key, field in RUN_DEFAULT_FIELDS.items()}


def follow_run_defaults(new: dict[str, object]) -> None:
    """Make `new` the run's defaults (before the widgets are drawn): a batch or rank still at the last run's default
    follows the new one (the device, stack or trainer changed the run), one the user chose stays. Following is
    forgetting the widget's value: it is drawn again at its new default (setting it through the Session State API
    while the widget also gets a default makes Streamlit log a warning)."""
    ss = st.session_state
    old = ss.get(RUN_DEFAULTS)
    if old is not None:
        for key, value in new.items():
            if key in ss and ss[key] == old.get(key) and value != old.get(key):
                del ss[key]
    ss[RUN_DEFAULTS] = dict(new)


def typed_number(key: str) -> float:
    """The value a sidebar number input holds (or is about to hold): on a link's first run the bound input has
    not read the URL yet, so take it from there; an unreadable value counts as the default."""
    try:
        return float(held(key))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float(default_of(key))  # type: ignore[arg-type]


# ---- the inputs across a page switch ---------------------------------------------------------------------------

def _current_page() -> str:
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def _page_param_value(key: str, raw: list[str]) -> object:
    """A page parameter's address value as its widget holds it (its table row says how: multiselects hold
    lists, toggles a bool, select sliders and segmented controls the option itself, maxgpus an int)."""
    p = TABLE[key]
    if p.widget in MULTI_VALUE:
        return list(raw)
    if p.widget == "toggle":
        return raw[-1].lower() == "true"
    if p.widget == "number":  # the calculator's run-time box (its rows hold numbers, not choices)
        return (int if p.integer else float)(float(raw[-1])) if p.accepts(raw[-1]) else p.default
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
    # the trainer controls are in every page's sidebar too; batch and rank default to the last page's run
    defaults = {**DEFAULTS, **TRAINER_DEFAULTS, **last.get("run_defaults", {})}
    for key, value in last["values"].items():
        if key not in st.query_params and value is not None and value != defaults.get(key):
            _restore(key, value, [url_value(value)])
    for key, raw in last["pages"].get(page, {}).items():
        if key not in st.query_params:
            _restore(key, _page_param_value(key, raw), raw)


def remember_inputs() -> None:
    """This run's inputs, and this page's own parameters as the address holds them, for the next switch.
    A page parameter is remembered only when its widget holds the address's value (so a refused value is
    never put back)."""
    last = st.session_state.get(_LAST_RUN) or {"pages": {}}
    page = _current_page()
    own = {}
    for key in PAGE_PARAM_CHOICES:  # (the trainer controls keep their own values: ui/trainer_inputs.py)
        raw = st.query_params.get_all(key)
        held = st.session_state.get(key)
        if raw and held is not None and (raw == (
                [url_value(v) for v in held] if isinstance(held, list) else [url_value(held)])
                or TABLE[key].widget == "number" and _page_param_value(key, raw) == held):  # 2.0 in the address
            own[key] = raw
    values = {key: st.session_state.get(key) for key in PARAMS}
    for key in TRAINER_PARAMS:  # drawn after this (ui/trainer_inputs.py remembers them then): keep the last ones
        values[key] = st.session_state.get(key, last.get("values", {}).get(key))
    st.session_state[_LAST_RUN] = {"page": page, "values": values, "pages": {**last["pages"], page: own},
                                   "run_defaults": dict(st.session_state.get(RUN_DEFAULTS, {}))}


def remember_page_value(key: str, raw: list[str]) -> None:
    """A page parameter the page itself changed after its inputs were remembered this run (the Compare page's pins):
    the address's value, for the next page switch."""
    last = st.session_state.get(_LAST_RUN)
    if last is not None:
        own = dict(last["pages"].get(_current_page(), {}))
        if raw:
            own[key] = list(raw)
        else:
            own.pop(key, None)
        last["pages"] = {**last["pages"], _current_page(): own}


def remember_values(values: dict[str, object]) -> None:
    """Controls drawn after the shared panel (the trainer box) remember their values for the next page switch."""
    last = st.session_state.get(_LAST_RUN)
    if last is not None:
        last["values"].update({k: v for k, v in values.items() if v is not None})


# ---- the share link ------------------------------------------------------------------------------------------

def link_params() -> dict[str, list[str]]:
    """The current inputs as link parameters, as Streamlit writes them (defaults left out), then this page's
    own parameters as the address holds them. Built from the widgets' values, not the address bar."""
    params: dict[str, list[str]] = {}
    for key in PARAMS:
        value = st.session_state.get(key)
        if value is None or value == default_of(key):
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
