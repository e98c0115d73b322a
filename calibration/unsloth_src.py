"""Unsloth's own source, read from the released wheels, for the Unsloth tracer (calibration/unsloth_trace.py).

``source_dir()`` downloads ``unsloth`` and ``unsloth_zoo`` at the pinned version with pip (``pip download --no-deps``,
the package registry only) into ``~/.cache/will-it-fit/unsloth-<version>`` and unzips them once.  ``load()`` executes
chosen top-level statements of one source file in a namespace the tracer prepares: imports are skipped (the tracer
supplies those names, with stand-ins for the Triton/CUDA-only pieces), so the functions and autograd classes that
run are Unsloth's own code, line for line.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

UNSLOTH_VERSION = "2026.10.9"  # unsloth and unsloth_zoo, the release docs/unsloth.md and the estimator read
CACHE = Path(os.environ.get("UNSLOTH_SRC_CACHE", Path.home() / ".cache" / "will-it-fit"))


def source_dir(version: str = UNSLOTH_VERSION) -> Path:
    """The unzipped wheels of unsloth and unsloth_zoo ``version`` (downloaded with pip on first use)."""
    root = CACHE / f"unsloth-{version}"
    if (root / "unsloth" / "kernels" / "fast_lora.py").exists() and (root / "unsloth_zoo").exists():
        return root
    wheels = CACHE / f"wheels-{version}"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels),
                    f"unsloth=={version}", f"unsloth_zoo=={version}"], check=True)
    root.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(root)
    return root


def _wanted(node: ast.stmt, only: set[str] | None) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return False
    if only is None:
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name in only
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id in only for t in node.targets)
    return False


def load(relpath: str, namespace: dict[str, Any], only: set[str] | None = None, version: str = UNSLOTH_VERSION
         ) -> dict[str, Any]:
    """Execute the top-level statements of ``relpath`` (inside the wheels) in a fresh module seeded with
    ``namespace``: all of them but the imports, or only the functions, classes and assignments named in ``only``.
    Returns the module's globals (the dict the loaded functions read, so later stand-ins go there)."""
    path = source_dir(version) / relpath
    text = path.read_text()
    tree = ast.parse(text, filename=str(path))
    body = [node for node in tree.body if _wanted(node, only)]
    if only is not None:
        found = {getattr(n, "name", None) for n in body} | {t.id for n in body if isinstance(n, ast.Assign)
                                                            for t in n.targets if isinstance(t, ast.Name)}
        missing = only - found
        if missing:
            raise KeyError(f"{relpath} has no top-level {sorted(missing)}")
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
    name = "unsloth_src." + relpath.replace("/", ".").removesuffix(".py")
    module = types.ModuleType(name)
    module.__dict__.update(namespace)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look the module up
    exec(code, module.__dict__)  # noqa: S102 - Unsloth's own released source
    return module.__dict__
