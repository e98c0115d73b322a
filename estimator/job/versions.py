"""What is installed, read once: the text of `pip freeze` or `pip list` and single `PKG==VERSION` pins, into the
versions a stack's estimate models (the ranges and the forks are data in estimator/options/versions.py).

Read: `pip freeze` and `pip list --format=freeze` (name==version, name===version; name @ url, whose wheel or sdist
file name gives the version; editable installs: `-e …#egg=name` and pip's "# Editable install with no version control
(name==version)" comment), `pip list` (its Package / Version table) and `pip list --format=json`. Skipped: blank lines,
comments, pip's own WARNING / DEPRECATION lines, option lines (-i, --index-url, -f …), inline "# via" comments,
environment markers; Windows and old-Mac line endings are read as newlines. Names are canonical
(packaging.utils.canonicalize_name: "Unsloth_Zoo" is "unsloth-zoo"), versions PEP 440 (packaging.version).

The rules, decided here once:
- a package the stack does not use is ignored, whatever its line says (a freeze lists hundreds); so is one no stack
  models. A line that is neither form is an error that names its number.
- a package listed twice with two different versions is an error (two lists pasted together); twice with the same
  version is fine.
- a single pin wins over the list (it is the more specific input and the later one, as a flag wins over an imported
  config); two pins that disagree are an error. A pin for a package the stack does not use is ignored and listed in
  `Versions.unused_pins`.
- a version outside the stack's modelled range is an error that names the range; a stack package nobody gives is
  modelled at its default (the newest release) and listed as such in `Versions.sources`, except beside a framework
  release that ran with an older one (options.versions.COMPANIONS: Unsloth's 2024.12 line), which gets that.
- a list that names a framework no stack models (XTuner, OpenRLHF, …) without the chosen stack's own package is
  an error when the stack was not chosen by the user (it would be a guess); otherwise the framework is only recorded
  in `Versions.unmodelled`.

Every error is a ValueError carrying one translatable line (estimator/i18n.py Text)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..i18n import N_, Text
from ..options.stacks import get_stack
from ..options.versions import (
    STACK_FRAMEWORK,
    UNMODELLED_FRAMEWORKS,
    companions,
    fork_applies,
    get_fork,
    in_range,
    stack_forks,
    stack_packages,
)

MAX_CHARS = 1_000_000  # a freeze of 2,000 packages is about 60 kB
MAX_SHOWN = 60  # characters of an offending line quoted in a message

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"  # PEP 508 name
_EXTRAS = r"(?:\s*\[[^\]]*\])?"
_MARKER = r"(?:\s*;.*)?"
_PINNED = re.compile(rf"^(?P<name>{_NAME}){_EXTRAS}\s*(?P<op>===|==)\s*(?P<version>[^\s;]+){_MARKER}$")
_URL = re.compile(rf"^(?P<name>{_NAME}){_EXTRAS}\s*@\s*(?P<url>\S+){_MARKER}$")
_PIN = re.compile(rf"^\s*(?P<name>{_NAME})\s*==\s*(?P<version>\S+)\s*$")
_ROW_NAME = re.compile(rf"^{_NAME}$")
_EDITABLE_COMMENT = re.compile(rf"^#\s*Editable\b.*\((?P<name>{_NAME})==(?P<version>[^()\s]+)\)\s*$")
_EGG = re.compile(r"[#&]egg=(?P<name>[A-Za-z0-9._-]+)")
_LIST_HEADER = re.compile(r"^Package\s+Version\b")
_DASHES = re.compile(r"^-{3,}(?:\s+-{3,})*$")
_INLINE_COMMENT = re.compile(r"\s+#.*$")
_PIP_NOISE = ("WARNING:", "DEPRECATION:", "ERROR:", "Could not generate requirement", "[notice]")


@dataclass(frozen=True)
class InstalledPackage:
    """One package as the input gives it: its canonical name, its version as written (None when the line gives
    none: a URL without a file name, an editable checkout), where it came from ("line 12" as a Text, or the pin as
    typed) and the line itself, shortened."""

    name: str
    version: str | None
    where: str
    text: str


@dataclass(frozen=True)
class Installed:
    """A package list read: every package it names, once each, in the order met; and its format."""

    packages: tuple[InstalledPackage, ...]
    format: str  # "freeze", "list" (the pip list table), "json" (pip list --format=json) or "empty"

    def get(self, name: str) -> InstalledPackage | None:
        key = canonicalize_name(name)
        return next((p for p in self.packages if p.name == key), None)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.packages)


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _line(n: int) -> Text:
    return Text(N_("line {line}"), line=n)


def _malformed(n: int, text: str) -> ValueError:
    return ValueError(Text(N_("line {line} of the package list is not a pip freeze or pip list line: {text}"),
                           line=n, text=_short(text)))


def _same_version(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.strip().lower() == b.strip().lower()


class _Collector:
    """Packages met so far, refusing a second, different version of one."""

    def __init__(self) -> None:
        self.found: dict[str, InstalledPackage] = {}

    def add(self, name: str, version: str | None, where: str, text: str) -> None:
        key = canonicalize_name(name)
        new = InstalledPackage(key, version, where, _short(text))
        old = self.found.get(key)
        if old is None:
            self.found[key] = new
        elif old.version is None and version is not None:
            self.found[key] = new  # an editable line's package, its version given by pip's comment
        elif version is not None and not _same_version(old.version, version):
            raise _conflict(old, new)

    def result(self, fmt: str) -> Installed:
        return Installed(tuple(self.found.values()), fmt if self.found else "empty")


def _conflict(old: InstalledPackage, new: InstalledPackage) -> ValueError:
    return ValueError(Text(N_("{package} is given twice with different versions: {first} ({first_where}) and "
                              "{second} ({second_where})"), package=new.name, first=old.version,
                           first_where=old.where, second=new.version, second_where=new.where))


def _url_version(name: str, url: str) -> str | None:
    """The version in a direct reference's file name (a wheel or an sdist of this package), else None."""
    try:
        filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        if filename.endswith(".whl"):
            wheel_name, version, _build, _tags = parse_wheel_filename(filename)
        else:
            wheel_name, version = parse_sdist_filename(filename)
    except ValueError:  # not a URL (urlsplit), not a wheel or sdist name (InvalidWheelFilename, …), bad version
        return None
    return str(version) if wheel_name == canonicalize_name(name) else None


