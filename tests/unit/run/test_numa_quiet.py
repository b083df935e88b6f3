"""--quiet-numa: numa_balancing off for a search and put back afterwards (library level; the
real processes stopped by signals are in tests/integration/test_memory_placement.py). A
temporary file stands in for /proc/sys/kernel/numa_balancing (the paths are parameters), so the
machine's own setting is never touched here."""
from __future__ import annotations

import json
import os
import tempfile

import pytest

from autotune.cli import main
from autotune.errors import MachineStateError
from autotune.run import numa_quiet
from autotune.run.numa_quiet import QuietNuma, disturbs


@pytest.fixture
def kernel(tmp_path):
    """(the stand-in numa_balancing file, holding 1; the marker path)."""
    path = tmp_path / "numa_balancing"
    path.write_text("1\n")
    return path, tmp_path / "marker.json"


def test_off_inside_and_back_after(kernel):
    path, marker = kernel
    with QuietNuma(path=str(path), marker=str(marker), euid=0) as quiet:
        assert path.read_text() == "0\n" and quiet.before == 1
        assert json.loads(marker.read_text())["path"] == str(path)
    assert path.read_text() == "1\n" and not marker.exists()
    assert "was 1" in quiet.said[0]


def test_refused_to_a_user_who_is_not_root_and_nothing_changes(kernel):
    path, marker = kernel
    with pytest.raises(MachineStateError, match=r"needs root \(this is uid 1000\)"):
        QuietNuma(path=str(path), marker=str(marker), euid=1000).__enter__()
    assert path.read_text() == "1\n" and not marker.exists()


def test_already_off_or_absent_changes_nothing(tmp_path, kernel):
    path, marker = kernel
    path.write_text("0\n")
    with QuietNuma(path=str(path), marker=str(marker), euid=0) as quiet:
        assert quiet.before is None and not marker.exists()
    assert quiet.said == ["--quiet-numa: numa_balancing is already off"]
    with QuietNuma(path=str(tmp_path / "none"), marker=str(marker), euid=0) as quiet:
        assert "this kernel has no" in quiet.said[0]


def test_when_numa_balancing_disturbs_a_timing():
    assert disturbs(1, 2).startswith("numa_balancing is on: the kernel migrates pages")
    assert "memory tiering" in disturbs(2, 4)
    assert disturbs(0, 2) is None and disturbs(None, 2) is None
    assert disturbs(1, 1) is None      # one node: nowhere to move pages to


def test_a_replayed_search_with_quiet_numa_times_every_trial_with_it_off(tmp_path, kernel,
                                                                         monkeypatch):
    """The whole search (tune.search) with --quiet-numa: every trial it measures sees 0, and
    the setting is back when it returns."""
    from autotune.tune import SearchRequest, search
    from benchmarks.landscapes.synthetic import synthetic
    from benchmarks.landscapes.table import SimClock
    path, marker = kernel
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(numa_quiet, "LIVE", str(path))
    monkeypatch.setattr(numa_quiet, "MARKER", str(marker))
    land, clock = synthetic("formula", seed=0), SimClock()
    table, seen = land.evaluator(clock), []

    def evaluate(config, mode, **kw):
        seen.append(path.read_text())
        return table(config, mode, **kw)
    search(SearchRequest(budget_s=300.0, results=str(tmp_path / "r"), seed=0, quiet_numa=True),
           label="cnn", topology=land.topology(), evaluate=evaluate, clock=clock)
    assert len(seen) > 5 and set(seen) == {"0\n"}
    assert path.read_text() == "1\n" and not marker.exists()


def test_search_quiet_numa_without_root_is_one_line_and_creates_nothing(tmp_path, kernel,
                                                                        monkeypatch, capsys):
    """As a user who is not root. (A real second user cannot run this checkout's Python, which
    lives under /root: the effective uid is what the refusal reads.)"""
    path, marker = kernel
    monkeypatch.setattr(numa_quiet, "LIVE", str(path))
    monkeypatch.setattr(numa_quiet, "MARKER", str(marker))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    results = tmp_path / "results"
    assert main(["search", "--budget", "5m", "--quiet-numa", "--results", str(results)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "autotune: error: --quiet-numa turns kernel.numa_balancing off for the search, which "
        "needs root (this is uid 1000); run without it, or as root"]
    assert not results.exists() and path.read_text() == "1\n" and not marker.exists()
