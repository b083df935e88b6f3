"""`autotune launch`: run a training command under this machine's tuned configuration (pure).

The configuration comes from a study's verified recommendation or from the JSON manifest that
`autotune export --format json` wrote. It is planned by the same build_plan as every trial and
every export, so the ranks get exactly the binding, environment, allocator and OpenMP runtime that
were measured; runner.run_attached executes the plan. Nothing here touches the machine: the
caller probes, reads the study or file, and runs.

Across hosts: a `Nodes` value turns one host's plan into its share of a static torchrun-style
rendezvous (every host runs `autotune launch --nnodes N --node-rank R --master-addr HOST`). A
launcher that starts the other hosts itself would build these per-host plans and hand them to its
runner: the plan is the seam.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ..util.atomic_json import read_json
from ..config import Config
from ..errors import ConfigError, StorageError
from ..plan.build import build_plan
from ..plan.feasible import infeasible_reason
from ..plan.launch_plan import LaunchPlan
from ..script.template import fill, placeholders
from ..config import IN_PROCESS_KNOBS, changed_knobs
from ..probe.topology import Topology
from ..recommend.settle import Verdict
from ..study.attrs import StudyAttrs

MANIFEST_FORMAT = "autotune-launch/1"   # written by export/command.py's json format
_BOOKKEEPING = ("AUTOTUNE_TRIAL_ID",)   # trial-only; the result/report paths stay (into the log dir)


@dataclass(frozen=True, kw_only=True)
class TunedConfig:
    """A configuration to launch and what it was measured on (from a study's recommendation or
    an exported manifest; not tune.Tuned, the result of a whole tuning run)."""
    config: Config
    source: str                       # "study NAME" or "manifest FILE", for messages
    fingerprint: str | None           # topology fingerprint of the machine that measured it
    torch_version: str | None         # the torch it was measured with
    verified: bool                    # a recommendation that survived interleaved verification
    headline: str = ""
    program: tuple[str, ...] = ()     # what the export would run when no command is given
    workload: str | None = None       # the study's built-in or module:function workload
    program_why: str | None = None    # why a manifest's program may not be yours (None: it is)

    def __post_init__(self) -> None:
        if not self.source:
            raise ConfigError("TunedConfig.source: say where the configuration came from")


@dataclass(frozen=True, kw_only=True)
class Nodes:
    """This host's place in a multi-host launch (torchrun's static rendezvous)."""
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise ConfigError(f"--nnodes {self.nnodes}: must be at least 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank}: must be 0..{self.nnodes - 1} "
                              f"with --nnodes {self.nnodes}")
        if not self.master_addr or any(c.isspace() for c in self.master_addr):
            raise ConfigError(f"--master-addr {self.master_addr!r}: give the host of node rank 0")
        if not 0 < self.master_port < 65536:
            raise ConfigError(f"--master-port {self.master_port}: must be 1-65535")


def from_study(study: Any) -> TunedConfig:
    """The study's recommendation (refusals() says when it was never verified)."""
    attrs = StudyAttrs.of(study)
    rec = attrs.recommendation
    if not rec:
        raise StorageError(f"study {study.study_name!r} has no recommendation (the search was "
                           "interrupted or is still running); finish `autotune search` first")
    config = Config.from_dict(rec["config"], where="stored recommendation")
    template = attrs.script_command
    return TunedConfig(config=config, source=f"study {study.study_name}",
                       fingerprint=attrs.fingerprint, workload=attrs.workload,
                       torch_version=attrs.torch_version,
                       verified=bool(rec.get("verified")) and not inconclusive(rec, config),
                       headline=rec.get("headline") or "",
                       program=fill(tuple(template), config) if template else ())


def from_manifest(path: str) -> TunedConfig:
    """The configuration of an `autotune export --format json` file."""
    data = read_json(path, unreadable=lambda why: ConfigError(f"--config {path}: cannot read it "
                                                              f"({why})"),
                     malformed=lambda why: ConfigError(f"--config {path}: not JSON ({why})"))
    return manifest_config(data, path)


