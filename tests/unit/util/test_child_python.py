"""Issue 46, item 4: a Python that autotune starts imports nothing from the current folder. Real
interpreters in a folder holding planted modules, each of which leaves a file when imported: -P
on this interpreter, the `-c` start on another one (another host's, of unknown version), and on
Python 3.10 where it is installed."""
from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.util.child_python import python_code, python_module

PLANTED = ("autotune", "torch", "runpy", "json", "psutil", "pip")


def _plant(folder: Path) -> Path:
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            f"open({str(folder / ('ran-' + name))!r}, 'w').close()\n")
    return folder


def _ran(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ran-*"))


def _interpreters() -> list[str]:
    """This one (-P), this venv's under another name (the -c start: a Python not known to be
    this one), and a Python 3.10 where one is installed (pyenv)."""
    other = str(Path(sys.executable).with_name("python3"))
    found = [sys.executable, other]
    found += sorted(glob.glob("/root/.pyenv/versions/3.10*/bin/python3.10"))[:1]
    return found


def test_plain_python_runs_what_is_planted_in_its_folder(tmp_path):
    """What the fix is for: `python -m` and `python -c` as autotune started them."""
    folder = _plant(tmp_path)
    subprocess.run([sys.executable, "-c", "import json"], cwd=folder, capture_output=True)
    subprocess.run([sys.executable, "-m", "autotune.bind", "--help"], cwd=folder,
                   capture_output=True)
    assert _ran(folder) == ["ran-autotune", "ran-json"]


@pytest.mark.parametrize("python", _interpreters())
def test_a_child_python_imports_nothing_from_its_current_folder(tmp_path, python):
    folder = _plant(tmp_path)
    # (torch is not installed for a pyenv 3.10: what matters is that the planted one never runs)
    code = subprocess.run(python_code("import json\ntry:\n    import torch\nexcept ImportError:\n"
                                      "    pass", python=python),
                          cwd=folder, capture_output=True, text=True, timeout=60)
    assert code.returncode == 0 and _ran(folder) == [], (code.stderr, _ran(folder))
    if "3.10" not in python:   # autotune itself is installed in this venv only
        module = subprocess.run(python_module("autotune.bind", "--help", python=python),
                                cwd=folder, capture_output=True, text=True, timeout=60)
        assert module.returncode == 0 and "autotune.bind" in module.stdout, module.stderr
    else:
        module = subprocess.run(python_module("json.tool", python=python), input="[1]",
                                cwd=folder, capture_output=True, text=True, timeout=60)
        assert module.returncode == 0 and module.stdout.split() == ["[", "1", "]"], module.stderr
    assert _ran(folder) == []


def test_this_interpreter_gets_minus_p_and_another_the_c_start():
    mine = python_module("autotune.worker", "--request", "r.json")
    assert mine[-3:] == ("autotune.worker", "--request", "r.json")
    if sys.version_info >= (3, 11):
        assert mine == (sys.executable, "-P", "-m", "autotune.worker", "--request", "r.json")
    other = python_module("autotune.bind", "--x", python="python3")
    assert other[:2] == ("python3", "-c") and other[3:] == ("autotune.bind", "--x")
    assert "\n" not in other[2]   # a plan shown by --dry-run keeps one line per rank
