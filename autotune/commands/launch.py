"""`autotune launch`: the user's training command run with the tuned configuration, exactly as
`autotune export` writes it, watched from outside while the ranks compute."""
from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import dataclass, field
from typing import TextIO

from ..util.clean import one_line
from ..config import Config, describe_changes
from ..errors import ConfigError
from ..util.checked_file import open_checked
from ..export.launch import (Nodes, TunedConfig, default_log_dir, describe, exit_code,
                             from_study, in_force_lines, manifest_config, override, plan_launch,
                             program_for, refusals)
from ..measure.observe import Sampler
from ..measure.unacted import unacted_knobs
from ..plan.launch_plan import LaunchPlan
from ..probe import probe
from ..probe.topology import Topology
from ..run.attached import run_attached
from ..run.idle import IDLE_DEADLINE_S
from ..run.runner import free_port
from ..run.weights import apply_weights, describe as weights_text
from ..script.scan import SCAN_BYTES, ScriptScan, scan_command
from ..script.template import check_command
from ..study.stored_code import command_code, workload_code
from ..study.trust import check_trusted, not_only_yours, require_hash
from .common import Say, StudyRef, open_results, quiet


@dataclass(frozen=True, kw_only=True)
class LaunchRequest:
    command: tuple[str, ...] | None = None   # after `--`; None: the study's or manifest's own
    config_file: str | None = None           # a manifest from `export --format json`
    study: StudyRef = field(default_factory=StudyRef)
    force: bool = False
    dry_run: bool = False
    log_dir: str | None = None
    nproc_per_node: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    check_seconds: float = 15.0
    trust_study: str | None = None           # the hash of the stored command, as a refusal showed it
    idle_timeout: float = IDLE_DEADLINE_S


@dataclass(frozen=True)
class Launched:
    exit_code: int
    dry_run: str | None = None   # what would run, per rank (--dry-run)


def launch(req: LaunchRequest, *, say: Say = quiet, echo: TextIO | None = None) -> Launched:
    """Plan the launch, say what it is, and run it in the foreground (ranks' output to `echo`,
    with a rank prefix); `say` gets the notes and warnings, one line each."""
    tell = _Teller(say)
    nodes = _check(req)
    tuned, why = _manifest(req.config_file) if req.config_file else _study(req.study)
    if req.command is None and not req.dry_run:   # a dry run shows the command, runs nothing
        check_trusted(_stored(tuned), tuned.source, why, req.trust_study,
                      hint=", or give your own command after `--`")
    topology = probe(None)
    problems = refusals(tuned, topology, topology.capabilities.torch_version)
    if problems and not req.force:
        raise ConfigError("; ".join(problems) + "; --force launches it anyway")
    for why in problems:
        tell(f"warning: {why} (--force)")
    config, notes = override(tuned.config, topology, nproc_per_node=req.nproc_per_node)
    program, more = program_for(tuned, req.command, config)
    base_env = dict(os.environ)
    log_dir = os.path.abspath(req.log_dir) if req.log_dir else default_log_dir(req.study.results)
    port = nodes.master_port if nodes else (req.master_port or free_port())
    scan = _scan(req.command, tuned)
    plan = plan_launch(config, topology, program, log_dir=log_dir, base_env=base_env, port=port,
                       nodes=nodes, local_rank_arg=scan.local_rank_arg)
    if scan.cut:
        more.append(f"{scan.path}: only its first {SCAN_BYTES >> 20} MiB were read for what it "
                    "overrides")
    tuned_value = {"threads": "auto" if config.threads is None else config.threads}
    more += [f"{f.where} {f.what}: {f.knob}={tuned_value.get(f.knob, getattr(config, f.knob, '?'))}"
             f" will not act ({f.fix})" for f in scan.findings if f.overrides]
    for note in notes + more:
        tell(f"note: {note}")
    if nodes:
        first = nodes.node_rank * len(plan.ranks)
        tell(f"note: --nnodes {nodes.nnodes}: this host is node {nodes.node_rank} (ranks "
             f"{first}-{first + len(plan.ranks) - 1} of {nodes.nnodes * len(plan.ranks)}), "
             f"rendezvous {nodes.master_addr}:{nodes.master_port}")
    tell(f"launching {len(plan.ranks)} rank(s) with {describe_changes(config)} "
         f"from {tuned.source}" + (f" ({tuned.headline})" if tuned.headline else ""))
    if req.dry_run:
        return Launched(0, dry_run=describe(plan, base_env))
    _set_weights(config, topology, tell)
    tell(f"running: {shlex.join(program)}")   # what was trusted is what runs: shown first
    return Launched(_run(plan, req, tell, echo, log_dir))


def _set_weights(config: Config, topology: Topology, tell: _Teller) -> None:
    """mem_policy=weighted ran with the kernel's weights set from the nodes' bandwidths: set
    them again before the user's training (a file that refuses: exit 2, nothing changed)."""
    if config.mem_policy == "weighted":
        changes = apply_weights(topology)
        if changes:
            tell(f"note: {weights_text(changes)}")


