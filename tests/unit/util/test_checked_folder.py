"""Issue 52: a trial's folder reached once and used through its descriptor
(autotune/util/checked_folder.py), and the launch's channel in it (autotune/util/channel.py).
Real folders, FIFOs, links and sparse files; another owner is set with chown (root)."""
from __future__ import annotations

import json
import os
import stat
import time

import pytest

from autotune.run.trials_dir import check_results
from autotune.util.channel import MAX_MESSAGE_BYTES, Channel
from autotune.util.checked_file import renamable
from autotune.util.checked_folder import CheckedFolder, FolderRefused, NotOurs, open_private

NOBODY = 65534


def _root_only():
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")


@pytest.fixture
def trial(tmp_path):
    folder = open_private(str(tmp_path / "results" / "trials" / "t1"), create=True)
    yield folder
    folder.close()


def test_a_trial_folder_is_made_0700_all_the_way_down(tmp_path, trial):
    for p in (tmp_path / "results", tmp_path / "results" / "trials", tmp_path / "results" /
              "trials" / "t1"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    assert trial.path == str(tmp_path / "results" / "trials" / "t1")


def test_a_folder_above_others_can_write_is_refused_and_nothing_is_made(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(FolderRefused, match=f"the folder {tmp_path / 'open'} above it can be "
                                            r"written by other users \(mode 777\)"):
        open_private(str(tmp_path / "open" / "results" / "trials" / "t1"), create=True)
    assert list((tmp_path / "open").iterdir()) == []
    assert "can be written by other users (mode 777)" in renamable(
        str(tmp_path / "open" / "results" / "trials"))
    assert renamable(str(tmp_path / "results" / "trials")) is None   # not there yet: its parents


def test_a_trial_folder_that_is_a_link_or_open_to_others_or_not_mine_is_refused(tmp_path):
    (tmp_path / "trials").mkdir(mode=0o700)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "trials" / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FolderRefused, match="not a folder"):
        open_private(str(tmp_path / "trials" / "link"))
    (tmp_path / "trials" / "open").mkdir(mode=0o755)
    (tmp_path / "trials" / "open").chmod(0o755)
    with pytest.raises(FolderRefused, match=r"others have access to it \(mode 755\)"):
        open_private(str(tmp_path / "trials" / "open"))
    _root_only()
    (tmp_path / "trials" / "theirs").mkdir(mode=0o700)
    os.chown(tmp_path / "trials" / "theirs", NOBODY, NOBODY)
    with pytest.raises(FolderRefused, match=f"belongs to uid {NOBODY}"):
        open_private(str(tmp_path / "trials" / "theirs"))


def test_the_folder_found_must_be_the_one_the_runner_checked(tmp_path, trial):
    assert open_private(trial.path, identity=trial.identity).identity == trial.identity
    os.rename(trial.path, trial.path + ".moved")        # the runner's folder, moved aside
    os.mkdir(trial.path, 0o700)                        # and another in its place
    with pytest.raises(FolderRefused, match="not the folder the runner checked"):
        open_private(trial.path, identity=trial.identity)


def test_the_descriptor_keeps_the_folder_its_name_no_longer_names(tmp_path, trial):
    os.rename(trial.path, trial.path + ".moved")
    os.mkdir(trial.path, 0o700)
    trial.replace("request.json", b"{}")
    assert os.listdir(trial.path + ".moved") == ["request.json"]
    assert os.listdir(trial.path) == []


def test_create_never_follows_or_reuses_what_is_at_the_name(tmp_path, trial):
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    os.symlink(victim, os.path.join(trial.path, "rank0.log"))
    with open(os.path.join(trial.path, "rank1.log"), "w") as f:
        f.write("planted")
    for name in ("rank0.log", "rank1.log"):
        with pytest.raises(FileExistsError):
            trial.create(name)
    assert victim.read_text() == "mine\n"


def test_replace_puts_a_new_file_in_place_of_a_planted_link(tmp_path, trial):
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    os.symlink(victim, os.path.join(trial.path, "rank0.json"))
    trial.replace("rank0.json", b'{"status": "ok"}')
    st = os.lstat(os.path.join(trial.path, "rank0.json"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert victim.read_text() == "mine\n" and os.listdir(trial.path) == ["rank0.json"]


def test_a_fifo_a_device_link_and_a_huge_file_are_not_read(tmp_path, trial):
    os.mkfifo(os.path.join(trial.path, "fifo.json"))
    os.symlink("/dev/zero", os.path.join(trial.path, "zero.json"))
    with open(os.path.join(trial.path, "huge.json"), "wb") as f:
        f.truncate(MAX_MESSAGE_BYTES + 1)              # sparse: nothing on disk, all to read
    started = time.monotonic()
    for name, why in (("fifo.json", "not a plain file"), ("zero.json", "a symbolic link"),
                      ("huge.json", f"larger than {MAX_MESSAGE_BYTES} bytes")):
        with pytest.raises(NotOurs, match=why):
            trial.read(name, MAX_MESSAGE_BYTES)
    assert time.monotonic() - started < 5             # was: open() of the FIFO never returned
    assert trial.read("missing.json", 10) is None


def test_another_users_file_in_the_folder_is_not_read(tmp_path, trial):
    _root_only()
    path = os.path.join(trial.path, "rank0.json")
    with open(path, "w") as f:
        f.write('{"status": "ok"}')
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(NotOurs, match=f"belongs to uid {NOBODY}"):
        trial.read("rank0.json", 100)


def _written(trial: CheckedFolder, name: str, data: dict | str) -> None:
    with open(os.path.join(trial.path, name), "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def test_the_channel_takes_only_this_launchs_messages_and_counts_the_others_once(trial):
    ours, theirs = Channel(trial, "s3cret"), Channel(trial, "guess")
    ours.send("request.window1.json", {"seed": 1})
    assert theirs.receive("request.window1.json") is None and theirs.ignored == 1
    assert theirs.receive("request.window1.json") is None and theirs.ignored == 1  # once a file
    assert ours.receive("request.window1.json") == {"seed": 1} and ours.ignored == 0
    _written(trial, "rank0.window1.json", {"status": "ok", "throughput": 1e9})   # no token
    _written(trial, "rank1.window1.json", '{"status": ')                          # torn
    _written(trial, "rank2.window1.json", '[1, 2]')
    os.mkfifo(os.path.join(trial.path, "rank3.window1.json"))
    for r in range(4):
        assert ours.receive(f"rank{r}.window1.json") is None
    assert ours.ignored == 4 and ours.take_ignored() == 4 and ours.ignored == 0
    assert "not written by this launch" in ours.why["rank0.window1.json"]
    assert "not JSON" in ours.why["rank1.window1.json"]


def test_a_results_folder_others_can_rename_is_refused_in_one_line_with_the_fix(tmp_path):
    (tmp_path / "group").mkdir()
    (tmp_path / "group").chmod(0o775)
    with pytest.raises(FolderRefused) as caught:
        check_results(str(tmp_path / "group" / "results"))
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"--results {tmp_path / 'group' / 'results'}: ")
    assert f"chmod go-w {tmp_path / 'group'}" in line and "~/autotune-results" in line
    assert not (tmp_path / "group" / "results").exists()
    check_results(str(tmp_path / "mine" / "results"))   # only the user's: no refusal
