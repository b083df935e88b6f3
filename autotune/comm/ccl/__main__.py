"""python -m autotune.comm.ccl install|build|status|adopt FILE: set-up of the ccl backend (setup.sh
runs `install` then `build`); `status` prints whether ccl is usable here and why not; `adopt`
installs a module compiled elsewhere for this torch (the GPU machine's kit carries one)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import build, problem, provider
from .build import load_extension
from .install import install_runtime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotune.comm.ccl", description=__doc__)
    p.add_argument("action", choices=("install", "build", "status", "adopt"),
                   help="install: the oneCCL runtime from PyPI (oneccl-cpu, its headers, and libccl.so.2 "
                        "from the oneccl wheel); build: compile the "
                        "backend for this torch (cached); status: usable or why not; adopt FILE: "
                        "a module compiled elsewhere for this torch and Python")
    p.add_argument("module", nargs="?", help="with adopt: the compiled module's file")
    args = p.parse_args(argv)
    if (args.action == "adopt") != (args.module is not None):
        p.error("adopt needs the module's file, and only adopt takes one")
    try:
        if args.action == "install":
            print(install_runtime())
        elif args.action == "build":
            print(f"ccl: built {build()}")
        elif args.action == "adopt":
            from .prebuilt import NotForThisTorch, adopt
            try:
                print(f"ccl: adopted {adopt(Path(args.module))}")
            except NotForThisTorch as exc:   # the file named is the problem: bad input
                print(f"{exc}", file=sys.stderr)
                return 2
        else:
            why = problem()
            if why is None and provider() == "autotune":
                try:
                    load_extension()   # built is not enough: it must load beside this torch
                except Exception as exc:  # noqa: BLE001 - any load failure makes it unusable
                    why = f"the built ccl extension does not load: {exc}; fix: python -m autotune.comm.ccl build"
            print(f"ccl: {'available (' + provider() + ')' if why is None else 'unavailable (' + why + ')'}")
            return 0 if why is None else 1
    except Exception as exc:  # noqa: BLE001 - a failed set-up step is one line, not a traceback
        print(f"{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
