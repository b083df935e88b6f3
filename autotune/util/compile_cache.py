"""torch.compile's caches, private to this user (issue 59).

Inductor keeps its compiled kernels, FX graphs and AOTAutograd graphs under TORCHINDUCTOR_CACHE_DIR
(default /tmp/torchinductor_<user>) and Triton its GPU kernels under TRITON_CACHE_DIR. Those are
code every compiling rank loads and runs: a co-user who creates /tmp/torchinductor_<user> first
owns what the user's ranks execute. So every rank that compiles is given both variables under
autotune's own cache folder (util/private_files.autotune_cache: ~/.cache/autotune/compile, or
$AUTOTUNE_CACHE/compile), made 0700, and checked like the oneCCL module's folder before torch
reads a byte of it (util/private_files.untrusted: this user's or root's all the way up, nobody
else may write). The plan sets the variables (plan/build.env_for), so an exported command
carries them and the user's first run finds the kernels the trials compiled, warm.

Ground floor, standard library only: the plan, the export and the ranks import it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .private_files import autotune_cache, private_dir, untrusted

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"
COMPILE_CACHE_ENV = (INDUCTOR_ENV, TRITON_ENV)


def compile_cache_dir() -> Path:
    """The folder both caches live under."""
    return autotune_cache() / "compile"


def compile_cache_env(folder: Path | None = None) -> dict[str, str]:
    """The variables a compiling rank is given: inductor's and Triton's caches, side by side."""
    folder = compile_cache_dir() if folder is None else folder
    return {INDUCTOR_ENV: str(folder / "inductor"), TRITON_ENV: str(folder / "triton")}


def cache_problem(env: Mapping[str, str]) -> str | None:
    """Make the folders `env` names (0700) and say why one may not be used, or None. Unset, torch
    would fall back to its default under /tmp, which is exactly what this refuses."""
    for key in COMPILE_CACHE_ENV:
        path = env.get(key)
        if not path:
            return (f"{key} is not set, and torch's default under /tmp can be created first by "
                    "another user; run the exported command, which sets it")
        if not os.path.isabs(path):
            return f"{key}={path} is not an absolute path"
        try:
            private_dir(path)
        except OSError as exc:
            return f"{key}: cannot make {path} ({exc.strerror or exc})"
        why = untrusted(path)
        if why is not None:
            return (f"refusing torch.compile's cache {path}: {why}; fix: set AUTOTUNE_CACHE to a "
                    "folder only you can write")
        _tighten(path)
    return None


def _tighten(path: str) -> None:
    """The cache folder and the one above it are 0700 when they are this user's: torch makes a
    missing cache folder 0777 & ~umask (0755: compiled graphs readable by others), and a folder
    made before this check (an eager window of the same launch) would keep that mode."""
    for folder in (path, os.path.dirname(path)):
        try:   # through a descriptor of the folder itself, never a link in its place
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if st.st_uid == os.geteuid() and st.st_mode & 0o077:
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
