"""A config file's text → a plain mapping, safely: size and shape limits, YAML through PyYAML's safe loader only
(no tag constructs a Python object), JSON through the json module, and the export's marker comment. Every
refusal is a ConfigError (a ValueError) whose message is one line fit to show a user; nothing of the file's
content is put into a message beyond a short, printable excerpt."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from ...i18n import N_, Text

MAX_CONFIG_BYTES = 1_000_000  # 1 MB: a real training config is a few kB (the same cap as a config.json upload)
MAX_DEPTH = 32  # nesting levels; the deepest shipped config (torchtune's) has 4
MAX_NODES = 20_000  # values in the document, aliases expanded; the largest shipped config has a few hundred
MAX_KEY_CHARS = 200
MARKER = "will-it-fit:"  # the export's first comment line: "# will-it-fit: stack=trl trainer=dpo gpus=4"
MARKER_LINES = 5  # the marker is looked for in the file's first lines only
_MARKER_RE = re.compile(r"^\s*#\s*will-it-fit:\s*(.*)$")


class ConfigError(ValueError):
    """The file cannot be read as a training config at all: the message says why, in one line."""


def printable(text: object, limit: int = 80) -> str:
    """A short, one-line, printable excerpt of a value from a file (for lists and messages)."""
    raw = text if isinstance(text, str) else json.dumps(text, default=str, ensure_ascii=False)
    out = "".join(ch if ch.isprintable() else " " for ch in raw)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def decode(data: bytes | str) -> str:
    """Text of the file: at most 1 MB, UTF-8 (a byte-order mark allowed), no NUL bytes (binary data)."""
    if isinstance(data, str):
        if len(data.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
            raise ConfigError(Text(N_("the config is larger than 1 MB; a training config is a few kB")))
        raw = data
    else:
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(Text(N_("the config is larger than 1 MB; a training config is a few kB")))
        if b"\x00" in data:
            raise ConfigError(Text(N_("the file holds binary data, not a YAML or JSON text config")))
        try:
            raw = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(Text(N_("the file is not UTF-8 text; save the config as UTF-8 YAML or JSON"))) from None
    if "\x00" in raw:
        raise ConfigError(Text(N_("the file holds binary data, not a YAML or JSON text config")))
    if not raw.strip():
        raise ConfigError(Text(N_("the config is empty")))
    return raw


def _yaml_problem(exc: yaml.YAMLError) -> Text:
    """PyYAML's error as one line: what and where (line and column), never the file's text."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    tag = re.search(r"constructor for the tag '([^']{0,60})", str(exc))
    if isinstance(exc, yaml.constructor.ConstructorError) and tag:
        return Text(N_("the YAML uses the tag {tag}{where}, which builds an object; only plain YAML values are read "
                       "(safe loader)"), tag=printable(tag.group(1), 60), where=where)
    problem = printable(getattr(exc, "problem", None) or type(exc).__name__, 80)
    return Text(N_("not valid YAML: {problem}{where}"), problem=problem, where=where)


def _check_shape(doc: Any) -> None:
    """Depth, size and key limits over the loaded document (aliases counted each time they are reached, so a
    'billion laughs' document stops at MAX_NODES instead of being walked forever)."""
    budget = [MAX_NODES]

    def walk(node: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(Text(N_("the config has more than {n} values; a training config has a few hundred"),
                                   n=MAX_NODES))
        if depth > MAX_DEPTH:
            raise ConfigError(Text(N_("the config is nested more than {n} levels deep"), n=MAX_DEPTH))
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise ConfigError(Text(N_("the config has a key that is not a name ({key})"),
                                           key=printable(key, 40)))
                if isinstance(key, str) and len(key) > MAX_KEY_CHARS:
                    raise ConfigError(Text(N_("the config has a key longer than {n} characters"), n=MAX_KEY_CHARS))
                walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                walk(value, depth + 1)

    walk(doc, 0)


def _json_constant(name: str) -> float:
    raise ConfigError(Text(N_("the JSON holds {name}, which is not a number a config can use"), name=name))


def parse_text(raw: str) -> dict[str, Any]:
    """The document as a mapping: JSON when it starts with '{', else YAML (JSON is YAML too, but the json module
    gives the better message for a JSON file). Raises ConfigError."""
    text = raw.lstrip()
    try:
        if text.startswith("{"):
            try:
                doc = json.loads(text, parse_constant=_json_constant)
            except json.JSONDecodeError as exc:
                raise ConfigError(Text(N_("not valid JSON: {problem} (line {line}, column {col})"),
                                       problem=printable(exc.msg, 60), line=exc.lineno, col=exc.colno)) from None
        else:
            try:
                doc = yaml.load(raw, Loader=yaml.SafeLoader)  # noqa: S506 - SafeLoader: yaml.safe_load's loader
            except yaml.YAMLError as exc:
                raise ConfigError(_yaml_problem(exc)) from None
    except RecursionError:
        raise ConfigError(Text(N_("the config is nested more than {n} levels deep"), n=MAX_DEPTH)) from None
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        # Python refuses to convert integers of more than 4,300 digits (sys.get_int_max_str_digits)
        raise ConfigError(Text(N_("the config holds a number too long to read ({problem})"),
                               problem=printable(str(exc), 60))) from None
    if not isinstance(doc, dict):
        kind = "a list" if isinstance(doc, list) else ("nothing" if doc is None else "a single value")
        raise ConfigError(Text(N_("a training config is a mapping of keys to values; this file holds {kind}"),
                               kind=kind))
    _check_shape(doc)
    return {str(k): v for k, v in doc.items()}


def marker(raw: str) -> dict[str, str]:
    """The export's marker comment (`# will-it-fit: stack=trl trainer=dpo gpus=4`) in the first lines: what the
    tools themselves ignore (a comment) but the export knew: the stack, the trainer, the GPU count and, where the
    format has no field for it, the model. {} when absent."""
    for line in raw.splitlines()[:MARKER_LINES]:
        m = _MARKER_RE.match(line)
        if m:
            pairs = (part.split("=", 1) for part in m.group(1).split() if "=" in part)
            return {k.strip()[:20]: v.strip()[:200] for k, v in pairs}
    return {}


def finite(value: object) -> bool:
    """A real number (bools excluded), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
