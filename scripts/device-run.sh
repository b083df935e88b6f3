#!/usr/bin/env bash
# The GPU machine's one command (issue 32): install the kit, then probe, a GPU search and a CPU
# search, each time-boxed, their results written under $OUT as they come (benchmarks/device/run.py).
#
#   scripts/device-kit.sh                          here, once: the wheels and libraries -> .kit/
#   scripts/device-run.sh                          there (device tool: carry [".kit"]); 9 minutes
#   scripts/device-run.sh --phases landscape --deadline 510s --bandwidth 358.4   its landscape
#   scripts/device-run.sh --cpu-only --cpu-budget 1m     the same on a machine without a GPU
#
# Options after the kit's own (--kit DIR, default .kit) go to `python -m benchmarks.device.run`:
# --phases LIST (gpu,cpu; or landscape), --gpu-budget T (4m), --cpu-budget T (3m; 0 skips the
# CPU phase), --cpu-only, --deadline T (9m), --compare-rounds N, --compare-seconds S,
# --landscape-window S, --bandwidth GBS. PYTHON names the Python that has torch (python3).
#
# The kit goes into a venv of its own (KIT_VENV, default /tmp/autotune-kit) that sees torch's
# environment through a .pth file: the carried wheels never replace a package of the machine's
# image, and the machine's torch and CUDA are the ones measured. autotune itself is this working
# tree, on the venv's path.
set -uo pipefail
cd "$(dirname "$0")/.."
die() { echo "device-run: $*" >&2; exit 2; }
kit=.kit
if [ "${1:-}" = "--kit" ]; then
    [ -n "${2:-}" ] || die "--kit needs a folder"
    kit="$2"; shift 2
fi
[ -n "${OUT:-}" ] || die "OUT is unset: name the folder the results go to (OUT=DIR scripts/device-run.sh)"
mkdir -p "$OUT" 2>/dev/null && [ -w "$OUT" ] || die "OUT=$OUT is not a folder this user can write"
[ -d "$kit/wheels" ] || die "no kit at $kit: run scripts/device-kit.sh here first and carry it"
# Every pinned wheel must be there: a missing one would fail at the first import, minutes in.
while read -r req; do
    req="${req%%#*}"; req="${req// /}"
    [ -n "$req" ] || continue
    name="${req%%==*}"; version="${req##*==}"
    norm="$(echo "$name" | tr 'A-Z-.' 'a-z__')"
    ls "$kit/wheels" | tr 'A-Z' 'a-z' | grep -q "^${norm}-${version}-" ||
        die "wheel missing from $kit/wheels: $req (run scripts/device-kit.sh again)"
done < benchmarks/device/wheels.txt

PY="${PYTHON:-python3}"
base="$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)" ||
    die "$PY cannot import torch: name the Python that has it with PYTHON=..."
venv="${KIT_VENV:-/tmp/autotune-kit}"
rm -rf "$venv"
if [ -z "${KIT_NO_VENV:-}" ] && "$PY" -m venv --without-pip "$venv" 2>/dev/null; then
    kpy="$venv/bin/python"
    site="$("$kpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$base" > "$site/zz-torch-environment.pth"    # after the venv's own packages on sys.path
    echo "$PWD" > "$site/autotune-working-tree.pth"
    libdir="$venv/lib"
else
    # No venv module there: the wheels go into a folder first on PYTHONPATH, the libraries into
    # the lib/ of torch's environment (the probe's first place; the machine is thrown away after).
    echo "device-run: no venv here; installing into $venv/site with PYTHONPATH instead"
    kpy="$PY"; site="$venv/site"; mkdir -p "$site" "$venv/bin"
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    libdir="$("$PY" -c 'import sys; print(sys.prefix)')/lib"
fi
# pip comes from torch's environment; --ignore-installed puts every carried wheel into the kit
# even where that environment has the same version.
"$kpy" -m pip install -q --no-index --no-deps --no-compile --ignore-installed \
    --disable-pip-version-check --target "$site" "$kit"/wheels/*.whl 2>&1 | grep -v "^WARNING: Target directory" >&2
[ "${PIPESTATUS[0]}" = 0 ] || die "installing the kit's wheels failed"
# Libraries where the probe looks first (the venv's lib/), whatever the machine has.
mkdir -p "$libdir" && cp "$kit"/lib/libiomp5.so "$kit"/lib/libjemalloc.so.2 "$kit"/lib/libtcmalloc_minimal.so.4 "$libdir/"
if ! command -v numactl >/dev/null 2>&1; then
    # Debian's numactl with its libnuma beside it, through a wrapper: only numactl (and what it
    # starts) sees the library path.
    mkdir -p "$venv/libexec/numa"
    cp "$kit/bin/numactl" "$venv/libexec/numa/numactl.bin" && cp "$kit/lib/libnuma.so.1" "$venv/libexec/numa/"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
        "$venv/libexec/numa" "$venv/libexec/numa/numactl.bin" > "$venv/bin/numactl"
    chmod +x "$venv/bin/numactl"
fi
export PATH="$venv/bin:$PATH"
# oneCCL (the kit's ccl.tar.gz): the runtime into the prefix where autotune looks for it, the
# libfabric providers where Intel's libfabric is told to look, then the carried module; a
# compiler there is the fallback. Either way the run goes on: without ccl, trials run gloo.
if [ -f "$kit/ccl.tar.gz" ]; then
    prefix="$(dirname "$libdir")"
    rm -rf "$venv/ccl-kit" && mkdir -p "$venv/ccl-kit" "$prefix/include" &&
        tar -xzf "$kit/ccl.tar.gz" -C "$venv/ccl-kit" &&
        cp -a "$venv/ccl-kit/ccl/lib/." "$libdir/" && cp -a "$venv/ccl-kit/ccl/include/." "$prefix/include/" ||
        die "the kit's ccl.tar.gz does not unpack (run scripts/device-kit.sh again)"
    export FI_PROVIDER_PATH="$libdir/libfabric"
    ccl() { "$kpy" -m autotune.comm.ccl "$@" >>"$OUT/kit.log" 2>&1; }
    if ccl adopt "$venv"/ccl-kit/ccl/ext/*.so && ccl status; then
        echo "device-run: ccl: the kit's module loads beside this torch" | tee -a "$OUT/kit.log"
    elif command -v g++ >/dev/null 2>&1 && ccl build && ccl status; then
        echo "device-run: ccl: the kit's module did not load; built here instead" | tee -a "$OUT/kit.log"
    else
        echo "device-run: ccl: unavailable here (kit.log says why); CPU trials run gloo" | tee -a "$OUT/kit.log"
    fi
fi
exec "$kpy" -m benchmarks.device.run --out "$OUT" "$@"
