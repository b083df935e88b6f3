"""Finding the oneCCL runtime, and compiling backend.cpp against it once per torch.

The runtime comes from PyPI: `oneccl-cpu` (libccl.so.1) and `oneccl-cpu-devel` (headers), which
pip installs under the environment's prefix (lib/, include/). libccl.so.1 also needs
libccl.so.2, which only the 92 MB `oneccl` wheel carries; `install.py` copies that one file
beside it. libfabric comes from Debian (libfabric1).

The compiled module is cached under ~/.cache/autotune/ccl/<key>/, where the key hashes the
source, torch's version, Python's version and the runtime's path: a second set-up, search or
import loads it without compiling. Compiling takes about a minute on 2 cores, so only set-up
(`python -m autotune.comm.ccl build`) compiles; everything else asks `cached_extension()`.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ...errors import AutotuneError
from ...util.private_files import autotune_cache, private_dir, untrusted
from ...util.file_lock import open_lock_file, wait_flock

SOURCE = Path(__file__).with_name("backend.cpp")
RUNTIME_VERSION = "2022.2.0"   # oneccl-cpu / oneccl-cpu-devel / oneccl (for libccl.so.2)
FIX_RUNTIME = "./setup.sh, or: python -m autotune.comm.ccl install"


class CclUnavailable(AutotuneError):
    """The ccl backend cannot be built or loaded here; the message says why and the fix."""


def runtime_prefixes() -> list[Path]:
    """Where a oneCCL runtime may be: CCL_ROOT (a oneAPI install), then this Python's prefix."""
    out = []
    if os.environ.get("CCL_ROOT"):
        out.append(Path(os.environ["CCL_ROOT"]))
    out += [Path(sys.prefix), Path(sys.base_prefix)]
    return list(dict.fromkeys(out))


def runtime_dir() -> Path | None:
    """The prefix holding lib/libccl.so.1 and include/oneapi/ccl.hpp, or None."""
    for prefix in runtime_prefixes():
        if (prefix / "lib" / "libccl.so.1").exists() and \
                (prefix / "include" / "oneapi" / "ccl.hpp").exists():
            return prefix
    return None


def libfabric_present() -> bool:
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
              "/usr/local/lib"):
        if os.path.exists(os.path.join(d, "libfabric.so.1")):
            return True
    return any((p / "lib" / "libfabric.so.1").exists() for p in runtime_prefixes())


def runtime_problem() -> str | None:
    """What is missing for the runtime (not the compiled module), with the fix; None if nothing."""
    prefix = runtime_dir()
    if prefix is None:
        return f"the oneCCL runtime is not installed (libccl.so.1 and its headers); fix: {FIX_RUNTIME}"
    if not (prefix / "lib" / "libccl.so.2").exists():
        return (f"{prefix}/lib/libccl.so.2 is missing (only the oneccl wheel carries it); "
                "fix: python -m autotune.comm.ccl install")
    if not libfabric_present():
        return "libfabric is not installed; fix: apt-get install libfabric1"
    return None


def cache_root() -> Path:
    return autotune_cache() / "ccl"


def cache_key() -> str:
    import torch
    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    for part in (torch.__version__, getattr(torch.version, "git_version", ""), sys.version,
                 str(runtime_dir()), RUNTIME_VERSION):
        h.update(str(part).encode())
    return f"torch{torch.__version__.replace('+', '_')}-{h.hexdigest()[:12]}"


def module_name() -> str:
    """The compiled module's name (its PyInit_ symbol), from what decides its binary alone:
    the same for this torch and Python wherever it is built, so a module compiled on another
    machine for the same torch wheel loads here (`prebuilt.adopt`; the GPU machine's kit)."""
    import torch
    return binary_name(torch.__version__, getattr(torch.version, "git_version", ""),
                       sys.implementation.cache_tag)


def binary_name(torch_version: str, torch_git: str, python_tag: str) -> str:
    """module_name() for a torch and Python named, not imported ("cpython-312")."""
    h = hashlib.sha256(SOURCE.read_bytes())
    for part in (torch_version, torch_git, python_tag, RUNTIME_VERSION):
        h.update(str(part).encode())
    return "autotune_ccl_" + h.hexdigest()[:12]


def cached_extension() -> Path | None:
    """The compiled module for this torch, source and runtime, if it was built; CclUnavailable
    when it is not safe to load (`untrusted`)."""
    if runtime_dir() is None:
        return None
    path = cache_root() / cache_key() / (module_name() + _suffix())
    if not path.exists():
        return None
    if (why := untrusted(path)) is not None:
        raise CclUnavailable(f"ccl: refusing the cached build {path}: {why}; fix: rm -r "
                             f"{path.parent} && python -m autotune.comm.ccl build (or set "
                             "AUTOTUNE_CACHE to a folder only you can write)")
    return path


def load_extension():
    """Import the cached module (never compiles)."""
    path = cached_extension()
    if path is None:
        raise CclUnavailable(f"ccl: {runtime_problem() or 'the ccl extension is not built for this torch'}; "
                             "fix: ./setup.sh, or python -m autotune.comm.ccl build")
    name = path.name[: -len(_suffix())]
    if name in sys.modules:
        return sys.modules[name]
    import torch  # noqa: F401 - the module links against torch's libraries, loaded by this import
    # libccl.so.1 by its full path first: a module compiled elsewhere (the kit's) has an rpath
    # of that machine, and the loader then finds libccl.so.1 among the loaded libraries.
    ctypes.CDLL(str(runtime_dir() / "lib" / "libccl.so.1"), mode=ctypes.RTLD_GLOBAL)
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


