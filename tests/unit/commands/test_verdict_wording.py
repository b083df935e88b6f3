"""The words of a lower-bound figure in what `autotune verify`, `autotune compare` and the search's
summary print (issue 47): "verified speedup ≥1.75x ... (95% lower bound, 12 rounds; median
1.90x)", one range at most per figure, never "settled". Verification, storage and the commands'
answers are the production code; only the rounds' throughputs are literal (tests/verdict_studies.py)."""
from __future__ import annotations

import math
import re

import optuna

from autotune.commands.compare import Compared
from autotune.commands.verify import Verified
from autotune.config import Config
from autotune.display.progress import TerminalProgress
from autotune.export.recommendation import save_recommendation
from autotune.recommend.compare import Comparison, Window
from autotune.recommend.reverify import reverify, store_unless_replaced
from autotune.result import Outcome, TrialResult
from autotune.search.options import SearchResult
from autotune.study.attrs import StudyAttrs
from results_study import live_topology
from verdict_studies import (ISSUE_ROUNDS, LOWER_BOUND_HEADLINE, WIDE_ROUNDS, recommendation,
                             study_recommending)

RANGE = re.compile(r"\d\.\d+-\d\.\d+x")


def test_verify_headlines_the_bound_its_rounds_prove_and_stores_it(tmp_path):
    """A study whose search ended unsettled (three rounds, 95% interval 0.91-1.66x) verified
    again: 12 quiet rounds as the issue's prove ≥1.75x, which replaces the stored figure."""
    url, study = study_recommending(tmp_path / "r", recommendation(WIDE_ROUNDS))
    measured = StudyAttrs.of(study).recommendation
    ratios = iter(ISSUE_ROUNDS)

    def evaluate(config: Config, mode: str, **_) -> TrialResult:
        thr = 100.0 if config == Config() else 100.0 * next(ratios)
        return TrialResult(outcome=Outcome.OK, throughput=thr, seconds=10.0, outside_share=0.0)

    done = reverify(study, evaluate, rounds=12, max_rounds=12, time_left=lambda: math.inf)
    done = store_unless_replaced(study, url, measured, done, lambda rec: save_recommendation(
        study, rec, live_topology(), "cnn"))
    text = Verified(done, url).text().splitlines()
    assert text[0] == LOWER_BOUND_HEADLINE
    assert text[1].startswith("  before: faster than the default launch, by how much is "
                              "unsettled: median 1.20x (95% interval 0.91-1.66x, 3 rounds)")
    assert text[2] == f"  stored in {url}"
    stored = optuna.load_study(study_name=None, storage=url).user_attrs["recommendation"]
    assert stored["verdict"] == "lower_bound" and stored["headline"] == LOWER_BOUND_HEADLINE
    assert done.to_json()["recommendation"]["verdict"] == "lower_bound"


def _comparison(ratios: list[float], *, b_faster: bool = False) -> Comparison:
    windows = []
    for i, r in enumerate(ratios, 1):
        fast, slow = 100.0 * r, 100.0
        a, b = (slow, fast) if b_faster else (fast, slow)
        windows += [Window(side="A", round=i, outcome=Outcome.OK, throughput=a, outside_share=0.0),
                    Window(side="B", round=i, outcome=Outcome.OK, throughput=b, outside_share=0.0)]
    return Comparison(a=Config(precision="bf16"), b=Config(), windows=tuple(windows))


def test_compare_names_the_faster_side_with_its_lower_bound():
    answer = Compared(_comparison(ISSUE_ROUNDS), "samples/s")
    lines = answer.text().splitlines()
    assert lines[-1] == ("verdict: A is faster, verified ≥1.75x over B (95% lower bound, "
                         "12 rounds; median 1.90x)")
    assert not any(line.startswith("ratio:") for line in lines)   # the figure is said once
    data = answer.to_json()
    assert data["verdict"] == "A is faster" and data["verdict_text"] == lines[-1][len("verdict: "):]
    assert data["settling"]["verdict"] == "lower_bound"
    # B faster: the bound is B's over A, worded the same way
    flipped = Compared(_comparison(ISSUE_ROUNDS, b_faster=True), "samples/s").text()
    assert flipped.splitlines()[-1] == ("verdict: B is faster, verified ≥1.75x over A (95% "
                                        "lower bound, 12 rounds; median 1.90x)")


def test_compare_without_a_figure_keeps_its_verdict_and_one_interval():
    text = Compared(_comparison(WIDE_ROUNDS), "samples/s").text()
    assert "\nverdict: A is faster\n" in text
    assert text.endswith("ratio: unsettled: median 1.20x (95% interval 0.91-1.66x, 3 rounds)")
    assert "verified" not in text


def test_the_search_summary_headlines_the_bound_once(capsys):
    rec = recommendation(ISSUE_ROUNDS)
    result = SearchResult(records=[], measured=13, default=None, run_cpu=None,
                          stop_reason="budget")
    TerminalProgress(budget_s=600, quiet=True, live=False).finish(result, rec, None, 600.0)
    out = capsys.readouterr().out
    assert f"\n{LOWER_BOUND_HEADLINE}\n" in out
    assert out.count("95%") == 1 and "settled" not in out and not RANGE.search(out)
    assert "verification:" not in out
