"""Never mix machines: a study measured on other hardware or with another torch is never resumed,
reported or exported as this machine's; it is listed with the reason it is not used.

The studies are real SQLite studies written by the production code (describe_study,
record_trial) with the topology of a captured machine; the search, report and export are the
real CLI. Nothing here launches a trial.
"""
from __future__ import annotations

from paths import TESTS
import dataclasses
import json
from pathlib import Path

import optuna
import pytest

from autotune.result import Outcome, TrialResult
from autotune.cli import main
from autotune.config import Config
from autotune.errors import StorageError
from autotune.probe import probe, torch_build
from autotune.probe.parse import parse_torch_version
from autotune.study.provenance import Here, check_resumable, not_used, why_not_here
from autotune.study.attrs import StudyAttrs, machine_attrs
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from autotune.study.records import record_trial
from autotune.probe.topology import TorchBuild
from results_study import live_topology, study_copy

MACHINES = TESTS / "fixtures" / "machines"
TORCH = TorchBuild(version="2.13.0+cpu", git_version="cf30153c4c131c8164ee7798e5022d810682e2cb")


def captured(name: str):
    return probe(str(MACHINES / name), collect_capabilities=False)


def elsewhere():
    """A captured machine that is surely not the one running the tests: the Zen 4 capture,
    unless this is that machine, then the Zen 5 one."""
    here = live_topology().fingerprint()
    for name in ("live-epyc-2cpu", "live-epyc-zen5-2cpu", "xeon-2s-icx"):
        topo = captured(name)
        if topo.fingerprint() != here:
            return topo
    raise AssertionError("every capture has this machine's fingerprint")


def foreign_study(url: str, topo, *, name: str | None = None, torch: TorchBuild = TORCH):
    """A real study as `autotune search` leaves it on machine `topo`, with one measured trial."""
    study = open_study(open_storage(url), name or study_name("cnn", topo, "cpu", torch=torch))
    describe_study(study, topology=topo, workload="cnn", space={"name": "cpu"},
                   settings={"target_seconds": 3.0}, torch=torch)
    record_trial(study, config=Config(), role="reference:default", result=TrialResult(
        outcome=Outcome.OK, throughput=123.0, accuracy=0.8, cpu_share=0.97))
    return study


def test_parse_torch_version_file():
    text = ("from typing import Optional\n__all__ = ['__version__']\n__version__ = '2.13.0+cpu'\n"
            "debug = False\ncuda: Optional[str] = None\n"
            "git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'\nhip: Optional[str] = None\n")
    assert parse_torch_version(text) == TORCH
    assert TORCH.tag() == "torch2.13.0+cpu.cf30153"
    cuda = parse_torch_version(text.replace("cuda: Optional[str] = None", "cuda = '12.4'"))
    assert cuda.accelerator == "cuda 12.4" and cuda != TORCH
    assert parse_torch_version("") == TorchBuild()           # torch not installed


def test_study_names_keep_hardware_and_torch_apart():
    zen4, zen5 = captured("live-epyc-2cpu"), captured("live-epyc-zen5-2cpu")
    names = {study_name("cnn", t, "cpu", torch=b) for t in (zen4, zen5)
             for b in (TORCH, dataclasses.replace(TORCH, version="2.12.0+cpu"))}
    assert len(names) == 4
    assert study_name("cnn", zen5, "cpu", torch=TORCH) == \
        f"autotune-cnn-cpu-{zen5.fingerprint()}-torch2.13.0+cpu.cf30153"


def test_why_not_here_names_the_difference():
    zen4, zen5 = captured("live-epyc-2cpu"), captured("live-epyc-zen5-2cpu")
    attrs = machine_attrs(zen4, TORCH)
    assert why_not_here(attrs, Here(topology=zen4, torch=TORCH)) is None
    assert why_not_here(attrs, Here(topology=zen5, torch=TORCH)) == (
        "measured on other hardware: AMD EPYC (amd family 25 model 17 stepping 1); "
        "this is AMD EPYC (amd family 26 model 2 stepping 1)")
    newer = dataclasses.replace(TORCH, version="2.14.0+cpu", git_version="a" * 40)
    assert why_not_here(attrs, Here(topology=zen4, torch=newer)) == (
        "measured with torch 2.13.0+cpu (git cf30153); this is torch 2.14.0+cpu (git aaaaaaa)")
    # A study written before the fingerprint knew CPU families: its stored machine lacks them.
    old = zen4.to_json()
    old["isa"] = {k: v for k, v in old["isa"].items() if k not in ("family", "model", "stepping")}
    assert "recorded before autotune stored the CPU family" in why_not_here(
        {"topology": old, "torch_build": TORCH.to_json()}, Here(topology=zen4, torch=TORCH))