def manifest_config(data: Any, path: str) -> TunedConfig:
    """The configuration of a manifest's JSON value `data`, read from `path` by the caller."""
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ConfigError(f"--config {path}: not a launch manifest (expected the output of "
                          f"`autotune export --format json`, format {MANIFEST_FORMAT})")
    if not isinstance(data.get("config"), dict):
        raise ConfigError(f"--config {path}: no configuration in it")
    config = Config.from_dict(data["config"], where=f"--config {path}")
    m = data.get("manifest") if isinstance(data.get("manifest"), dict) else {}
    program = data.get("program")
    program = tuple(str(a) for a in program) if isinstance(program, list) else ()
    return TunedConfig(config=config, source=f"manifest {path}", fingerprint=m.get("fingerprint"),
                       torch_version=(m.get("library_versions") or {}).get("torch"),
                       verified=bool(m.get("verified")) and not inconclusive(m, config),
                       headline=m.get("headline") or "", program=program,
                       program_why=_program_why(m.get("provenance")) if program else None)


def _program_why(provenance: Any) -> str | None:
    """Why a manifest's program may be someone else's choice, from what the export recorded of
    the study it came from (export/command.py): the manifest being yours proves nothing of it."""
    if not isinstance(provenance, dict):
        return ("the manifest does not say where its program came from (written by hand, or by "
                "an older autotune)")
    if provenance.get("why"):
        return f"its program was exported from {provenance.get('from')}, and {provenance['why']}"
    return None


def inconclusive(rec: dict, config: Config) -> bool:
    """A stored recommendation of the default launch that only says no candidate's rounds
    proved anything (one stored before the key existed: its verdict unsettled and the default
    launch). A lower bound is a verdict, launched like a settled figure."""
    if "inconclusive" in rec:
        return bool(rec["inconclusive"])
    return not Verdict.stored(rec).verified and config == Config()


def refusals(tuned: TunedConfig, topology: Topology, torch_version: str | None) -> list[str]:
    """Why this configuration should not be launched here (each line alone explains)."""
    out = []
    here = topology.fingerprint()
    if not tuned.fingerprint:
        out.append(f"{tuned.source} does not say which machine it was measured on")
    elif tuned.fingerprint != here:
        out.append(f"{tuned.source} was measured on other hardware (topology "
                   f"{tuned.fingerprint}; this machine is {here})")
    if tuned.torch_version and torch_version and tuned.torch_version != torch_version:
        out.append(f"{tuned.source} was measured with torch {tuned.torch_version}; this machine "
                   f"runs torch {torch_version}")
    if not tuned.verified:
        out.append(f"{tuned.source} holds no verified recommendation"
                   + (f" ({tuned.headline})" if tuned.headline else "")
                   + ("; `autotune verify` measures it again"
                      if tuned.source.startswith("study ") and "`autotune verify" not in
                      tuned.headline else ""))
    return out


def override(config: Config, topology: Topology, *,
             nproc_per_node: int | None) -> tuple[Config, list[str]]:
    """torchrun's --nproc-per-node (ranks on this host) over the recommendation; the notes say
    what changed. Threads per rank are kept when they still fit, else sized to each rank's cores."""
    if nproc_per_node is None or nproc_per_node == config.nproc:
        return config, []
    out = config.with_(nproc=nproc_per_node, ranks_per_numa_node=None)
    threads = "kept"
    if out.threads is not None and infeasible_reason(out, topology):
        out, threads = out.with_(threads=None), "sized to each rank's cores"
    why = infeasible_reason(out, topology)
    if why:
        raise ConfigError(f"--nproc-per-node {nproc_per_node}: {why}")
    return out, [f"--nproc-per-node {nproc_per_node} overrides the recommendation's "
                 f"{config.nproc} rank(s) on this host (threads per rank {threads})"]


def program_for(tuned: TunedConfig, command: tuple[str, ...] | None,
                config: Config) -> tuple[tuple[str, ...], list[str]]:
    """The command each rank runs, {knob} placeholders filled as the export fills them, and
    warnings about tuned in-process knobs the command cannot receive."""
    if command is None:
        if tuned.program:
            return tuned.program, []
        if tuned.workload:   # the built-in trainer on the study's workload, as export prints it
            from .command import training_command
            return training_command(tuned.workload, config), []
        raise ConfigError(f"{tuned.source} holds no training command: give yours after `--`")
    if not command:
        raise ConfigError("nothing after `--`: give the training command, e.g. -- python train.py")
    used = placeholders(command)
    changed = changed_knobs(config)
    lost = [k for k in IN_PROCESS_KNOBS if k not in used and k in changed]
    notes = [f"{k}={getattr(config, k)} was tuned but acts inside the training process; the "
             f"command has no {{{k}}} to pass it to your script" for k in lost]
    return fill(command, config), notes


