"""Fuzz the out-of-memory reader: malformed messages (the real ones cut, altered, with huge numbers, odd units,
markup and junk spliced in, and random text) through the parser and the diagnosis (400 cases), the CLI (120 cases
and a corpus of 41 hand-written ones) and the page (a sample of 12 through AppTest). Nothing may raise anything but
the parser's one-sentence ValueError; every figure read is a plausible byte count; the CLI exits 0 or 2 with one
line; the page shows no exception and no live markup. Derandomized: every run checks the same cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.advice.oom import diagnose_oom
from estimator.i18n import Text
from estimator.job.stack import resolve_setup
from estimator.models.presets import load_preset
from estimator.oom_message import IMPLAUSIBLE_BYTES, MAX_TEXT_CHARS, OomReading, parse_oom
from estimator.report.cli import main
from tests.test_bad_input import APP, IMG, MD_LINK, SCRIPT, assert_safe

DATA = Path(__file__).resolve().parent / "data" / "oom"
REAL = sorted(p.read_text(encoding="utf-8") for p in DATA.glob("*.txt"))
LLAMA = load_preset("llama-3.1-8b")
SETUP = resolve_setup("trl", method="lora")
SIZE_FIELDS = ("requested_bytes", "capacity_bytes", "free_bytes", "in_use_bytes", "allocated_bytes",
               "reserved_bytes", "reserved_unallocated_bytes", "allowed_bytes", "private_pool_bytes", "other_bytes",
               "limit_bytes", "max_buffer_bytes", "peak_bytes")
ODD_NUMBERS = ["1e309", "9" * 40, "-1", "nan", "inf", "0.000001", "00000", "1,024.00", "١٢", "1.2.3", "0x10"]
ODD_UNITS = ["PiB", "gb", "GiBB", "bytes", "", "KB", "EiB", "Gib", "gigabytes", "MiB\u200b"]
JUNK = [SCRIPT, IMG, MD_LINK, "**bold** `code` $x$", "\x1b[31m", "\u202e", "💥", "\r\n", "\t", "<b>", "&lt;"]

CORPUS = [
    "", " ", "\n\n\n", "CUDA out of memory", "CUDA out of memory.", "CUDA out of memory. Tried to allocate",
    "CUDA out of memory. Tried to allocate 1e309 GiB. GPU 0 has a total capacity of 1e309 GiB",
    "CUDA out of memory. Tried to allocate 99999999999999999999999999.00 GiB.",
    "CUDA out of memory. Tried to allocate -3.00 GiB. GPU 0 has a total capacity of -1 GiB of which nan is free.",
    "CUDA out of memory. Tried to allocate 2.00 PiB (GPU 0; 24.00 PiB total capacity)",
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 99999 has a total capacity of 24.00 GiB",
    "HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 191.98 GiB of which 0 bytes is free.",
    "XPU out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 15.11 GiB of which 0 bytes is free.",
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
    "MPS backend out of memory (MPS allocated: , other allocations: , max allowed: ). Tried to allocate on pool.",
    "MPS backend out of memory (MPS allocated: 9.48 GiB, other allocations: 480.00 KiB, max allowed: 9.47 GiB). "
    "Tried to allocate 256 bytes on shared pool.",
    "[metal::malloc] Attempting to allocate bytes which is greater than the maximum allowed buffer size of bytes.",
    "[metal::malloc] Attempting to allocate 99999999999999999999999 bytes which is greater than the maximum allowed "
    "buffer size of 1 bytes.",
    "[metal::malloc] Resource limit () exceeded.", "[malloc] Unable to allocate bytes.",
    "[METAL] Command buffer execution failed: Internal Error (0000000e:Internal Error)",
    "kIOGPUCommandBufferCallbackErrorOutOfMemory", "Peak mem 1e309 GB\n[METAL] Command buffer execution failed: x",
    SCRIPT + "CUDA out of memory. Tried to allocate " + IMG + " GiB",
    "CUDA out of memory. Tried to allocate 2.00 GiB" + MD_LINK + ". GPU 0 has a total capacity of 8.00 GiB",
    "\x00CUDA out of memory", "\ufeffCUDA out of memory. Tried to allocate 2.00 GiB.", "💥" * 1000,
    "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 1.00 GiB is free.",
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.73 GiB total capacity; "
    "13.67 GiB already allocated; 15.88 MiB free; " + "9" * 500 + " GiB reserved in total by PyTorch)",
    "CUDA out of memory. " * 500, "[rank0]: [rank1]: [rank2]: CUDA out of memory. Tried to allocate 1.00 GiB.",
    "Process 1 has 1.00 GiB memory in use. " * 200, "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
    "total capacity of 0 bytes of which 0 bytes is free.",
    "x" * (MAX_TEXT_CHARS + 10), "\n".join(REAL), REAL[0][: len(REAL[0]) // 2], REAL[3].upper(), REAL[5].lower(),
    REAL[7].replace("GiB", "GB").replace("MiB", "MB"), REAL[1].replace(".", ","),
]
assert len(CORPUS) == 41


def mutate(text: str, ops: list[tuple[int, int, int]]) -> str:
    """Apply (kind, where, which) edits: cut, a number replaced, a unit replaced, junk spliced in, a copy."""
    for kind, where, which in ops:
        at = where % (len(text) + 1)
        if kind == 0:
            text = text[:at]
        elif kind == 1:
            text = text[:at] + ODD_NUMBERS[which % len(ODD_NUMBERS)] + text[at:]
        elif kind == 2:
            for unit in ("GiB", "MiB", "GB", "MB", "bytes"):
                if unit in text:
                    text = text.replace(unit, ODD_UNITS[which % len(ODD_UNITS)], 1 + which % 3)
                    break
        elif kind == 3:
            text = text[:at] + JUNK[which % len(JUNK)] + text[at:]
        else:
            text = text + "\n" + text[: which % (len(text) + 1)]
    return text


messages = st.one_of(
    st.builds(mutate, st.sampled_from(REAL), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10**6),
                                                                st.integers(0, 100)), max_size=4)),
    st.text(max_size=300),
    st.sampled_from(CORPUS),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="replace")),
)


def check_reading(text: str) -> OomReading | None:
    """Parse: a reading with plausible figures and a JSON form, or the parser's one-sentence ValueError."""
    try:
        r = parse_oom(text)
    except ValueError as exc:
        assert len(exc.args) == 1 and isinstance(exc.args[0], Text) and "\n" not in str(exc)
        return None
    for name in SIZE_FIELDS:
        value = getattr(r, name)
        assert value is None or (isinstance(value, int) and 0 <= value < IMPLAUSIBLE_BYTES), (name, value)
    for _pid, used in r.other_processes:
        assert used is None or 0 <= used < IMPLAUSIBLE_BYTES
    json.dumps(r.as_json())
    return r


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(messages)
def test_parser_and_diagnosis_never_break(text):
    r = check_reading(text)
    if r is None:
        return
    d = diagnose_oom(r, LLAMA, SETUP)
    doc = json.dumps(d.as_json())
    assert "NaN" not in doc and "Infinity" not in doc
    if d.short_by_bytes is not None:
        assert math.isfinite(d.short_by_bytes) and d.short_by_bytes >= 0


