"""benchmarks/timed/data_bound_search.py's arithmetic and table, on literal windows (the search and the
windows themselves are real trials: the benchmark is run by hand, docs/benchmarks.md)."""
from __future__ import annotations

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from benchmarks.timed.data_bound_search import _summarise, best_by_hand, main, table


def _run(thr: float, data: float) -> TrialResult:
    return TrialResult(outcome=Outcome.OK, throughput=thr,
                       split={"step_s": 0.02, "data": 0.02 * data, "compute": 0.02 * (1 - data)})


def test_ratios_are_per_round_over_the_default_and_the_best_by_hand_is_named():
    default = [_run(1000, 0.75), _run(1200, 0.75), _run(1100, 0.74)]
    measured = {"default": _summarise("default", Config(), default, default),
                "by hand 1": _summarise("h1", Config(dataloader_workers=1, threads=1),
                                        [_run(1300, 0.5), _run(1560, 0.5), _run(1430, 0.5)],
                                        default),
                "by hand 2": _summarise("h2", Config(dataloader_workers=2, threads=1),
                                        [_run(1700, 0.21), _run(2040, 0.2), _run(1870, 0.22)],
                                        default)}
    assert measured["by hand 2"]["vs_default"] == 1.7 and measured["by hand 2"]["ratios"] == \
        [1.7, 1.7, 1.7]
    assert measured["by hand 2"]["data_share"] == 0.22   # the median window's split (1870)
    assert best_by_hand(measured) == "by hand 2"
    rows = table(measured)
    assert rows[-1] == ("| by hand 2: threads=1 dataloader_workers=2 | 1870 | 1.70x (1.70-1.70) "
                        "| 22% |")


def test_a_cost_per_sample_of_zero_is_refused(capsys):
    assert main(["--decode-ms", "0"]) == 2
    assert "--decode-ms must be positive" in capsys.readouterr().err
