"""Collectors of capability facts: allocators and OpenMP runtimes found on disk, numactl and
taskset tried with no-op runs, torch and optional modules imported in subprocesses, a C++
compiler. Raw facts only (memoised per process); capabilities.py turns them into values."""
from __future__ import annotations

import copy
import functools
import glob
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from typing import Any

from ..util.child_python import python_code, python_module
from ..util.search_path import child_env

_LIB_NAME = re.compile(r"^lib(jemalloc|tcmalloc|tcmalloc_minimal|iomp5|gomp)\.so(\.\d+)*$")
MULTIARCH_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                  "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/local/lib", "/usr/lib")
_TORCH_CHECK = """
import json, torch, torch.distributed as d
ok = d.is_available()
cuda = torch.cuda.is_available()
print(json.dumps({"version": torch.__version__, "distributed": ok,
                  "gloo": ok and d.is_gloo_available(), "mpi": ok and d.is_mpi_available(),
                  "nccl": ok and d.is_nccl_available(), "cuda": cuda,
                  "cuda_devices": torch.cuda.device_count() if cuda else 0}))
"""
OPTIONAL_MODULES = {  # import name -> distribution name (for its version without importing it)
    "intel_extension_for_pytorch": "intel_extension_for_pytorch",
    "oneccl_bindings_for_pytorch": "oneccl_bind_pt",
    "torchvision": "torchvision",
    "triton": "triton",          # torch.compile's GPU code generator
}


def library_dirs() -> list[str]:
    """Where allocators and OpenMP runtimes are looked for, most specific first."""
    dirs = []
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(os.environ["CONDA_PREFIX"], "lib"))
    dirs += [os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]
    dirs += [p for p in site.getsitepackages() if os.path.isdir(p)]
    dirs += MULTIARCH_DIRS
    return list(dict.fromkeys(os.path.realpath(d) for d in dirs if os.path.isdir(d)))


def collect_capabilities(*, cpu: int | None = None, node: int | None = None) -> dict[str, Any]:
    """Raw capability facts; the slow checks (imports, no-op runs) run in parallel processes.

    Memoised per process: libraries and tools do not change while autotune runs, and importing
    torch in a subprocess (the torch check) costs seconds every time.
    """
    cpu = min(os.sched_getaffinity(0)) if cpu is None else cpu
    if node is None:
        nodes = sorted(int(m.group(1)) for p in glob.glob("/sys/devices/system/node/node[0-9]*")
                       if (m := re.search(r"node(\d+)$", p)))
        node = nodes[0] if nodes else 0
    key = (os.environ.get("CONDA_PREFIX"), os.environ.get("CXX"), os.environ.get("PATH"),
           os.environ.get("AUTOTUNE_CACHE"))   # where the ccl build is looked for
    return copy.deepcopy(_collect_capabilities(cpu, node, key))


@functools.lru_cache(maxsize=8)
def _collect_capabilities(cpu: int, node: int, _env_key: tuple) -> dict[str, Any]:
    versions = {}
    for dist in ("torch", *OPTIONAL_MODULES.values()):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    jobs: dict[str, list[str]] = {"torch": [*python_code(_TORCH_CHECK)]}
    for module in OPTIONAL_MODULES:
        if importlib.util.find_spec(module) is not None:
            jobs[f"import:{module}"] = [*python_code(f"import {module}")]
    # the ccl backend: Intel's bindings or autotune's own build (autotune/comm/ccl), loadable?
    jobs["ccl_status"] = [*python_module("autotune.comm.ccl", "status")]
    tools = {name: shutil.which(name) for name in ("numactl", "taskset", "ldconfig")}
    if tools["numactl"]:
        jobs["numactl_physcpubind"] = [tools["numactl"], f"--physcpubind={cpu}", "true"]
        jobs["numactl_membind"] = [tools["numactl"], f"--membind={node}", "true"]
        # numactl 2.0.19 added --weighted-interleave (mem_policy=weighted; kernel 6.9+)
        jobs["numactl_weighted"] = [tools["numactl"], f"--weighted-interleave={node}", "true"]
    if tools["taskset"]:
        jobs["taskset"] = [tools["taskset"], "-c", str(cpu), "true"]
    ldconfig = tools["ldconfig"] or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if ldconfig:
        jobs["ldconfig"] = [ldconfig, "-p"]
    cxx = _find_cxx()
    if cxx:
        jobs["cxx"] = [cxx, "--version"]
        scratch = tempfile.mkdtemp(prefix="autotune-cxx-")   # 0700, removed below
        jobs["cxx_build"] = cxx_build_check(cxx, os.path.join(scratch, "check.so"))
    try:
        results = _run_parallel(jobs, timeout=IMPORT_TIMEOUT_S)
    finally:
        if cxx:
            shutil.rmtree(scratch, ignore_errors=True)
    torch_spec = importlib.util.find_spec("torch")
    torch_lib = (os.path.join(list(torch_spec.submodule_search_locations)[0], "lib")
                 if torch_spec and torch_spec.submodule_search_locations else None)
    return {
        "machine": platform.machine(),
        "versions": versions,
        "results": results,
        "tools": tools,
        "cxx": cxx,
        "lib_files": [os.path.join(d, n) for d in library_dirs() for n in sorted(os.listdir(d))
                      if _LIB_NAME.match(n)],
        "torch_lib_files": ([os.path.join(torch_lib, n) for n in sorted(os.listdir(torch_lib))]
                            if torch_lib and os.path.isdir(torch_lib) else []),
        "numactl_target": {"cpu": cpu, "node": node},
    }


def cxx_build_check(cxx: str, output: str) -> list[str]:
    """A compiler that exists may still not build what inductor builds: a shared library with
    OpenMP that includes Python.h (python3-dev missing is the usual failure). This builds an
    empty one of those into `output` (a private scratch folder: a compiler removes its output
    when it fails, which must never be /dev/null), in well under a second."""
    include = sysconfig.get_paths().get("include") or ""
    return [cxx, "-shared", "-fPIC", "-fopenmp", f"-I{include}", "-include", "Python.h",
            "-x", "c++", os.devnull, "-o", output]


def _find_cxx() -> str | None:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate:
            found = shutil.which(shlex.split(candidate)[0])
            if found:
                return found
    return None


def _run_parallel(jobs: dict[str, list[str]], *, timeout: float) -> dict[str, dict[str, Any]]:
    procs, out = {}, {}
    for name, argv in jobs.items():
        try:
            procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           stdin=subprocess.DEVNULL, text=True,
                                           start_new_session=True, env=child_env())
        except OSError as exc:
            out[name] = {"rc": 127, "stdout": "", "stderr": str(exc)}
    deadline = time.monotonic() + timeout   # all run at once: one deadline, not one per job
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            out[name] = {"rc": proc.returncode, "stdout": stdout, "stderr": stderr}
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[name] = {"rc": 124, "stdout": "", "stderr": f"timed out after {timeout:g}s"}
    return out


# A cold import of torch plus IPEX (a CUDA torch build: ~7 GB of libraries) took over 15 s on
# 2 busy cores with the torch and torchvision checks importing torch beside it; the probe only
# waits for the slowest job, so a generous limit costs nothing when imports are fast.
IMPORT_TIMEOUT_S = 60.0
