"""The GPU machine's kit, its parts made in Python (scripts/device-kit.sh calls them, issue 45).

    python -m benchmarks.device.kit ccl KIT [--for-here]   # KIT/ccl.tar.gz: oneCCL and our backend
    python -m benchmarks.device.kit size KIT               # what travels, per part; over 64 MiB: exit 2

ccl.tar.gz holds what a ccl rank needs there and nothing else (about 3 MB):
  lib/      libccl.so.1 (oneccl-cpu), libccl.so.2 (the 92 MB oneccl wheel's one file it needs),
            both stripped; libfabric.so.1 and, in lib/libfabric/, its tcp, shm and rxm providers
            (Intel's build from impi-rt: it needs only libc and libatomic, where Debian's needs
            a dozen RDMA libraries). device-run.sh points FI_PROVIDER_PATH at lib/libfabric.
  include/  oneCCL's headers (300 KB): autotune finds the runtime by them, and a build there
            needs them should the carried module not load
  ext/      autotune/comm/ccl/backend.cpp compiled here against the GPU machine's own torch wheel
            (2.11.0+cu130 from PyPI: its headers and libraries unpacked, never imported) for
            CPython 3.12. The module's name encodes the torch, its commit, the Python and the
            source (ccl.build.binary_name), so `python -m autotune.comm.ccl adopt` there refuses
            one compiled for anything else. Carried compiled rather than built there: a build
            takes a minute of the nine a run has, and needs a compiler the image does not promise.
Downloads (about 730 MB once: the torch wheel, impi-rt, oneccl) and builds are cached under
~/.cache/autotune/device-kit/. --for-here makes the same for this Python and its torch (the
kit's test here).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

from autotune.comm.ccl.build import RUNTIME_VERSION, binary_name, compile_command
from benchmarks import ROOT

CACHE = Path.home() / ".cache" / "autotune" / "device-kit"
GPU_TORCH = "2.11.0"        # the GPU machine's torch: PyPI's 2.11.0 (+cu130), CPython 3.12
GPU_PYTHON_TAG = "cpython-312"
IMPI_VERSION = "2021.18.1"  # its libfabric is the one oneCCL's ofi transport was checked with
PROVIDERS = ("libtcp-fi.so", "libshm-fi.so", "librxm-fi.so")
TORCH_LIBS = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
DEVICE_LIMIT_MIB = 64.0     # what the device tool carries: the working tree and the kit together
MIB = float(1 << 20)


class KitError(Exception):
    """A part of the kit cannot be made; the message says why and what to do."""


def download(requirements: list[str], dest: Path, python: str | None) -> None:
    """pip download, once: a wheel already in `dest` is not fetched again."""
    target = [] if python is None else ["--python-version", python, "--implementation", "cp",
                                        *[x for p in PLATFORMS for x in ("--platform", p)]]
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                           "--only-binary=:all:", *target, "-d", str(dest), *requirements],
                          capture_output=True, text=True)
    if done.returncode:
        tail = [x for x in done.stderr.splitlines() if not x.startswith("WARNING")][-1:]
        raise KitError(f"pip could not download {' '.join(requirements)} ({tail[0] if tail else ''})")


def wheel(folder: Path, name: str, version: str) -> Path:
    found = sorted(folder.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise KitError(f"no {name} {version} wheel in {folder}")
    return found[0]


def extract(whl: Path, suffix: str, dest: Path) -> Path:
    """The wheel's one member whose path ends with `suffix`, written to `dest`."""
    with zipfile.ZipFile(whl) as z:
        name = next((n for n in z.namelist() if n.endswith(suffix)), None)
        if name is None:
            raise KitError(f"{whl.name} has no {suffix}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(z.read(name))
    os.chmod(dest, 0o755)
    return dest


def strip(path: Path) -> None:
    """Symbol tables are a sixth of libccl.so.1 and nothing a rank reads."""
    if shutil.which("strip"):
        subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)


