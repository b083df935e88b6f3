"""Pure: raw capability facts (from collect.collect_capabilities) -> Capabilities and warnings.

Every "not usable" carries the reason and, where there is one, the command that fixes it.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from .topology import Capabilities

# Preference order per allocator. Full tcmalloc first (what Intel's launcher preloads);
# tcmalloc_minimal (no heap profiler) is as fast for training and is the fallback.
# Unversioned names come from -dev packages; the versioned ones are what runtime packages ship.
ALLOCATOR_NAMES = {
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so", "libjemalloc.so.1"),
    "tcmalloc": ("libtcmalloc.so.4", "libtcmalloc.so", "libtcmalloc_minimal.so.4",
                 "libtcmalloc_minimal.so"),
}
ALLOCATOR_FIX = {
    "jemalloc": "apt-get install libjemalloc2 (or conda install jemalloc)",
    "tcmalloc": "apt-get install libgoogle-perftools4 (or conda install gperftools)",
}
IOMP_NAMES = ("libiomp5.so",)
CCL_MISSING = ("the ccl backend is not set up here; fix: ./setup.sh, or "
               "python -m autotune.comm.ccl build")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")
_ARCH_TAG = {"x86_64": "x86-64", "aarch64": "AArch64", "ppc64le": "64bit", "s390x": "64bit"}


def _ccl_problem(results: dict[str, Any]) -> str | None:
    """Why the ccl backend cannot be used, from `python -m autotune.comm.ccl status` (which
    knows both Intel's bindings and autotune's own build) or, in older captures, from the
    import of Intel's bindings alone."""
    status = results.get("ccl_status")
    if status is not None:
        if _ok(status):
            return None
        text = (status.get("stdout") or "").strip()
        m = re.match(r"ccl: unavailable \((.*)\)$", text.splitlines()[-1] if text else "")
        return m.group(1) if m else f"ccl status check failed: {_tail(status)}"
    ccl_import = results.get("import:oneccl_bindings_for_pytorch")
    if ccl_import is None:
        return CCL_MISSING
    if not _ok(ccl_import):
        return f"oneccl_bindings_for_pytorch fails to import: {_tail(ccl_import)}"
    return None


def parse_ldconfig(text: str, machine: str = "x86_64") -> dict[str, str]:
    """`ldconfig -p` -> {soname: path}, keeping only libraries for this machine's architecture
    (a multilib system also lists i386 copies, which cannot be preloaded into x86-64 python)."""
    tag = _ARCH_TAG.get(machine)
    libs: dict[str, str] = {}
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if m and (tag is None or tag in m.group(2)):
            libs.setdefault(m.group(1), m.group(3))
    return libs


def find_library(names: tuple[str, ...], lib_files: list[str], ldconfig: dict[str, str]
                 ) -> str | None:
    """First hit in name-preference order. Per name, the ordered directory listing (conda/venv
    before system) wins over the ldconfig cache so an environment's own copy is used."""
    for name in names:
        for path in lib_files:
            if os.path.basename(path) == name:
                return path
        if name in ldconfig:
            return ldconfig[name]
    return None


def major_minor(version: str | None) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _tail(result: dict[str, Any] | None) -> str:
    if not result:
        return "not run"
    text = result.get("stderr") or result.get("stdout") or ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else f"exit status {result.get('rc')}"


def _ok(result: dict[str, Any] | None) -> bool:
    return bool(result) and result.get("rc") == 0


