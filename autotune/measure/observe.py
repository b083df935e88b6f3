"""What a rank's processes really run with, seen from outside while they run (script mode).

A user's script can undo the plan: `os.environ["OMP_NUM_THREADS"] = "8"` before `import torch`,
`torch.set_num_threads`, `os.sched_setaffinity`, its own LD_PRELOAD re-exec. The in-rank checks
(worker/in_force.py) only exist inside autotune's worker, so for a script the launcher samples each rank's
process tree with psutil and /proc:
  - busy compute threads (threads whose CPU time grew during a sample window),
  - the CPU affinity, the mapped allocator and OpenMP libraries (/proc/PID/maps),
  - the memory policy, where /proc/PID/numa_maps is readable.

Collect, then compare: `Sampler`/`observe` read the machine; `summarize`, `compare` and
`unacted_knobs` are pure and tested on literal values. Importing this module does not import torch
(the search process never needs it).

    with Sampler(pids) as sampler:      # or sampler.start() ... sampler.stop()
        ...wait for the ranks...
    observations = sampler.observations()
    for message in unacted_knobs(plan.request.ranks, observations): print(message)
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import psutil

from ..probe.procfs import classify_libraries, mapped_libraries, parse_mem_policy, read_proc

__all__ = ["RankObservation", "Sampler", "Window", "busy_count", "observe", "summarize"]

# A thread is busy in a window when it used at least this share of one core...
BUSY_FLOOR = 0.05
# ...and at least this share of the busiest thread of its process: an OpenMP pool shares the
# work evenly, while gloo's I/O thread or Python's helpers use a sliver of it. Relative, because on
# an oversubscribed machine every compute thread gets only a fraction of a core.
BUSY_SHARE = 0.3


@dataclass(frozen=True, kw_only=True)
class RankObservation:
    """One rank's processes as sampled from outside (rank: its index in the pids observed)."""
    rank: int
    pid: int                             # the rank's leader (what the runner spawned)
    busy_threads: int                    # compute threads busy at once in the training process
    num_threads: int                     # all threads of that process (most seen)
    affinity: tuple[int, ...]            # CPUs its threads may run on, all together (last seen)
    libraries: tuple[str, ...]           # allocator / OpenMP libraries mapped (basenames)
    mempolicy: str | None                # "default", "bind:1", ...; None: not readable
    num_processes: int = 1               # processes in the rank's tree (most seen at once)
    busy_processes: int = 1              # of those, how many did real work
    num_windows: int = 0                 # sample windows that saw the rank compute

    def __post_init__(self) -> None:
        for name in ("rank", "pid", "busy_threads", "num_threads", "num_processes",
                     "busy_processes", "num_windows"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"RankObservation.{name}={value!r}: must be an integer >= 0")

    @property
    def allocator(self) -> str:
        return classify_libraries(self.libraries)[0]

    @property
    def omp_runtime(self) -> str:
        return classify_libraries(self.libraries)[1]


# ---------------------------------------------------------------- pure: windows -> observation

@dataclass(frozen=True, kw_only=True)
class Window:
    """CPU seconds each thread used between two samples, per process of one rank's tree."""
    seconds: float
    threads: dict[int, dict[int, float]]   # pid -> tid -> CPU seconds used in the window


def busy_count(cpu: dict[int, float], seconds: float) -> int:
    """Threads of one process that computed in a window (see BUSY_FLOOR and BUSY_SHARE)."""
    if seconds <= 0 or not cpu:
        return 0
    top = max(cpu.values())
    cut = max(BUSY_FLOOR * seconds, BUSY_SHARE * top)
    return sum(1 for used in cpu.values() if used >= cut and used > 0)


def summarize(windows: Sequence[Window]) -> tuple[int, int, int]:
    """(busy_threads, busy_processes, num_windows) over one rank's windows.

    busy_threads is the most threads seen busy at once in one process *in two windows or more*:
    one window where gloo's thread happened to overlap the main thread is not a thread pool.
    With a single computing window (a very short run), that window stands.
    """
    counts: list[int] = []
    procs: list[int] = []
    for w in windows:
        per_proc = [busy_count(cpu, w.seconds) for cpu in w.threads.values()]
        per_proc = [c for c in per_proc if c > 0]
        if per_proc:
            counts.append(max(per_proc))
            procs.append(len(per_proc))
    if not counts:
        return 0, 0, 0
    busy = sorted(counts)[-2] if len(counts) >= 2 else counts[0]
    return busy, max(procs), len(counts)


# ---------------------------------------------------------------- pure: plan vs observation


# ---------------------------------------------------------------- collection (reads /proc)

def _tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        leader = psutil.Process(pid)
        return [leader, *leader.children(recursive=True)]
    return []


