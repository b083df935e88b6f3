"""`python -m autotune.bind [--tool numactl --cpus '0-3;4-7'] [--mem 'interleave:0,4;interleave:1,5']
    [--env K=a;b] [--env-all K=V] [--rank-log F] -- CMD ...`

A launcher (torchrun, mpirun, srun) starts every rank with the same command and cannot give ranks
different cores or environments. This shim runs as that command: it finds which planned rank it
is, picks that rank's CPU set, memory node or policy and per-rank variables, and replaces itself (exec)
with numactl/taskset running CMD, so launched ranks bind like the measured trial did.

Which planned rank: `--node-rank N` (torchrun across hosts, whose rendezvous may number ranks
otherwise) gives N * LOCAL_WORLD_SIZE + LOCAL_RANK; under mpirun or srun the global rank they
assign (ranks are mapped by node, in host order); under plain torchrun LOCAL_RANK. Per-rank lists
(`;`-separated) are indexed by that number; an --env-all value is the same for every rank and
taken whole (the trial folder's paths, which may hold a `;`). The rank variables torchrun sets
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE) are filled in from mpirun's or srun's own, so one
worker serves all launchers. `{rank}` in an --env or --env-all value or --rank-log is replaced by
the planned rank.

`--local-ranks N` (with --node-rank) makes the shim the launcher itself: it starts this host's N
ranks, each with the variables torchrun would give it, and exits with the first failure (ending
the others, as torchrun's agent does). A trial across hosts starts its ranks so, over ssh: a
torchrun agent per host cost a second import of torch and a rendezvous before any rank started
(docs/benchmarks.md, "Trials across hosts").
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Mapping

from .util.channel import LIFELINE_ENV
from .util.checked_folder import FolderRefused, open_private

# (rank, world size, local rank, local world size) as each launcher names them.
_LAUNCHER_VARS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),       # MPICH / Intel MPI
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


# numactl's flag for each memory mode a plan names (autotune/plan/memory.py)
_MEM_FLAGS = {"bind": "--membind", "interleave": "--interleave", "preferred": "--preferred",
              "weighted": "--weighted-interleave"}


def mem_flags(spec: str) -> list[str]:
    """A plan's memory policy as numactl flags: 'interleave:0,4' -> ['--interleave=0,4'];
    a bare node list is --membind (the shim's form before other policies existed)."""
    mode, sep, nodes = spec.partition(":")
    if not sep:
        return [f"--membind={spec}"]
    if mode not in _MEM_FLAGS:
        raise SystemExit(f"autotune.bind: memory policy {spec!r}: the mode is one of "
                         f"{', '.join(_MEM_FLAGS)}")
    return [f"{_MEM_FLAGS[mode]}={nodes}"]


def command(tool: str, cpus: str | None, membind: str | None, argv: list[str],
            mem: str | None = None) -> list[str]:
    """The binding prefix and argv: taskset's CPUs, or numactl's CPUs (None: not bound) with
    --membind=`membind` or the memory policy `mem` ('interleave:0,4')."""
    if tool == "taskset":
        return ["taskset", "-c", cpus, *argv]
    memory = mem_flags(mem) if mem else ([f"--membind={membind}"] if membind else [])
    return ["numactl", *([f"--physcpubind={cpus}"] if cpus else []), *memory, *argv]


def rank_env(env: Mapping[str, str]) -> dict[str, str]:
    """RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE from whichever launcher started us."""
    if "RANK" in env and "LOCAL_RANK" in env:
        return {}
    for names in _LAUNCHER_VARS:
        if names[0] in env:
            values = [env.get(n) for n in names]
            return {k: v for k, v in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
                                         values) if v is not None}
    return {}


def plan_index(env: Mapping[str, str], node_rank: int | None) -> int:
    local = int(env.get("LOCAL_RANK", "0"))
    if node_rank is not None:
        return node_rank * int(env.get("LOCAL_WORLD_SIZE", "1")) + local
    if any(names[0] in env for names in _LAUNCHER_VARS):
        return int(env.get("RANK", "0"))
    return local


def pick(values: str, index: int, what: str) -> str:
    """`a;b;c` -> the index-th; a value without `;` is the same for every rank."""
    parts = values.split(";")
    if len(parts) == 1:
        return parts[0]
    if index >= len(parts):
        raise SystemExit(f"autotune.bind: planned rank {index} but only {len(parts)} {what} given")
    return parts[index]


def local_rank_env(env: Mapping[str, str], node_rank: int, local_rank: int,
                   local_ranks: int) -> dict[str, str]:
    """What torchrun's agent sets for one of its ranks (one role, no restarts): the rank numbers
    in host order, node rank by node rank. WORLD_SIZE comes from the launch's environment."""
    rank = node_rank * local_ranks + local_rank
    world = env.get("WORLD_SIZE", str(local_ranks))
    return {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(local_ranks),
            "WORLD_SIZE": world, "GROUP_RANK": str(node_rank), "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": world, "ROLE_NAME": "default", "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0"}


