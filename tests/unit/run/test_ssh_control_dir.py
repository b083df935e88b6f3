"""Issue 61, hole 4: the ssh shared-connection folder was judged by its last component only;
under a temp folder others can write without the sticky bit, a co-user could swap it and answer
ssh's mux socket. Now it is judged from the root, once, and used through its descriptor."""
from __future__ import annotations

import os
import tempfile

from autotune.run import remote


def _control(monkeypatch, tmp: str):
    monkeypatch.setattr(remote, "_CONTROL", [])
    monkeypatch.setattr(tempfile, "tempdir", tmp)
    said: list[str] = []
    return remote.ssh_control_dir(said.append), said


def test_under_a_temp_folder_others_can_rename_in_sharing_is_skipped_in_one_line(monkeypatch,
                                                                                 tmp_path):
    shared = tmp_path / "open-tmp"
    shared.mkdir()
    shared.chmod(0o777)            # anyone may rename what is in it: no sticky bit
    got, said = _control(monkeypatch, str(shared))
    assert got is None and len(said) == 1 and "not shared" in said[0], said
    assert not (shared / f"autotune-ssh-{os.getuid()}").exists()


def test_the_folder_is_reached_through_its_descriptor_whatever_is_renamed_later(monkeypatch,
                                                                                tmp_path):
    got, said = _control(monkeypatch, str(tmp_path))
    assert got is not None and said == [] and got.startswith(f"/proc/{os.getpid()}/fd/")
    real = tmp_path / f"autotune-ssh-{os.getuid()}"
    assert os.path.samefile(got, real) and (real.stat().st_mode & 0o777) == 0o700
    real.rename(tmp_path / "moved")
    (tmp_path / real.name).mkdir(mode=0o700)          # a stand-in at the old name
    assert os.path.samefile(got, tmp_path / "moved")
    assert remote.ssh_control_dir() == got            # judged once
