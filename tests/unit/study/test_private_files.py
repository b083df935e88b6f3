"""The results folder, the study database and the trial files are created for their owner only
(issue 34: they were 0755/0644 and hold script arguments and log tails), whatever the umask;
what exists already keeps its mode. Real files and a real SQLite study, no processes."""
from __future__ import annotations

import contextlib
import os
import stat

import optuna
import pytest

from autotune.errors import AutotuneError
from autotune.util.private_files import create_private, private_dir, private_file
from autotune.study.storage import open_storage


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277])
def test_folders_and_files_are_private_whatever_the_umask(tmp_path, mask):
    with _umask(mask):
        assert private_dir(tmp_path / "r" / "trials" / "t1") == [
            str(tmp_path / "r"), str(tmp_path / "r" / "trials"), str(tmp_path / "r" / "trials" / "t1")]
        os.close(private_file(tmp_path / "r" / "trials" / "t1" / "rank0.log"))
        assert create_private(tmp_path / "r" / "autotune.db")
    for p in ("r", "r/trials", "r/trials/t1"):
        assert _mode(tmp_path / p) == 0o700, p
    assert _mode(tmp_path / "r/autotune.db") == 0o600
    assert _mode(tmp_path / "r/trials/t1/rank0.log") & 0o077 == 0


def test_an_existing_folder_keeps_its_mode_and_a_symlink_is_not_followed(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    assert private_dir(shared / "trials") == [str(shared / "trials")]
    assert _mode(shared) == 0o755 and _mode(shared / "trials") == 0o700
    target = tmp_path / "victim"
    target.write_text("theirs")
    os.symlink(target, shared / "trials" / "rank0.log")
    with pytest.raises(AutotuneError) as refused:   # one line naming the link, not a traceback
        private_file(shared / "trials" / "rank0.log")
    assert str(refused.value).startswith(f"refusing to write {shared}/trials/rank0.log: it is a "
                                         f"symbolic link to {target} (made by uid {os.getuid()})")
    assert target.read_text() == "theirs"
    assert not create_private(shared / "trials" / "rank0.log")


def test_a_new_study_database_and_its_wal_are_0600_and_its_folder_0700(tmp_path):
    results = tmp_path / "results"
    with _umask(0o000):
        storage = open_storage(f"sqlite:///{results}/autotune.db", create_under=str(results))
        study = optuna.create_study(storage=storage, study_name="s")
        study.set_user_attr("script_command", ["python", "train.py", "--token", "x"])
    assert _mode(results) == 0o700
    files = [f for f in os.listdir(results) if f.startswith("autotune.db")]
    assert "autotune.db" in files
    assert {f: _mode(results / f) for f in files} == {f: 0o600 for f in files}
    storage.engine.dispose()
