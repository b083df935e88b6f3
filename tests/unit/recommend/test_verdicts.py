"""The three verdicts on verification rounds, with literal ratios: settled (the 95% interval within
±10%), a lower bound (wider, but the one-sided 95% lower bound reaches MIN_GAIN) and unsettled;
each headline shows one range at most and names it; a lower bound is never worded as settled.
ISSUE_ROUNDS are issue 47's first command (tests/verdict_studies.py)."""
from __future__ import annotations

import dataclasses
import math
import re
import statistics

import pytest

from autotune.config import Config
from autotune.recommend.settle import (MIN_GAIN, Verdict, ratio_interval, ratio_lower_bound,
                                       settle, shown_in)
from autotune.recommend.recommendation import Recommendation
from autotune.recommend.verify import verify
from autotune.result import Outcome, TrialResult
from autotune.study.records import Record, Role
from verdict_studies import ISSUE_ROUNDS, LOWER_BOUND_HEADLINE, WIDE_ROUNDS, recommendation

QUIET = [0.0] * 12
# a range like "1.71-2.13x": a headline shows at most one, and names it
RANGE = re.compile(r"\d\.\d+-\d\.\d+x")


def lower_bound_recommendation() -> Recommendation:
    return recommendation(ISSUE_ROUNDS)


def test_the_issues_twelve_quiet_rounds_prove_a_lower_bound():
    s = settle(ISSUE_ROUNDS, QUIET)
    lo, hi = s.interval
    assert (f"{lo:.2f}", f"{hi:.2f}") == ("1.71", "2.13") and s.ratio == pytest.approx(1.90)
    assert s.verdict is Verdict.LOWER_BOUND and not s.settled and s.verdict.verified
    assert s.describe() == "≥1.75x (95% lower bound, 12 rounds; median 1.90x)"
    assert s.next_step() == ""
    data = s.to_json()
    assert data["verdict"] == "lower_bound" and data["settled"] is False
    assert data["lower_bound"] == pytest.approx(1.7485, abs=1e-4)
    # per-round detail stays in the JSON, named for what it is, never in the text
    assert (data["low"], data["high"]) == (1.50, 2.40) and "1.5-2.4" not in data["text"]


def test_the_bound_is_one_sided_on_the_logs_not_the_two_sided_intervals_lower_end():
    logs = [math.log(r) for r in ISSUE_ROUNDS]
    se = statistics.stdev(logs) / math.sqrt(12)
    # Student's t, one-sided 95%, 11 degrees of freedom: 1.796
    assert ratio_lower_bound(ISSUE_ROUNDS) == pytest.approx(math.exp(statistics.fmean(logs)
                                                                     - 1.796 * se))
    assert ratio_lower_bound(ISSUE_ROUNDS) > ratio_interval(ISSUE_ROUNDS)[0]
    assert ratio_lower_bound([2.0]) is None and ratio_lower_bound([2.0, -1.0]) is None


@pytest.mark.parametrize("ratios, outside, verdict", [
    ([2.60, 2.61, 2.62, 2.59, 2.63], [0.0] * 5, Verdict.SETTLED),
    (ISSUE_ROUNDS, QUIET, Verdict.LOWER_BOUND),
    ([1.5242, 1.3865, 1.4040], [0.002, 0.0, 0.011], Verdict.LOWER_BOUND),   # ≥1.32x
    (WIDE_ROUNDS, [0.0] * 3, Verdict.UNSETTLED),          # bound 0.999x: at or below 1
    ([1.15, 1.45, 1.25], [0.0] * 3, Verdict.LOWER_BOUND),     # ≥1.05x, however wide
    ([0.8, 1.3, 1.05], [0.0] * 3, Verdict.UNSETTLED),         # bound well below 1
    (ISSUE_ROUNDS, [0.3] * 12, Verdict.UNSETTLED),            # every round disturbed
    ([2.0], [0.0], Verdict.UNSETTLED),                        # one round: no spread
])
def test_each_verdict_from_literal_ratios(ratios, outside, verdict):
    s = settle(ratios, outside)
    assert s.verdict is verdict
    if verdict is Verdict.LOWER_BOUND:
        assert s.lower_bound >= MIN_GAIN
    elif verdict is Verdict.UNSETTLED and s.lower_bound is not None:
        assert s.lower_bound < MIN_GAIN or s.quiet_rounds < s.rounds


def test_a_bound_above_1_but_short_of_min_gain_is_not_headlined():
    """The bound must reach MIN_GAIN (1.02x), the least gain a candidate needs to be recommended:
    'verified speedup ≥1.01x' would claim less than the tool itself counts as a speedup."""
    ratios = [1.12, 1.42, 1.22]
    bound = ratio_lower_bound(ratios)
    assert 1.0 < bound < MIN_GAIN
    assert settle(ratios, [0.0] * 3).verdict is Verdict.UNSETTLED


