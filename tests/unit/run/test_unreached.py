"""Kills by marker that did not reach their host are owed until one does (run/unreached.py):
real short commands stand for the kill over ssh, one failing while its "host" is cut off (a
file absent) and succeeding once it is back."""
from __future__ import annotations

from autotune.run.unreached import OwedKills, unreached_line


def kill_while(cut_off, marker: str = "t1") -> tuple[str, ...]:
    """A kill that fails (exit 255, as ssh's) while the file `cut_off` exists."""
    return ("sh", "-c", f'test ! -e "$0" || exit 255  # kill {marker}', str(cut_off))


def test_a_kill_is_owed_while_its_host_is_cut_off_and_settled_once_it_is_back(tmp_path):
    cut = tmp_path / "cut"
    cut.touch()
    owed = OwedKills()
    owed.owe("th2", "t1", kill_while(cut))
    owed.owe("th2", "t1", kill_while(cut))   # the same kill twice is owed once
    assert owed.settle(wait_s=1.0) == [("th2", "t1")]   # still cut off: said, not hidden
    assert owed.owed() == []                            # and no retry left running
    owed.owe("th2", "t1", kill_while(cut))
    owed.owe("th3", "t2", kill_while(tmp_path / "never", "t2"))
    owed.retry()
    cut.unlink()                                        # the link is back
    assert owed.settle(wait_s=10.0) == []


def test_the_line_names_each_host_and_the_command_to_run_there():
    line = unreached_line([("th2", "t1"), ("th3", "t2")])
    assert "\n" not in line and "host th2" in line and "kill t1`" in line and "host th3" in line