def runtime(stage: Path) -> None:
    """oneCCL's runtime and headers, and Intel's libfabric with three providers, into `stage`."""
    wheels = CACHE / "wheels"
    download([f"oneccl-cpu=={RUNTIME_VERSION}", f"oneccl-cpu-devel=={RUNTIME_VERSION}",
              f"oneccl=={RUNTIME_VERSION}", f"impi-rt=={IMPI_VERSION}"], wheels, None)
    lib = stage / "lib"
    for name, whl in (("libccl.so.1", wheel(wheels, "oneccl_cpu", RUNTIME_VERSION)),
                      ("libccl.so.2", wheel(wheels, "oneccl", RUNTIME_VERSION))):
        strip(extract(whl, f"/lib/{name}", lib / name))
    impi = wheel(wheels, "impi_rt", IMPI_VERSION)
    extract(impi, "/lib/libfabric.so.1", lib / "libfabric.so.1")
    for provider in PROVIDERS:
        extract(impi, f"/lib/{provider}", lib / "libfabric" / provider)
    with zipfile.ZipFile(wheel(wheels, "oneccl_cpu_devel", RUNTIME_VERSION)) as z:
        for name in z.namelist():
            if "/data/include/" in name and not name.endswith("/"):
                out = stage / "include" / name.split("/data/include/", 1)[1]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(name))


def gpu_torch() -> tuple[Path, str, str]:
    """The GPU machine's torch wheel, unpacked once: headers, the four libraries the module
    links to, and its version and commit (read from the wheel, not imported)."""
    wheels, tree = CACHE / "wheels", CACHE / f"torch-{GPU_TORCH}-cp312"
    if not (tree / "version.json").exists():
        download([f"torch=={GPU_TORCH}"], wheels, "3.12")
        whl = wheel(wheels, "torch", f"{GPU_TORCH}-cp312-cp312")
        shutil.rmtree(tree, ignore_errors=True)
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                if name.startswith("torch/include/") or name in [f"torch/lib/{x}" for x in TORCH_LIBS]:
                    z.extract(name, tree)
            found = dict(re.findall(r"^(__version__|git_version) = '([^']*)'",
                                    z.read("torch/version.py").decode(), re.M))
        (tree / "version.json").write_text(json.dumps(
            {"version": found["__version__"], "git": found["git_version"]}))
    v = json.loads((tree / "version.json").read_text())
    return tree / "torch", v["version"], v["git"]


def python312() -> tuple[str, str]:
    """A CPython 3.12 here with its headers, as (interpreter, include folder): PY312 names it,
    else python3.12 on PATH or pyenv's."""
    candidates = [os.environ.get("PY312"), shutil.which("python3.12"),
                  *sorted(map(str, Path.home().glob(".pyenv/versions/3.12*/bin/python3.12")))]
    for py in filter(None, candidates):
        done = subprocess.run([py, "-c", "import sys, sysconfig; assert sys.version_info[:2] == "
                               "(3, 12); print(sysconfig.get_path('include'))"],
                              capture_output=True, text=True)
        if done.returncode == 0 and (Path(done.stdout.strip()) / "Python.h").exists():
            return py, done.stdout.strip()
    raise KitError("the ccl module for the GPU machine needs CPython 3.12's headers here: set "
                   "PY312=/path/to/python3.12 (or make the kit with --no-ccl)")


def compile_module(stage: Path, *, here: bool) -> Path:
    """backend.cpp compiled for the target's torch and Python into stage/ext/ (cached by name)."""
    if here:
        import torch
        torch_dir, version, git = Path(torch.__file__).parent, torch.__version__, torch.version.git_version
        tag, include, suffix = sys.implementation.cache_tag, sysconfig.get_path("include"), \
            sysconfig.get_config_var("EXT_SUFFIX")
    else:
        torch_dir, version, git = gpu_torch()
        tag, include = GPU_PYTHON_TAG, python312()[1]
        suffix = ".cpython-312-x86_64-linux-gnu.so"
    name = binary_name(version, git, tag) + suffix
    cached = CACHE / "ext" / name
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(cached.name + ".partial")
        # torch 2.11's wheels are built with the C++11 ABI only (torch._C says so there)
        argv = compile_command(shutil.which("g++") or "g++", partial, prefix=stage,
                               torch_dir=torch_dir, python_include=include, abi=1,
                               name=name[: -len(suffix)])
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            raise KitError(f"compiling the ccl module failed: {done.stderr.strip()[-300:]}")
        strip(partial)
        os.replace(partial, cached)
    out = stage / "ext" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return out


