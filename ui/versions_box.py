"""The sidebar's "Your releases" box (issue 28): the releases installed, as the estimate prices them.

A paste box reads the output of `pip freeze` or `pip list` (estimator/job/versions.py parse_installed and
resolve_versions, the CLI's --installed-from reader) and sets one picker per package the stack's estimate depends on
(estimator/options/versions.py STACK_PACKAGES); a picker offers `auto` (the newest modelled release, or the one the
framework release given ran with) and the releases where that package changes what a step keeps in memory
(options.versions FORKS: each fork's first release and the last one without it) with the range's oldest and newest.

The link carries the releases as one parameter, `versions=transformers==4.57.6,trl==0.21.0` (canonical package names,
in options.versions.PACKAGES's order): the pickers' values, and so the packages a pasted list names that some stack
models, never the list itself. A hidden text input bound to the address holds it (ui/params.py row `versions`), as
the device picker's hidden `device` widget does (without a default: None is none given); the pickers and the paste
box write it. The sidebar's setup is resolved with these releases (`Releases.for_stack`, passed to resolve_setup's
`versions`), so every page prices them.

Bad input is one line in the box, and the rest of the releases and every other setting stay: a list that cannot be
read (its line named) or that names a stack this estimate does not model leaves the releases as they were; a link
entry that is not PKG==VERSION, not PEP 440, given twice or outside the stack's range is left out (that package at
its newest). Nothing from the list or the link is rendered as Markdown or HTML."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from estimator.i18n import N_, Text, _, error_message, ngettext, shown
from estimator.job.versions import MAX_CHARS, Versions, parse_installed, resolve_versions
from estimator.memory.forks import version_notes
from estimator.options.stacks import get_stack
from estimator.options.versions import (
    PACKAGES,
    STACK_FRAMEWORK,
    companions,
    in_range,
    stack_forks,
    stack_packages,
)
from ui.once import remembered
from ui.params import AUTO, TABLE
from ui.text import plain, warn_notes

if TYPE_CHECKING:
    from estimator import Estimate, ModelSpec, TrainingSetup
    from estimator.job.trainer import TrainerSetup

PARAM = "versions"  # the link parameter, and the hidden text input bound to it
PASTE = "versions_paste"  # the paste box (never in the link)
READ = "versions_read"  # the paste box's button
CLEAR = "versions_clear"  # back to the newest releases
PICK = "versions_pick_"  # + a canonical package name: that package's picker
_STATE = "_versions_paste"  # the last paste's outcome: {"error": Text} or {"read": Pasted}
_DRAWN_FOR = "_versions_drawn_for"  # (stack, stack_given) the box was last drawn for: its callbacks read it
_HIDE_LINK_WIDGET = "<style>.st-key-versions { display: none; }</style>"
_SHOWN = 40  # characters of a link entry quoted in a message
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508 name (estimator/job/versions.py)


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


# ---- the link's value ------------------------------------------------------------------------------------------

def link_value(pins: Mapping[str, str]) -> str:
    """The link's `versions` value for these releases (package → version): 'pkg==ver,…' in PACKAGES's order, or
    'auto' (the newest releases) for none."""
    return ",".join(f"{p}=={pins[p]}" for p in PACKAGES if p in pins) or AUTO


def read_link_value(text: str) -> tuple[dict[str, str], tuple[Text, ...]]:
    """The releases a link's `versions` value gives (package → version as packaging writes it), and a line for each
    entry left out: not PKG==VERSION, a package no stack models, not a PEP 440 version, or a package given twice
    with two versions (both left out)."""
    pins: dict[str, str] = {}
    twice: set[str] = set()
    errors: list[Text] = []
    if str(text).strip().lower() in ("", AUTO):
        return pins, ()
    for entry in str(text).split(","):
        if not entry.strip():
            continue
        name, sep, version = entry.partition("==")
        if not sep or not _NAME.match(name.strip()) or not version.strip():
            errors.append(Text(N_("The link's 'versions' entry '{entry}' is not PKG==VERSION; left out."),
                               entry=_short(entry)))
            continue
        package = canonicalize_name(name.strip())
        if package not in PACKAGES:
            errors.append(Text(N_("The link's 'versions' names {package}, not a package this estimate models; left out."),
                               package=_short(package)))
            continue
        try:
            parsed = Version(version.strip())
        except InvalidVersion:
            errors.append(Text(N_("The link's 'versions' gives {package} {version}, not a PEP 440 version; left out."),
                               package=package, version=_short(version)))
            continue
        if package in pins and Version(pins[package]) != parsed:
            errors.append(Text(N_("The link's 'versions' gives {package} twice ({first} and {second}); it is priced at "
                                  "its newest modelled release."), package=package, first=pins[package],
                               second=str(parsed)))
            twice.add(package)
            continue
        pins[package] = str(parsed)
    return {p: v for p, v in pins.items() if p not in twice}, tuple(errors)


# ---- the releases for a stack ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Releases:
    """What the box decided: the releases given (package → version, every modelled package the link names, for
    any stack), the stack the box was drawn for and those releases resolved for it (None: none given, or none
    of them usable), and the lines the box shows about them."""

    pins: tuple[tuple[str, str], ...] = ()
    stack: str | None = None
    versions: Versions | None = None
    errors: tuple[Text, ...] = ()

    def for_stack(self, stack: str) -> Versions | None:
        """The releases resolved for `stack` (the setup's, which can differ from the box's when the sidebar falls
        back to another stack): None when none is given or usable there."""
        if stack == self.stack:
            return self.versions
        return resolve_for_stack(stack, dict(self.pins))[0]


def resolve_for_stack(stack: str, pins: Mapping[str, str]) -> tuple[Versions | None, tuple[Text, ...]]:
    """These releases resolved for a stack (estimator.job.versions.resolve_versions: the stack's other packages at
    their newest, or what the framework release given ran with), and a line for each one outside the stack's
    modelled range (left out: that package at its newest). None when no release the stack reads is given."""
    ranges = {r.package: r for r in stack_packages(stack)}
    label = get_stack(stack).label
    usable: list[str] = []
    errors: list[Text] = []
    for package, version in pins.items():
        r = ranges.get(package)
        if r is None:
            continue  # another stack's package: kept in the link for that stack
        if not in_range(version, r):
            errors.append(Text(N_("{package} {version} is outside the releases the {stack} stack is modelled for "
                                  "({oldest} to {newest}); priced at {newest}."), package=package, version=version,
                               stack=label, oldest=r.oldest, newest=r.newest))
            continue
        usable.append(f"{package}=={version}")
    if not usable:
        return None, tuple(errors)
    try:
        return resolve_versions(stack, pins=usable), tuple(errors)
    except ValueError as exc:  # nothing left that it refuses (checked above); kept so that a page never fails
        return None, (*errors, Text(N_("The releases could not be used: {error}."), error=error_message(exc)))


def releases(stack: str, package: str) -> tuple[str, ...]:
    """A picker's releases, newest first: the package's modelled range's newest and oldest, and for each fork of
    this stack on this package (or needing a release of it) the first release with it and the last without, within
    the range (options.versions FORKS)."""
    r = next(x for x in stack_packages(stack) if x.package == package)
    found = {r.newest, r.oldest}
    for fork in stack_forks(stack):
        if fork.package == package:
            found |= {fork.since, fork.last_without}
        found |= {floor for p, floor in fork.requires if p == package}
    ordered = sorted((v for v in found if in_range(v, r)), key=Version, reverse=True)
    out: list[str] = []
    for v in ordered:
        if not out or Version(out[-1]) != Version(v):
            out.append(v)
    return tuple(out)


# ---- a pasted package list -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pasted:
    """A package list read: the releases it gives (every package some stack models), how many packages it names,
    its format, and what it names that this stack does not price (another stack's framework, one no stack models)."""

    pins: tuple[tuple[str, str], ...]
    count: int
    format: str
    other_frameworks: tuple[tuple[str, str], ...] = ()  # (stack id, package==version) of the other stacks named
    unmodelled: tuple[str, ...] = ()  # frameworks no stack models (their labels)


def read_pasted(text: str, stack: str, stack_given: bool = True) -> Pasted:
    """The releases a pasted `pip freeze` / `pip list` gives, checked against the stack (resolve_versions: a stack
    package without a version, not PEP 440 or outside its range; a framework no stack models named without this
    stack's own package when the stack was not chosen). ValueError with one line for those, for a list
    parse_installed refuses, and for a list that names none of the stack's packages."""
    installed = parse_installed(text)
    versions = resolve_versions(stack, installed, stack_given=stack_given)
    pins: dict[str, str] = {}
    for p in installed.packages:
        if p.name not in PACKAGES or p.version is None:
            continue
        try:
            pins[p.name] = Version(p.version).public  # 2.8.0+cu128 is 2.8.0's code (docs/versions.md)
        except InvalidVersion:
            continue  # another stack's package (this stack's are checked above)
    own = [r.package for r in stack_packages(stack)]
    if not any(p in pins for p in own):
        raise ValueError(Text(N_("the list names none of the packages the {stack} stack reads ({packages})"),
                              stack=get_stack(stack).label, packages=", ".join(own)))
    frameworks = {package: sid for sid, package in STACK_FRAMEWORK.items() if package not in own}
    others = tuple((frameworks[p], f"{p}=={v}") for p, v in pins.items() if p in frameworks
                   and p not in ("torch", "transformers", "trl"))  # those three run under most stacks
    return Pasted(tuple((p, pins[p]) for p in PACKAGES if p in pins), len(installed.packages), installed.format,
                  others, versions.unmodelled)


# ---- the box ---------------------------------------------------------------------------------------------------

def _pins_now() -> dict[str, str]:
    return read_link_value(st.session_state.get(PARAM) or AUTO)[0]


def _set_pins(pins: Mapping[str, str]) -> None:
    st.session_state[PARAM] = link_value(pins) if pins else None  # None: none given (the newest releases)


def _apply_paste() -> None:
    """The paste box's button: the list's releases replace the pickers' (a package it leaves out: auto)."""
    text = str(st.session_state.get(PASTE, ""))
    if not text.strip():
        st.session_state[_STATE] = {"error": Text(N_("nothing pasted yet"))}
        return
    stack, stack_given = st.session_state.get(_DRAWN_FOR, (None, True))
    if stack is None:
        return
    try:
        pasted = read_pasted(text, stack, stack_given)
    except ValueError as exc:
        st.session_state[_STATE] = {"error": error_message(exc)}
        return
    _set_pins(dict(pasted.pins))
    st.session_state[_STATE] = {"read": pasted}


def _clear() -> None:
    """Back to the newest releases: the pickers on auto, the paste box emptied."""
    st.session_state[PARAM] = None
    st.session_state[PASTE] = ""
    st.session_state.pop(_STATE, None)


def _picked(package: str) -> None:
    """A picker moved: the link's value follows (auto takes the package out)."""
    pins = _pins_now()
    choice = st.session_state.get(PICK + package, AUTO)
    if choice == AUTO:
        pins.pop(package, None)
    else:
        pins[package] = str(choice)
    _set_pins(pins)
    st.session_state.pop(_STATE, None)  # the last paste's summary no longer says what is set


def _pasted_lines(pasted: Pasted, stack: str) -> list[str]:
    own = {r.package for r in stack_packages(stack)}
    used = ", ".join(f"{p} {v}" for p, v in pasted.pins if p in own)
    lines = [_("{n} packages read ({format}); the pickers are set: {packages}.").format(
        n=pasted.count, format=pasted.format, packages=used)]
    kept = ", ".join(f"{p} {v}" for p, v in pasted.pins if p not in own)
    if kept:
        lines.append(_("Kept in the link for the stacks that read them: {packages}.").format(packages=kept))
    for sid, pin in pasted.other_frameworks:
        lines.append(_("The list names {package}: choose the {stack} stack (Training stack) to price its "
                       "releases.").format(package=pin, stack=get_stack(sid).label))
    if pasted.unmodelled:
        lines.append(_("The list also names {frameworks}, which this estimate does not model.").format(
            frameworks=", ".join(pasted.unmodelled)))
    return lines


def _auto_release(stack: str, package: str, versions: Versions | None) -> str:
    """The release `auto` stands for in a package's picker: the newest modelled, or the one the framework release
    given ran with (options.versions COMPANIONS)."""
    framework = STACK_FRAMEWORK[stack]
    if versions is not None and package != framework and framework in versions.found:
        along = companions(framework, versions[framework])
        if package in along:
            return along[package]
    return next(r.newest for r in stack_packages(stack) if r.package == package)


def _draw_pickers(stack: str, pins: Mapping[str, str], versions: Versions | None) -> None:
    for r in stack_packages(stack):
        key = PICK + r.package
        options = list(releases(stack, r.package))
        given = pins.get(r.package)
        if given is not None and in_range(given, r):
            same = next((o for o in options if Version(o) == Version(given)), None)
            if same is None:  # a pasted release between the listed ones
                options = sorted([*options, given], key=Version, reverse=True)
            given = same or given
        # before the picker is drawn: it shows the link's release (auto for none, or one outside the range)
        st.session_state[key] = given if given in options else AUTO
        names = {AUTO: _("auto ({version})").format(version=_auto_release(stack, r.package, versions))}
        st.selectbox(r.package, [AUTO, *options], key=key, on_change=_picked, args=(r.package,),
                     format_func=lambda o, names=names: names.get(o, o),
                     help=_("The releases where {package} changes what a step keeps in memory, and the oldest and "
                            "newest modelled ({oldest} to {newest}); paste a list above for any other. auto = the "
                            "newest, or the one your framework release ran with.").format(
                         package=r.package, oldest=r.oldest, newest=r.newest))


def draw_versions_box(sb: Any, stack: str, stack_given: bool) -> Releases:
    """The box, for the stack the sidebar prices (`stack_given`: the user chose it, not 'auto'): the hidden link
    widget, then in an expander the paste box, the last paste's outcome, the lines about the link's releases and
    the pickers. Returns the releases for the setup."""
    # The hidden link widget (ui/params.py row `versions`), drawn without a default value: None is "none given"
    # (a link's versions=auto too). The box's callbacks set it, and Streamlit logs "created with a default value but
    # also had its value set via the Session State API", with a stack trace, for a widget that has a default
    # (streamlit/elements/lib/policies.py check_session_state_rules); None stays out of the address and the share link.
    row = TABLE[PARAM]
    text = sb.text_input(_(row.label), value=None, key=PARAM, bind="query-params", max_chars=row.max_chars,
                         label_visibility="collapsed")
    sb.html(_HIDE_LINK_WIDGET)
    st.session_state[_DRAWN_FOR] = (stack, stack_given)
    pins, link_errors = read_link_value(text or AUTO)
    versions, range_errors = resolve_for_stack(stack, pins)
    errors = link_errors + range_errors
    state = st.session_state.get(_STATE)
    given = len(versions.found) if versions is not None else 0  # the releases this stack prices
    title = (ngettext("Your releases ({n} given)", "Your releases ({n} given)", given).format(n=given) if given
             else _("Your releases (newest)"))
    with sb.expander(title, expanded=bool(state or errors)):
        st.caption(_("Paste `pip freeze` or `pip list` from the machine you train on: the estimate prices those "
                     "releases. The link keeps the ones it reads, never the list."))
        st.text_area(_("pip freeze or pip list"), key=PASTE, height=110, max_chars=MAX_CHARS,
                     placeholder="transformers==4.57.6\ntrl==0.21.0\npeft==0.17.1\n…")
        st.button(_("Read the list"), key=READ, on_click=_apply_paste, icon=":material/input:")
        if state and "error" in state:
            warn_notes([_("The package list could not be read: {error}. The releases are unchanged.").format(
                error=shown(state["error"]))])
        elif state:
            for line in _pasted_lines(state["read"], stack):
                st.caption(plain(line))
        warn_notes([shown(e) for e in errors])
        other = [f"{p} {v}" for p, v in pins.items() if p not in {r.package for r in stack_packages(stack)}]
        if other:
            st.caption(plain(_("Not read by the {stack} stack (kept for the stacks that read them): {packages}.")
                             .format(stack=get_stack(stack).label, packages=", ".join(other))))
        _draw_pickers(stack, pins, versions)
        if pins or state:
            st.button(_("Back to the newest releases"), key=CLEAR, on_click=_clear, type="tertiary",
                      icon=":material/restart_alt:")
    return Releases(tuple(pins.items()), stack, versions, errors)


# ---- the notes beside an estimate ------------------------------------------------------------------------------

def release_notes(spec: ModelSpec, setup: TrainingSetup, est: Estimate, trainer: TrainerSetup | None,
                  device_capacity: float | None, rule: str | None) -> tuple[str, ...]:
    """The estimate's release notes in the page's language (estimator/memory/forks.py version_notes): the releases
    given, then each version fork whose other side moves this estimate by 5 % or more, with that estimate. Shown
    whether or not releases were given: at the default, the newest releases, a fork still says what an older
    release would need (issue 28: "a note names the fork whenever it matters to the estimate shown"). One estimate
    per fork of the stack, built once per estimate shown (ui/once.py remembered)."""
    notes = remembered("versions.notes", est,
                       lambda: version_notes(spec, setup, est, trainer, device_capacity, rule), rule)
    return tuple(shown(n) for n in notes)


def show_release_notes(spec: ModelSpec, setup: TrainingSetup, est: Estimate, trainer: TrainerSetup | None,
                       device_capacity: float | None, rule: str | None) -> None:
    """The release notes as captions, where the page shows the estimate's own notes."""
    for note in release_notes(spec, setup, est, trainer, device_capacity, rule):
        st.caption(plain(note, limit=2000))


__all__ = ["PARAM", "Pasted", "Releases", "draw_versions_box", "link_value", "read_link_value", "read_pasted",
           "release_notes", "releases", "resolve_for_stack", "show_release_notes"]
