"""Every command is composed in the library (autotune.tune): a request value in, a value out that
the CLI only prints. Driven here without argparse, on this machine and a real stored study."""
from __future__ import annotations

import json

import pytest

from autotune.config import Config
from autotune.errors import ConfigError, StorageError
from autotune.tune import (ExportRequest, ProbeRequest, ReportRequest, RunRequest, StudyRef,
                           export, probe, report, run)
from results_study import study_copy


def test_a_dry_run_is_a_plan_value_and_says_nothing():
    said = []
    answer = run(RunRequest(config=Config(nproc=2, threads=1), dry_run=True), say=said.append)
    assert answer.trial is None and len(answer.plan.ranks) == 2 and answer.exit_code == 0
    plan = answer.to_json()
    assert [r["rank"] for r in plan["ranks"]] == [0, 1] and plan["env"]["OMP_NUM_THREADS"] == "1"
    assert answer.text() == answer.plan.describe() and said == []


def test_a_request_is_checked_when_it_is_made_and_a_plan_that_cannot_run_is_refused():
    with pytest.raises(ConfigError, match="--sysfs-root plans against another machine"):
        RunRequest(config=Config(), sysfs_root="captured/")
    with pytest.raises(ConfigError, match=r"--set: .* \(on this machine\)"):
        run(RunRequest(config=Config(nproc=4096), dry_run=True))


def test_probe_answers_the_topology_and_its_table(tmp_path):
    probed = probe(ProbeRequest(capture=str(tmp_path / "cap")))
    assert probed.text().startswith("machine      this machine (fingerprint ")
    assert probed.captured.startswith("captured ") and (tmp_path / "cap").is_dir()
    replayed = probe(ProbeRequest(sysfs_root=str(tmp_path / "cap")))
    assert replayed.topology.fingerprint() == probed.topology.fingerprint()


def test_report_and_export_read_a_stored_study(tmp_path):
    ref = StudyRef(storage=f"sqlite:///{study_copy(tmp_path)}")
    reported = report(ReportRequest(study=ref, top=3))
    assert len(reported.report.top) <= 3 and reported.url == ref.url
    assert json.loads(json.dumps(reported.to_json()))["storage"] == ref.url
    said = []
    text = export(ExportRequest(study=ref, format="json"), say=said.append)
    assert json.loads(text)["config"] and all(line.startswith("autotune: ") for line in said)
    with pytest.raises(StorageError, match="--trial 999: study"):
        export(ExportRequest(study=ref, trial=999))
