"""Issue 52, item 5: every attribute study/attrs.py owns is bounded where it is read. A study is
written by whoever can write it (every worker's account of a shared study): an Infinity in the
budget account crashed `autotune report`, a stored quality run length had no upper bound, a noise
floor claiming 10**30 seeds was counted, a claim's infinite deadline never passed. Real studies
(tests/results_study.py), hostile values written through Optuna's public API."""
from __future__ import annotations

import math
import shutil
import time

import pytest

from autotune.cli import main
from autotune.study import attrs as A
from autotune.study import bounded
from autotune.study.owners import owner_alive
from autotune.quality.evidence import ClassEvidence, QualityBook
from hostile_study import open_only
from results_study import study_copy

ACCOUNT = {"budget_s": 600.0, "elapsed_s": 590.0, "fixed_s": 100.0, "warm_runs": 10,
           "other_s": 40.0, "configurations": 12, "next_step": "a 10-minute budget would",
           "seconds": {"trials": 300.0, "quality": 100.0, "verification": 150.0},
           "runs": {"trials": 20, "quality": 6, "verification": 8}}


@pytest.fixture(scope="module")
def base_study(tmp_path_factory):
    db = study_copy(tmp_path_factory.mktemp("numbers") / "r")
    study = open_only(db)
    study.set_user_attr(A.BUDGET_ACCOUNT, ACCOUNT)
    study.set_user_attr(A.QUALITY_LENGTH, 16384)
    study.set_user_attr(A.ACCURACY_PREFIX + "64:bf16", 0.79)
    study.set_user_attr(A.WORKER_PREFIX + "h:1:ab", {"state": "searching", "deadline": 1.0,
                                                      "owner": {"host": "elsewhere"}})
    study.set_user_attr(A.VERIFIER, {"id": "h:1:ab", "state": "verifying", "deadline": 1.0,
                                     "owner": {"host": "elsewhere"}, "covers": []})
    return db


def _hostile(value, replacement):
    """`value` with every number in it (bools aside) replaced by `replacement`."""
    if isinstance(value, dict):
        return {k: _hostile(v, replacement) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(v, replacement) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return replacement
    return value


@pytest.mark.parametrize("replacement", [math.inf, -math.inf, math.nan, -1e308, 10**30, "x"])
@pytest.mark.parametrize("whole", [False, True], ids=["numbers", "whole-values"])
def test_report_and_export_of_a_study_with_hostile_numbers_never_crash(base_study, tmp_path,
                                                                      capsys, replacement, whole):
    db = tmp_path / "hostile.db"
    shutil.copy(base_study, db)
    study = open_only(db)
    for key, value in dict(study.user_attrs).items():   # every attribute, one of each prefix
        study.set_user_attr(key, replacement if whole else _hostile(value, replacement))
    for argv in (["report"], ["report", "--json"], ["export"]):
        rc = main([*argv, "--storage", f"sqlite:///{db}"])   # was: OverflowError, TypeError...
        err = capsys.readouterr().err
        assert rc in (0, 2) and "Traceback" not in err, (argv, err)


def test_an_infinite_budget_account_reads_without_its_figures(base_study, tmp_path, capsys):
    db = tmp_path / "inf.db"
    shutil.copy(base_study, db)
    study = open_only(db)
    study.set_user_attr(A.BUDGET_ACCOUNT, {**ACCOUNT, "other_s": math.inf, "fixed_s": math.nan,
                                           "seconds": {"trials": math.inf, "quality": 100.0},
                                           "warm": {"trials": -1, "quality": 10**12,
                                                    "verification": 3, "x": "4"}})
    account = A.StudyAttrs.of(study).budget_account
    assert account["seconds"] == {"quality": 100.0} and "other_s" not in account
    assert account["warm"] == {"verification": 3}
    assert main(["report", "--storage", f"sqlite:///{db}"]) == 0   # was: OverflowError
    assert "where the budget went: quality 01:40" in capsys.readouterr().out


def test_a_stored_quality_length_beyond_bounds_or_this_searchs_own_is_not_taken(base_study,
                                                                               tmp_path):
    db = tmp_path / "len.db"
    shutil.copy(base_study, db)
    study = open_only(db)
    for hostile in (10**12, math.inf, -5, 0, "16384", True):
        study.set_user_attr(A.QUALITY_LENGTH, hostile)
        assert A.StudyAttrs.of(study).quality_length is None, hostile
    study.set_user_attr(A.QUALITY_LENGTH, 1 << 28)    # within bounds, beyond this search's
    book = QualityBook(study, None, batchnorm=True, tolerance_pp=1.0, most_samples=16384)
    assert book.length is None
    study.set_user_attr(A.QUALITY_LENGTH, 8192)
    book.refresh()
    assert book.length == 8192


def test_settings_noise_floor_and_evidence_numbers_are_bounded():
    settings = bounded.settings({"target_seconds": math.inf, "max_accuracy_drop": 1e9,
                                 "quality_seeds": 10**9, "quality_samples": 1024,
                                 "batchnorm": "yes", "reference_batch": 32})
    assert settings == {"quality_samples": 1024, "reference_batch": 32}
    floor = {"values": [0.7, 0.71, 0.69], "mean": 0.7, "sd": 0.01, "n": 3, "math_class": "c"}
    assert bounded.noise_floor(floor) == floor
    for bad in ({"n": 10**30}, {"values": [math.nan] * 3}, {"mean": math.inf}, {"sd": -1}):
        assert bounded.noise_floor({**floor, **bad}) is None, bad
    ev = ClassEvidence.from_json('{"math_class": "c", "config": {}, "runs": {'
                                 '"0": {"quality": Infinity, "seconds": 1e400, "samples": -1,'
                                 ' "curve": [[1, NaN]]}, "x": {"quality": 0.5}, "1": 7}}')
    assert list(ev.runs) == [0] and ev.runs[0]["quality"] is None
    assert ev.runs[0]["seconds"] == 0.0 and ev.runs[0]["curve"] is None
    assert ev.runs[0]["samples"] is None and ev.sample() is None


def test_a_deadline_no_search_writes_has_passed():
    elsewhere = {"host": "another-host", "pid": 1}
    assert owner_alive(elsewhere, time.time() + 600)
    for hostile in (math.inf, time.time() + 10 * 365 * 86400, "soon", [1]):
        assert not owner_alive(elsewhere, hostile), hostile
    assert owner_alive(elsewhere, None)    # an older version's claim, as before
