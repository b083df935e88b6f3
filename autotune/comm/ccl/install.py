"""Completing the PyPI runtime: libccl.so.1 (oneccl-cpu) needs libccl.so.2, which only the
92 MB `oneccl` wheel carries (165 KB of it). The wheel is downloaded once and that one file is
copied beside libccl.so.1; nothing else of the wheel is installed (its GPU libccl.so.1 would
replace the CPU one)."""
from __future__ import annotations

import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

from ...util.child_python import python_module
from .build import FIX_RUNTIME, RUNTIME_VERSION, CclUnavailable, runtime_dir


def install_runtime() -> str:
    """pip-install the runtime and headers into this Python's prefix (once), then libccl.so.2."""
    said = []
    if runtime_dir() is None:
        done = subprocess.run(python_module("pip", "install", "-q", "--no-deps",
                                            f"oneccl-cpu=={RUNTIME_VERSION}",
                                            f"oneccl-cpu-devel=={RUNTIME_VERSION}"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode or runtime_dir() is None:
            tail = done.stdout.strip().splitlines()[-1:] or ["installed nothing usable"]
            raise CclUnavailable(f"ccl: pip could not install oneccl-cpu {RUNTIME_VERSION} ({tail[0]}); "
                                 f"fix: {FIX_RUNTIME}")
        said.append(f"ccl: installed oneccl-cpu {RUNTIME_VERSION} under {runtime_dir()}")
    said.append(install_libccl2())
    return "\n".join(said)


def install_libccl2() -> str:
    prefix = runtime_dir()
    if prefix is None:
        raise CclUnavailable(f"ccl: the oneCCL runtime is not installed; fix: {FIX_RUNTIME}")
    target = prefix / "lib" / "libccl.so.2"
    if target.exists():
        return f"ccl: {target} present"
    with tempfile.TemporaryDirectory(prefix="autotune-oneccl-") as tmp:
        done = subprocess.run(python_module("pip", "download", "-q", "--no-deps", "-d", tmp,
                                            f"oneccl=={RUNTIME_VERSION}"), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        wheels = list(Path(tmp).glob("oneccl-*.whl"))
        if done.returncode or not wheels:
            tail = done.stdout.strip().splitlines()[-1:] or ["no wheel"]
            raise CclUnavailable(f"ccl: could not download oneccl=={RUNTIME_VERSION} for libccl.so.2 "
                                 f"({tail[0]})")
        extract_libccl2(wheels[0], target)
    return f"ccl: installed {target}"


def extract_libccl2(wheel: Path, target: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        member = next((n for n in z.namelist() if n.endswith("/lib/libccl.so.2")), None)
        if member is None:
            raise CclUnavailable(f"ccl: {wheel.name} has no lib/libccl.so.2")
        partial = target.with_suffix(".2.partial")
        partial.write_bytes(z.read(member))
        os.chmod(partial, 0o755)
        os.replace(partial, target)
