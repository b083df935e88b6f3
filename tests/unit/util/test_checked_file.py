"""Issue 46, item 3: whether only this user can change a file is judged on the file actually
opened and on every folder above it, and what is read afterwards comes from that same walk, not
from the name looked up again. Real folders and files; another owner is set with chown (root)."""
from __future__ import annotations

import os
import sqlite3

import pytest

from autotune.util.checked_file import open_checked
from autotune.study.trust import storage_provenance

NOBODY = 65534


def _file(path, text="mine"):
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_a_private_file_in_private_folders_is_only_mine(tmp_path):
    with open_checked(str(_file(tmp_path / "a" / "b" / "f"))) as checked:
        assert checked.why is None and checked.read(100) == b"mine"
        assert checked.path == str(tmp_path / "a" / "b" / "f")


def test_a_world_writable_folder_anywhere_above_is_refused(tmp_path):
    f = _file(tmp_path / "open" / "mine" / "f")
    (tmp_path / "open").chmod(0o777)          # not the file's own folder: two levels up
    with open_checked(str(f)) as checked:
        assert checked.why == (f"the folder {tmp_path / 'open'} above it can be written by other "
                               "users (mode 777), who may put another in its place")


def test_a_sticky_folder_is_fine_but_not_an_entry_someone_else_put_there(tmp_path):
    f = _file(tmp_path / "sticky" / "mine" / "f")
    (tmp_path / "sticky").chmod(0o1777)
    with open_checked(str(f)) as checked:
        assert checked.why is None            # as /tmp/you/...: nobody else can rename "mine"
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    os.chown(tmp_path / "sticky" / "mine", NOBODY, NOBODY)
    with open_checked(str(f)) as checked:
        assert f"{tmp_path / 'sticky' / 'mine'} in the shared folder {tmp_path / 'sticky'} " \
               f"belongs to uid {NOBODY}" in checked.why


def test_a_link_is_followed_by_the_walk_and_its_target_judged(tmp_path):
    target = _file(tmp_path / "theirs" / "f")
    link = tmp_path / "mine" / "link"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(target)
    with open_checked(str(link)) as checked:
        assert checked.why is None and checked.path == str(target)
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    os.chown(target.parent, NOBODY, NOBODY)   # the link leads into another user's folder
    with open_checked(str(link)) as checked:
        assert f"the folder {target.parent} above it belongs to uid {NOBODY}" in checked.why


def test_what_is_read_is_the_file_checked_even_when_the_path_is_swapped(tmp_path):
    """A folder on the way renamed and replaced between the check and the read: the read goes
    through the fds of the walk, so it sees the file that was judged, never the one planted."""
    f = _file(tmp_path / "proj" / "f", "checked")
    checked = open_checked(str(f))
    os.rename(tmp_path / "proj", tmp_path / "moved")
    _file(tmp_path / "proj" / "f", "planted")
    try:
        assert checked.read(100) == b"checked"
        with open(checked.in_folder()) as through_folder:
            assert through_folder.read() == "checked"
    finally:
        checked.close()


def test_the_study_is_opened_through_the_folder_that_was_checked(tmp_path):
    """The storage URL a command opens after the check leads to the checked folder: SQLite reads
    the checked database (and writes its -wal there), not one planted under the old name."""
    def db(folder, value):
        folder.mkdir(mode=0o700)
        con = sqlite3.connect(folder / "autotune.db")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE t (v)")
        con.execute("INSERT INTO t VALUES (?)", (value,))
        con.commit()
        con.close()
    db(tmp_path / "proj", "checked")
    provenance = storage_provenance(f"sqlite:///{tmp_path}/proj/autotune.db", "shown")
    assert provenance.why is None and provenance.url.startswith("sqlite:////proc/self/fd/")
    os.rename(tmp_path / "proj", tmp_path / "moved")
    db(tmp_path / "proj", "planted")
    con = sqlite3.connect(provenance.url[len("sqlite:///"):])
    try:
        assert con.execute("SELECT v FROM t").fetchall() == [("checked",)]
    finally:
        con.close()
        provenance.held.close()


def test_a_side_file_someone_else_made_is_named(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    f = _file(tmp_path / "p" / "autotune.db")
    _file(tmp_path / "p" / "autotune.db-journal")
    os.chown(tmp_path / "p" / "autotune.db-journal", NOBODY, NOBODY)
    with open_checked(str(f), side_suffixes=("-wal", "-journal")) as checked:
        assert f"autotune.db-journal belongs to uid {NOBODY}" in checked.why
