"""Issue 46: what a co-user could still plant, each reproduced for real and now refused or inert.

- item 4: modules planted in the current folder (`torch.py`...) ran as the user in the probe's
  and the trials' Pythons; the real `autotune` command in a shared folder planted by a real
  second uid, `probe` and a real trial;
- a link planted at a launch's `rank0.log` was a traceback, now one line;
- item 7: a study name with a newline broke the dashboard's start line (a real server);
- item 8: a stored kmp_affinity with shell syntax ran in `launch -- sh -c '... {kmp_affinity}'`;
- item 9: `launch --dry-run` planned dataloader_workers=100000 and global_batch=10**9, and read a
  stored script whole (memory measured on the real process).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from hostile_study import open_only
from other_user import other_user  # noqa: F401  (the fixture)
from results_study import sha256, study_copy

AUTOTUNE = str(Path(sys.executable).with_name("autotune"))   # the installed command
PLANTED = ("torch", "psutil", "numpy", "optuna", "yaml", "autotune", "runpy", "json", "pip")


@pytest.fixture
def scratch():
    """A folder every user may write to, like /tmp (sticky, 1777): pytest's tmp_path is root's
    alone, so it is made in the temporary folder itself."""
    folder = Path(tempfile.mkdtemp(prefix="autotune-test-scratch-"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _ran(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ran-*"))


def test_modules_a_co_user_planted_in_the_current_folder_never_run(tmp_path, scratch,
                                                                  other_user):
    for name in PLANTED:   # each leaves ran-NAME behind when imported, as the user
        other_user.run("tee", str(scratch / f"{name}.py"),
                       input=f"open({str(scratch / ('ran-' + name))!r}, 'w').close()\n")
    probe = subprocess.run([AUTOTUNE, "probe"], cwd=scratch, capture_output=True, text=True,
                           timeout=300)
    assert probe.returncode == 0 and "does not import" not in probe.stdout, probe.stdout
    trial = subprocess.run([AUTOTUNE, "run", "--seconds", "1", "--set", "nproc=2",
                            "--results", str(tmp_path / "results")],
                           cwd=scratch, capture_output=True, text=True, timeout=300)
    assert trial.returncode == 0, trial.stderr[-2000:]
    assert "samples/s" in trial.stdout
    assert _ran(scratch) == []   # was: ran-torch and ran-autotune, from `probe` alone


def _own_study(tmp_path: Path, **config) -> tuple[Path, str]:
    """A study of this user's own (so launch trusts it) whose stored recommendation holds
    `config`, as anyone with write access could have stored it."""
    db = study_copy(tmp_path / "r")
    study = open_only(db)
    rec = dict(study.user_attrs["recommendation"])
    rec["config"] = {**rec["config"], **config}
    study.set_user_attr("recommendation", rec)
    return db, f"sqlite:///{db}"


def _one_line(capsys, argv: list[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("autotune: error:")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_link_a_co_user_planted_at_rank0_log_is_one_line(tmp_path, scratch, other_user,
                                                         capsys):
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    other_user.run("ln", "-s", str(victim), str(scratch / "rank0.log"))
    _db, url = _own_study(tmp_path)
    line = _one_line(capsys, ["launch", "--storage", url, "--check-seconds", "0",
                              "--log-dir", str(scratch), "--", "true"])
    assert f"refusing to write {scratch}/rank0.log: it is a symbolic link to {victim} " \
           f"(made by uid {other_user.uid})" in line and "--log-dir" in line
    assert victim.read_text() == "mine\n"


def test_a_stored_kmp_affinity_with_shell_syntax_never_reaches_a_shell(tmp_path, capsys):
    marker = tmp_path / "owned"
    payload = f"x;touch${{IFS}}{marker}"
    db, url = _own_study(tmp_path, kmp_affinity=payload)
    before = sha256(db)
    line = _one_line(capsys, ["launch", "--storage", url, "--check-seconds", "0",
                              "--log-dir", str(tmp_path / "logs"), "--",
                              "sh", "-c", "echo kmp={kmp_affinity}"])
    assert f"kmp_affinity={payload!r}: not Intel OpenMP's KMP_AFFINITY syntax" in line
    assert not marker.exists() and sha256(db) == before


@pytest.mark.parametrize("knob, value, words", [
    ("dataloader_workers", 100_000, "dataloader_workers=100000: more than 8,192"),
    ("global_batch", 10**9, "global_batch=1000000000: more than 1,048,576"),
    # within what a machine may hold, beyond what this one gives a rank (plan/feasible.py)
    ("dataloader_workers", 64, "dataloader_workers=64: more than the ")])
def test_launch_dry_run_refuses_numbers_the_machine_cannot_hold(tmp_path, capsys, knob, value,
                                                                words):
    db, url = _own_study(tmp_path, **{knob: value})
    before = sha256(db)
    line = _one_line(capsys, ["launch", "--storage", url, "--dry-run"])
    assert words in line and sha256(db) == before


def _dry_run_peak_kib(url: str) -> tuple[int, str]:
    """`autotune launch --dry-run` in a process of its own: (its peak RSS in KiB, stderr)."""
    wrapper = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], "
               "capture_output=True, text=True); sys.stderr.write(done.stderr); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", wrapper, AUTOTUNE, "launch", "--storage", url,
                           "--dry-run", "--force"], capture_output=True, text=True, timeout=300)
    return int(done.stdout.split()[-1]), done.stderr


def test_launch_dry_run_reads_a_bounded_part_of_a_huge_stored_script(tmp_path):
    small, huge = tmp_path / "small.py", tmp_path / "huge.py"
    small.write_text("print('train')\n")
    with open(huge, "wb") as f:       # 128 MiB, sparse: no disk, all of it to read
        f.truncate(128 << 20)
    peaks = {}
    for script in (small, huge):
        db = study_copy(tmp_path / script.stem)
        open_only(db).set_user_attr("script_command", ["python", str(script)])
        peaks[script.stem], err = _dry_run_peak_kib(f"sqlite:///{db}")
        assert "Traceback" not in err, err
    # was: the whole file read and decoded (+256 MiB here; 905 MB for a 400 MB one)
    assert peaks["huge"] - peaks["small"] < 32 << 10, peaks
    assert f"{huge}: only its first 1 MiB were read" in err


def test_a_study_name_with_a_newline_stays_on_the_dashboards_start_line(tmp_path):
    from test_dashboard_browser import Dashboard
    db = study_copy(tmp_path / "r")
    url = f"sqlite:///{db}"
    evil = "forged\n\x1b[2Jautotune: note: all clear"
    optuna.copy_study(from_study_name=open_only(db).study_name, from_storage=url,
                      to_storage=url, to_study_name=evil)
    server = Dashboard(url, "--study", evil)   # reads the URL from the first line it prints
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/studies") as answer:
            assert answer.status == 200   # serving: then Ctrl-C stops it cleanly
    finally:
        rc, _err = server.stop()
    assert "optuna-dashboard for forged\\n\\x1b[2Jautotune: note: all clear (" in \
        server.first_line and "\x1b" not in server.first_line
    assert rc == 0, _err
