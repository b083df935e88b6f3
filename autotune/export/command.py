"""Turn a configuration into the launch command a user copies: shell, torchrun or JSON (pure).

The command is built from the same LaunchPlan the trials ran, with the timed worker replaced by
the training command, so what the user pastes binds, preloads and threads exactly as measured.
"""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from ..util.child_python import python_module
from ..util.clean import one_line
from ..util.compile_cache import COMPILE_CACHE_ENV, INDUCTOR_ENV, TRITON_ENV
from ..config import (DEFAULT_WORKLOAD, TRAINER_FLAGS, Config, changed_knobs,
                      describe_changes)
from ..errors import ConfigError
from ..plan.build import build_plan
from ..plan.launch_plan import RENDEZVOUS_ENV, STANDALONE_SECONDS
from ..probe.parse import format_cpulist
from ..probe.topology import Topology

FORMATS = ("shell", "torchrun", "mpirun", "slurm", "json")
# Per-trial bookkeeping a user's launch does not need.
_TRIAL_ONLY = ("AUTOTUNE_RESULT", "AUTOTUNE_TRIAL_ID", "AUTOTUNE_REPORT")
_PER_RANK = ("RANK", "LOCAL_RANK")
# What torchrun sets itself (the torchrun format leaves these to it).
_TORCHRUN_SETS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "ROLE_RANK", "ROLE_NAME", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
                  "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS")
# A knob a user's script overrides is not claimed: its variables are left out and the knob is
# shown at its default (the script's own setting is what runs, as in every trial).
_OVERRIDE_ENV = {"threads": ("OMP_NUM_THREADS",), "kmp_affinity": ("KMP_AFFINITY",),
                 "kmp_blocktime": ("KMP_BLOCKTIME",)}


@dataclass(frozen=True, kw_only=True)
class LaunchCommand:
    config: Config
    env: dict[str, str]                          # the same for every rank
    ranks: tuple[tuple[dict[str, str], tuple[str, ...]], ...]   # (rank-only env, argv)
    program: tuple[str, ...]                     # the training command without binding
    cpus: tuple[tuple[int, ...] | None, ...]
    mem_nodes: tuple[int | None, ...]
    manifest: dict[str, Any] = field(default_factory=dict)
    mem_policies: tuple[str | None, ...] = ()    # per rank: "interleave:0,4" (plan/memory.py)
    overridden: dict[str, str] = field(default_factory=dict)   # knob -> why it is not claimed
    local_rank_arg: str | None = None
    topology: Topology | None = None             # for the launcher formats (mpirun, slurm)
    cluster: Any = None                          # multinode.Cluster: the hosts it spans


def training_command(workload: str, config: Config, *, python: str = sys.executable,
                     seconds: float = STANDALONE_SECONDS) -> tuple[str, ...]:
    """The built-in trainer for a built-in or module:function workload, with the knobs that act
    inside the process (the rest act through the environment and binding)."""
    # The libraries are always named: the rank then checks that the environment really
    # preloads them (or nothing, for the defaults).
    checked = ("allocator", "omp_runtime")
    changed = changed_knobs(config)
    sets = [f"--set={k}={v}" for k, v in config.to_dict().items()
            if k in TRAINER_FLAGS and v is not None and (k in checked or k in changed)]
    return python_module("autotune.worker", "--workload", workload, *sets,
                         "--seconds", f"{seconds:g}", python=python)