def build_capabilities(raw: dict[str, Any], *, num_gpus: int = 0
                       ) -> tuple[Capabilities, tuple[str, ...]]:
    """What this machine's software can do, and a warning (with its fix) for each thing that
    cannot be used; each step below reads its own raw facts."""
    results: dict[str, dict[str, Any]] = raw.get("results", {})
    versions: dict[str, str | None] = raw.get("versions", {})
    ldconfig = parse_ldconfig((results.get("ldconfig") or {}).get("stdout", ""),
                              raw.get("machine", "x86_64"))
    lib_files = list(raw.get("lib_files", []))
    allocators, warned_alloc = _allocators(lib_files, ldconfig)
    torch_info, warned_torch = _torch_info(results)
    torch_version = torch_info.get("version") or versions.get("torch")
    backends, ccl_problem, warned_backends = _backends(torch_info, results, num_gpus)
    ipex_version, ipex_problem = _ipex(versions, results, torch_version)
    warned_ipex = [f"IPEX not usable: {ipex_problem}"] if ipex_problem else []
    numactl, membind, taskset, warned_binding = _binding_tools(raw, results)
    cxx = raw.get("cxx") if _ok(results.get("cxx")) else None
    compile_problem, triton_problem = _compile_problems(cxx, results, num_gpus)
    if cxx is None and raw.get("cxx"):   # found, but `--version` failed
        compile_problem = (f"the C++ compiler {raw['cxx']} does not run "
                           f"({_tail(results.get('cxx'))}); fix: apt-get install g++, or set "
                           "CXX to a working one")
    warned_cxx = [f"torch.compile not offered on CPUs: {compile_problem}"] if compile_problem \
        else []
    if triton_problem:
        warned_cxx.append(f"torch.compile not offered on GPUs: {triton_problem}")
    torchvision, warned_tv = _torchvision(results, torch_version)
    caps = Capabilities(allocators=allocators, omp_runtimes=_omp_runtimes(raw, lib_files, ldconfig),
                        backends=backends, torch_version=torch_version, ipex_version=ipex_version,
                        ipex_problem=ipex_problem, ccl_problem=ccl_problem, numactl=numactl,
                        numactl_membind=numactl and membind, taskset=taskset, cxx_compiler=cxx,
                        compile_problem=compile_problem, triton_problem=triton_problem,
                        numactl_weighted=numactl and membind
                        and _ok(results.get("numactl_weighted")),
                        torchvision=torchvision,
                        cuda=bool(num_gpus and torch_info.get("cuda")))
    warnings = (warned_alloc + warned_torch + warned_backends + warned_ipex + warned_binding
                + warned_cxx + warned_tv)
    return caps, tuple(warnings)


def _compile_problems(cxx: str | None, results: dict[str, Any], num_gpus: int
                      ) -> tuple[str | None, str | None]:
    """Why torch.compile cannot run on this machine's CPUs (a C++ compiler that builds what
    inductor builds) and on its GPUs (Triton imports), each None where it can; one line each."""
    build = results.get("cxx_build")
    if cxx is None:
        cpu = "no C++ compiler found; fix: apt-get install g++"
    elif build is not None and not _ok(build):   # a capture from before the check: not judged
        cpu = (f"the C++ compiler {cxx} cannot build what torch.compile builds ({_tail(build)}); "
               "fix: apt-get install g++ python3-dev")
    else:
        cpu = None
    gpu = None
    if num_gpus:
        triton = results.get("import:triton")
        gpu = ("Triton is not installed; fix: pip install triton" if triton is None
               else None if _ok(triton) else f"Triton fails to import: {_tail(triton)}")
    return cpu, gpu


def _allocators(lib_files: list[str], ldconfig: dict[str, str]
                ) -> tuple[dict[str, str | None], list[str]]:
    allocators = {name: find_library(names, lib_files, ldconfig)
                  for name, names in ALLOCATOR_NAMES.items()}
    return allocators, [f"{name} not found: {ALLOCATOR_FIX[name]}"
                        for name, path in allocators.items() if path is None]


def _omp_runtimes(raw: dict[str, Any], lib_files: list[str],
                  ldconfig: dict[str, str]) -> dict[str, str | None]:
    # libgomp: the copy torch ships (torch/lib/libgomp*.so*); None means torch's default, which
    # is always usable. libiomp5: from the intel-openmp wheel, preloaded to replace libgomp.
    gomp = next((p for p in raw.get("torch_lib_files", [])
                 if re.match(r"libgomp.*\.so", os.path.basename(p))), None)
    return {"libgomp": gomp, "libiomp5": find_library(IOMP_NAMES, lib_files, ldconfig)}


