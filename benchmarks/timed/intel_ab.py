"""Interleaved A/B of one knob in real trials: IPEX on/off, libiomp5/libgomp (docs/backends.md, "The Intel stack").

    python -m benchmarks.timed.intel_ab --python PY --a ipex=on --b ipex=off --set precision=bf16 --rounds 3

A thin wrapper over `autotune compare` (autotune/recommend/compare.py: the rounds, the ratio statistics and
the verdict are the verification's own code) that runs it under another interpreter: PY may be
another environment (scripts/intel-env.sh) whose torch IPEX matches. Options other than --python
are passed through unchanged; the default window is 3 s, as the measurements in docs/benchmarks.md used.
"""
from __future__ import annotations

import os
import subprocess
import sys

from benchmarks import ROOT


def compare_argv(argv: list[str]) -> tuple[str, list[str]]:
    """(interpreter, the `autotune compare` command line) for this wrapper's arguments."""
    python, rest = sys.executable, list(argv)
    if "--python" in rest:
        i = rest.index("--python")
        if i + 1 >= len(rest):
            raise SystemExit("intel_ab: --python needs an interpreter path")
        python = rest[i + 1]
        del rest[i:i + 2]
    return python, [python, "-m", "autotune", "compare", *rest]


def main(argv: list[str] | None = None) -> int:
    python, cmd = compare_argv(sys.argv[1:] if argv is None else argv)
    # The other environment imports this checkout's autotune, not an installed copy.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    raise SystemExit(main())
