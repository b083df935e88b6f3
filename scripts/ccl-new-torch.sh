#!/usr/bin/env bash
# Does the ccl backend build and pass its collective tests against another torch? Run by hand when
# a new torch is released (it costs about 13 minutes and 3 GB of downloads on 2 cores, too much
# for CI). A side venv outside the repository, a worktree of HEAD installed into it, then
# `autotune.comm.ccl install/build/status` and the ccl tests.
#   scripts/ccl-new-torch.sh 2.15.0 [VENV]        (VENV default: ~/.cache/autotune/torch-VERSION)
set -euo pipefail
version="${1:-}"
[[ "$version" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || { echo "ccl-new-torch: error: give a torch release, e.g. 2.15.0" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${2:-$HOME/.cache/autotune/torch-$version}"
tree="$(mktemp -d /tmp/autotune-ccl-torch-XXXXXX)"
trap 'git -C "$repo" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# A pip configuration that caps torch or adds wheel folders would swap the version under test:
# this venv reads none (an empty PIP_CONSTRAINT does not lift a cap; pip ignores empty settings).
export PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT=/dev/null
"$venv/bin/pip" install -q --index-url https://pypi.org/simple "torch==$version"
git -C "$repo" worktree add -q --detach "$tree" HEAD
"$venv/bin/pip" install -q --index-url https://pypi.org/simple -e "$tree[test]"
"$venv/bin/python" -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '$version' else f'pip replaced torch $version with {torch.__version__}')"
cd "$tree"
"$venv/bin/python" -m autotune.comm.ccl install
time "$venv/bin/python" -m autotune.comm.ccl build
"$venv/bin/python" -m autotune.comm.ccl status
"$venv/bin/python" -m pytest -q tests/integration/test_ccl.py tests/unit/comm