# A build takes about a minute (several on a loaded machine): a holder past this hangs.
BUILD_LOCK_WAIT_S = 900.0


def build(*, log=print, wait_s: float = BUILD_LOCK_WAIT_S) -> Path:
    """Compile backend.cpp unless this torch already has it; returns the module's path.

    One build at a time per cache folder (a file lock): two ranks or two set-ups started together
    wait for the first instead of compiling twice, for up to `wait_s` seconds (then a LockError
    names the holder). The lock file is never followed through a link nor truncated."""
    problem = runtime_problem()
    if problem:
        raise CclUnavailable(f"ccl: {problem}")
    cxx = _compiler()

    def compile_into(partial: Path) -> None:
        log(f"ccl: compiling the oneCCL backend for torch {_torch_version()} (about a minute, once)")
        argv = compile_command(cxx, partial)
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode:
            (partial.parent / "build.log").write_text(" ".join(argv) + "\n" + done.stdout)
            tail = done.stdout.strip().splitlines()[-3:]
            raise CclUnavailable(f"ccl: compiling the backend failed ({' | '.join(tail)}); "
                                 f"full log: {partial.parent / 'build.log'}")
    return install_module(compile_into, wait_s=wait_s)


def install_module(make, *, wait_s: float = BUILD_LOCK_WAIT_S) -> Path:
    """Put the module where cached_extension() looks, unless it is there: `make(partial)` writes
    it (a compile, or a copy of one compiled elsewhere), under the folder's lock."""
    folder = cache_root() / cache_key()
    private_dir(folder)
    if (why := untrusted(folder)) is not None:   # its lock and module would be someone else's
        raise CclUnavailable(f"ccl: refusing to build into {folder}: {why}")
    target = folder / (module_name() + _suffix())
    with open(open_lock_file(str(folder / ".lock")), "rb") as lock:
        wait_flock(lock.fileno(), wait_s=wait_s, what=f"the ccl build lock {folder / '.lock'}")
        if target.exists():
            return target
        partial = folder / (target.name + ".partial")
        make(partial)
        os.replace(partial, target)   # atomic: a reader never loads a half-written module
        (folder / RUNTIME_MARK).write_text(str(runtime_dir()))
    prune_stale(folder)
    return target


# In each build folder: the oneCCL runtime it was linked to (its virtualenv's).
RUNTIME_MARK = "runtime"


def prune_stale(keep: Path) -> list[Path]:
    """Remove the builds of this torch for older sources of the same runtime, or for a runtime
    that is gone (about 0.5 MB each; every autotune update that changes backend.cpp left one
    behind). Builds for other torch versions, or for the same torch in another virtualenv (a
    fresh clone's set-up beside this one: its runtime is elsewhere), stay: they are in use. A
    build without the mark (older than it) is not known to be stale and stays. A process that
    loaded a removed module keeps it."""
    prefix = keep.name.rsplit("-", 1)[0] + "-"
    mine = _mark(keep)

    def stale(d: Path) -> bool:
        theirs = _mark(d)
        return theirs is not None and (theirs == mine or not Path(theirs).is_dir())
    gone = [d for d in keep.parent.iterdir() if d.is_dir() and d.name.startswith(prefix)
            and d.name != keep.name and stale(d)]
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return gone


def _mark(folder: Path) -> str | None:
    try:
        return (folder / RUNTIME_MARK).read_text().strip() or None
    except OSError:
        return None


def compile_command(cxx: str, output: Path, *, prefix: Path | None = None,
                    torch_dir: Path | None = None, python_include: str | None = None,
                    abi: int | None = None, name: str | None = None) -> list[str]:
    """g++ argv for the extension: torch's own extension flags, linked to libccl.so.1 with an
    rpath, so no LD_LIBRARY_PATH is needed in the ranks. By default for this torch, Python and
    runtime; the keywords name another's (an unpacked torch wheel, for the GPU machine's kit)."""
    prefix = prefix or runtime_dir()
    lib = prefix / "lib"
    if torch_dir is None:
        import torch
        from torch.utils import cpp_extension
        torch_lib = Path(torch.__file__).parent / "lib"
        abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)) if abi is None else abi
        torch_includes = cpp_extension.include_paths()
    else:
        torch_lib = torch_dir / "lib"
        torch_includes = [str(torch_dir / "include"),
                          str(torch_dir / "include" / "torch" / "csrc" / "api" / "include")]
    includes = [*torch_includes, python_include or sysconfig.get_path("include"),
                str(prefix / "include")]
    return [cxx, "-O2", "-std=c++20", "-fPIC", "-shared", "-w",
            f"-D_GLIBCXX_USE_CXX11_ABI={1 if abi is None else abi}",
            "-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={name or module_name()}",
            *[f"-I{d}" for d in includes], str(SOURCE), "-o", str(output),
            f"-L{torch_lib}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
            f"-L{lib}", "-l:libccl.so.1",
            # DT_RPATH (not RUNPATH) also applies to libccl.so.1's own dependencies
            "-Wl,--disable-new-dtags", f"-Wl,-rpath,{lib}", f"-Wl,-rpath,{torch_lib}"]


def _compiler() -> str:
    for candidate in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise CclUnavailable("ccl: no C++ compiler found to build the backend; fix: apt-get install g++")


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def _torch_version() -> str:
    import torch
    return torch.__version__
