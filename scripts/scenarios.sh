#!/usr/bin/env bash
# The end-to-end scenarios (tests/README.md): whole searches over hosts and through SLURM, kills at
# random moments, a hog beside verify, fresh installs, the Intel stack. About 20 minutes on 2 cores,
# on top of the README's test command, which leaves them out. Run before landing a change to the
# search, verification, the launchers or set-up. Extra arguments go to pytest (-x, -k NAME).
# The Intel environment (scripts/intel-env.sh, ~7 GB, ~5 minutes once per machine) is built first;
# AUTOTUNE_INTEL=0 skips it, and a build that fails (no network) is a warning: test_intel.py skips.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${AUTOTUNE_INTEL:-1}" != 0 ]; then
    scripts/intel-env.sh >/dev/null || echo "scenarios: warning: intel env not built; tests/integration/test_intel.py will skip" >&2
fi
./setup.sh --test && .venv/bin/python -m pytest -q -m scenario "$@"
