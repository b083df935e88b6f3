"""Feeding a CPU's step (issue 51): the CPU space offers DataLoader workers where the workload
has a pipeline of its own, and a search whose default launch waits on data measures launches of
the default's math that feed it (workers against threads and ranks) before any class that
changes the math. On the captured 2-core EPYC, the real CPU space and the real search loop,
driven by a step model of an entry point whose samples cost 0.5 ms of CPU each."""
from __future__ import annotations

from autotune.config import Config, launch_part
from autotune.plan.feasible import ruled_out
from autotune.quality.math_class import math_class
from autotune.reporting.diagnosis import diagnosis_lines, feeder_words
from autotune.result import Outcome, TrialResult
from autotune.search.guide import first_guess
from autotune.search.loop import run_search
from autotune.search.options import SearchOptions
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.records import Record, Role, records
from test_search import new_study
from two_core import topo  # noqa: F401 - fixture: the captured 2-core EPYC

DECODE_S, COMPUTE_S, CORES = 0.0005, 0.00015, 2


def cpu_space(topology, pipeline: bool = True):
    return resolve(load_space(find_space("cpu")), topology, pipeline=pipeline)


def step(c: Config) -> tuple[float, float]:
    """(seconds per step, of which waiting on data) for one rank of `c` in the model: the rank
    makes its batch itself, or `dataloader_workers` make it beside the step; the CPU time of both
    must fit the rank's share of the cores."""
    share = CORES / c.nproc
    threads = min(c.threads or share, share)
    n = c.global_batch / c.nproc
    compute = n * COMPUTE_S * (0.6 if c.precision == "bf16" else 1.0) / threads
    if not c.dataloader_workers:
        return n * DECODE_S + compute, n * DECODE_S
    made = n * DECODE_S / min(c.dataloader_workers, share)
    total = max(compute, made, (n * DECODE_S + compute * threads) / share)
    return total, total - compute


class Model:
    """The step model as an evaluator, on a simulated clock of 5 s a trial."""

    def __init__(self) -> None:
        self.t, self.configs = 0.0, []

    def elapsed(self) -> float:
        return self.t

    def __call__(self, c: Config, mode: str, seed: int = 0, samples=None,
                 **_) -> TrialResult:
        self.t += 5.0
        if mode == "accuracy":
            return TrialResult(outcome=Outcome.OK, accuracy=0.9 + 0.002 * (seed % 3),
                               seconds=5.0)
        self.configs.append(c)
        total, data = step(c)
        return TrialResult(outcome=Outcome.OK, throughput=c.global_batch / total, seconds=5.0,
                           split={"step_s": total, "data": data, "compute": total - data})


def test_the_cpu_space_offers_workers_only_to_a_workload_with_a_pipeline(topo):
    plain, fed = cpu_space(topo, pipeline=False), cpu_space(topo)
    assert "dataloader_workers" not in plain.knobs       # the built-in cnn's space, as before
    assert fed.knobs["dataloader_workers"] == (0, 1, 2)  # from the cores: none to all 2
    assert {k: v for k, v in fed.knobs.items() if k != "dataloader_workers"} == plain.knobs
    # threads and workers share the cores but are not added up: 2 workers beside 1 thread run
    # (a worker waiting on its queue is not a busy core); the workers of 2 ranks share them out
    assert fed.violations({"ranks_per_numa_node": 1, "threads": 1, "dataloader_workers": 2}) == []
    assert fed.violations({"ranks_per_numa_node": 2, "threads": 1, "dataloader_workers": 1}) == []
    assert fed.violations({"ranks_per_numa_node": 2, "threads": 1, "dataloader_workers": 2}) == \
        ["dataloader_workers * nproc <= usable_cores"]


def test_a_bound_rank_with_workers_keeps_its_share_of_the_cores(topo):
    space = cpu_space(topo)
    fed = Config(threads=1, dataloader_workers=2, binding="numactl")
    # its workers are bound with it: one core would hold the thread and both workers
    assert ruled_out(fed, space, topo) is None
    assert "more than the 2 CPUs" in ruled_out(fed.with_(dataloader_workers=3), space, topo)


def test_whether_a_bound_rank_has_workers_is_part_of_its_launch():
    # with workers its CPU set is its whole share, without them its threads' cores: another
    # launch, not a window of the running one; how many workers is a window's
    bound = Config(threads=1, binding="numactl")
    assert launch_part(bound.with_(dataloader_workers=2)) != launch_part(bound)
    assert launch_part(bound.with_(dataloader_workers=2)) == \
        launch_part(bound.with_(dataloader_workers=1))
    for same in (Config(threads=1), Config(binding="numactl")):   # the same CPUs either way
        assert launch_part(same.with_(dataloader_workers=2)) == launch_part(same)