def _check(req: LaunchRequest) -> Nodes | None:
    """The request's own checks, before any study is read; the nodes of a launch across hosts."""
    if req.check_seconds < 0:
        raise ConfigError(f"--check-seconds {req.check_seconds:g}: must be 0 (no check) or more")
    if req.config_file and req.study.storage:
        raise ConfigError("give either --config FILE or --storage URL, not both")
    if req.command is not None:
        check_command(req.command, None)
    require_hash(req.trust_study)
    if not (req.nnodes > 1 or req.node_rank):
        return None
    if not req.master_addr:
        raise ConfigError(f"--nnodes {req.nnodes}: give --master-addr, the host of node rank 0")
    return Nodes(nnodes=req.nnodes, node_rank=req.node_rank, master_addr=req.master_addr,
                 master_port=req.master_port or 29500)


def _run(plan: LaunchPlan, req: LaunchRequest, tell: _Teller, echo: TextIO | None,
         log_dir: str) -> int:
    check = _InForce(plan, req.check_seconds, tell)
    try:
        result = run_attached(plan, echo=echo, on_start=check.start, on_poll=check.poll,
                              idle_s=req.idle_timeout)
    finally:
        check.report()   # a run shorter than --check-seconds: what was seen before it ended
    for stuck in result.stuck:
        tell(f"warning: {stuck.message}; it counts as finished")
    code = exit_code(result.exit_codes, result.stopped_by_us,
                     ended=tuple(s.rank for s in result.stuck))
    codes = ", ".join(f"rank {r}: {c}" for r, c in enumerate(result.exit_codes))
    tell(f"{'done' if code == 0 else 'failed'} in {result.wall_seconds:.1f}s ({codes}); "
         f"logs in {log_dir}")
    return code


def _study(ref: StudyRef) -> tuple[TunedConfig, str | None]:
    """The study's recommendation, and why its stored command may not be yours (None: only you
    can change the storage, as judged before it was read)."""
    opened = open_results(ref)
    return from_study(opened.study), opened.provenance.why


_MANIFEST_MAX_BYTES = 16 << 20   # a manifest is a few KiB; a larger file is not one


def _manifest(path: str) -> tuple[TunedConfig, str | None]:
    """A manifest read from the file its check opened, and why its program may not be yours:
    someone else can change the file, or the study it was exported from was not only yours."""
    try:
        with open_checked(path) as checked:
            text = checked.read(_MANIFEST_MAX_BYTES)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--config {path}: cannot read it "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--config {path}: not JSON ({exc})") from None
    tuned = manifest_config(data, path)
    return tuned, not_only_yours("manifest", checked) or tuned.program_why


def _stored(tuned: TunedConfig):
    """Without `--` the command comes from the study or manifest: data someone wrote."""
    return command_code(tuned.program) if tuned.program else workload_code(tuned.workload)


def _scan(command: tuple[str, ...] | None, tuned: TunedConfig) -> ScriptScan:
    """What the script's own text overrides, and whether it takes --local-rank, as the search's
    script mode reads it (script/scan.py)."""
    command = command if command is not None else tuned.program
    return scan_command(tuple(command)) if command else ScriptScan(path=None)


class _Teller:
    """`autotune: ...` lines; the headline and the source (a study name) come from the study:
    shown, never acted on."""

    def __init__(self, say: Say) -> None:
        self.say = say

    def __call__(self, text: str) -> None:
        self.say(f"autotune: {one_line(text)}")


_INTERVAL_S = 0.5   # one /proc walk per rank per interval, taken from the training's cores


class _InForce:
    """The configuration checked from outside the ranks, as script-mode trials are checked
    (measure/observe.py): the user's script may set its own threads, affinity or LD_PRELOAD."""

    def __init__(self, plan: LaunchPlan, seconds: float, tell: _Teller) -> None:
        self.plan, self.seconds, self.tell = plan, seconds, tell
        self.sampler: Sampler | None = None
        self.peeked = 0.0

    def start(self, pids: list[int]) -> None:
        if self.seconds > 0:
            self.sampler = Sampler(pids, interval_s=_INTERVAL_S).start()

    def poll(self) -> None:
        # Counted in windows where every rank computed: start-up (imports, rendezvous) would
        # otherwise use up the watch before the thread pools exist.
        if self.sampler is None or time.monotonic() - self.peeked < 1.0:
            return
        self.peeked = time.monotonic()
        computed = min(o.num_windows for o in self.sampler.observations()) * _INTERVAL_S
        if computed >= self.seconds:
            self.report()

    def report(self) -> None:
        if self.sampler is None:
            return
        observations, self.sampler = self.sampler.stop(), None
        if not any(o.num_windows for o in observations):
            self.tell("in force: not checked (no rank computed while watched)")
            return
        problems = unacted_knobs(self.plan.request.ranks, observations)
        for problem in problems:
            self.tell(f"warning: {problem}")
        self.tell("in force, seen from outside the ranks: " + (
            f"{len(problems)} planned knob(s) did not act" if problems else
            "every planned knob acted"))
        for line in in_force_lines(self.plan.request.ranks, observations):
            self.tell(f"  {line}")