def _freeze_line(raw: str, n: int, out: _Collector) -> None:
    if raw.startswith(("-e ", "-e\t", "--editable")):
        egg = _EGG.search(raw)
        if egg:  # the version comes from pip's comment line when it printed one
            out.add(egg.group("name"), None, _line(n), raw)
        return
    if raw.startswith("-"):
        return  # an option line: -i, --index-url, -f, --find-links, -r, -c, --pre …
    line = _INLINE_COMMENT.sub("", raw)
    m = _PINNED.match(line)
    if m:
        out.add(m.group("name"), m.group("version"), _line(n), raw)
        return
    m = _URL.match(line)
    if m:
        out.add(m.group("name"), _url_version(m.group("name"), m.group("url")), _line(n), raw)
        return
    raise _malformed(n, raw)


def _table_line(raw: str, n: int, out: _Collector) -> None:
    if _LIST_HEADER.match(raw) or _DASHES.match(raw):
        return
    tokens = raw.split()
    if len(tokens) < 2 or not _ROW_NAME.match(tokens[0]):
        raise _malformed(n, raw)
    out.add(tokens[0], tokens[1], _line(n), raw)


def _json_list(text: str) -> Installed | None:
    """pip list --format=json: [{"name": …, "version": …}, …]; None when the text is not that."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
    if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
        return None
    out = _Collector()
    for i, item in enumerate(doc, 1):
        name, version = item.get("name"), item.get("version")
        if not isinstance(name, str) or not _ROW_NAME.match(name) or not isinstance(version, str):
            raise ValueError(Text(N_("entry {n} of the JSON package list has no name and version"), n=i))
        out.add(name, version, Text(N_("entry {n}"), n=i), f"{name} {version}")
    return out.result("json")


def parse_installed(text: str) -> Installed:
    """The packages a `pip freeze` or `pip list` text names (module docstring: the formats and the rules).
    ValueError (one translatable line) for a malformed line, two different versions of one package, or a text
    that is not text or too long. Versions are kept as written; resolve_versions checks them."""
    if not isinstance(text, str):
        raise ValueError(Text(N_("the package list must be text")))
    if len(text) > MAX_CHARS:
        raise ValueError(Text(N_("the package list is too long: {n} characters (at most {max})"), n=len(text),
                              max=MAX_CHARS))
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if text.lstrip().startswith("["):
        parsed = _json_list(text)
        if parsed is not None:
            return parsed
    lines = [line.strip() for line in text.split("\n")]
    first = next((line for line in lines if line and not line.startswith("#")), "")
    table = bool(_LIST_HEADER.match(first))
    out = _Collector()
    for n, raw in enumerate(lines, 1):
        if not raw:
            continue
        if raw.startswith("#"):
            m = _EDITABLE_COMMENT.match(raw)
            if m:
                out.add(m.group("name"), m.group("version"), _line(n), raw)
            continue
        if raw.startswith(_PIP_NOISE):
            continue
        (_table_line if table else _freeze_line)(raw, n, out)
    return out.result("list" if table else "freeze")


def parse_pin(text: str) -> InstalledPackage:
    """One `PKG==VERSION` (the CLI's --installed, repeatable). ValueError for any other form or a version that is
    not PEP 440."""
    m = _PIN.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(Text(N_("--installed takes PKG==VERSION, got {value}"), value=repr(_short(str(text)))))
    pin = InstalledPackage(canonicalize_name(m.group("name")), m.group("version"), f"--installed {_short(text)}",
                           _short(text))
    _version(pin)
    return pin


def _version(p: InstalledPackage) -> Version:
    try:
        return Version(p.version or "")
    except InvalidVersion:
        raise ValueError(Text(N_("{package} {version} ({where}) is not a PEP 440 version"), package=p.name,
                              version=_short(p.version or ""), where=p.where)) from None


@dataclass(frozen=True)
class Versions(Mapping[str, Version]):
    """The release of every package that moves this stack's estimate: a mapping from the canonical name to its
    Version (what options.versions.fork_applies reads), with where each came from."""

    stack: str
    packages: tuple[tuple[str, Version], ...]
    # package → "installed" (the list), "pin", "framework" (the release the given framework release ran with,
    # options.versions.COMPANIONS) or "default" (the newest modelled release)
    sources: tuple[tuple[str, str], ...]
    unused_pins: tuple[str, ...] = ()  # pinned packages this stack does not use (ignored)
    unmodelled: tuple[str, ...] = ()  # frameworks the list names that no stack models (their labels)
    # forks priced on the other side than these releases are on, one change undone (memory/forks.py's notes); never
    # given by the user
    flipped: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> Version:
        key = canonicalize_name(name)
        for package, version in self.packages:
            if package == key:
                return version
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (package for package, _ in self.packages)

    def __len__(self) -> int:
        return len(self.packages)

    @property
    def found(self) -> tuple[str, ...]:
        """The packages the input gave (a list or a pin)."""
        return tuple(p for p, src in self.sources if src in ("installed", "pin"))

    @property
    def defaulted(self) -> tuple[str, ...]:
        """The packages modelled at their default (the newest release) because the input did not give them."""
        return tuple(p for p, src in self.sources if src == "default")

    def older_forks(self) -> tuple[str, ...]:
        """The ids of this stack's forks whose older behaviour these versions have (the estimate must model it)."""
        return tuple(f.id for f in stack_forks(self.stack) if not fork_applies(f.id, self))

    def as_json(self) -> dict[str, object]:
        """What JSON `setup.versions` echoes: each package's version and where it came from, and the forks whose
        older side is modelled."""
        src = dict(self.sources)
        out: dict[str, object] = {
            "stack": self.stack,
            "packages": {p: {"version": str(v), "from": src[p]} for p, v in self.packages},
            "older_behaviour": list(self.older_forks()),
        }
        if self.unused_pins:
            out["ignored_pins"] = list(self.unused_pins)
        if self.unmodelled:
            out["unmodelled_frameworks"] = list(self.unmodelled)
        return out


def older(fork_id: str, versions: Mapping[str, object]) -> bool:
    """Do these releases have the older behaviour of a version fork (options.versions.FORKS)? Only for a fork that
    moves the stack's estimate (Fork.stacks) of a `Versions`; a fork in `Versions.flipped` answers the other way."""
    fork = get_fork(fork_id)
    stack = getattr(versions, "stack", None)
    if stack is not None and stack not in fork.stacks:
        return False
    return (not fork_applies(fork_id, versions)) != (fork_id in getattr(versions, "flipped", ()))


def resolve_versions(stack: str, installed: Installed | str | None = None, pins: Iterable[str] = (), *,
                     stack_given: bool = True) -> Versions:
    """The versions `stack` is estimated at: the list's, then the pins' (which win), every other package at its
    default. `installed` is a parsed list or its text. ValueError (one translatable line) for anything
    parse_installed or parse_pin refuses, two pins that disagree, a stack package given without a version or with
    one that is not PEP 440 or outside the modelled range, and (stack_given=False) a list that is another
    framework's."""
    label = get_stack(stack).label  # ValueError for an unknown stack, with the choices
    if isinstance(installed, str):
        installed = parse_installed(installed)
    ranges = {r.package: r for r in stack_packages(stack)}
    given: dict[str, tuple[InstalledPackage, str]] = {}
    unmodelled: list[str] = []
    for p in installed.packages if installed else ():
        if p.name in UNMODELLED_FRAMEWORKS:
            unmodelled.append(p.name)
        if p.name in ranges:
            given[p.name] = (p, "installed")
    pinned: dict[str, InstalledPackage] = {}
    unused: list[str] = []
    for text in pins:
        pin = parse_pin(text)
        if pin.name in pinned and not _same_version(pinned[pin.name].version, pin.version):
            raise _conflict(pinned[pin.name], pin)
        pinned[pin.name] = pin
        if pin.name in ranges:
            given[pin.name] = (pin, "pin")
        elif pin.name not in unused:
            unused.append(pin.name)
    framework = STACK_FRAMEWORK[stack]
    if unmodelled and not stack_given and framework not in given:
        other = installed.get(unmodelled[0]) if installed else None
        raise ValueError(Text(N_("the package list names {framework} ({package} {version}), a stack this estimate "
                                 "does not model, and not {stack_package} ({stack}): choose the stack you run"),
                              framework=UNMODELLED_FRAMEWORKS[unmodelled[0]], package=unmodelled[0],
                              version=(other.version if other else None) or "?", stack_package=framework,
                              stack=label))
    resolved: dict[str, tuple[Version, str]] = {}
    for name, r in ranges.items():
        if name not in given:
            continue
        p, source = given[name]
        if p.version is None:
            raise ValueError(Text(N_("{package} ({where}) is installed without a version number ({text}); give it "
                                     "as {package}==VERSION"), package=name, where=p.where, text=p.text))
        version = _version(p)
        if not in_range(version, r):
            raise ValueError(Text(N_("{package} {version} ({where}) is outside the releases the {stack} stack is "
                                     "modelled for: {oldest} to {newest}"), package=name, version=str(version),
                                  where=p.where, stack=label, oldest=r.oldest, newest=r.newest))
        resolved[name] = (version, source)
    # a package nobody gives: the release the given framework release ran with (options.versions.COMPANIONS), else
    # the newest modelled
    along = companions(framework, resolved[framework][0]) if framework in resolved else {}
    for name, r in ranges.items():
        if name not in resolved:
            resolved[name] = (Version(along[name]), "framework") if name in along else (Version(r.default),
                                                                                      "default")
    packages = tuple((name, resolved[name][0]) for name in ranges)
    sources = tuple((name, resolved[name][1]) for name in ranges)
    return Versions(stack, packages, sources, tuple(unused), tuple(UNMODELLED_FRAMEWORKS[n] for n in unmodelled))


def default_versions(stack: str) -> Versions:
    """Every package of the stack at its default (the newest modelled release)."""
    return resolve_versions(stack)