def test_workers_do_not_change_the_math_on_a_cpu():
    base = math_class(Config(), batchnorm=True)
    assert math_class(Config(dataloader_workers=2, threads=1), batchnorm=True) == base
    # a GPU's pipeline crops and flips: other data
    assert "data_pipeline=augmented" in math_class(Config(device="cuda"), batchnorm=True)


def test_a_data_bound_default_gets_its_own_math_fed_first(topo):
    space = cpu_space(topo)
    launchable = lambda p: ruled_out(space.to_config(p), space, topo) is None  # noqa: E731
    cls = lambda c: math_class(c, batchnorm=True)  # noqa: E731
    plain = first_guess(space, topo, launchable, class_of=cls)
    fed = first_guess(space, topo, launchable, bottleneck="data", class_of=cls, base=Config())
    assert plain["dataloader_workers"] == 0
    # the most workers, threads fitted to the cores they leave, the default's math (bf16 speeds
    # a computation the step hardly waits for)
    assert (fed["dataloader_workers"], fed["threads"]) == (2, 1)
    assert cls(space.to_config(fed)) == cls(Config())
    assert (fed["binding"], fed["allocator"]) == (plain["binding"], plain["allocator"])


def _search(tmp_path, topology, budget: float = 300.0):
    model, study = Model(), new_study(tmp_path)
    run_search(study, space=cpu_space(topology), topology=topology, evaluate=model, clock=model,
               options=SearchOptions(budget_s=budget, min_trial_s=5, patience=100,
                                     quality_samples=2048))
    return model.configs, study


def test_the_search_tries_workers_against_threads_and_ranks_before_changing_the_math(tmp_path,
                                                                                     topo):
    measured, _ = _search(tmp_path, topo)
    base = math_class(Config(), batchnorm=True)
    same = [math_class(c, batchnorm=True) == base for c in measured]
    first_other = same.index(False)
    fed = measured[2:first_other]   # after the default launch and run_cpu's settings
    assert fed and fed[0].dataloader_workers == 2 and fed[0].threads == 1
    # workers against threads: other worker counts and other thread counts, all in the default's
    # math, before the first launch that changes it
    assert len({c.dataloader_workers for c in fed}) >= 2
    assert len({c.threads for c in fed}) >= 2
    # the faster launch of the default's math was measured before any other math
    fastest_fed = max(c.global_batch / step(c)[0] for c in fed)
    assert fastest_fed > 1.5 * Config().global_batch / step(measured[0])[0]


def test_the_summary_says_what_fed_the_step():
    def rec(c: Config, role: str, data: float) -> Record:
        return Record(config=c, role=role, feasible=True, result=TrialResult(
            outcome=Outcome.OK, throughput=100.0, split={"step_s": 1.0, "data": data,
                                                         "compute": 1.0 - data}))
    tuned = Config(dataloader_workers=2, threads=1)
    lines = diagnosis_lines([rec(Config(), Role.DEFAULT, 0.75), rec(tuned, Role.SEARCH, 0.21)],
                            recommended=tuned, class_of=lambda c: "x", workload="w")
    assert lines[-1] == ("the default launch waited on data 75% of its step; the recommendation "
                         "21%, with 2 DataLoader workers beside 1 compute thread")
    # a compute-bound default: nothing to say about feeding
    quiet = diagnosis_lines([rec(Config(), Role.DEFAULT, 0.1), rec(tuned, Role.SEARCH, 0.05)],
                            recommended=tuned, class_of=lambda c: "x", workload="w")
    assert len(quiet) == 2
    assert feeder_words(Config(nproc=2, global_batch=128)) == "its batches made in each of 2 ranks"
    assert feeder_words(Config(nproc=2, dataloader_workers=1, threads=1)) == \
        "1 DataLoader worker beside 1 compute thread in each of 2 ranks"


def test_a_script_gets_workers_where_its_command_takes_them(topo, tmp_path):
    from autotune.commands.search_job import prepare
    from autotune.script.spec import ScriptSpec
    from autotune.tune import SearchRequest

    def knobs(*command: str) -> tuple[dict, tuple]:
        req = SearchRequest(budget_s=60.0, script=ScriptSpec.scanned(command),
                            results=str(tmp_path))
        job = prepare(req, label="script", topology=topo, cluster=None)
        return job.space.knobs, job.dropped
    fed, dropped = knobs("python", "train.py", "--workers", "{dataloader_workers}")
    assert fed["dataloader_workers"] == (0, 1, 2) and "dataloader_workers" not in dropped
    plain, dropped = knobs("python", "train.py")
    assert "dataloader_workers" not in plain and "dataloader_workers" not in dropped
