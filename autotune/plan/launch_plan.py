"""Values that describe a launch before anything runs (built by plan/build.py, executed by run/runner.py).

The worker protocol (autotune/worker/main.py) in one place:
- each rank is started as `[<binding prefix>] python -m autotune.worker --request REQUEST.json`
  with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and AUTOTUNE_RESULT in its env;
- REQUEST.json is `WorkerRequest.to_json()`; `ranks[RANK]` says what that rank must see in force;
- the rank writes its `RankResult` JSON to $AUTOTUNE_RESULT (atomically: tmp file + rename).
In script mode (`LaunchPlan.script`) the ranks run the user's command instead: it writes no result
(exit 0 is success) and may write its metrics to $AUTOTUNE_REPORT through
`autotune.report_metrics()`.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import REFERENCE_GLOBAL_BATCH
from ..probe.parse import format_cpulist
from ..training import QUALITY_SAMPLES

# The defaults of a trial's timing, one owner each (plan/build.py, run/trial.py and the CLI use
# these names).
TARGET_SECONDS = 5.0        # the timed window of a trial when nobody chose one
WARMUP_STEPS = 3            # untimed steps before the window
# The ceiling's timed window (worker/train.py): a few seconds, with no data pipeline to start.
CEILING_SECONDS = 2.0
TRIAL_TIMEOUT_S = 120.0     # a whole trial's wall-clock limit when nobody chose one
KILL_GRACE_S = 5.0          # SIGTERM -> SIGKILL grace period of a trial's ranks
# The timed window of the built-in trainer started by hand (`python -m autotune.worker
# --workload`, the command an export prints): long enough to read a steady speed.
STANDALONE_SECONDS = 60.0

# Exit code of a rank that ended because its lifeline closed (util/channel.LIFELINE_ENV).
EXIT_LIFELINE = 81

# Exit code a worker uses when what is in force differs from the plan (classified "bad_config").
EXIT_BAD_CONFIG = 78
# Exit code a worker uses when the requested backend cannot be initialised.
EXIT_BACKEND_UNAVAILABLE = 79
# Exit code a worker uses when the workload itself is broken (import error, wrong return type).
EXIT_WORKLOAD_ERROR = 80
# Exit code of a rank whose launch has a stranger in it (worker/rendezvous.py): nothing measured.
EXIT_STRANGER = 82
# How a trial's ranks meet (worker/rendezvous.py): RENDEZVOUS_FILE, the plan of one machine says,
# is a file store in the trial folder; unset, rank 0's store on MASTER_ADDR (across hosts).
RENDEZVOUS_ENV = "AUTOTUNE_RENDEZVOUS"
RENDEZVOUS_FILE = "file"


@dataclass(frozen=True, kw_only=True)
class RankExpect:
    """What a rank must find in force, checked by the worker before training."""
    cpus: tuple[int, ...] | None      # exact affinity when bound; None: not bound
    threads: int | None               # torch.get_num_threads(); None: torch default
    allocator: str | None             # "default" | "jemalloc" | "tcmalloc"; None: not checked
    omp_runtime: str | None           # "libgomp" | "libiomp5"; None: not checked
    precision: str                    # autocast dtype in force: fp32 (none) / bf16 / fp16
    mem_node: int | None = None       # memory bound to this NUMA node (numactl --membind)
    device: str | None = None         # "cpu" or "cuda:N" (N = LOCAL_RANK); None: not checked
    backend: str | None = None        # process-group backend in force; None: not checked
    # a memory policy other than local ("interleave:0,4"; plan/memory.py), read back from
    # /proc/self/numa_maps; None: mem_node (or nothing) is the plan
    mem_policy: str | None = None


@dataclass(frozen=True, kw_only=True)
class WorkerRequest:
    workload: str                       # registry name or "module:function"
    config: dict[str, Any]              # Config.to_dict()
    ranks: tuple[RankExpect, ...]
    mode: str = "throughput"            # "throughput" | "accuracy"
    warmup_steps: int = WARMUP_STEPS
    target_seconds: float = TARGET_SECONDS  # timed window length; steps derived from warmup speed
    min_steps: int = 5
    max_steps: int = 10_000
    accuracy_samples: int = QUALITY_SAMPLES  # global samples a quality run trains on
    reference_batch: int = REFERENCE_GLOBAL_BATCH  # the batch the workload's lr is for
    checkpoints: int = 4                # held-out evaluations along a quality run (its curve)
    gns_probes: int = 4                 # steps of the gradient noise probe after a quality run
    seed: int = 0
    workload_args: dict[str, Any] = field(default_factory=dict)
    # The throughput (samples/s) of the search's leader: a speed run whose first windows are
    # clearly below it stops early (measure/early_stop.py); None: the whole window always runs.
    leader_throughput: float | None = None
    # Where each step's time goes (worker/phases.py); off only for the overhead benchmark.
    time_phases: bool = True
    # After a whole speed window at `ceiling_above` samples/s or more, the same step with its
    # batches resident for about this long: the ceiling (measure/split.py); 0: not asked.
    ceiling_seconds: float = 0.0
    ceiling_above: float | None = None
    # > 0: after this window the rank waits up to this long for the next window's request
    # (window_request_path) instead of exiting: a session (run/session.py, worker/session.py).
    serve_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ranks"] = [asdict(r) for r in self.ranks]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "WorkerRequest":
        ranks = tuple(RankExpect(**{**r, "cpus": None if r["cpus"] is None else tuple(r["cpus"])})
                      for r in d["ranks"])
        return cls(**{**d, "ranks": ranks})


# A session's windows (run/session.py starts them, worker/session.py serves them): window n >= 1
# is asked for by a request file beside the first one and answered by a result file beside each
# rank's first; a request {"stop": true} ends the session.
STOP_REQUEST = {"stop": True}


def window_request_path(request_path: str, n: int) -> str:
    return request_path if n == 0 else f"{request_path.removesuffix('.json')}.window{n}.json"


def window_result_path(result_path: str, n: int) -> str:
    return result_path if n == 0 else f"{result_path.removesuffix('.json')}.window{n}.json"


def rank_files_env(workdir: str, rank: int | str) -> dict[str, str]:
    """Where a rank writes its result and a script its report (autotune.report_metrics), in the
    trial's folder. `rank` "{rank}": the template the shim fills in (autotune/bind.py)."""
    return {"AUTOTUNE_RESULT": os.path.join(workdir, f"rank{rank}.json"),
            "AUTOTUNE_REPORT": os.path.join(workdir, f"rank{rank}.report.json")}


