"""A ccl module compiled on another machine, for this same torch wheel and Python.

The GPU machine's kit (scripts/device-kit.sh) carries one: that machine has no package index and
minutes a command, so the module is compiled here against the very torch wheel it runs (its
headers and libraries, unpacked, never imported) and `adopt` puts it where `cached_extension()`
looks. A module's name says what its binary was compiled for (`build.binary_name`: backend
source, torch version and commit, Python tag), so one compiled for anything else is refused by
name before it could be loaded.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .build import (CclUnavailable, _suffix, install_module, module_name, runtime_problem,
                    untrusted)


class NotForThisTorch(CclUnavailable):
    """The file given to adopt is not a module this torch may load (bad input, not set-up)."""


def adopt(prebuilt: Path) -> Path:
    """Install `prebuilt` as this torch's ccl module (unless one is there); returns its path."""
    problem = runtime_problem()
    if problem:
        raise CclUnavailable(f"ccl: {problem}")
    want = module_name() + _suffix()
    if prebuilt.name != want:
        raise NotForThisTorch(f"ccl: {prebuilt.name} was compiled for another torch, Python or "
                             f"backend source (this one loads {want}); fix: python -m "
                             "autotune.comm.ccl build")
    if (why := untrusted(prebuilt)) is not None:   # its code would run in every ccl rank
        raise NotForThisTorch(f"ccl: refusing {prebuilt}: {why}")

    def copy(partial: Path) -> None:
        shutil.copyfile(prebuilt, partial)
        os.chmod(partial, 0o755)
    return install_module(copy)
