"""Every benchmark a document, a script or a test names exists under that name, and a module's
old flat name (before issue 55) fails in one line that names the new one.

Read: README.md, docs/, scripts/, tests/ and benchmarks/ itself (its code and README; not
results/, whose files keep the commands they were made with). A `python -m benchmarks...` or a
`benchmarks/....py` must be a module or file of this checkout; `benchmarks.<old name>` must not
appear at all (benchmarks/__init__.py's MOVED holds the old names and their new ones).
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

from benchmarks import MOVED

RUN = re.compile(r"-m[\s\"',]+(benchmarks(?:\.\w+)+)")      # a shell line, or an argv list
FILE = re.compile(r"(?<![\w/.-])(benchmarks/[\w/]+\.py)\b")
OLD = re.compile(r"\bbenchmarks[./](" + "|".join(sorted(MOVED, key=len, reverse=True)) + r")\b(?!s)")


def _read() -> list[tuple[str, str]]:
    """(file, text) of everything that may name a benchmark."""
    paths = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "scripts").iterdir(),
             *(REPO / "tests").rglob("*.py"), *(REPO / "tests").glob("*.md"),
             *(REPO / "benchmarks").rglob("*.py"), REPO / "benchmarks" / "README.md"]
    skip = {REPO / "benchmarks" / "__init__.py", Path(__file__).resolve()}   # the old names, on purpose
    return [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in sorted(set(paths))
            if p.is_file() and p not in skip and "fixtures" not in p.parts]


TEXTS = _read()


def test_every_named_module_and_file_exists():
    missing = []
    for name, text in TEXTS:
        missing += [f"{name}: python -m {m}" for m in RUN.findall(text)
                    if importlib.util.find_spec(m) is None or m.split(".")[1] in MOVED]
        missing += [f"{name}: {f}" for f in FILE.findall(text) if not (REPO / f).is_file()]
    assert not missing, "\n".join(missing)


def test_no_old_name_is_left():
    old = [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
           for name, text in TEXTS for m in OLD.finditer(text)]
    assert not old, "name the new module (benchmarks/__init__.py, MOVED):\n" + "\n".join(old)


def test_every_new_name_is_a_module_and_no_old_one_is():
    for old, new in MOVED.items():
        assert importlib.util.find_spec(f"benchmarks.{new.split()[0]}").origin.endswith(".py")
        assert not (REPO / "benchmarks" / f"{old}.py").exists()


@pytest.mark.parametrize("old", ["search_at_scale", "landscape"])
def test_an_old_name_run_fails_in_one_line_naming_the_new_one(old):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{old}", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"benchmarks.{old} has moved to benchmarks.{MOVED[old]}")


def test_an_old_name_imported_fails_with_the_same_line():
    with pytest.raises(ImportError, match="benchmarks.search_efficiency has moved to "
                                          "benchmarks.replay.efficiency"):
        from benchmarks import search_efficiency  # noqa: F401
