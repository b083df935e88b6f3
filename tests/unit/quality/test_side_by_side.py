"""A math class's seeded quality runs side by side on disjoint hosts (quality/evidence.py with an
evaluator that has lanes, as run/evaluate.LiveEvaluator has across hosts): batches of as many
seeds as lanes, each stored, the cost in rounds of runs, not runs. No processes: the evaluator
is a table."""
from __future__ import annotations

from autotune.config import Config
from autotune.quality.sizing import run_seconds
from autotune.quality.evidence import QualityBook
from autotune.progress import Silent
from autotune.result import Outcome, SideBySide, TrialResult
from autotune.study.storage import open_storage, open_study


class TwoHosts:
    """Quality runs of 40 s; a 1-host configuration has 2 lanes, a 2-host one 1."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[int]]] = []

    def __call__(self, config: Config, mode: str, *, seed: int = 0, samples=None) -> TrialResult:
        self.batches.append((mode, [seed]))
        return TrialResult(outcome=Outcome.OK, accuracy=0.9 + 0.001 * seed, seconds=40.0)

    def lanes(self, config: Config) -> int:
        return 2 // config.nnodes

    def at_once(self, config: Config, mode: str, seeds: list[int], samples=None):
        assert len(seeds) <= self.lanes(config)
        self.batches.append((mode, list(seeds)))
        return [TrialResult(outcome=Outcome.OK, accuracy=0.9 + 0.001 * s, seconds=40.0) for s in seeds]


def _book(tmp_path, evaluate) -> QualityBook:
    study = open_study(open_storage(f"sqlite:///{tmp_path}/q.db"), "q")
    return QualityBook(study, evaluate, batchnorm=True, tolerance_pp=1.0, seeds=(0, 1, 2))


def test_three_seeds_on_two_lanes_run_as_two_rounds_and_are_all_stored(tmp_path):
    ev = TwoHosts()
    assert isinstance(ev, SideBySide)
    book = _book(tmp_path, ev)
    started = []

    class Started(Silent):
        def quality_start(self, **info) -> None:
            started.append(info)

    # before: 3 runs of ~40 s on 2 lanes cost two rounds
    assert book.cost(Config(), 100.0, 16384) == 2 * run_seconds(16384, 100.0)
    book.measure(Config(), progress=Started())
    assert ev.batches == [("accuracy", [0, 1]), ("accuracy", [2])]
    assert [i["seed"] for i in started] == [0, 1, 2]
    assert [i.get("side_by_side") for i in started] == [2, 2, None]
    assert sorted(book.evidence(Config()).runs) == [0, 1, 2]
    assert book.default_sample().n == 3               # the noise floor, stored
    # a configuration over both hosts has one lane: its seeds run one after another
    spanning = Config(nnodes=2, nproc=2, global_batch=64)
    book.measure(spanning)
    assert ev.batches[2:] == [("accuracy", [0]), ("accuracy", [1]), ("accuracy", [2])]
    assert book.lanes(spanning) == 1 and book.lanes(Config()) == 2


def test_a_plain_evaluator_runs_one_seed_at_a_time(tmp_path):
    calls = []

    def evaluate(config, mode, *, seed=0, samples=None):
        calls.append(seed)
        return TrialResult(outcome=Outcome.OK, accuracy=0.9, seconds=40.0)
    book = _book(tmp_path, evaluate)
    assert book.lanes(Config()) == 1
    book.measure(Config())
    assert calls == [0, 1, 2]


def test_a_class_is_measured_by_its_quickest_launch(tmp_path):
    """Ranks, threads, binding, allocator and OpenMP runtime leave the math alone: the default's
    class (its noise floor) is run by whichever of its launches measured fastest."""
    book = _book(tmp_path, TwoHosts())
    run_cpu = Config(binding="numactl", allocator="tcmalloc", omp_runtime="libiomp5")
    bf16 = Config(precision="bf16")                     # another class: never chosen for it
    measured = [(Config(), 118.0), (run_cpu, 190.0), (bf16, 400.0)]
    assert book.quickest(Config(), measured) == run_cpu
    assert book.quickest(bf16, measured) == bf16
    assert book.quickest(Config(global_batch=64), measured) == Config(global_batch=64)


def test_a_compiled_launch_never_runs_its_class_quality_runs(tmp_path):
    """Quality runs train eager: the default launch compiled (faster than run_cpu's settings
    compiled or not) would run them as the default launch eager, the slowest of the class."""
    book = _book(tmp_path, TwoHosts())
    run_cpu = Config(binding="numactl", allocator="tcmalloc", omp_runtime="libiomp5")
    measured = [(Config(), 1330.0), (run_cpu, 1680.0), (Config(compile=True), 1704.0),
                (run_cpu.with_(compile=True), 2191.0)]
    assert book.quickest(Config(), measured) == run_cpu
    assert book.quickest(Config(compile=True), measured[2:]) == Config(compile=True)