def cli(tmp_path: Path, text: str, capsys, *extra: str) -> None:
    """--oom-log through the CLI: exit 0 with JSON, or 2 with one line on stderr and nothing on stdout."""
    path = tmp_path / "oom.log"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        code = main(["--model", "qwen2.5-0.5b", "--oom-log", str(path), "--json", *extra])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert code in (0, 2), code
    if code == 2:
        assert out.out == "" and len(out.err.strip().splitlines()) == 1, out.err
    else:
        assert "oom" in json.loads(out.out)


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_cli_corpus(tmp_path, capsys, i):
    cli(tmp_path, CORPUS[i], capsys)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(messages)
def test_cli_never_breaks(tmp_path_factory, capsys, text):
    cli(tmp_path_factory.mktemp("oom"), text, capsys)


APP_SAMPLE = [CORPUS[i] for i in (0, 6, 9, 14, 18, 24, 25, 27, 31)] + [
    mutate(REAL[0], [(3, 40, 0), (1, 90, 0)]), mutate(REAL[8], [(3, 10, 1), (0, 200, 0)]),
    REAL[2] + "\n" + MD_LINK + IMG,
]


@pytest.mark.parametrize("i", range(len(APP_SAMPLE)))
def test_the_page_survives_malformed_messages(i):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/oom.py").run()
    at.text_area(key="oom_text").set_value(APP_SAMPLE[i][:MAX_TEXT_CHARS]).run()
    assert_safe(at)
    assert at.title and at.title[0].value  # the page is still there
