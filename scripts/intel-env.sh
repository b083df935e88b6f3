#!/usr/bin/env bash
# Build (once) and print the path of a second environment with the Intel stack:
# torch 2.8.0 + intel-extension-for-pytorch 2.8.0 + torchvision 0.23 + autotune itself.
# It is large (~7 GB), so it lives outside the clone, keyed on requirements/intel.txt: a later
# run (or CI on the same machine) reuses it, and changing the pins builds a new one.
#   scripts/intel-env.sh          -> prints the environment's python, building it if needed
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
key=$(sha256sum requirements/intel.txt | cut -c1-12)
cache="${AUTOTUNE_CACHE:-$HOME/.cache/autotune}"
env_dir="$cache/venv-intel-$key"
if [ ! -f "$env_dir/.complete" ]; then
    echo "intel-env: building $env_dir (about 7 GB, a few minutes; reused afterwards)" >&2
    rm -rf "$env_dir"
    mkdir -p "$cache"
    "$PY" -m venv "$env_dir"
    "$env_dir/bin/pip" install -q -r requirements/intel.txt >&2
    touch "$env_dir/.complete"
fi
# The project itself is installed on every call (editable, no deps beyond what is pinned), so
# the environment always runs this checkout's code.
"$env_dir/bin/pip" install -q --no-deps -e . >&2
"$env_dir/bin/python" -c "import optuna, psutil, cpuinfo, yaml" 2>/dev/null ||
    "$env_dir/bin/pip" install -q optuna psutil py-cpuinfo PyYAML optuna-dashboard >&2
echo "$env_dir/bin/python"
