"""Languages: English (the source text) and Spanish, with the standard gettext tooling.

Strings a user reads are marked with `_()` (stdlib gettext style) or, where they are defined before the
language is known (module constants, labels stored in data), with `N_()` and translated where shown with
`_(value)`. Babel extracts them into locales/messages.pot (babel.cfg); translations live in
locales/<lang>/LC_MESSAGES/messages.po, read at run time with Babel's po reader into a gettext
Translations object (no compiled .mo file to keep in step). The language is a context variable: the app
sets it once per rerun (ui/lang.py), the CLI leaves it at English. Numbers go through format_number so a
Spanish page reads "17,0 GB" and an English one "17.0 GB".

Errors: an exception a user may read (a bad config.json, a Hub failure, a setup the estimator refuses) is raised
with a Text as its one argument, `ValueError(Text(N_("… {key} …"), key=key))`: str(exc) is the English text (the
CLI, logs and tests read that), and the app shows localised_error(exc), the same message in the page's language.

English needs nothing but the standard library; Babel is imported only when another language is used."""

from __future__ import annotations

import contextlib
import gettext
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


LANGUAGES: dict[str, str] = {"en": "English", "es": "Español"}  # code → its own name (the switch shows these)
DEFAULT_LANGUAGE = "en"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locales"
DOMAIN = "messages"

MIN_GROUPING_DIGITS = {"es": 2}  # CLDR numbers.minimumGroupingDigits where it is not 1

_language: ContextVar[str] = ContextVar("language", default=DEFAULT_LANGUAGE)


def normalise_language(value: object) -> str | None:
    """'es', 'es-ES', 'ES_mx' → 'es'; an unsupported or empty value → None."""
    if not isinstance(value, str) or not value.strip():
        return None
    code = value.strip().replace("_", "-").split("-")[0].lower()
    return code if code in LANGUAGES else None


def set_language(code: str) -> None:
    """Use this language for every following _() and format_number() in this context (thread, rerun)."""
    _language.set(normalise_language(code) or DEFAULT_LANGUAGE)


def get_language() -> str:
    return _language.get()


@contextlib.contextmanager
def language(code: str) -> Iterator[None]:
    """Temporarily use a language: `with language("es"): ...`."""
    token = _language.set(normalise_language(code) or DEFAULT_LANGUAGE)
    try:
        yield
    finally:
        _language.reset(token)


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The catalogue of one language, read once from its .po file (Babel's reader → gettext Translations).
    English, or a language without a catalogue, gets the identity."""
    po_path = LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po"
    if code == DEFAULT_LANGUAGE or not po_path.is_file():
        return gettext.NullTranslations()
    from babel.messages.pofile import read_po
    from babel.support import Translations

    with po_path.open("rb") as handle:
        catalog = read_po(handle, locale=code)
    result = Translations(domain=DOMAIN)
    for message in catalog:
        if not message.id or not message.string or message.fuzzy:
            continue  # untranslated or fuzzy: the English text shows (a test keeps the catalogue complete)
        if isinstance(message.id, tuple):  # plural forms: (singular, plural) → [form0, form1, …]
            for index, form in enumerate(message.string):
                if form:
                    result._catalog[(message.id[0], index)] = form
        else:
            result._catalog[message.id] = message.string
    result.plural = lambda n: int(n != 1)  # English and Spanish: one, other
    return result


def _(message: str) -> str:
    """Translate a message into the current language (the source text is English); a Text formats its
    template's translation with its values."""
    if not message:
        return message
    if isinstance(message, Text):
        return message.translated()
    return translations(_language.get()).gettext(message)


class Text(str):
    """A message built from values, kept for later: English as a str, translated where shown by _(). For notes
    written into cached objects (a model's spec), whose reader's language is not known when they are written:
    `Text(N_("a {n} × {d} table ({b} B parameters)"), n=262144, d=35, b=(2.35, 2))`. Values: an int is grouped
    (format_int), a (number, digits) pair or (number, digits, grouping) triple goes through format_number (see
    short_number), a Text is translated too, anything else is shown as it is (names, ids)."""

    template: str
    args: dict[str, object]

    def __new__(cls, template: str, /, **args: object) -> Text:
        token = _language.set(DEFAULT_LANGUAGE)
        try:
            english = template.format(**_shown_values(args))
        finally:
            _language.reset(token)
        obj = super().__new__(cls, english)
        obj.template, obj.args = template, args
        return obj

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, object]]:  # pickling (st.cache_data) keeps it a Text
        return (self.template,), self.args

    def translated(self) -> str:
        return translations(_language.get()).gettext(self.template).format(**_shown_values(self.args))


def _shown_values(args: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in args.items():
        if isinstance(value, Text):
            out[key] = value.translated()
        elif isinstance(value, tuple) and len(value) in (2, 3):
            out[key] = format_number(float(value[0]), int(value[1]), *(bool(v) for v in value[2:]))
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = format_int(value)
        else:
            out[key] = value
    return out


def short_number(value: float) -> tuple[float, int, bool] | str:
    """A Text value written as Python's f"{value:g}" writes it in English (24, 0.5, 100000: no grouping, no
    trailing zeros) and with the language's decimal sign otherwise (0,5); an exponent form stays as it is."""
    shown = f"{value:g}"
    if "e" in shown or "n" in shown:  # 1e+06, inf, nan: no locale form
        return shown
    return (value, len(shown.partition(".")[2]), False)


def error_message(exc: BaseException) -> str:
    """An exception's message as it was raised: the Text it carries (to nest in another Text, translated where
    shown), or its English str when it carries none (a library's error)."""
    message = exc.args[0] if len(exc.args) == 1 else None
    return message if isinstance(message, Text) else str(exc)


def shown(value: str) -> str:
    """A value as the page shows it: a Text translated with its values, a plain str (a name, a library's
    message) exactly as it is (no catalogue lookup)."""
    return value.translated() if isinstance(value, Text) else value


def localised_error(exc: BaseException) -> str:
    """An exception's message in the current language, for the app's "… could not be used: {error}" notes. An
    exception raised with a Text (see the module docstring) is translated with its values; any other shows
    str(exc)."""
    return shown(error_message(exc))


def ngettext(singular: str, plural: str, n: int) -> str:
    """Singular or plural, translated: ngettext("{n} GPU", "{n} GPUs", n).format(n=n)."""
    return translations(_language.get()).ngettext(singular, plural, n)


def N_(message: str) -> str:  # noqa: N802 - the gettext convention's name
    """Mark a string for extraction without translating it now (it is translated where it is shown)."""
    return message


def format_number(value: float, digits: int = 1, grouping: bool = True) -> str:
    """A number for the current language: 1,234.5 in English, 1234,5 / 12.345,5 in Spanish (Babel's CLDR
    data: Spanish groups thousands from five digits on)."""
    code = _language.get()
    if code == DEFAULT_LANGUAGE:
        return f"{value:{',' if grouping else ''}.{digits}f}"
    from babel.numbers import format_decimal

    # CLDR's minimum grouping digits: Spanish writes 2048 but 12.345 (Babel's custom patterns ignore it).
    grouping = grouping and abs(value) >= 10 ** (2 + MIN_GROUPING_DIGITS.get(code, 1))
    pattern = ("#,##0" if grouping else "0") + ("." + "0" * digits if digits > 0 else "")
    return format_decimal(round(value, digits), format=pattern, locale=code, decimal_quantization=True)


def format_int(value: int) -> str:
    """A whole number with the language's grouping: 131,072 / 131.072."""
    return format_number(value, 0)
