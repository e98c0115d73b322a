"""What every format's reader shares: the three lists (read, ignored, not honoured) as `Entry` rows, and a
`Reader` that looks keys up in the document, checks each value against the setup's limits, records where every
setting came from, and at the end sorts the keys nobody read into 'changes no memory', 'not modelled' or
'unknown key'."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ...i18n import N_, Text
from ..settings import SETTINGS, TRAINER_NAMES
from ._read import finite, printable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

MISSING: Any = object()

# The setup's and the trainer's settings as the lists name them: the settings table's labels (marked for translation
# where written, estimator/job/settings.py), and the model.
SETTING_NAMES: dict[str, str] = {"model": N_("model"), **{s.name: s.label for s in SETTINGS if s.label}}
TRAINER_FIELDS = frozenset(TRAINER_NAMES)


@dataclass(frozen=True)
class Entry:
    """One row of a list: the config's key (dotted for nested keys), its value as a short printable excerpt
    ('' when the key is absent and the tool's default applies) and what became of it: the setting it set
    ('batch per GPU = 2'), or the reason it was ignored or not honoured."""

    key: str
    value: str
    detail: str
    default: bool = False  # the key is absent: the tool's own default was used
    setting: str = ""  # read: the setting it set (not shown; lets a setting be withdrawn when it cannot apply)

    def as_json(self) -> dict[str, object]:
        return {"key": self.key, "value": self.value, "detail": str(self.detail), "default": self.default}


@dataclass(frozen=True)
class ReadContext:
    """What a format's reader gets beside the document: the stack it reads for, the export's marker, and a way
    to fetch a file the config names (a DeepSpeed JSON): `attachment(path)` → its bytes or None."""

    stack: str
    marker: dict[str, str]
    attachment: Callable[[str], bytes | None]
    name: str = ""  # the file's name: a hint where the file's keys do not say (trl <command>_config.yaml)


def shown(value: object) -> str:
    """A value as the lists show it: YAML's spelling for null and booleans, else a short printable excerpt."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        value = list(value)
    return printable(value, 80)


def load_keys(name: str) -> frozenset[str]:
    """A format's schema key list (keys/<name>.txt, written by scripts/config_sources.py from the project's source)."""
    text = resources.files(__package__).joinpath("keys", f"{name}.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


class Reader:
    """Reads one document: `get` marks a key as used, `set` records a setting and its source, `ignore` and
    `refuse` record the other two lists. Checks (`integer`, `boolean`, `number`) refuse a bad value with the reason
    and return None, so the caller keeps the tool's default."""

    def __init__(self, doc: dict[str, Any], tool: str) -> None:
        self.doc = doc
        self.tool = tool  # "Axolotl 0.19.0": named in the reasons
        self.settings: dict[str, Any] = {}
        self.trainer: dict[str, Any] = {}
        self.read: list[Entry] = []
        self.ignored: list[Entry] = []
        self.refused: list[Entry] = []
        self.used: set[str] = set()

    # ---- looking up ---------------------------------------------------------------------------------------
    def lookup(self, key: str, doc: Any = MISSING) -> Any:
        """The value at a dotted key, MISSING when any part is absent (does not mark it used)."""
        node = self.doc if doc is MISSING else doc
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return MISSING
            node = node[part]
        return node

    def has(self, key: str) -> bool:
        return self.lookup(key) is not MISSING

    def get(self, key: str, default: Any = MISSING) -> Any:
        """The value at a dotted key (marked used), `default` when absent."""
        self.used.add(key)
        value = self.lookup(key)
        return default if value is MISSING else value

    def given(self, key: str) -> bool:
        """Present and not null (YAML's empty `key:` is null: the tool's default applies)."""
        return self.lookup(key) not in (MISSING, None)

    # ---- recording ----------------------------------------------------------------------------------------
    def _store(self, name: str, value: Any) -> None:
        if name in ("model", "stack"):  # recorded in the lists; the caller keeps them apart from the setup
            return
        (self.trainer if name in TRAINER_FIELDS else self.settings)[name] = value

    def set(self, name: str, value: Any, key: str, why: str = "", raw: Any = MISSING) -> None:
        """A setting read from `key` (its value as written is shown; `why` explains a translation)."""
        self.used.add(key)
        self._store(name, value)
        written = self.lookup(key) if raw is MISSING else raw
        self.read.append(Entry(printable(key, 100), "" if written is MISSING else shown(written),
                               _detail(name, value, why), setting=name))

    def default(self, name: str, value: Any, key: str, source: str) -> None:
        """A setting the file leaves to the tool: the tool's default, with where it is written."""
        self._store(name, value)
        self.read.append(Entry(printable(key, 100), "", _detail(name, value, source), default=True, setting=name))

    def withdraw(self, name: str, reason: str) -> None:
        """A setting that cannot apply with the others (the setup's own checks refused the combination): its read
        entries move to the not-honoured list with the reason."""
        (self.trainer if name in TRAINER_FIELDS else self.settings).pop(name, None)
        moved = [e for e in self.read if e.setting == name]
        self.read = [e for e in self.read if e.setting != name]
        for entry in moved or [Entry(name, "", "")]:
            self.refused.append(Entry(entry.key, entry.value, reason))

    def ignore(self, key: str, reason: str) -> None:
        self.used.add(key)
        self.ignored.append(Entry(printable(key, 100), shown(self.lookup(key)), reason))

    def refuse(self, key: str, reason: str, raw: Any = MISSING) -> None:
        self.used.add(key)
        value = self.lookup(key) if raw is MISSING else raw
        self.refused.append(Entry(printable(key, 100), "" if value is MISSING else shown(value), reason))

    # ---- a key read into a setting when given --------------------------------------------------------------
    def take_int(self, name: str, key: str, low: int, high: int) -> bool:
        """When `key` is given (not null): its whole number in [low, high] becomes setting `name`, or it is
        refused. Returns whether the key was given (the caller's default applies otherwise)."""
        if not self.given(key):
            return False
        value = self.integer(key, low, high)
        if value is not None:
            self.set(name, value, key)
        return True

    def take_number(self, name: str, key: str, low: float, high: float) -> bool:
        if not self.given(key):
            return False
        value = self.number(key, low, high)
        if value is not None:
            self.set(name, value, key)
        return True

    def take_bool(self, name: str, key: str) -> bool:
        if not self.given(key):
            return False
        value = self.boolean(key)
        if value is not None:
            self.set(name, value, key)
        return True

    # ---- checked values ------------------------------------------------------------------------------------
    def integer(self, key: str, low: int, high: int, value: Any = MISSING) -> int | None:
        """A whole number in [low, high] (an integral float or a numeric string, as the tools' parsers accept),
        else refused with the limits."""
        raw = self.get(key) if value is MISSING else value
        number = _as_int(raw)
        if number is None:
            self.refuse(key, Text(N_("not a whole number; {tool} needs one here"), tool=self.tool), raw)
            return None
        if not low <= number <= high:
            self.refuse(key, Text(N_("out of range: the estimate takes {low} to {high}"), low=low, high=high), raw)
            return None
        return number

    def number(self, key: str, low: float, high: float, value: Any = MISSING) -> float | None:
        """A finite number in [low, high], else refused."""
        raw = self.get(key) if value is MISSING else value
        number = _as_float(raw)
        if number is None or not low <= number <= high:
            self.refuse(key, Text(N_("not a number between {low} and {high}"), low=str(low), high=str(high)), raw)
            return None
        return number

    def boolean(self, key: str, value: Any = MISSING) -> bool | None:
        """true/false (also 'true'/'false' and 0/1, as pydantic and argparse accept), else refused."""
        raw = self.get(key) if value is MISSING else value
        result = as_bool(raw)
        if result is None:
            self.refuse(key, Text(N_("not true or false")), raw)
        return result

    def text(self, key: str, value: Any = MISSING) -> str | None:
        raw = self.get(key) if value is MISSING else value
        if isinstance(raw, str) and raw.strip():
            return raw.strip()
        self.refuse(key, Text(N_("not a name")), raw)
        return None

    # ---- the keys nobody read --------------------------------------------------------------------------------
    def finish(self, keys: Iterable[str], schema: frozenset[str], no_memory: Callable[[str], str | None],
               not_modelled: Callable[[str], str | None] = lambda key: None) -> None:
        """Sort every key not read: one that changes no memory (no_memory gives the reason), one of the schema's
        that the estimate does not model (not_modelled gives a reason, else a general one), or an unknown key."""
        listed = {e.key.split(".")[0] for e in (*self.read, *self.ignored, *self.refused)}
        for key in keys:
            if key in self.used or any(u.startswith(key + ".") for u in self.used):
                if key not in listed:  # read, but it set nothing (load_in_4bit: false; a block read key by key)
                    self.ignore(key, Text(N_("read: it changes nothing the estimate prices here")))
                continue
            reason = no_memory(key)
            if reason is None and self.doc.get(key, 0) is None and key in schema:
                reason = Text(N_("empty: {tool}'s default applies"), tool=self.tool)
            if reason:
                self.ignore(key, reason)
            elif key in schema:
                self.refuse(key, not_modelled(key) or Text(N_("not modelled: {tool} reads it, the estimate does not "
                                                              "count what it changes"), tool=self.tool))
            else:
                self.refuse(key, Text(N_("unknown key: not in {tool}'s config schema (a typo?)"), tool=self.tool))


def _detail(name: str, value: Any, why: str) -> str:
    setting = Text(SETTING_NAMES.get(name, name))
    shown_value = ", ".join(value) if isinstance(value, tuple) else shown(value)
    if why:
        return Text(N_("{setting} = {value} ({why})"), setting=setting, value=shown_value, why=why)
    return Text(N_("{setting} = {value}"), setting=setting, value=shown_value)


def _as_int(raw: Any) -> int | None:
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if finite(raw) and raw.is_integer() else None
    if isinstance(raw, str) and len(raw) <= 20:
        try:
            return int(raw.strip())
        except ValueError:
            return None
    return None


def _as_float(raw: Any) -> float | None:
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)):
        value = float(raw) if abs(raw) < 1e300 else float("inf")
        return value if finite(value) else None
    if isinstance(raw, str) and len(raw) <= 30:
        try:
            value = float(raw.strip())
        except ValueError:
            return None
        return value if finite(value) else None
    return None


def as_bool(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "yes", "no"):
        return raw.strip().lower() in ("true", "yes")
    return None
