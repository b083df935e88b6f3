#!/usr/bin/env bash
# Set up autotune in ./.venv on a fresh Linux machine.
#   ./setup.sh                 runtime: torch, autotune and its dependencies (Intel OpenMP
#                              included, so every knob of the built-in space has its choices),
#                              and the oneCCL backend, built once for this torch
#   ./setup.sh --test          also the test tools (pytest, hypothesis), headless Chromium, the
#                              PostgreSQL server and driver the shared-search test starts and uses,
#                              and sshd, Open MPI and SLURM for the multi-host tests
#   ./setup.sh --torch 2.15.0  another torch version than the default (2.13.0)
# torch: a torch >= 2.8 already in .venv, or in the Python that runs this script, is kept (the
# .venv then sees that Python's packages). Otherwise torch is installed first, pinned: with an
# NVIDIA driver, PyPI's (CUDA) build; without one, the CPU build from PyTorch's CPU index (an
# unpinned torch from PyPI is the multi-GB CUDA build). autotune's own requirement (torch>=2.8)
# is then already satisfied and pip never replaces it.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
want_test=0
torch_version=""
default_torch=2.13.0
usage="usage: ./setup.sh [--test] [--torch VERSION]"
while [ $# -gt 0 ]; do
    case "$1" in
        --test) want_test=1 ;;
        --torch) [ $# -ge 2 ] && [ -n "$2" ] || { echo "setup: error: --torch needs a version, e.g. --torch 2.15.0" >&2; exit 2; }
                 torch_version="$2"; shift ;;
        --torch=*) torch_version="${1#--torch=}" ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup: error: unknown option '$1'; $usage" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$torch_version" ] && ! [[ "$torch_version" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then
    echo "setup: error: --torch '$torch_version': give a release such as 2.15.0" >&2; exit 2
fi
if [ -n "$torch_version" ] && ! "$PY" -c "import sys; v=tuple(map(int,'$torch_version'.split('.')[:2])); sys.exit(v < (2, 8))"; then
    echo "setup: error: --torch $torch_version: autotune needs torch 2.8 or newer" >&2; exit 2
fi

# What the knobs and the ccl backend need from the system (Debian names; the README lists the
# names on other systems): jemalloc and tcmalloc (allocator), numactl (binding), libfabric1
# (oneCCL's transport) and g++ (the ccl backend's one-time build).
debs="libjemalloc2 libgoogle-perftools4 numactl libfabric1 g++"
# chromium: the dashboard test; postgresql: the shared-search test; openssh-server, openmpi-bin,
# iproute2: the multi-host tests over namespace hosts (scripts/testhosts.sh); slurm-wlm, munge:
# srun and the sbatch export.
[ $want_test = 1 ] && debs="$debs chromium postgresql openssh-server openmpi-bin iproute2 slurm-wlm munge"
if ! command -v dpkg >/dev/null 2>&1; then
    echo "setup: not a Debian system: install jemalloc, gperftools (tcmalloc), numactl, libfabric and a C++ compiler with your package manager (README, 'System packages'); autotune works without them, with fewer choices"
else
    missing=""
    for d in $debs; do dpkg -s "$d" >/dev/null 2>&1 || missing="$missing $d"; done
    if [ -n "$missing" ]; then
        if [ "$(id -u)" = 0 ]; then
            echo "setup: installing Debian packages:$missing"
            (apt-get install -y -q $missing >/dev/null 2>&1 ||
             { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }) ||
                echo "setup: warning: could not install$missing (autotune works without them, with fewer choices)"
        else
            echo "setup: not root; for all allocator and binding choices run: sudo apt-get install -y$missing"
        fi
    fi
fi

torch_ok='import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(v < (2, 8))'
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    if [ -z "$torch_version" ] && "$PY" -c "$torch_ok" >/dev/null 2>&1; then
        # a .pth file, not --system-site-packages: that would show the base interpreter's
        # packages, not those of a venv or conda environment that $PY belongs to
        echo "setup: keeping $("$PY" -c 'import torch; print("torch", torch.__version__)') from $PY (.venv sees its packages)"
        "$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"]); print(sysconfig.get_paths()["platlib"])' \
            > "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_autotune_torch_env.pth"
    fi
fi
have=$(.venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [ -n "$torch_version" ] && [ "${have%%+*}" != "$torch_version" ]; then
    have=""
elif [ -n "$have" ] && ! .venv/bin/python -c "$torch_ok" >/dev/null 2>&1; then
    echo "setup: torch $have is older than 2.8; installing $default_torch"
    have=""
fi
if [ -z "$have" ]; then
    v="${torch_version:-$default_torch}"
    if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; then
        echo "setup: installing torch $v (an NVIDIA driver is here: PyPI's CUDA build)"
        .venv/bin/pip install -q "torch==$v"
    else
        echo "setup: installing torch $v (no NVIDIA driver: the CPU build, from PyTorch's CPU index)"
        # a wheel folder or mirror that already holds the CPU build is used as it is; only
        # without one is PyTorch's index asked (pip retries an unreachable index for minutes)
        .venv/bin/pip install -q "torch==$v+cpu" >/dev/null 2>&1 ||
            .venv/bin/pip install -q "torch==$v+cpu" --extra-index-url https://download.pytorch.org/whl/cpu
    fi
fi
# Until 2026-11 the distribution was called `autotune`, like an unrelated PyPI package that also
# installs an `autotune` module; either would shadow this one, so a .venv set up before the rename
# (or one that got the other package) loses it first.
if .venv/bin/pip show -q autotune >/dev/null 2>&1; then
    echo "setup: removing the distribution named 'autotune' (this project is now ddp-autotune)"
    .venv/bin/pip uninstall -y -q autotune
fi
extras=""
[ $want_test = 1 ] && extras="[test,postgres]"
.venv/bin/pip install -q -e ".$extras"
# The ccl backend (autotune/comm/ccl): oneCCL's runtime from PyPI, compiled against this torch
# once (about a minute) and cached; a later set-up finds it built. Without it autotune uses gloo.
if ! .venv/bin/python -m autotune.comm.ccl status >/dev/null 2>&1; then
    echo "setup: setting up the ccl backend (oneCCL runtime from PyPI, one build for this torch)"
    { .venv/bin/python -m autotune.comm.ccl install >/dev/null && .venv/bin/python -m autotune.comm.ccl build >/dev/null; } ||
        echo "setup: warning: the ccl backend is not available; autotune goes on with gloo ($(.venv/bin/python -m autotune.comm.ccl status 2>&1 | tail -1))"
fi
echo "setup: ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