def test_disturbed_rounds_do_not_count_towards_the_bound():
    # the 3 highest rounds were disturbed: the bound is the 9 quiet ones'
    outside = [0.0] * 9 + [0.4] * 3
    s = settle(ISSUE_ROUNDS, outside)
    assert s.quiet_rounds == 9 and s.lower_bound == pytest.approx(ratio_lower_bound(ISSUE_ROUNDS[:9]))
    assert s.verdict is Verdict.LOWER_BOUND and "9 rounds" in s.describe()


def test_the_headline_names_the_bound_and_the_median_and_never_says_settled():
    rec = lower_bound_recommendation()
    head = rec.headline()
    assert head == LOWER_BOUND_HEADLINE
    assert "settled" not in head and "interval" not in head and not RANGE.search(head)
    data = rec.to_json()
    assert data["verdict"] == "lower_bound" and data["settled"] is False
    assert data["inconclusive"] is False and data["headline"] == head
    assert data["speedup"] == pytest.approx(1.90)        # the median; the bound is the settling's
    assert shown_in(head, rec.settling.describe())


def test_settled_headlines_stay_as_they_were_and_unsettled_ones_show_one_interval():
    settled = settle([2.60, 2.61, 2.62, 2.59, 2.63], [None] * 5)
    rec = Recommendation(config=Config(nproc=2), speedup=settled.ratio, spread=0.04, rounds=5,
                         verified=True, settling=settled)
    assert rec.headline() == ("verified speedup 2.61x over the default launch (95% interval "
                              "2.59-2.63x, 5 rounds)")
    assert rec.to_json()["verdict"] == "settled"
    wide = dataclasses.replace(rec, settling=settle(WIDE_ROUNDS, [0.0] * 3))
    head = wide.headline()
    assert head.startswith("faster than the default launch, by how much is unsettled: median "
                           "1.20x (95% interval 0.91-1.66x, 3 rounds); the machine was quiet")
    assert len(RANGE.findall(head)) == 1 and wide.to_json()["verdict"] == "unsettled"


def test_a_default_launch_recommended_over_a_bounded_candidate_is_a_verdict():
    """The default launch wins (the bounded candidate did not hold up, or its quality was
    refused): that is an answer to launch by, as with a settled candidate; unsettled is not."""
    bounded = Recommendation(config=Config(), speedup=1.0, spread=0.0, rounds=12, verified=True,
                             default_wins=True, settling=settle(ISSUE_ROUNDS, QUIET),
                             note="quality refused")
    assert not bounded.inconclusive and bounded.verdict is Verdict.LOWER_BOUND
    assert bounded.headline().startswith("no verified speedup")
    unsettled = dataclasses.replace(bounded, settling=settle(WIDE_ROUNDS, [0.0] * 3))
    assert unsettled.inconclusive and unsettled.headline().startswith("no verified speedup: the "
                                                                      "best candidate")


def test_a_stored_verdict_reads_back_and_older_recommendations_read_as_before():
    assert Verdict.stored(lower_bound_recommendation().to_json()) is Verdict.LOWER_BOUND
    # written before verdicts existed: only "settled"
    assert Verdict.stored({"settled": False}) is Verdict.UNSETTLED
    assert Verdict.stored({"settled": True}) is Verdict.SETTLED
    assert Verdict.stored({}) is Verdict.SETTLED
    assert Verdict.stored({"verdict": "nonsense", "settled": False}) is Verdict.UNSETTLED


def test_the_winner_carries_the_bound_through_verification():
    """verify() itself: a candidate whose 12 quiet rounds are the issue's is recommended with
    the bound as its headline, and its speedup is the quiet rounds' median."""
    ratios = iter(ISSUE_ROUNDS)

    def evaluate(config: Config, mode: str) -> TrialResult:
        thr = 100.0 if config == Config() else 100.0 * next(ratios)
        return TrialResult(outcome=Outcome.OK, throughput=thr, seconds=10, outside_share=0.0)

    def record(config: Config, role: str) -> Record:
        return Record(config=config, role=role, feasible=True,
                      result=TrialResult(outcome=Outcome.OK, throughput=190.0, accuracy=0.8))

    rec = verify([record(Config(nproc=2, threads=1), "search")], record(Config(), Role.DEFAULT),
                 evaluate, rounds=12, max_rounds=12)
    assert rec.rounds == 12 and rec.verdict is Verdict.LOWER_BOUND
    assert rec.headline() == LOWER_BOUND_HEADLINE and rec.speedup == pytest.approx(1.90)
