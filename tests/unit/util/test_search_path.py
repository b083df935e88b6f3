"""Issue 61, hole 3: an empty PYTHONPATH or PATH entry put the current folder back on every
child's search path. The one owner of their cleaning, with literal values; and a relative entry
refused in one line before any command starts a process."""
from __future__ import annotations

import pytest

from autotune.cli import main
from autotune.util.search_path import clean, relative_entry


@pytest.mark.parametrize("value, kept", [
    (":/opt/x", "/opt/x"), ("/opt/x:", "/opt/x"), ("/a::/b", "/a:/b"),
    (".:/opt/x", "/opt/x"), ("lib:/opt/x:~/bin", "/opt/x"), ("/opt/x", "/opt/x")])
def test_only_absolute_entries_reach_a_child(value, kept):
    env = clean({"PYTHONPATH": value, "PATH": value, "HOME": "/root"})
    assert env == {"PYTHONPATH": kept, "PATH": kept, "HOME": "/root"}


def test_a_search_path_left_with_no_entry_is_removed_and_the_rest_untouched():
    env = {"PYTHONPATH": ":", "PATH": "", "LANG": "C"}
    assert clean(env) == {"LANG": "C"} and env == {"PYTHONPATH": ":", "PATH": "", "LANG": "C"}


def test_an_empty_entry_is_dropped_not_refused_and_a_relative_one_is_named():
    assert relative_entry({"PYTHONPATH": ":/opt/x", "PATH": "/usr/bin::/bin"}) is None
    why = relative_entry({"PYTHONPATH": "/opt/x", "PATH": "/usr/bin:.:/bin"})
    assert why is not None and why.startswith("PATH entry '.': refused, a relative entry")


@pytest.mark.parametrize("key, value", [("PYTHONPATH", "lib"), ("PATH", f".:{'/usr/bin'}")])
def test_a_command_that_starts_processes_refuses_a_relative_entry_first(monkeypatch, capsys,
                                                                        tmp_path, key, value):
    monkeypatch.setenv(key, value)
    rc = main(["run", "--set", "nproc=1", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"{key} entry" in err and "refused" in err
    assert not (tmp_path / "r").exists()
