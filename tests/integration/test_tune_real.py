"""A whole search through the pipeline (autotune.tune) with real trials.
(The request parsing is in tests/unit/cli/test_tune.py.)
"""
from __future__ import annotations

import tempfile
import pytest
from autotune.tune import SearchRequest, search


@pytest.mark.slow
@pytest.mark.scenario
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
    from autotune.study.records import Role, records
    from autotune.study.storage import open_storage, open_study
    study = open_study(open_storage(req.url), tuned.summary["study"], create=False)
    stored = {r.number: r.outcome for r in records(study) if r.role != Role.REPEAT}
    assert {r.number: r.outcome for r in tuned.result.records} == stored
    if tuned.recommendation is not None:
        assert study.user_attrs["recommendation"]["command"] == tuned.command
