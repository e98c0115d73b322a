"""References in comments and docs point at things that exist.

(a) every "formulas.md §X[.Y]" resolves to a numbered heading of docs/formulas.md;
(b) every repo-relative path written in a comment or doc (docs/…md, estimator/…py, tests/…py, …) exists;
(c) nothing cites the research folder that lived outside the repository.

The helpers take text or a root folder, so the tests below also check that each check fails on a broken input.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORMULAS = ROOT / "docs" / "formulas.md"
SELF = Path(__file__).resolve()

# Where a "formulas.md §X" reference may say the document lives. "" accepts the bare form still used in some
# comments; drop it once they all say "docs/formulas.md §X".
ALLOWED_PREFIXES = ("", "docs/")

# Written as two pieces so that this file does not contain them.
FORBIDDEN = ("shared" + "/research", ".." + "/shared")

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".pytest_cache", ".ruff_cache", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".md"}

# Paths that look like ours but name a file in another project, keyed by (citing file, path).
EXTERNAL = {
    ("validation/data/README.md", "scripts/benchmarks/refs/a100_80gb.csv"),  # foundation-model-stack/fms-acceleration
}

HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?(?:\s|$)")
# "formulas.md §3.3", "docs/formulas.md §2.2", "`formulas.md` §0", "formulas.md (§3.3, §6)", "formulas.md §3.3 Qp"
SECTION_REF = re.compile(
    r"(?<![\w.-])((?:[\w.-]+/)*)formulas\.md`?\s*\(?\s*"
    r"(§\s?\d+(?:\.\d+)*(?:\s*(?:,|and|&)\s*§?\s?\d+(?:\.\d+)*)*)"
)
SECTION_NUMBER = re.compile(r"\d+(?:\.\d+)*")
# A repo-relative path: one of our top-level folders, then a file name with an extension we keep there. The
# look-behind skips paths inside longer ones (URLs, "huggingface/transformers/docs/…").
PATH_REF = re.compile(
    r"(?<![\w./-])("
    r"docs/[\w./-]*\.md"
    r"|(?:calibration|tests|estimator|bench|scripts|validation)/[\w./-]*\.(?:py|md|json|csv|sh|txt|toml)"
    r")(?!\.?[\w-])"
)


# --------------------------------------------------------------------------------------------- helpers

def repo_files(root: Path) -> list[Path]:
    """Files of the repository under root: git's tracked and untracked-but-not-ignored files when root is a
    git checkout, else every file outside virtual environments and caches."""
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 cwd=root, capture_output=True, check=True, timeout=60).stdout
            names = sorted({n for n in out.decode("utf-8", "surrogateescape").split("\0") if n})
            return [root / n for n in names if (root / n).is_file()]
        except (OSError, subprocess.SubprocessError):
            pass
    files = []
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.startswith(".venv") for p in parts) or not path.is_file():
            continue
        files.append(path)
    return files


def text_files(root: Path, suffixes: set[str] = TEXT_SUFFIXES) -> list[Path]:
    """The *.py and *.md files of the repository, without this test (its examples are deliberately broken)."""
    return [p for p in repo_files(root) if p.suffix in suffixes and p.resolve() != SELF]


def headings(markdown: str) -> set[str]:
    """Section numbers of the numbered headings ("## 3. Activations", "### 3.3 Closed forms"), outside code."""
    numbers: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            numbers.add(match.group(1))
    return numbers


def section_refs(text: str) -> list[tuple[int, str, str]]:
    """(line, prefix, section) for every "formulas.md §X" reference in text."""
    refs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in SECTION_REF.finditer(line):
            for number in SECTION_NUMBER.findall(match.group(2)):
                refs.append((lineno, match.group(1), number))
    return refs


def broken_section_refs(text: str, sections: set[str]) -> list[str]:
    """References to a section that is not a heading, or written with a path other than ALLOWED_PREFIXES."""
    bad = []
    for lineno, prefix, number in section_refs(text):
        if number not in sections:
            bad.append(f"{lineno}: §{number} is not a heading of docs/formulas.md")
        elif prefix not in ALLOWED_PREFIXES:
            bad.append(f"{lineno}: '{prefix}formulas.md §{number}' should say 'docs/formulas.md §{number}'")
    return bad


def path_refs(text: str) -> list[tuple[int, str]]:
    """(line, path) for every repo-relative path in text."""
    return [(lineno, m.group(1)) for lineno, line in enumerate(text.splitlines(), 1)
            for m in PATH_REF.finditer(line)]


def missing_paths(root: Path, citing: str, text: str) -> list[str]:
    return [f"{lineno}: {ref}" for lineno, ref in path_refs(text)
            if (citing, ref) not in EXTERNAL and not (root / ref).exists()]


def forbidden_mentions(text: str) -> list[str]:
    return [f"{lineno}: {word}" for lineno, line in enumerate(text.splitlines(), 1)
            for word in FORBIDDEN if word in line]


def scan(root: Path, check, files: list[Path]) -> list[str]:
    """Run check(relative path, text) over files; 'path:line: problem' for each finding."""
    found = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        text = path.read_bytes().decode("utf-8", "replace")
        found.extend(f"{rel}:{problem}" for problem in check(rel, text))
    return found


def formula_problems(root: Path) -> list[str]:
    sections = headings((root / "docs" / "formulas.md").read_text(encoding="utf-8"))
    return scan(root, lambda rel, text: broken_section_refs(text, sections), text_files(root))


def path_problems(root: Path) -> list[str]:
    return scan(root, lambda rel, text: missing_paths(root, rel, text), text_files(root))


def forbidden_problems(root: Path) -> list[str]:
    files = [p for p in repo_files(root) if p.resolve() != SELF]
    return scan(root, lambda rel, text: forbidden_mentions(text), files)


# --------------------------------------------------------------------------------------------- the repo

def test_formulas_doc_has_the_cited_structure():
    sections = headings(FORMULAS.read_text(encoding="utf-8"))
    expected = {"0", "1", "2", "2.1", "2.2", "2.3", "2.4", "3", "3.1", "3.2", "3.3", "3.4", "3.5",
                "4", "4.1", "5", "6", "6.1", "6.2", "7", "8"}
    assert expected <= sections, sorted(expected - sections)


def test_formulas_references_resolve():
    problems = formula_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_formulas_references_are_found():
    # The scan sees the references the estimator's comments make (a silent regex would pass everything).
    refs = [ref for path in text_files(ROOT) for ref in section_refs(path.read_text(encoding="utf-8"))]
    assert len(refs) >= 10


def test_cited_repo_paths_exist():
    problems = path_problems(ROOT)
    assert not problems, "cited paths that do not exist:\n" + "\n".join(problems)


def test_no_mention_of_the_research_folder_outside_the_repo():
    problems = forbidden_problems(ROOT)
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------- the checks fail

def test_headings_parse_numbers_and_skip_code_blocks():
    doc = "# Title\n## 0. Top\n### 2.1 Weights\n```\n## 9 not a heading\n```\n#### 3.3.1 deep\n## Sources\n"
    assert headings(doc) == {"0", "2.1", "3.3.1"}


@pytest.mark.parametrize(("text", "expected"), [
    ("see formulas.md §3.3 Qp", [(1, "", "3.3")]),
    ("x\n(docs/formulas.md §2.2)", [(2, "docs/", "2.2")]),
    ("(`formulas.md` §0)", [(1, "", "0")]),
    ("worked examples of formulas.md (§3.3, §6)", [(1, "", "3.3"), (1, "", "6")]),
    ("research/formulas.md §1 table", [(1, "research/", "1")]),
    ("formulas.md says nothing", []),
    ("myformulas.md §1", []),
])
def test_section_refs_are_parsed(text, expected):
    assert section_refs(text) == expected


def test_broken_section_refs_are_reported():
    sections = {"0", "3", "3.3"}
    assert broken_section_refs("ok: formulas.md §3.3 and docs/formulas.md §0", sections) == []
    assert broken_section_refs("bad: formulas.md §9.9", sections) == ["1: §9.9 is not a heading of docs/formulas.md"]
    assert broken_section_refs("bad: formulas.md (§3, §3.4)", sections) == [
        "1: §3.4 is not a heading of docs/formulas.md"]
    assert broken_section_refs("old: research/formulas.md §3", sections) == [
        "1: 'research/formulas.md §3' should say 'docs/formulas.md §3'"]


@pytest.mark.parametrize(("text", "expected"), [
    ("checked in tests/test_memory.py.", ["tests/test_memory.py"]),
    ("(`calibration/README.md`, findings)", ["calibration/README.md"]),
    ("see estimator/memory.py:105 and docs/formulas.md#x", ["estimator/memory.py", "docs/formulas.md"]),
    ("run scripts/test.sh, then bench/run.py", ["scripts/test.sh", "bench/run.py"]),
    ("validation/data/fixtures.json", ["validation/data/fixtures.json"]),
    ("https://github.com/x/y/blob/main/tests/test_a.py", []),  # inside a URL: not ours
    ("huggingface/transformers/docs/source/en/x.md", []),  # inside a longer path
    ("torchtune docs/source/tutorials/qlora_finetune.rst", []),  # docs/ only counts .md
    ("the validation/generation pass", []),  # no extension: prose, not a path
    ("estimator/presets/<id>.json", []),  # a pattern, not a path
    ("tests/test_x.py.orig", []),
])
def test_path_refs_are_parsed(text, expected):
    assert [ref for _, ref in path_refs(text)] == expected


def _fake_repo(tmp_path: Path, extra: dict[str, str]) -> Path:
    files = {
        "docs/formulas.md": "# Doc\n## 0. Peak\n## 3. Activations\n### 3.3 Closed forms\n",
        "estimator/memory.py": '"""Peak (docs/formulas.md §0); closed forms in formulas.md §3.3."""\n',
        "tests/test_memory.py": "# checks estimator/memory.py against docs/formulas.md\n",
        ".venv/lib/junk.py": "# formulas.md §42 and tests/nope.py are ignored inside a virtualenv\n",
    }
    files.update(extra)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_clean_fake_repo_passes(tmp_path):
    root = _fake_repo(tmp_path, {})
    assert formula_problems(root) == []
    assert path_problems(root) == []
    assert forbidden_problems(root) == []


def test_a_broken_fake_repo_fails(tmp_path):
    root = _fake_repo(tmp_path, {
        "estimator/activations.py": "# formulas.md §3.2 (missing), see tests/test_calibration.py\n",
        "pages/how.py": f'TEXT = "from the notes in {FORBIDDEN[0]}/formulas.md"\n',
        "README.md": f"Seed: {FORBIDDEN[1]}/seed-notes.md, docs/missing.md\n",
    })
    assert formula_problems(root) == ["estimator/activations.py:1: §3.2 is not a heading of docs/formulas.md"]
    assert path_problems(root) == ["README.md:1: docs/missing.md", "estimator/activations.py:1: tests/test_calibration.py"]
    assert forbidden_problems(root) == [f"README.md:1: {FORBIDDEN[1]}", f"pages/how.py:1: {FORBIDDEN[0]}"]


def test_the_real_doc_with_a_heading_removed_fails(tmp_path):
    # A temp copy of the real document without §4: the estimator's "formulas.md §4" references break.
    (tmp_path / "docs").mkdir()
    doc = FORMULAS.read_text(encoding="utf-8")
    (tmp_path / "docs" / "formulas.md").write_text(doc.replace("\n## 4. ", "\n## Four. "), encoding="utf-8")
    (tmp_path / "activations.py").write_text("# 12·T·V at the peak (formulas.md §4)\n", encoding="utf-8")
    assert formula_problems(tmp_path) == ["activations.py:1: §4 is not a heading of docs/formulas.md"]
