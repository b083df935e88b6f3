"""The pipeline composed once (autotune.tune): the request checked once, and a whole real search
driven through `search()` without argparse, as the CLI drives it."""
from __future__ import annotations

import tempfile

import pytest

from autotune.errors import AutotuneError, WorkloadError
from autotune.tune import SearchRequest, check_workload, search


@pytest.mark.parametrize("bad, message", [
    ({"max_accuracy_drop": -1.0}, r"--max-accuracy-drop -1.0: must be a number >= 0"),
    ({"quality_seeds": 1}, r"--quality-seeds 1: at least 2 seeds"),
    ({"quality_samples": 0}, r"--quality-samples 0: must be positive"),
    ({"verify_rounds": 0}, r"--verify-rounds 0: must be at least 1"),
])
def test_request_is_checked_once_with_the_flags_names(bad, message):
    with pytest.raises(AutotuneError, match=message):
        SearchRequest(budget_s=60.0, **bad)


def test_workload_label_names_the_study_and_script_flags_need_a_script():
    assert check_workload("mlp") == "mlp"
    with pytest.raises(WorkloadError, match="--metric reads a script's output"):
        check_workload("mlp", metric="x: ([0-9.]+)")
    with pytest.raises(WorkloadError, match="no_such_module"):
        check_workload("no_such_module:build")


@pytest.mark.slow
def test_a_whole_search_runs_through_the_pipeline(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept private
    space = tmp_path / "tiny.yaml"
    space.write_text("name: tiny\nknobs:\n  threads: [1, 2]\nfixed:\n  nproc: 1\n"
                     "constraints: []\n")
    req = SearchRequest(budget_s=120.0, workload="mlp", space=str(space), seconds=1.0,
                        results=str(tmp_path / "results"), verify_rounds=1, quality_seeds=2,
                        quality_samples=2048, max_trials=3)
    tuned = search(req)
    assert tuned.summary["study"].startswith("autotune-mlp-tiny-")
    assert tuned.result.default is not None and tuned.result.default.outcome == "ok"
    assert tuned.summary["trials_run"] >= 2
    # the study holds what the search returned: the same trials and the same command
    from autotune.study.records import REPEAT_ROLE, records
    from autotune.study.storage import open_storage, open_study
    study = open_study(open_storage(req.url), tuned.summary["study"], create=False)
    stored = {r.number: r.outcome for r in records(study) if r.role != REPEAT_ROLE}
    assert {r.number: r.outcome for r in tuned.result.records} == stored
    if tuned.recommendation is not None:
        assert study.user_attrs["recommendation"]["command"] == tuned.command