def plan_launch(config: Config, topology: Topology, program: tuple[str, ...], *, log_dir: str,
                base_env: dict[str, str], port: int, nodes: Nodes | None = None,
                local_rank_arg: str | None = None) -> LaunchPlan:
    """The trials' own plan with the user's command as every rank's program (torchrun's
    environment, and `local_rank_arg` for scripts that take --local-rank, as in script mode)."""
    plan = build_plan(config, topology, workload="launch", workdir=log_dir, master_port=port,
                      base_env=base_env, program=program, script=True, trial_id="autotune",
                      local_rank_arg=local_rank_arg)
    ranks = tuple(replace(r, env={k: v for k, v in r.env.items() if k not in _BOOKKEEPING})
                  for r in plan.ranks)
    plan = replace(plan, ranks=ranks)
    return plan if nodes is None or nodes.nnodes == 1 else for_nodes(plan, nodes)


def for_nodes(plan: LaunchPlan, nodes: Nodes) -> LaunchPlan:
    """This host's ranks renumbered into a job of nodes.nnodes identical hosts."""
    local = len(plan.ranks)
    world = str(nodes.nnodes * local)
    ranks = tuple(replace(r, env={**r.env, "RANK": str(nodes.node_rank * local + r.rank),
                                  "ROLE_RANK": str(nodes.node_rank * local + r.rank),
                                  "WORLD_SIZE": world, "ROLE_WORLD_SIZE": world,
                                  "GROUP_RANK": str(nodes.node_rank),
                                  "GROUP_WORLD_SIZE": str(nodes.nnodes),
                                  "MASTER_ADDR": nodes.master_addr,
                                  "MASTER_PORT": str(nodes.master_port)})
                  for r in plan.ranks)
    return replace(plan, ranks=ranks, master_port=nodes.master_port)


def describe(plan: LaunchPlan, base_env: dict[str, str]) -> str:
    """--dry-run: per rank, the binding and what its environment adds to yours, then its argv."""
    import shlex
    lines = [f"{len(plan.ranks)} rank(s); logs in {plan.workdir}"]
    for r in plan.ranks:
        added = {k: v for k, v in sorted(r.env.items()) if base_env.get(k) != v}
        lines.append(f"rank {r.rank}: " + " ".join(f"{k}={shlex.quote(v)}"
                                                  for k, v in added.items()))
        lines.append("  " + " ".join(shlex.quote(a) for a in r.argv))
    return "\n".join(lines)


def default_log_dir(results: str) -> str:
    import time
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    return os.path.abspath(os.path.join(results, "launch", stamp))


def exit_code(codes: tuple[int | None, ...], stopped_by_us: tuple[int, ...] = (),
              ended: tuple[int, ...] = ()) -> int:
    """The worst rank's exit code, shell-style (a signal N is 128+N). Ranks the runner stopped
    because another had failed do not count: the one that failed first is the reason. Ranks
    `ended` as stuck after another's clean exit (run/idle.py) count as finished."""
    failed = [(r, c if c is not None else 1) for r, c in enumerate(codes)
              if c != 0 and r not in ended]
    if not failed:
        return 0
    own = [c for r, c in failed if r not in stopped_by_us] or [c for _, c in failed]
    return max(128 - c if c < 0 else c for c in own)


def in_force_lines(expected: tuple, observations: list) -> list[str]:
    """Each rank as seen from outside (observe.RankObservation), next to what was planned."""
    from ..probe.parse import format_cpulist
    lines = []
    for o in observations:
        exp = expected[o.rank] if o.rank < len(expected) else None
        planned = f" (planned {exp.threads})" if exp is not None and exp.threads else ""
        cpus = format_cpulist(o.affinity) if o.affinity else "?"
        lines.append(f"rank {o.rank}: {o.busy_threads} busy thread(s){planned}, cpus {cpus}, "
                     f"allocator {o.allocator}, OpenMP {o.omp_runtime}, "
                     f"memory policy {o.mempolicy or 'unreadable'}")
    return lines
