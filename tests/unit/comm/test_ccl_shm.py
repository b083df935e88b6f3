"""oneCCL segments are removed only by a record of a process of ours that mapped them (a stale one
under a reused pid fails the next rank's init with "failed to initialize ATL"; a segment judged
dead by its name deleted a container's live ranks' memory). Real files, no processes here; the
runner and `remote kill --ccl` are exercised in tests/integration/test_shared_machine.py."""
from __future__ import annotations

import json
import os

import psutil

from autotune.comm.ccl.shm import RECORD, _namespace, clean_record, clean_recorded

GONE = 4194305          # above any pid_max: a process that no longer exists


def _segment(root, name):
    (root / name).write_bytes(b"\0" * 64)
    return os.stat(root / name).st_ino


def _record(path, segments, **where):
    path.write_text(json.dumps({**_namespace(), **where, "segments": segments}))


def test_a_recorded_segment_of_a_dead_process_is_removed_and_nothing_else(tmp_path):
    shm, trial = tmp_path / "shm", tmp_path / "trials" / "t1"
    shm.mkdir()
    trial.mkdir(parents=True)
    ino = _segment(shm, f"{GONE}:0:0")
    _segment(shm, f"{GONE}:0:1")           # same dead pid, never recorded: someone else's
    _segment(shm, "12:0:0")                # another container's, "dead" by this namespace
    _record(trial / RECORD, [{"name": f"{GONE}:0:0", "ino": ino, "pid": GONE, "started": 1.0}])
    assert clean_recorded(tmp_path / "trials", shm) == [f"{GONE}:0:0"]
    assert sorted(os.listdir(shm)) == sorted([f"{GONE}:0:1", "12:0:0"])
    assert not (trial / RECORD).exists()


def test_a_name_reused_by_another_file_is_kept(tmp_path):
    ino = _segment(tmp_path, f"{GONE}:0:0")
    (tmp_path / f"{GONE}:0:0").unlink()
    _segment(tmp_path, "spacer")           # the new file gets another inode
    _segment(tmp_path, f"{GONE}:0:0")
    _record(tmp_path / RECORD, [{"name": f"{GONE}:0:0", "ino": ino, "pid": GONE, "started": 1}])
    assert os.stat(tmp_path / f"{GONE}:0:0").st_ino != ino
    assert clean_record(tmp_path / RECORD, tmp_path) == []
    assert (tmp_path / f"{GONE}:0:0").exists()


def test_a_live_owner_keeps_its_segment_and_the_record(tmp_path):
    me = os.getpid()
    ino = _segment(tmp_path, f"{me}:0:0")
    _record(tmp_path / RECORD, [{"name": f"{me}:0:0", "ino": ino, "pid": me,
                                 "started": psutil.Process(me).create_time()}])
    assert clean_record(tmp_path / RECORD, tmp_path) == []
    assert (tmp_path / f"{me}:0:0").exists() and (tmp_path / RECORD).exists()


def test_a_record_from_another_pid_namespace_or_host_is_left_alone(tmp_path):
    ino = _segment(tmp_path, f"{GONE}:0:0")
    seg = [{"name": f"{GONE}:0:0", "ino": ino, "pid": GONE, "started": 1}]
    for where in ({"pid_ns": 1}, {"host": "elsewhere"}):
        _record(tmp_path / RECORD, seg, **where)
        assert clean_record(tmp_path / RECORD, tmp_path) == []
        assert (tmp_path / f"{GONE}:0:0").exists()


def test_a_broken_record_removes_nothing(tmp_path):
    _segment(tmp_path, f"{GONE}:0:0")
    for text in ("", "[]", '{"segments": 3}', "{"):
        (tmp_path / RECORD).write_text(text)
        assert clean_record(tmp_path / RECORD, tmp_path) == []
    assert (tmp_path / f"{GONE}:0:0").exists()


def test_a_recorded_name_that_leaves_the_shm_folder_removes_nothing(tmp_path):
    """Issue 46: `root / name` with an absolute name or '..' left /dev/shm; a record is data,
    and only a oneCCL segment's own name, looked up in the shm folder, is ever removed."""
    shm, trial = tmp_path / "shm", tmp_path / "trials" / "t1"
    shm.mkdir()
    trial.mkdir(parents=True)
    victim = tmp_path / f"{GONE}:0:0"     # a file of the user's, beside /dev/shm, named alike
    ino = _segment(tmp_path, victim.name)
    (shm / "sub").mkdir()
    _segment(shm / "sub", f"{GONE}:0:1")
    names = [str(victim), f"../{victim.name}", f"sub/{GONE}:0:1", f"sub/../../{victim.name}"]
    _record(trial / RECORD, [{"name": n, "ino": ino, "pid": GONE, "started": 1.0}
                             for n in names])
    assert clean_recorded(tmp_path / "trials", shm) == []
    assert victim.exists() and (shm / "sub" / f"{GONE}:0:1").exists()


def test_a_record_others_can_write_is_not_read(tmp_path):
    shm, trial = tmp_path / "shm", tmp_path / "open" / "t1"
    shm.mkdir()
    trial.mkdir(parents=True)
    ino = _segment(shm, f"{GONE}:0:0")
    _record(trial / RECORD, [{"name": f"{GONE}:0:0", "ino": ino, "pid": GONE, "started": 1.0}])
    (tmp_path / "open").chmod(0o777)      # anyone could have put this record here
    assert clean_record(trial / RECORD, shm) == []
    assert (shm / f"{GONE}:0:0").exists() and (trial / RECORD).exists()
    (tmp_path / "open").chmod(0o700)      # the same record where only its owner writes
    assert clean_record(trial / RECORD, shm) == [f"{GONE}:0:0"]