def _thread_times(proc: psutil.Process) -> dict[int, float] | None:
    with contextlib.suppress(psutil.Error):
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return {t.id: t.user_time + t.system_time for t in proc.threads()}
    return None


def _allowed_cpus(tids: Iterable[int]) -> tuple[int, ...]:
    """The CPUs any thread of a process may run on: the union of its threads' masks. Not the
    process's own mask, which is its main thread's: Intel OpenMP with KMP_AFFINITY=compact pins
    each OpenMP thread, the main one included, to one core of the rank's set, and a rank bound to
    cpus 0-1 then read as "ran on cpus 0" (seen on `autotune launch` with libiomp5)."""
    cpus: set[int] = set()
    for tid in tids:
        with contextlib.suppress(OSError):   # a thread that ended since it was listed
            cpus |= os.sched_getaffinity(tid)
    return tuple(sorted(cpus))


@dataclass
class _RankState:
    pid: int
    last: dict[int, dict[int, float]] = field(default_factory=dict)
    last_at: float = 0.0
    windows: list[Window] = field(default_factory=list)
    cpu_total: dict[int, float] = field(default_factory=dict)    # pid -> CPU seconds seen
    nthreads: dict[int, int] = field(default_factory=dict)
    affinity: dict[int, tuple[int, ...]] = field(default_factory=dict)
    policy: dict[int, str | None] = field(default_factory=dict)
    libraries: set[str] = field(default_factory=set)
    num_processes: int = 0


class Sampler:
    """Samples the process trees of `pids` every `interval_s` in a background thread.

    Costs one /proc walk per rank per interval, taken from the cores being timed, so the interval
    is coarse. `observations()` may be called after `stop()` (or while running, for a peek).
    """

    def __init__(self, pids: Sequence[int], *, interval_s: float = 0.25) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s={interval_s!r}: must be > 0")
        self.interval_s = interval_s
        self._states = [_RankState(pid=p) for p in pids]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> "Sampler":
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="autotune-observe", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[RankObservation]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.observations()

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample of every rank now (the background thread calls this)."""
        with self._lock:
            for st in self._states:
                self._sample_rank(st)

    @staticmethod
    def _sample_rank(st: _RankState) -> None:
        now = time.monotonic()
        procs = _tree(st.pid)
        current: dict[int, dict[int, float]] = {}
        for proc in procs:
            times = _thread_times(proc)
            if times is None:
                continue
            current[proc.pid] = times
            st.cpu_total[proc.pid] = sum(times.values())
            st.nthreads[proc.pid] = max(st.nthreads.get(proc.pid, 0), len(times))
            allowed = _allowed_cpus(times)
            if allowed:
                st.affinity[proc.pid] = allowed
            st.libraries.update(mapped_libraries(read_proc(f"/proc/{proc.pid}/maps")))
            policy = parse_mem_policy(read_proc(f"/proc/{proc.pid}/numa_maps"))
            if policy is not None:   # an exiting process reads as empty: keep what was seen
                st.policy[proc.pid] = policy
        if current:
            st.num_processes = max(st.num_processes, len(current))
        if st.last and current:
            used = {pid: {tid: cpu - st.last[pid].get(tid, 0.0) for tid, cpu in tids.items()}
                    for pid, tids in current.items() if pid in st.last}
            st.windows.append(Window(seconds=now - st.last_at, threads=used))
        if current:
            st.last, st.last_at = current, now

    def observations(self) -> list[RankObservation]:
        with self._lock:
            return [self._observation(r, st) for r, st in enumerate(self._states)]

    @staticmethod
    def _observation(rank: int, st: _RankState) -> RankObservation:
        busy, busy_procs, nwin = summarize(st.windows)
        # The training process is the one that used the most CPU (a wrapper shell or numactl
        # exec'd away uses none); its affinity and policy are the ones that matter.
        main = max(st.cpu_total, key=st.cpu_total.__getitem__, default=None)
        return RankObservation(
            rank=rank, pid=st.pid, busy_threads=busy,
            num_threads=st.nthreads.get(main, 0) if main is not None else 0,
            affinity=st.affinity.get(main, ()) if main is not None else (),
            libraries=tuple(sorted(st.libraries)),
            mempolicy=st.policy.get(main) if main is not None else None,
            num_processes=st.num_processes, busy_processes=busy_procs, num_windows=nwin)


def observe(pids: Sequence[int], *, seconds: float = 1.0,
            interval_s: float = 0.25) -> list[RankObservation]:
    """Sample running processes for `seconds` and return one observation per pid (blocking)."""
    sampler = Sampler(pids, interval_s=interval_s).start()
    time.sleep(seconds)
    return sampler.stop()
