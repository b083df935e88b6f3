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


@pytest.mark.slow
@pytest.mark.scenario
def test_a_short_search_samples_until_its_reserve_is_due_and_shows_what_it_left(tmp_path):
    """Issue 62: a short search stops sampling when the reserve predicted from its own runs (a
    window of a kept launch, a start where none runs) plus their spread's margin reaches the time
    left; the account shows the budget never used as a row of its own, and why any was left."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.run([sys.executable, "-m", "autotune", "search", "--budget", "90s",
                        "--workload", "mlp", "--seconds", "1", "--quality-samples", "2048",
                        "--results", str(tmp_path / "results")], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    went = next(line for line in p.stdout.splitlines() if "where the budget went" in line)
    m = re.search(r"; unused (\d+):(\d+)$", went)
    assert m, went
    unused = int(m[1]) * 60 + int(m[2])
    stopped = re.search(r"search stopped \((\w+)\)", p.stdout)[1]
    if stopped == "budget" and "verification windows" in went:
        # sampled until the reserve was due, then verified: little left (on a shared box too)
        assert unused <= 25, p.stdout
    if unused >= 1:           # whatever was left, the summary says why
        assert re.search(rf"^\s+unused {m[1]}:{m[2]}: \S", p.stdout, re.M), p.stdout