def start_local_ranks(argv: list[str], env: Mapping[str, str], node_rank: int, count: int,
                      grace_s: float = 5.0) -> int:
    """Run the shim once per local rank (argv: the shim's own arguments, without
    --local-ranks); the first rank to fail ends the others. Returns the exit status: 0, the
    failed rank's code, or 128 + the signal that ended it."""
    pids = []
    for local in range(count):
        pid = os.fork()
        if pid == 0:   # the child becomes one rank: this shim's path again, then exec
            child = {**env, **local_rank_env(env, node_rank, local, count)}
            code = 127
            try:
                code = main(argv, env=child)
            except SystemExit as exc:   # a bad --env list, say: its message, as without forking
                code = exc.code if isinstance(exc.code, int) else 2
                if not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
            finally:   # a child never returns into the parent's loop
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    status = 0
    while pids:
        pid, raw = os.wait()
        if pid in pids:
            pids.remove(pid)
            code = os.waitstatus_to_exitcode(raw)
            if code != 0 and status == 0:
                status = code if code > 0 else 128 - code
                _end(pids, grace_s)
                pids = []
    return status


def _end(pids: list[int], grace_s: float) -> None:
    """SIGTERM the other ranks, SIGKILL what is left after the grace period; all reaped."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    left, deadline = list(pids), time.monotonic() + grace_s
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if os.waitpid(pid, os.WNOHANG) == (0, 0)]
        time.sleep(0.05)
    for pid in left:
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _keep_output_open() -> None:
    """Keep the launcher's output pipe open, unused, in the rank (across its exec): Open MPI
    closes a rank's stdin, the rank's lifeline to the runner (worker/lifeline.py), as soon as
    the rank's own stdout and stderr close, which sending them to the rank's log does."""
    kept = os.dup(1)
    os.set_inheritable(kept, True)


def _rank_variables(p: argparse.ArgumentParser, args: argparse.Namespace,
                    index: int) -> dict[str, str]:
    """The variables --env (this rank's of a ';'-separated list) and --env-all (one value for
    all) give the planned rank `index`, with {rank} filled in."""
    out = {}
    for item, whole in [(i, False) for i in args.env] + [(i, True) for i in args.env_all]:
        key, sep, values = item.partition("=")
        if not sep:
            p.error(f"--env{'-all' if whole else ''} {item!r}: expected KEY=VALUE")
        value = values if whole else pick(values, index, f"values of {key}")
        out[key] = value.replace("{rank}", str(index))
    return out


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotune.bind", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", choices=("numactl", "taskset"), default="numactl")
    p.add_argument("--cpus", help="one CPU list per rank, separated by ';' (none: not bound)")
    p.add_argument("--membind", help="one NUMA node per rank, separated by ';'")
    p.add_argument("--mem", help="one memory policy per rank ('interleave:0,4', 'preferred:4', "
                                 "'weighted:0,2'), separated by ';'")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUES",
                   help="a variable for the rank: one value per rank separated by ';', or one for all")
    p.add_argument("--env-all", action="append", default=[], metavar="KEY=VALUE",
                   help="a variable with one value for every rank, taken whole: never split at "
                        "';' (a path may hold one); {rank} allowed")
    p.add_argument("--node-rank", type=int, help="this host's place in the host list (torchrun)")
    p.add_argument("--local-ranks", type=int, metavar="N",
                   help="start this host's N ranks here (needs --node-rank): no torchrun agent")
    p.add_argument("--rank-log", help="send the rank's stdout and stderr to this file ({rank} allowed)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = p.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        p.error("no command given after --")
    env = dict(os.environ if env is None else env)
    if args.local_ranks is not None:
        if args.local_ranks < 1 or args.node_rank is None:
            p.error("--local-ranks N needs N >= 1 and --node-rank")
        own = list(sys.argv[1:] if argv is None else argv)
        i = own.index(next(a for a in own if a.startswith("--local-ranks")))
        own[i:i + (1 if "=" in own[i] else 2)] = []
        return start_local_ranks(own, env, args.node_rank, args.local_ranks)
    env.update(rank_env(env))
    index = plan_index(env, args.node_rank)
    env["AUTOTUNE_PLAN_INDEX"] = str(index)
    env.update(_rank_variables(p, args, index))
    full = cmd
    if args.cpus or args.mem:
        nodes = pick(args.membind, index, "NUMA nodes") if args.membind else None
        full = command(args.tool, pick(args.cpus, index, "CPU lists") if args.cpus else None,
                       nodes, cmd, mem=pick(args.mem, index, "memory policies") if args.mem
                       else None)
    if args.rank_log:   # in the trial's folder, checked as the runner checks it; a new file
        log = os.path.abspath(args.rank_log.replace("{rank}", str(index)))
        try:
            with open_private(os.path.dirname(log)) as folder:
                fd = folder.create(os.path.basename(log))
        except (FolderRefused, OSError) as exc:
            p.error(f"--rank-log {log}: {exc}")
        if env.get(LIFELINE_ENV):
            _keep_output_open()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    sys.stdout.flush()
    os.execvpe(full[0], full, env)
    return 127  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