def _torch_info(results: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """What the probe's torch import printed (version, distributed, cuda, nccl, mpi); {} with a
    warning when torch does not import."""
    torch_result = results.get("torch")
    torch_info: dict[str, Any] = {}
    if _ok(torch_result):
        try:
            torch_info = json.loads(torch_result["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            torch_info = {}
    if torch_info:
        return torch_info, []
    return torch_info, [f"torch does not import: {_tail(torch_result)} "
                        "(pip install torch --index-url https://download.pytorch.org/whl/cpu)"]


def _backends(torch_info: dict[str, Any], results: dict[str, dict[str, Any]], num_gpus: int
              ) -> tuple[tuple[str, ...], str | None, list[str]]:
    """(usable backends, why ccl is not, warnings)."""
    backends, warnings = [], []
    if torch_info.get("distributed"):
        backends.append("gloo")
        if num_gpus and torch_info.get("cuda") and torch_info.get("nccl"):
            backends.append("nccl")
    elif torch_info:
        warnings.append("torch was built without torch.distributed: no backend is usable")
    if num_gpus and torch_info and not torch_info.get("cuda"):
        warnings.append(f"{num_gpus} GPU(s) found but this torch cannot use CUDA (a CPU-only "
                        f"build?): GPU trials are not offered")
    ccl_problem = _ccl_problem(results)
    if ccl_problem is None and torch_info.get("distributed"):
        backends.append("ccl")
    if torch_info.get("mpi"):
        backends.append("mpi")
    return tuple(backends), ccl_problem, warnings


def _binding_tools(raw: dict[str, Any], results: dict[str, dict[str, Any]]
                   ) -> tuple[bool, bool, bool, list[str]]:
    """(numactl --physcpubind works, numactl --membind works, taskset works, warnings)."""
    target = raw.get("numactl_target", {})
    tools = raw.get("tools", {})
    numactl = _ok(results.get("numactl_physcpubind"))
    membind = _ok(results.get("numactl_membind"))
    warnings = []
    if not tools.get("numactl"):
        warnings.append("numactl not found: apt-get install numactl")
    elif not numactl:
        warnings.append(f"numactl not usable: `numactl --physcpubind={target.get('cpu')} true` "
                        f"failed: {_tail(results.get('numactl_physcpubind'))} (containers need "
                        "--cap-add SYS_NICE or a seccomp profile allowing set_mempolicy)")
    elif not membind:
        warnings.append(f"numactl --membind not usable: `numactl --membind={target.get('node')} "
                        f"true` failed: {_tail(results.get('numactl_membind'))} (often blocked in "
                        "containers; binding falls back to CPUs only)")
    taskset = _ok(results.get("taskset"))
    if not tools.get("taskset"):
        warnings.append("taskset not found: apt-get install util-linux")
    elif not taskset:
        warnings.append(f"taskset not usable: {_tail(results.get('taskset'))}")
    return numactl, membind, taskset, warnings


def _torchvision(results: dict[str, dict[str, Any]], torch_version: str | None
                 ) -> tuple[bool, list[str]]:
    torchvision = _ok(results.get("import:torchvision"))
    if "import:torchvision" in results and not torchvision:
        return torchvision, [f"torchvision installed but fails to import: "
                             f"{_tail(results['import:torchvision'])} (reinstall it matching "
                             f"torch {torch_version})"]
    return torchvision, []


def _ipex(versions: dict[str, str | None], results: dict[str, dict[str, Any]],
          torch_version: str | None) -> tuple[str | None, str | None]:
    """IPEX is usable only when it imports and was built for this torch's major.minor (a
    mismatched IPEX prints an error and exits the interpreter on import)."""
    ipex = versions.get("intel_extension_for_pytorch")
    imported = results.get("import:intel_extension_for_pytorch")
    if ipex is None and imported is None:
        return None, None  # not installed: an optional extra, not a problem
    want, have = major_minor(ipex), major_minor(torch_version)
    if want and have and want != have:
        return None, (f"intel-extension-for-pytorch {ipex} needs torch {want}.*, "
                      f"found {torch_version}")
    if not _ok(imported):
        return None, f"intel-extension-for-pytorch {ipex or ''} fails to import: {_tail(imported)}"
    return ipex, None