def test_a_study_from_another_machine_is_not_resumed(tmp_path, capsys, monkeypatch):
    """The same study name (a reused one) holding another machine's measurements: the search
    refuses in one line, exit 2, before any trial, and adds nothing to the study."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept private
    here = Here(topology=probe(), torch=torch_build())
    space = resolve(load_space(find_space("cpu")), here.topology)
    url = f"sqlite:///{tmp_path}/shared.db"
    name = study_name("cnn", here.topology, space.name, torch=here.torch)
    study = foreign_study(url, elsewhere(), name=name)
    with pytest.raises(StorageError, match="not resumed"):
        check_resumable(study, here)
    rc = main(["search", "--budget", "60s", "--storage", url, "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"study '{name}' was measured on other hardware" in err and "not resumed" in err
    assert len(optuna.load_study(study_name=name, storage=url).trials) == 1
    assert not (tmp_path / "r" / "trials").exists()


def test_a_second_worker_never_sees_a_half_written_description(tmp_path):
    """Two workers of a shared search start together on one new study: each attribute is its own
    write, so the second may open the study between two writes of the first. After every single
    write it must see either no description (and write the same one itself) or the whole of it;
    CI once saw the machine without its torch and refused the study as 'an unrecorded version'."""
    here = Here(topology=live_topology(), torch=torch_build())
    url = f"sqlite:///{tmp_path}/shared.db"
    name = study_name("cnn", here.topology, "cpu", torch=here.torch)
    first = open_study(open_storage(url), name)
    seen = []
    write = first.set_user_attr

    def write_then_look(key, value):
        write(key, value)
        second = optuna.load_study(study_name=name, storage=url)
        check_resumable(second, here)        # raises on a half-written description
        seen.append((key, StudyAttrs.of(second).described))

    first.set_user_attr = write_then_look
    describe_study(first, topology=here.topology, workload="cnn", space={"name": "cpu"},
                   settings={"target_seconds": 3.0}, torch=here.torch)
    # described only by the last write, after the torch, the settings and the rest
    assert [described for _, described in seen] == [False] * (len(seen) - 1) + [True]
    assert {"torch_build", "settings", "library_versions"} <= {key for key, _ in seen[:-1]}


def test_search_lists_studies_measured_elsewhere(tmp_path):
    """A storage shared by two machines: from here, the other's study is listed as not used, with
    its reason; this machine's own study is not."""
    db = study_copy(tmp_path)
    url = f"sqlite:///{db}"
    other = foreign_study(url, elsewhere())
    mine = study_name("cnn", live_topology(), "cpu")
    here = Here(topology=live_topology(), torch=torch_build())
    summaries = optuna.get_all_study_summaries(open_storage(url), include_best_trial=False)
    listed = not_used(summaries, here, workload="cnn", space="cpu")
    assert [n for n, _ in listed] == [other.study_name] and mine not in dict(listed)
    assert dict(listed)[other.study_name].startswith("measured on other hardware: ")
    assert not_used(summaries, here, workload="transformer") == []


def test_report_and_export_prefer_this_machine_and_say_what_is_not_used(tmp_path, capsys):
    db = study_copy(tmp_path)
    url = f"sqlite:///{db}"
    other = foreign_study(url, elsewhere())             # the newest study, but not this machine's
    mine = study_name("cnn", live_topology(), "cpu")
    assert main(["report", "--storage", url, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["study"] == mine
    assert data["provenance"] == [f"not used: study {other.study_name} (measured on other "
                                  f"hardware: {other_reason(other)})"]
    # Asked for by name, it is shown, and says it is not this machine's.
    assert main(["report", "--storage", url, "--study", other.study_name]) == 0
    out = capsys.readouterr().out
    assert f"note: study {other.study_name} is not this machine's: it was measured on other " \
           "hardware" in out
    assert main(["export", "--storage", url, "--study", other.study_name, "--trial", "0"]) == 0
    assert "is not this machine's" in capsys.readouterr().err


def other_reason(study) -> str:
    return why_not_here(study.user_attrs, Here(topology=live_topology(), torch=torch_build())
                        ).removeprefix("measured on other hardware: ")
