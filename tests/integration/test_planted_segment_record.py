"""Issue 46, item 2: a oneCCL segment record (`trials/<id>/ccl-segments.json`) planted by a real
second uid in a results folder it made in a world-writable scratch folder names a file of the
user's (its inode, this host, pid namespace and uid, all data the planter writes). The user's
`autotune search` there (a replayed landscape: the whole start-up, no trials) warns first that
the folder is another user's, and deletes nothing."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from autotune.comm.ccl.shm import RECORD, _namespace
from autotune.progress import Silent
from autotune.tune import SearchRequest, search
from benchmarks.landscapes.synthetic import synthetic
from benchmarks.landscapes.table import SimClock
from other_user import other_user  # noqa: F401  (the fixture)

GONE = 4194305          # above any pid_max: a "rank" that no longer exists


class _Said(Silent):
    def __init__(self) -> None:
        self.said: list[str] = []

    def warn(self, text: str) -> None:
        self.said.append(f"warn: {text}")

    def start(self, **_kw) -> None:
        self.said.append("start")


def test_a_record_planted_by_another_user_deletes_none_of_the_users_files(tmp_path, other_user,
                                                                          monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the machine lock, kept here
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's")
    segment = Path("/dev/shm") / f"{GONE}:0:7"   # a segment-like file of the user's
    segment.write_bytes(b"\0" * 64)
    scratch = Path(tempfile.mkdtemp(prefix="autotune-46-", dir="/tmp"))
    try:
        scratch.chmod(0o777)
        results = scratch / "autotune-results"
        _plant(other_user, results / "trials" / "x" / RECORD, [
            (str(victim), victim.stat().st_ino), (f"../..{victim}", victim.stat().st_ino),
            (segment.name, segment.stat().st_ino)])
        land, clock, progress = synthetic("formula", seed=0), SimClock(), _Said()
        search(SearchRequest(budget_s=300.0, results=str(results), seed=0, max_trials=2),
               label="cnn", topology=land.topology(), evaluate=land.evaluator(clock),
               clock=clock, progress=progress)
        assert victim.read_text() == "the user's" and segment.exists()
        assert progress.said[0].startswith(f"warn: --results {results} belongs to uid "
                                           f"{other_user.uid}"), progress.said
    finally:
        segment.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _plant(user, record: Path, named: list[tuple[str, int]]) -> None:
    """The planter, as itself: its results folder (open to all) and a record naming `named`."""
    data = {**_namespace(), "uid": os.getuid(), "segments": [
        {"name": name, "ino": ino, "pid": GONE, "started": 1.0} for name, ino in named]}
    user.run("/usr/bin/python3", "-c", (
        "import json, os, sys\n"
        "os.umask(0)\n"
        "os.makedirs(os.path.dirname(sys.argv[1]), mode=0o777)\n"
        "open(sys.argv[1], 'w').write(sys.argv[2])\n"), str(record), json.dumps(data))
