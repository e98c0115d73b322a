"""Follow the max length from the calculator's slider to its chart (issue 27's file hops): one change of the
max-length box on the calculator page under AppTest, and every line of the project that names the length (max_len,
seq_len, lm_seq_len, .tokens) while a local there holds the slider's value (the number, or a setup or context whose
seq_len it is), in execution order, until the chart builder (ui/charts.py memory_bar_spec) is called. A hop is a
change of file between two consecutive such lines; a return is a hop into a file the value had already left.
Prints the path and the counts; asserts nothing.

Usage: .venv/bin/python bench/length_hops.py"""
import linecache
import re
import sys
import threading
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = str(Path(__file__).resolve().parents[1])
NAMES = re.compile(r"\b(max_len|seq_len|lm_seq_len)\b|\.tokens\b")
CHART = "memory_bar_spec"
events: list[tuple[str, str, int, str]] = []
state = {"on": False}


VALUE = 3002


def carries(obj, depth=0) -> bool:
    """Does this value hold the slider's length (the int itself, in a container, or as an object's seq_len)?"""
    if depth > 2:
        return False
    if isinstance(obj, bool):
        return False
    if isinstance(obj, int):
        return obj == VALUE
    if isinstance(obj, dict):
        return any(carries(v, depth + 1) for v in list(obj.values())[:60])
    if isinstance(obj, (tuple, list)):
        return any(carries(v, depth + 1) for v in obj[:60])
    return getattr(obj, "seq_len", None) == VALUE


def tracer(frame, event, arg):
    path = frame.f_code.co_filename
    if not state["on"] or not path.startswith(ROOT + "/") or "/.venv/" in path or "/tests/" in path:
        return None
    if event == "call" and frame.f_code.co_name == CHART:
        events.append((path[len(ROOT) + 1:], CHART, frame.f_lineno, "the chart builder"))
        state["on"] = False
        return None
    if event == "line":
        text = linecache.getline(path, frame.f_lineno).split("#")[0]
        if NAMES.search(text) and (carries(frame.f_locals) or '"max_len"' in text):
            events.append((path[len(ROOT) + 1:], frame.f_code.co_name, frame.f_lineno, text.strip()[:100]))
    return tracer


sys.path.insert(0, ROOT)
at = AppTest.from_file(ROOT + "/app.py", default_timeout=120)
at.query_params["max_len"] = "3001"
at.run()
at.switch_page("pages/calculator.py").run()
at.run()
box = at.sidebar.number_input(key="max_len").set_value(3002)
state["on"] = True
sys.settrace(tracer)
threading.settrace(tracer)
box.run()
sys.settrace(None)
threading.settrace(None)
runs: list[tuple[str, str, int, str]] = []
for e in events:
    if not runs or runs[-1][0] != e[0]:
        runs.append(e)
left: set[str] = set()
hops = returns = 0
for i, (path, func, line, text) in enumerate(runs):
    tag = ""
    if i:
        hops += 1
        left.add(runs[i - 1][0])
        if path in left:
            returns += 1
            tag = "  (return)"
    print(f"{i:3d} {path}:{line} {func}{tag}\n      {text}")
print(f"hops {hops}, returns {returns} ({len(events)} lines naming the length in {len({e[0] for e in events})} files)")