def launch_command(config: Config, topology: Topology, *, workload: str = DEFAULT_WORKLOAD,
                   program: tuple[str, ...] | None = None, python: str = sys.executable,
                   port: int = 29500, manifest: dict[str, Any] | None = None,
                   script: bool = False, local_rank_arg: str | None = None,
                   overridden: dict[str, str] | None = None, cluster: Any = None) -> LaunchCommand:
    """`script`: a user's command, launched as the trials launched it (torchrun's environment,
    `local_rank_arg`); `overridden`: knobs the script sets itself, which are not claimed;
    `cluster`: the hosts a multi-node configuration spans (the launcher formats)."""
    overridden = {k: v for k, v in (overridden or {}).items() if k in Config().to_dict()}
    reset = {k: getattr(Config(), k) for k in overridden}
    if "nproc" in reset:   # a script that starts its own workers is launched once
        reset["ranks_per_numa_node"] = None
    config = config.with_(**reset)
    program = program or training_command(workload, config, python=python)
    if config.nnodes > 1 or cluster is not None:   # across hosts: the launcher formats (_across)
        if cluster is None:
            raise ConfigError(f"nnodes={config.nnodes}: the study has no hosts stored to export for")
        return LaunchCommand(config=config, env={}, ranks=(), program=tuple(program), cpus=(),
                             mem_nodes=(), manifest=manifest or {}, topology=topology,
                             cluster=cluster)
    plan = build_plan(config, topology, workload=workload, workdir=".", master_port=port,
                      base_env={}, program=program, python=python, script=script,
                      local_rank_arg=local_rank_arg, trial_id="autotune")
    dropped = {v for k in overridden for v in _OVERRIDE_ENV.get(k, ())}
    # a user's launch meets through env:// (no trial folder), and compiles only when it does
    dropped |= {RENDEZVOUS_ENV} | (set() if config.compile or script else set(COMPILE_CACHE_ENV))
    envs = [{k: v for k, v in r.env.items() if k not in _TRIAL_ONLY and k not in dropped}
            for r in plan.ranks]
    common = {k: v for k, v in envs[0].items() if k not in _PER_RANK
              and all(e.get(k) == v for e in envs)}
    ranks = tuple(({k: v for k, v in e.items() if k not in common}, r.argv)
                  for e, r in zip(envs, plan.ranks))
    return LaunchCommand(config=config, env=common, ranks=ranks, program=tuple(program),
                         cpus=tuple(r.cpus for r in plan.ranks),
                         mem_nodes=tuple(r.mem_node for r in plan.ranks), manifest=manifest or {},
                         mem_policies=tuple(r.mem_policy for r in plan.ranks),
                         overridden=overridden, local_rank_arg=local_rank_arg,
                         topology=topology, cluster=cluster)


def render(cmd: LaunchCommand, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if cmd.cluster is not None or fmt in ("mpirun", "slurm"):
        text = _across(cmd, fmt)
        if text.startswith("#!"):   # an sbatch script: sbatch reads #SBATCH lines only above
            # the first command, so the header goes below them, beside the script's own comments
            head, _, body = text.partition("\nset -euo pipefail\n")
            return "\n".join([head, *_header(cmd), "set -euo pipefail", body])
        return "\n".join(_header(cmd) + [text])
    return {"shell": _shell, "torchrun": _torchrun, "json": _json}[fmt](cmd)


def _across(cmd: LaunchCommand, fmt: str) -> str:
    from . import cluster as H
    cluster = cmd.cluster or H.local_cluster(cmd.topology, cmd.program[0])
    if fmt == "shell":   # the launcher the trials ran with
        fmt = {"ssh": "torchrun", "srun": "slurm"}.get(cluster.launcher, cluster.launcher)
    if fmt == "json":
        raise ConfigError("--format json exports one machine; across hosts use torchrun, "
                          "mpirun or slurm")
    make = {"torchrun": H.torchrun_hosts, "mpirun": H.mpirun, "slurm": H.sbatch}[fmt]
    return make(cmd.config, cluster, cmd.program)


def _q(args) -> str:
    return " ".join(shlex.quote(str(a)) for a in args)


def _assign(env: dict[str, str]) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))


def _env_prefix(env: dict[str, str]) -> str:
    return f"env {_assign(env)} " if env else ""


def _header(cmd: LaunchCommand) -> list[str]:
    """The `# ...` lines above a command. Every field comes from the study, which someone else
    may have written: one_line keeps a newline in it from ending the comment and running the
    rest as a command."""
    m = cmd.manifest
    lines = ["# autotune tuned launch: " + describe_changes(cmd.config)]
    if m.get("headline"):
        lines.append(f"# {m['headline']}")
    lines += [f"# {claim}" for claim in m.get("accuracy") or ()]
    lines += [f"# {line}" for line in m.get("compile") or () if isinstance(line, str)]
    if m.get("fingerprint"):
        lines.append(f"# measured on {m.get('machine', '?')} (topology {m['fingerprint']}), "
                     f"torch {(m.get('library_versions') or {}).get('torch', '?')}")
    for knob, why in cmd.overridden.items():
        lines.append(f"# {knob}: not set here, the script sets its own ({why})")
    cache = cmd.env.get(INDUCTOR_ENV)
    if cache:   # the trials compiled into it: a compiled first run starts warm
        lines.append(f"# torch.compile's cache: {cache} (and {TRITON_ENV}), private to you, " + (
            "where the trials compiled this launch's graphs: its first run starts warm"
            if cmd.config.compile else
            "kept for a script that compiles itself: its trials' graphs are there"))
    if cmd.config.mem_policy == "weighted" and cmd.topology is not None:
        from ..plan.memory import wanted_weights, weight_commands
        wanted = wanted_weights(cmd.topology)
        if wanted:   # the kernel's per-node weights the ranks interleave by (autotune launch sets them)
            lines.append(f"# mem_policy=weighted interleaves by these weights (as root): "
                         f"{weight_commands(wanted)}")
    return [one_line(line) for line in lines]