def idle_report_path(result_path: str) -> str:
    """Where a kept launch's rank reports the CPU it used while waiting for its next window."""
    return f"{result_path.removesuffix('.json')}.idle.json"


@dataclass(frozen=True, kw_only=True)
class RankPlan:
    rank: int
    argv: tuple[str, ...]               # full command, binding prefix included; never via a shell
    env: dict[str, str]                 # the complete child environment (not a delta)
    cpus: tuple[int, ...] | None        # the CPU set this rank is bound to (None: unbound)
    mem_node: int | None                # NUMA node its memory is bound to (None: unbound)
    log_path: str
    result_path: str
    mem_policy: str | None = None       # another memory policy ("interleave:0,4"), else None


@dataclass(frozen=True, kw_only=True)
class LaunchPlan:
    ranks: tuple[RankPlan, ...]
    request_path: str                   # where the WorkerRequest JSON is written before launch
    request: WorkerRequest
    timeout_s: float                    # whole-trial wall clock limit
    grace_s: float = KILL_GRACE_S       # SIGTERM -> SIGKILL grace period
    master_port: int = 0
    workdir: str = ""
    env_delta: dict[str, str] = field(default_factory=dict)  # what the plan adds to the base env
    script: bool = False                # ranks run the user's script: exit 0 is success, no result
    # Across hosts (plan/cluster.py): the ranks are started by these launcher processes, run here as
    # (host, argv, log path), and `host_kill` ends what is left of the trial on each host
    # (`kill_hosts`, in the same order).
    launchers: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    host_kill: tuple[tuple[str, ...], ...] = ()
    kill_hosts: tuple[str, ...] = ()
    master_addr: str = "127.0.0.1"

    def describe(self) -> str:
        """Human-readable plan for --dry-run."""
        lines = [f"launch plan: {len(self.ranks)} rank(s), timeout {self.timeout_s:.0f}s, "
                 f"rendezvous {self.master_addr}:{self.master_port}"]
        for host, argv, log in self.launchers:
            lines.append(f"launcher on {host} (log {log}):")
            lines.append("  " + " ".join(argv))
        if self.env_delta:
            lines.append("environment:")
            lines.extend(f"  {k}={v}" for k, v in sorted(self.env_delta.items()))
        for r in self.ranks:
            cpus = "unbound" if r.cpus is None else format_cpulist(r.cpus)
            mem = "any" if r.mem_node is None else f"node {r.mem_node}"
            if r.mem_policy:   # the numactl flags it runs with (bind.mem_flags)
                from ..bind import mem_flags
                mem = " ".join(mem_flags(r.mem_policy))
            lines.append(f"rank {r.rank}: cpus {cpus}, memory {mem}, log {r.log_path}")
            lines.append("  " + " ".join(r.argv))
        return "\n".join(lines)

