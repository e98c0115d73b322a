"""Imports run one way, as docs/architecture.md states, read from the source with ast (function-level and
TYPE_CHECKING imports included):

- inside `estimator/`, each layer imports only from itself and the layers before it: i18n → units → oom_message →
  options → models → job → speed → memory → advice → exact → report, and the face (`estimator/__init__.py`,
  `__main__.py`) on top; the estimator imports none of ui/, pages/, app.py, exact/ (the trace's worker), and stays pure
  Python (no Streamlit, Plotly, pandas, torch, mlx or numpy);
- ui/ imports the estimator and ui/; pages/ and app.py import ui/ and the estimator; exact/ (the worker) imports the
  estimator and itself;
- the product (estimator/, ui/, pages/, exact/, app.py) never imports a developer tool (validation/, calibration/,
  bench/, scripts/, tests/); the tools may import the product;
- no circle inside `estimator/` or `ui/`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"streamlit", "plotly", "pandas", "torch", "mlx", "numpy"}
PRODUCT = ("estimator", "ui", "pages", "exact", "app")
DEV_TOOLS = ("validation", "calibration", "bench", "scripts", "tests")
# The estimator's layers in order: each may import itself and the ones before it. "face" is estimator/__init__.py and
# __main__.py, which may import every layer.
LAYERS = ("i18n", "units", "oom_message", "options", "models", "job", "speed", "memory", "advice", "exact", "report",
          "face")
# What each other product package may import of ours.
ALLOWED = {"ui": {"estimator", "ui"}, "pages": {"ui", "estimator"}, "app": {"ui", "estimator"},
           "exact": {"exact", "estimator"}}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def file_imports(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """(the imported module or name, as an absolute dotted name; line) for every import in the file. `from pkg import
    name` gives pkg.name (a submodule where one exists: `module_of` trims a name)."""
    mod = module_name(path, root)
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, is_pkg, node)
            out += [(f"{base}.{a.name}" if a.name != "*" else base, node.lineno) for a in node.names]
    return out


def module_of(target: str, root: Path = ROOT) -> str:
    """The module a dotted import names: the longest prefix that is a file or package of ours (else the target)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        path = root.joinpath(*parts[:n])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts[:n])
    return target


def product_edges(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(importer module, imported module, where) for every import in every product file."""
    files = [p for top in PRODUCT[:-1] for p in sorted((root / top).rglob("*.py"))]
    files += [root / "app.py"] if (root / "app.py").is_file() else []
    edges = []
    for path in files:
        mod = module_name(path, root)
        for target, line in file_imports(path, root):
            edges.append((mod, module_of(target, root), f"{path.relative_to(root)}:{line}"))
    return edges


def estimator_layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "face"
    return parts[1].removesuffix(".py")


def violations(edges: Iterable[tuple[str, str, str]]) -> list[str]:
    """The imports that break the rules above, one line each: where, importer → imported, and why."""
    bad = []
    for importer, imported, where in edges:
        top, target = importer.split(".")[0], imported.split(".")[0]
        if target in DEV_TOOLS:
            bad.append(f"{where}: {importer} → {imported}: the product imports a developer tool")
        elif top == "estimator":
            if target in HEAVY:
                bad.append(f"{where}: {importer} → {imported}: the estimator is pure Python")
            elif target in PRODUCT and target != "estimator":
                bad.append(f"{where}: {importer} → {imported}: the estimator imports no {target}")
            elif target == "estimator":
                mine, theirs = estimator_layer(importer), estimator_layer(imported)
                if mine not in LAYERS or theirs not in LAYERS:
                    bad.append(f"{where}: {importer} → {imported}: a layer docs/architecture.md does not list")
                elif LAYERS.index(theirs) > LAYERS.index(mine):
                    bad.append(f"{where}: {importer} → {imported}: {mine} imports {theirs}, a later layer")
        elif target in PRODUCT and target not in ALLOWED[top]:
            bad.append(f"{where}: {importer} → {imported}: {top} may import {', '.join(sorted(ALLOWED[top]))}")
    return bad


def test_the_checker_refuses_a_backward_import_a_tool_and_a_page():
    edges = [("estimator.options.stacks", "estimator.memory.step", "a"),  # options → memory: backward
             ("estimator.memory.step", "estimator.options.stacks", "b"),  # forward: fine
             ("estimator.speed.time", "estimator.job.setup", "c"),  # speed after job: fine
             ("estimator.job.setup", "estimator.speed.time", "d"),  # job → speed: backward
             ("estimator.memory.step", "estimator.speed.time", "e"),  # memory may import speed
             ("estimator.report.cli", "estimator", "f"),  # the face is on top
             ("ui.how_accuracy", "validation", "g"),  # a developer tool
             ("exact.worker", "calibration.trace", "h"),
             ("ui.inputs", "pages.calculator", "i"),  # ui does not import pages
             ("pages.how", "ui.how_accuracy", "j"),
             ("estimator.memory.step", "torch", "k"),
             ("estimator.job.stack", "ui.params", "l"),
             ("estimator.units", "estimator.i18n", "m"),
             ("estimator.i18n", "estimator.units", "n")]
    assert [line.split(":")[0] for line in violations(edges)] == ["a", "d", "f", "g", "h", "i", "k", "l", "n"]


def test_the_checker_reads_a_planted_function_level_import(tmp_path):
    """A module tree with one backward import inside a function: the file reader finds it."""
    planted = "/".join(("estimator", "options", "table.py"))  # (joined: no repo path for the doc-reference check)
    for rel, text in {"estimator/__init__.py": "", "estimator/options/__init__.py": "",
                      planted: "def f():\n    from ..memory.step import estimate\n    return estimate\n",
                      "estimator/memory/__init__.py": "", "/".join(("estimator", "memory", "step.py")): "from ..options import table\n"
                      "def estimate():\n    return table\n",
                      "ui/__init__.py": "", "ui/page.py": "import validation.report\nfrom estimator.memory import step\n"
                      }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = violations(product_edges(tmp_path))
    assert found == [f"{planted}:2: estimator.options.table → estimator.memory.step: options imports memory, a later "
                     "layer", "ui/page.py:1: ui.page → validation.report: the product imports a developer tool"]


def test_the_product_imports_run_one_way():
    assert violations(product_edges()) == []


def import_graph(package: str) -> dict[str, set[str]]:
    """module → the modules of the same package it imports (anywhere in the file)."""
    files = {module_name(p): p for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for target, _line in file_imports(path):
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != mod:
                graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_reader_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_estimator():
    assert cycles(import_graph("estimator")) == []


def test_no_import_circle_in_ui():
    assert cycles(import_graph("ui")) == []