def _shell(cmd: LaunchCommand) -> str:
    if len(cmd.ranks) == 1:
        env, argv = cmd.ranks[0]
        return "\n".join(_header(cmd) + [f"{_env_prefix({**cmd.env, **env})}{_q(argv)}"])
    body = [f"  {_assign(env)} {_q(argv)} &" for env, argv in cmd.ranks]
    # A subshell keeps the exports out of the user's shell; the trap stops every rank on Ctrl-C.
    return "\n".join(_header(cmd) + ["(", "  trap 'kill 0' INT TERM",
                                     f"  export {_assign(cmd.env)}", *body, "  wait", ")"])


def _torchrun(cmd: LaunchCommand) -> str:
    env = {k: v for k, v in cmd.env.items() if k not in _TORCHRUN_SETS}
    n = len(cmd.ranks)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                f"--nproc-per-node={n}"]
    bound = [c for c in cmd.cpus if c is not None]
    # Variables that differ between ranks (oneCCL's worker core, per-rank OpenMP cores): torchrun
    # gives every rank the same environment, so the shim sets them per LOCAL_RANK.
    per_rank = sorted({k for e, _argv in cmd.ranks for k in e if k not in _PER_RANK})
    shim = [cmd.program[0], "-m", "autotune.bind"]
    shim += [f"--env={k}=" + ";".join(e.get(k, "") for e, _a in cmd.ranks) for k in per_rank]
    if torchrun_numa_binding(cmd.config):
        # torchrun computes the same CPU sets from the live /sys (torch/numa/binding.py)
        launcher.append(f"--numa-binding={cmd.config.numa_binding}")
    elif bound:
        tool = cmd.config.binding.split("_")[0]
        shim += [f"--tool={tool}", "--cpus=" + ";".join(format_cpulist(c) for c in bound)]
        if any(m is not None for m in cmd.mem_nodes):
            shim.append("--membind=" + ";".join(str(m) for m in cmd.mem_nodes))
    if any(cmd.mem_policies):   # interleave, preferred or weighted: numactl sets it per rank
        shim.append("--mem=" + ";".join(m or "" for m in cmd.mem_policies))
    if len(shim) > 3:
        tail = ["--no-python", *shim, "--", *cmd.program]
    else:
        tail = ["--no-python", *cmd.program]
    notes = [one_line(f"# the script reads {cmd.local_rank_arg}: torchrun passes LOCAL_RANK only; "
                      "use the shell form, or read os.environ['LOCAL_RANK']")] \
        if cmd.local_rank_arg else []
    return "\n".join(_header(cmd) + notes + [f"{_env_prefix(env)}{_q(launcher + tail)}"])


def torchrun_numa_binding(config: Config) -> bool:
    """torchrun's own --numa-binding applies this launch: a GPU launch whose numa_binding mode
    is applied with numactl over every logical CPU (torchrun binds SMT siblings too and never
    binds memory). Other bindings are exported as numactl/taskset per rank."""
    return (config.device == "cuda" and config.numa_binding != "none"
            and config.binding == "numactl_smt")


def _json(cmd: LaunchCommand) -> str:
    return json.dumps({"format": "autotune-launch/1", "config": cmd.config.to_dict(),
                       "env": cmd.env, "program": list(cmd.program),
                       "ranks": [{"env": e, "argv": list(a)} for e, a in cmd.ranks],
                       "shell": _shell(cmd), "torchrun": _torchrun(cmd),
                       "overridden_by_script": cmd.overridden, "manifest": cmd.manifest},
                      indent=2)
