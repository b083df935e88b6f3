"""Every seed counts, and counts the same after storage (issue 60): a candidate run that failed,
timed out or gave a non-finite quality makes its class not shown at best, in the search and after
a refresh from the study (a resumed or shared search, `report`, `verify`), and a stored quality
that is neither a number nor a failure marker is named, never read as one. Real SQLite; quality
runs are a table of results by seed."""
from __future__ import annotations

import json
import math

import pytest

from autotune.config import Config
from autotune.quality.evidence import QualityBook
from autotune.reporting import quality as QR
from autotune.result import Outcome, TrialResult
from autotune.study.attrs import StudyAttrs
from autotune.study.storage import open_storage, open_study

BF16 = Config(precision="bf16")


def _runner(bad: dict[tuple[str, int], TrialResult]):
    def run(config, mode, *, seed=0, samples=None):
        got = bad.get((config.precision, seed))
        return got or TrialResult(outcome=Outcome.OK, accuracy=0.90 + 0.004 * (seed % 3) -
                                  (0.001 if config.precision == "bf16" else 0.0), seconds=5.0)
    return run


def _book(path, run) -> QualityBook:
    study = open_study(open_storage(f"sqlite:///{path}/s.db"), "s")
    study.set_user_attr("settings", {"max_accuracy_drop": 1.0, "quality_seeds": 6})
    return QualityBook(study, run, batchnorm=True, tolerance_pp=1.0, seeds=tuple(range(6)))


@pytest.mark.parametrize("bad, words", [
    (TrialResult(outcome=Outcome.CRASH, reason="exit 1"), "failed on seed 2 (crash: exit 1)"),
    (TrialResult(outcome=Outcome.TIMEOUT, reason="ran past 60 s"),
     "failed on seed 2 (timeout: ran past 60 s)"),
    (TrialResult(outcome=Outcome.OK, accuracy=math.nan, seconds=5.0),
     "failed on seed 2 (diverged: its quality is nan)"),
])
def test_a_failed_seed_is_never_accepted_in_the_search_or_after_a_refresh(tmp_path, bad, words):
    book = _book(tmp_path, _runner({("bf16", 2): bad}))
    book.measure(Config())
    book.measure(BF16)
    seen = book.verdict(BF16)
    # its other seeds lose 0.1 pp each: alone they would be within; the failure keeps it out
    assert seen.status == "not shown" and not seen.accepted and words in seen.claim
    assert seen.violation > 0                           # it may not lead the search either
    fresh = QualityBook(book.study, _runner({}), batchnorm=True, tolerance_pp=1.0,
                        seeds=tuple(range(6)))          # a resumed or shared search
    again = fresh.verdict(BF16)
    assert (again.status, again.claim) == (seen.status, seen.claim)
    report = QR.class_verdict(StudyAttrs.of(book.study), book.class_of(BF16))
    assert (report.status, report.claim) == (seen.status, seen.claim)


def test_a_failed_default_seed_is_the_defaults_and_its_pair_is_left_out(tmp_path):
    book = _book(tmp_path, _runner({("fp32", 1): TrialResult(outcome=Outcome.CRASH,
                                                             reason="exit 1")}))
    book.measure(Config())
    assert book.missing_seeds(Config()) == []           # the default ran every seed all the same
    book.measure(BF16)
    v = book.verdict(BF16)
    assert v.gate.seeds == (0, 2, 3, 4, 5) and not v.gate.failed
    assert "the default's seed 1 failed (crash: exit 1): its pair left out" in v.claim


def test_stored_runs_of_every_kind_are_read_as_what_they_were(tmp_path):
    book = _book(tmp_path, _runner({}))
    book.measure(Config())
    book.measure(BF16)
    cls = book.class_of(BF16)
    stored = json.loads(StudyAttrs.of(book.study).quality_evidence[1]) \
        if json.loads(StudyAttrs.of(book.study).quality_evidence[1])["math_class"] == cls \
        else json.loads(StudyAttrs.of(book.study).quality_evidence[0])
    # an older study's failure (None and its reason), and a value no search writes
    stored["runs"]["3"] = {"quality": None, "reason": "oom: 2 GiB", "seconds": 1.0}
    stored["runs"]["4"] = {"quality": "0.95", "seconds": 1.0}
    book.study.set_user_attr(f"quality:{cls}", json.dumps(stored))
    before = dict(book.study.user_attrs)
    fresh = QualityBook(book.study, _runner({}), batchnorm=True, tolerance_pp=1.0,
                        seeds=tuple(range(6)))
    v = fresh.verdict(BF16)
    assert v.status == "not shown" and "failed on seed 3 (oom: 2 GiB) and 1 more" in v.claim
    assert fresh.evidence(BF16).failures()[4] == ("its stored quality '0.95' is neither a number "
                                                  "nor a failure marker")
    assert dict(book.study.user_attrs) == before        # nothing stored is rewritten


def test_screening_stops_at_the_first_seed_that_decides_the_class(tmp_path):
    """A seed that spiked (lost more than the tolerance plus 5x the default's own spread) makes
    the class not shown whatever its other seeds say: its screening stops there, asks for
    nothing more and prices nothing more; the default's class runs every seed."""
    calls = []
    spike = TrialResult(outcome=Outcome.OK, accuracy=0.73, seconds=5.0)   # 17 pp below
    run = _runner({("bf16", 0): spike})

    def counted(config, mode, *, seed=0, samples=None):
        calls.append((config.precision, seed))
        return run(config, mode, seed=seed, samples=samples)
    book = _book(tmp_path, counted)
    book.measure(Config())
    assert calls == [("fp32", s) for s in range(6)] and not book.beyond_showing(Config())
    book.measure(BF16)
    assert calls[6:] == [("bf16", 0)]                   # one seed, not six
    v = book.verdict(BF16)
    assert v.status == "not shown" and v.gate.spiked and book.beyond_showing(BF16)
    assert book.cost(BF16, 100.0, 16384) == 0.0
    book.measure(BF16)                                  # asked again (another of its trials)
    assert len(calls) == 7


def test_a_class_within_reach_is_screened_on_every_seed(tmp_path):
    calls = []
    run = _runner({})

    def counted(config, mode, *, seed=0, samples=None):
        calls.append((config.precision, seed))
        return run(config, mode, seed=seed, samples=samples)
    book = _book(tmp_path, counted)
    book.measure(Config())
    book.measure(BF16)
    assert [s for p, s in calls if p == "bf16"] == list(range(6))
    assert not book.beyond_showing(BF16) and book.verdict(BF16).status == "within"
