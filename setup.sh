#!/usr/bin/env bash
# Set up autotune in ./.venv on a fresh Linux machine.
#   ./setup.sh          runtime: torch 2.13.0 (CPU) first, then autotune and its dependencies
#   ./setup.sh --test   also the test tools (pytest, hypothesis), headless Chromium, the
#                       PostgreSQL server and driver the shared-search test starts and uses, and
#                       sshd, Open MPI and SLURM for the multi-host tests
# torch is installed first, pinned, because an unpinned torch resolves to the newest CUDA build
# (several GB); autotune's own requirement (torch>=2.8) is then already satisfied.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
want_test=0
[ "${1:-}" = "--test" ] && want_test=1

# libfabric1 and g++: the ccl backend (oneCCL's transport, and its one-time build)
debs="libjemalloc2 libgoogle-perftools4 numactl libfabric1 g++"
# chromium: the dashboard test; postgresql: the shared-search test; openssh-server, openmpi-bin,
# iproute2: the multi-host tests over namespace hosts (scripts/testhosts.sh); slurm-wlm, munge:
# srun and the sbatch export.
[ $want_test = 1 ] && debs="$debs chromium postgresql openssh-server openmpi-bin iproute2 slurm-wlm munge"
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

[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    echo "setup: installing torch 2.13.0 (CPU build)"
    .venv/bin/pip install -q torch==2.13.0
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
