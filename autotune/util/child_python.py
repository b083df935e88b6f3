"""How autotune starts a Python of its own (the probe's checks, a trial's ranks, the rank shim, the
helpers it runs on other hosts, pip): never with the current folder on its import path.

For `python -c` and `python -m`, Python puts the current folder first on sys.path, so a `torch.py`
that a co-user left in /tmp, a scratch folder or a group-writable project ran as the user in every
child that imports torch (`autotune probe` ran it twice). -P (Python 3.11+) leaves that entry out.
3.10 has no -P, and another host's Python is of a version unknown here: those start through a
`-c` line that drops the entry before it imports anything, then runs the module as -m would.
A user's own command (`-- python train.py`) keeps Python's rules: that is the user's choice.
"""
from __future__ import annotations

import sys

# Python < 3.11, or another interpreter: -c puts '' (the current folder) first; drop it first.
# One line, so that a plan shown by --dry-run stays one line per rank.
_DROP_FOLDER = "import sys; sys.path[:1] == [''] and sys.path.pop(0)"
_RUN_MODULE = (_DROP_FOLDER + "; import runpy; "
               "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def _has_safe_path(python: str) -> bool:
    """-P is known to work: this very interpreter, of 3.11 or later."""
    return python == sys.executable and sys.version_info >= (3, 11)


def python_module(module: str, *args: str, python: str = sys.executable) -> tuple[str, ...]:
    """argv of `python -m module args` that imports nothing from the current folder."""
    if _has_safe_path(python):
        return (python, "-P", "-m", module, *args)
    return (python, "-c", _RUN_MODULE, module, *args)


def python_code(code: str, python: str = sys.executable) -> tuple[str, ...]:
    """argv of `python -c code` that imports nothing from the current folder."""
    if _has_safe_path(python):
        return (python, "-P", "-c", code)
    return (python, "-c", f"{_DROP_FOLDER}\n{code}")
