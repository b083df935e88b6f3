"""Issue 54: across hosts the launch's token reaches the ranks through a 0600 file of the trial
folder (util/channel.py), never a command line. Real folders, links and modes."""
from __future__ import annotations

import os
import stat

import pytest

from autotune.util.channel import (TOKEN_FILE, Channel, new_token, read_token_file,
                                   write_token_file)
from autotune.util.checked_folder import NotOurs, open_private


@pytest.fixture
def folder(tmp_path):
    opened = open_private(str(tmp_path / "res" / "trials" / "t1"), create=True)
    yield opened
    opened.close()


def test_the_token_file_is_made_0600_and_read_back(folder):
    token = new_token()
    write_token_file(folder, token)
    path = os.path.join(folder.path, TOKEN_FILE)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_token_file(folder, TOKEN_FILE) == token
    # what a rank sends with it, the runner takes; a file without it is ignored
    runner, rank = Channel(folder, token), Channel(folder, read_token_file(folder, TOKEN_FILE))
    rank.send("rank0.json", {"status": "ok"})
    assert runner.receive("rank0.json") == {"status": "ok"}


def test_a_file_planted_at_the_tokens_name_is_never_written_through(folder, tmp_path):
    target = tmp_path / "victim"
    target.write_text("mine")
    os.symlink(target, os.path.join(folder.path, TOKEN_FILE))
    with pytest.raises(FileExistsError):
        write_token_file(folder, new_token())
    assert target.read_text() == "mine"
    with pytest.raises(NotOurs, match="symbolic link"):
        read_token_file(folder, TOKEN_FILE)


@pytest.mark.parametrize("mode, content, needle", [
    (0o644, "a" * 32, "others have access"),
    (0o600, "not a token!", "not a launch token"),
    (0o600, "", "not a launch token"),
])
def test_a_token_file_others_may_read_or_that_holds_no_token_is_refused(folder, mode, content,
                                                                         needle):
    path = os.path.join(folder.path, TOKEN_FILE)
    with open(path, "w") as f:
        f.write(content)
    os.chmod(path, mode)
    with pytest.raises(NotOurs, match=needle):
        read_token_file(folder, TOKEN_FILE)


def test_no_token_file_is_refused(folder):
    with pytest.raises(NotOurs, match="no such file"):
        read_token_file(folder, TOKEN_FILE)


def test_a_scripts_report_across_hosts_carries_the_token_of_the_file(folder, monkeypatch):
    """Issue 61: across hosts a script's rank has no token in its environment, only the name of
    the token's file; autotune.report_metrics() reads it there, so the runner takes the report.
    Without the file (or where the folder is not the runner's), the report goes without a token
    and the runner ignores it, as it ignores anyone else's."""
    import autotune
    token = new_token()
    write_token_file(folder, token)
    report = os.path.join(folder.path, "rank0.report.json")
    monkeypatch.delenv("AUTOTUNE_LAUNCH_TOKEN", raising=False)
    monkeypatch.setenv("AUTOTUNE_LAUNCH_TOKEN_FILE", TOKEN_FILE)
    monkeypatch.setenv("AUTOTUNE_TRIAL_FOLDER", folder.identity)
    monkeypatch.setenv("AUTOTUNE_REPORT", report)
    assert autotune.report_metrics(samples_per_sec=12.5) is True
    runner = Channel(folder, token)
    assert runner.receive("rank0.report.json") == {"samples_per_sec": 12.5}
    monkeypatch.setenv("AUTOTUNE_TRIAL_FOLDER", "0:0")    # another folder than the runner's
    monkeypatch.setattr("autotune.client._TOKENS", {})
    assert autotune.report_metrics(accuracy=0.5) is True
    assert runner.receive("rank0.report.json") is None and runner.ignored == 1