def make_ccl(kit: Path, *, here: bool, log=print) -> Path:
    """KIT/ccl.tar.gz; returns its path."""
    with tempfile.TemporaryDirectory(prefix="autotune-kit-ccl-") as tmp:
        stage = Path(tmp) / "ccl"
        log("device-kit: the oneCCL runtime (oneccl-cpu, libccl.so.2, Intel's libfabric)")
        runtime(stage)
        log(f"device-kit: the ccl module for {'this torch' if here else 'torch ' + GPU_TORCH + ', CPython 3.12'}")
        module = compile_module(stage, here=here)
        (stage / "manifest.json").write_text(json.dumps(
            {"runtime": RUNTIME_VERSION, "impi_rt": IMPI_VERSION, "module": module.name,
             "files": {str(p.relative_to(stage)): p.stat().st_size
                       for p in sorted(stage.rglob("*")) if p.is_file()}}, indent=1))
        out = kit / "ccl.tar.gz"
        with tarfile.open(out, "w:gz", compresslevel=9) as tar:
            tar.add(stage, arcname="ccl")
    return out


def working_tree(repo: Path, leave_out: Path) -> int:
    """Bytes of what the device tool sends besides carried paths: tracked files and untracked
    ones git does not ignore (a kit inside the tree counts as the kit, not twice)."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True, check=True)
    total = 0
    for rel in filter(None, listed.stdout.split("\0")):
        path = repo / rel
        if path.is_file() and not path.is_symlink() and leave_out not in path.parents:
            total += path.stat().st_size
    return total


def parts(kit: Path, repo: Path = ROOT) -> dict[str, int]:
    """Bytes per part of what travels: each entry of the kit, and the working tree."""
    sizes = {}
    for entry in sorted(kit.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        sizes[entry.name] = sum(p.stat().st_size for p in files)
    sizes["working tree"] = working_tree(repo, kit.resolve())
    return sizes


def too_big(sizes: dict[str, int], limit_mib: float) -> str | None:
    """The refusal, one line with the size of each part; None when everything fits."""
    total = sum(sizes.values()) / MIB
    if total <= limit_mib:
        return None
    each = ", ".join(f"{name} {size / MIB:.1f} MiB" for name, size in sizes.items())
    return (f"the kit and the working tree come to {total:.1f} MiB, over the {limit_mib:g} MiB "
            f"the device carries ({each}); drop what the runs do not need")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.device.kit", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("ccl", "size"))
    p.add_argument("kit", type=Path)
    p.add_argument("--for-here", action="store_true", help="ccl: for this Python and torch")
    p.add_argument("--limit-mib", type=float, default=DEVICE_LIMIT_MIB,
                   help="size: what the device tool carries (64)")
    args = p.parse_args(argv)
    try:
        if args.what == "ccl":
            make_ccl(args.kit, here=args.for_here)
            return 0
        sizes = parts(args.kit)
        refusal = too_big(sizes, args.limit_mib)
        if refusal:
            print(f"device-kit: {refusal}", file=sys.stderr)
            return 2
        print("device-kit: " + ", ".join(f"{n} {s / MIB:.1f} MiB" for n, s in sizes.items())
              + f"; {sum(sizes.values()) / MIB:.1f} MiB of {args.limit_mib:g}")
        return 0
    except (KitError, subprocess.CalledProcessError, OSError) as exc:
        print(f"device-kit: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
