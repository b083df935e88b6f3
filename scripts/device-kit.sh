#!/usr/bin/env bash
# Make the kit that scripts/device-run.sh installs on the GPU machine, which has torch and CUDA
# but no package index. Run here (where PyPI and Debian's archive answer), then carry the folder:
#
#   scripts/device-kit.sh                 # -> .kit/ for the GPU machine (CPython 3.12, x86-64)
#   scripts/device-kit.sh --for-here DIR  # the same kit for this machine's Python (the kit's test)
#   scripts/device-kit.sh --no-ccl        # without the oneCCL part (its first make downloads 730 MB)
#
# The kit (about 35 MB; the device tool carries at most 64 MiB with the working tree):
#   wheels/   every wheel of benchmarks/device/wheels.txt (autotune itself is the carried working
#             tree, installed there as a path: a wheel made here could be older than the tree)
#   lib/      libiomp5.so alone (intel-openmp's wheel is 50 MB: its offload library is 135 MB
#             unpacked), jemalloc, tcmalloc_minimal (no libunwind needed) and libnuma
#   bin/      numactl
#   ccl.tar.gz  the oneCCL runtime, Intel's libfabric and our ccl backend compiled for the GPU
#             machine's torch 2.11.0 and CPython 3.12 (3 MB; benchmarks/device/kit.py says what
#             is in it and why it is carried compiled)
# The libraries and numactl come from Debian's packages (apt-get download; nothing is installed
# here). device-run.sh puts lib/ where the probe looks (the kit venv's lib/) and numactl on PATH
# only where the GPU machine lacks them, so the CPU phase can offer every allocator, the Intel
# OpenMP runtime and numactl binding; it unpacks ccl.tar.gz into the same prefix, so the backend
# knob offers ccl there.
#
# The kit is made in a folder of its own and moved to DIR only when it and the working tree fit
# the device's 64 MiB (KIT_LIMIT_MIB): over it, one line with the size of each part, exit 2, and
# DIR is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
here=0
ccl=1
while [ $# -gt 0 ]; do
    case "$1" in
        --for-here) here=1 ;;
        --no-ccl) ccl=0 ;;
        -*) echo "device-kit: unknown option $1 (usage: scripts/device-kit.sh [--for-here] [--no-ccl] [DIR])" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
dest="${1:-.kit}"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && PY="${PYTHON:-.venv/bin/python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
kit="$tmp/kit"
mkdir -p "$kit/wheels" "$kit/lib" "$kit/bin"

if [ $here = 1 ]; then
    target=()
else
    # pip matches each manylinux tag exactly: name the ones these wheels are built for.
    target=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
            --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
            --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
fi
echo "device-kit: wheels of benchmarks/device/wheels.txt"
"$PY" -m pip download -q --no-deps --only-binary=:all: "${target[@]}" -d "$kit/wheels" \
    -r benchmarks/device/wheels.txt 2> >(grep -v "^WARNING: Location" >&2)

echo "device-kit: libiomp5.so from intel-openmp"
"$PY" -m pip download -q --no-deps --only-binary=:all: "${target[@]}" -d "$tmp" \
    "intel-openmp==2026.2.0" 2> >(grep -v "^WARNING: Location" >&2)
"$PY" - "$tmp" "$kit/lib" <<'PYCODE'
import glob, sys, zipfile
whl = glob.glob(f"{sys.argv[1]}/intel_openmp-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/libiomp5.so"))
    with open(f"{sys.argv[2]}/libiomp5.so", "wb") as out:
        out.write(z.read(name))
PYCODE

echo "device-kit: jemalloc, tcmalloc_minimal, numactl from Debian"
(cd "$tmp" && apt-get download -q libjemalloc2 libtcmalloc-minimal4 libnuma1 numactl >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get download -q libjemalloc2 libtcmalloc-minimal4 libnuma1 numactl >/dev/null; })
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
cp -L "$tmp"/root/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
      "$tmp"/root/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
      "$tmp"/root/usr/lib/x86_64-linux-gnu/libnuma.so.1 "$kit/lib/"
cp "$tmp"/root/usr/bin/numactl "$kit/bin/"

if [ $ccl = 1 ]; then
    "$PY" -m benchmarks.device.kit ccl "$kit" $([ $here = 1 ] && echo --for-here)
fi
# The size check last, on what would travel: nothing reaches DIR unless it fits.
sizes="$("$PY" -m benchmarks.device.kit size "$kit" --limit-mib "${KIT_LIMIT_MIB:-64}")" || exit 2
rm -rf "$dest" && mkdir -p "$(dirname "$dest")" && mv "$kit" "$dest"
echo "$sizes"
echo "device-kit: ready in $(cd "$dest" && pwd)"
