"""A complete study for the Results tests, built in about a second through the real pipeline.

The search loop, verification, `save_recommendation` and the storage are the production code; only
the trials' measurements come from a formula (as in test_search.py), with some configurations
crashing, running out of memory or timing out, and one trial left interrupted. The topology is this
machine's, probed live, so exported commands name libraries that exist here and can be run.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import optuna

from autotune.result import Outcome, TrialResult
from autotune.export.recommendation import save_recommendation
from autotune.config import Config
from autotune.probe import probe
from autotune.recommend.verify import verify
from autotune.search.lineup import pick_candidates
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.search.references import make_sampler
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from autotune.study.records import records
from autotune.probe.topology import Topology


@functools.lru_cache(maxsize=1)
def live_topology() -> Topology:
    return probe()


class Landscape:
    """Two ranks, one thread each, bf16, tcmalloc and torch.compile (where the probe offers it)
    help; a batch of 64 costs accuracy; some combinations fail the way real trials fail."""

    def __init__(self):
        self.t = 0.0

    def elapsed(self) -> float:
        return self.t

    def speed(self, c: Config) -> float:
        s = 100.0 * (1.6 if c.precision == "bf16" else 1.0)
        s *= {"tcmalloc": 1.15, "jemalloc": 1.05}.get(c.allocator, 1.0)
        s *= 1.3 if c.nproc == 2 else 1.0
        s *= 1.0 if c.threads in (None, 2 // c.nproc) else 0.6
        s *= 1.2 if c.compile else 1.0
        return s * (1.1 if c.global_batch == 64 else 1.0) * (1.04 if c.binding != "none" else 1.0)

    def __call__(self, c: Config, mode: str, seed: int = 0,
                 samples: int | None = None) -> TrialResult:
        self.t += 10.0
        if mode == "accuracy":
            noise = (0.0, 0.002, -0.002)[seed % 3]
            return TrialResult(outcome=Outcome.OK, accuracy=0.80 - 0.0002 * c.global_batch + noise,
                               seconds=10.0, curve=((c.global_batch * 100, 0.5),
                                                    (c.global_batch * 200, 0.8)))
        if c.omp_runtime == "libiomp5" and c.precision == "bf16":
            return TrialResult(outcome=Outcome.CRASH, reason="rank 1 exited with signal 11 (SIGSEGV)",
                               seconds=10.0, log_tail="Fatal Python error: Segmentation fault")
        if c.global_batch >= 64 and c.nproc == 2 and c.allocator == "jemalloc":
            return TrialResult(outcome=Outcome.OOM, reason="rank 0 killed by SIGKILL (out of memory)",
                               seconds=10.0)
        if c.binding == "taskset" and c.omp_runtime == "libiomp5":
            return TrialResult(outcome=Outcome.TIMEOUT, reason="no step finished within 30s",
                               seconds=30.0)
        step = c.global_batch / self.speed(c)
        # where the step's time went, as a worker's timers say it (measure/split.py)
        return TrialResult(outcome=Outcome.OK, throughput=self.speed(c), seconds=10.0,
                           step_median_s=32.0 / self.speed(c),
                           split={"step_s": step, "source": "worker", "data": 0.06 * step,
                                  "copy": 0.0, "compute": 0.9 * step, "optimizer": 0.03 * step})


def make_study(db: Path, *, budget_s: float = 800, verify_rec: bool = True) -> optuna.Study:
    """A finished study in the SQLite file `db`, as `autotune search` would have left it."""
    topo = live_topology()
    space = resolve(load_space(find_space("cpu")), topo)
    study = open_study(open_storage(f"sqlite:///{db}"), study_name("cnn", topo, space.name),
                       sampler=make_sampler(0))
    describe_study(study, topology=topo, workload="cnn", space=space.to_json(),
                   settings={"target_seconds": 3.0, "max_accuracy_drop": 1.0})
    sim = Landscape()
    result = run_search(study, space=space, topology=topo, evaluate=sim, clock=sim,
                        options=SearchOptions(budget_s=budget_s, min_trial_s=10, patience=100,
                                              quality_samples=500))
    # A search killed mid-trial leaves this behind (recorded as FAIL, outcome interrupted).
    from autotune.study.records import record_trial
    record_trial(study, config=Config(nproc=2, threads=1, binding="numactl_smt"), role="search",
                 result=TrialResult(outcome=Outcome.TIMEOUT, reason="no step finished within 30s",
                                    log_tail="rank 0 waiting in all_reduce"))
    record_trial(study, config=Config(nproc=2, threads=1), role="search",
                 result=TrialResult(outcome=Outcome.INTERRUPTED,
                                    reason="the search was killed during this trial"))
    if verify_rec:
        rec = verify(pick_candidates(result.records), result.default, sim, rounds=2)
        save_recommendation(study, rec, topo, "cnn")
    return study


@functools.lru_cache(maxsize=1)
def _pristine() -> Path:
    import atexit
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="autotune-results-study-"))
    atexit.register(shutil.rmtree, folder, True)
    make_study(folder / "autotune.db")
    return folder / "autotune.db"


def study_copy(folder: Path) -> Path:
    """A private copy of one finished study (built once per test process) at folder/autotune.db,
    so every test can write to or corrupt its own."""
    import sqlite3
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / "autotune.db"
    # SQLite's backup API, not a file copy: committed pages may still sit in the -wal file.
    src, dst = sqlite3.connect(_pristine()), sqlite3.connect(dest)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=WAL")  # as autotune leaves its storages
    finally:
        src.close()
        dst.close()
    return dest


def sha256(db: Path) -> str:
    """The study file's hash once SQLite's write-ahead log is folded in: opening a study, even to
    read it, may checkpoint the log, which moves bytes between the two files without changing the
    study, so a raw hash taken before a command can differ from one after it by chance."""
    import sqlite3
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return hashlib.sha256(Path(db).read_bytes()).hexdigest()
