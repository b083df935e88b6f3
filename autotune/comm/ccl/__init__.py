"""The `ccl` backend: torch.distributed over oneCCL on CPU tensors.

    from autotune.comm import ccl
    ccl.register()                       # or: import oneccl_bindings_for_pytorch (the shim)
    dist.init_process_group("ccl", ...)

Where Intel's own bindings (oneccl_bind_pt, the torch-2.8 IPEX lane) import, they register
"ccl" themselves and are used instead. Otherwise the extension built by `build.py` (once per
torch, cached) is loaded and registered. `problem()` says why neither is possible, with the fix.
"""
from __future__ import annotations

from .build import CclUnavailable, build, cached_extension, runtime_problem
from .env import rank_env, shim_dir

__all__ = ["CclUnavailable", "build", "cached_extension", "problem", "register", "provider",
           "rank_env", "runtime_problem", "shim_dir"]

_INTEL = "oneccl_bindings_for_pytorch"


# The first words of every autotune shim's __init__.py (this checkout's or another's).
_SHIM_MARK = "autotune's stand-in for Intel's"


def intel_spec():
    """The import spec of Intel's own package, looked for everywhere but in autotune shims:
    this checkout's, and another checkout's put on PYTHONPATH by a command it exported (taking
    that one for Intel's made each shim import the other for ever)."""
    import importlib.machinery
    import os
    import sys
    shim = os.path.realpath(shim_dir())
    path = [p for p in sys.path if os.path.realpath(p or ".") != shim]
    while True:
        spec = importlib.machinery.PathFinder.find_spec(_INTEL, path)
        if spec is None or not _is_shim(spec.origin):
            return spec
        folder = os.path.realpath(os.path.dirname(os.path.dirname(spec.origin)))
        path = [p for p in path if os.path.realpath(p or ".") != folder]


def _is_shim(origin: str | None) -> bool:
    try:
        with open(origin or "", encoding="utf-8") as f:
            return _SHIM_MARK in f.read(200)
    except OSError:
        return False


def intel_bindings_present() -> bool:
    """Intel's package is installed (not our shim of the same name)."""
    return intel_spec() is not None


def provider() -> str:
    """"intel" when Intel's bindings provide ccl here, "autotune" for the built extension."""
    return "intel" if intel_bindings_present() else "autotune"


def problem() -> str | None:
    """Why `ccl` cannot be registered in this Python, with the fix; None when it can."""
    if intel_bindings_present():
        return None
    why = runtime_problem()
    if why:
        return why
    try:
        if cached_extension() is None:
            return ("the ccl extension is not built for this torch; fix: ./setup.sh, or "
                    "python -m autotune.comm.ccl build")
    except CclUnavailable as exc:   # a build someone else can change (build.untrusted)
        return str(exc).removeprefix("ccl: ")
    return None


def register() -> str:
    """Make init_process_group("ccl") work in this process; returns who provides it.

    Idempotent. Raises CclUnavailable (with the reason and the fix) when neither Intel's
    bindings nor the built extension can be loaded; never builds (that takes a minute)."""
    import torch.distributed as dist
    if "ccl" in dist.Backend.backend_list:
        return "registered"
    if intel_bindings_present():
        _import_intel()             # importing Intel's package registers "ccl"
        return "intel"
    from .register import register_extension
    register_extension()
    return "autotune"


def _import_intel() -> None:
    import importlib.util
    import sys
    spec = intel_spec()
    module = importlib.util.module_from_spec(spec)
    sys.modules[_INTEL] = module
    spec.loader.exec_module(module)
