"""`python -m autotune.bind --tool numactl --cpus '0-3;4-7' [--membind '0;1'] -- CMD ...`

torchrun starts every rank with the same command and cannot bind ranks to different cores. This
shim runs under torchrun (`--no-python`), picks this rank's CPU set by LOCAL_RANK and replaces
itself (exec) with numactl/taskset running CMD, so the exported torchrun command binds like the
measured trial did.
"""
from __future__ import annotations

import argparse
import os
import sys


def command(tool: str, cpus: str, membind: str | None, argv: list[str]) -> list[str]:
    if tool == "taskset":
        return ["taskset", "-c", cpus, *argv]
    return ["numactl", f"--physcpubind={cpus}", *([f"--membind={membind}"] if membind else []), *argv]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotune.bind", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", choices=("numactl", "taskset"), default="numactl")
    p.add_argument("--cpus", required=True, help="one CPU list per local rank, separated by ';'")
    p.add_argument("--membind", help="one NUMA node per local rank, separated by ';'")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = p.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        p.error("no command given after --")
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    cpus = args.cpus.split(";")
    nodes = args.membind.split(";") if args.membind else None
    if rank >= len(cpus) or (nodes and rank >= len(nodes)):
        p.error(f"LOCAL_RANK={rank} but only {len(cpus)} CPU list(s) given")
    full = command(args.tool, cpus[rank], nodes[rank] if nodes else None, cmd)
    sys.stdout.flush()
    os.execvp(full[0], full)
    return 127  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
