"""Issue 34: a study is data, never code, until a person says so. Each test writes a study the way
another user of a shared storage could, then runs the real command on it: the exported scripts
through bash, `verify` and `launch` as this user on another account's storage (a real second uid)
and on a real PostgreSQL study. Nothing stored may run unless the person passed --trust-study,
and a refusal is one line, exit 2, with the study unchanged."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.cli import main
from hostile_study import give_to, hostile_copy, inject, open_only, other_user, shown_hash
from results_study import sha256, study_copy

FORMATS = ("shell", "torchrun", "mpirun", "slurm")


def _launchers(folder: Path) -> dict[str, str]:
    """PATH with srun, scontrol and mpirun that do nothing: the exported scripts run through
    bash for what their comment lines do, not to start a cluster job."""
    folder.mkdir()
    for name in ("srun", "scontrol", "mpirun", "sbatch"):
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_scripts_keep_stored_strings_inside_their_comments(tmp_path, capsys, fmt):
    marker = tmp_path / "ran"
    db = hostile_copy(tmp_path / "results", marker, command=["true"], backend="gloo")
    assert main(["export", "--storage", f"sqlite:///{db}", "--format", fmt]) == 0
    out = capsys.readouterr().out
    script = tmp_path / f"job.{fmt}.sh"
    script.write_text(out)
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=_launchers(tmp_path / "bin"),
                          capture_output=True, text=True, timeout=300)
    ran = sorted(p.name for p in tmp_path.glob("ran.*"))
    assert ran == [], (ran, out, done.stderr[-2000:])
    assert "\x1b" not in out
    if fmt == "slurm":   # sbatch reads #SBATCH lines only above the first command
        lines = out.splitlines()
        last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
        assert all(line.startswith("#") for line in lines[:last_directive]), out


def _foreign_storage(tmp_path: Path, marker: Path) -> tuple[Path, str]:
    """A study in another account's folder whose stored script command touches `marker`."""
    shared = tmp_path / "shared"
    db = study_copy(shared)
    inject(db, marker, command=["sh", "-c", f"touch {marker}"], backend="gloo", machine=False)
    give_to(shared, other_user())
    return db, f"sqlite:///{db}"


def _refused(capsys, argv: list[str], db: Path, marker: Path) -> str:
    before = sha256(db)
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("autotune: error:")]
    assert rc == 2 and len(lines) == 1 and err.count("\n") == 1, err
    assert f"touch {marker}" in lines[0] and "--trust-study" in lines[0]
    assert "belongs to uid" in lines[0] or "database server" in lines[0]
    assert not marker.exists() and sha256(db) == before
    return lines[0]


def test_verify_does_not_run_another_users_stored_command(tmp_path, capsys):
    marker = tmp_path / "verify-ran"
    db, url = _foreign_storage(tmp_path, marker)
    _refused(capsys, ["verify", "--storage", url, "--budget", "2m", "--rounds", "1"], db, marker)


def test_launch_does_not_run_another_users_stored_command(tmp_path, capsys):
    marker = tmp_path / "launch-ran"
    db, url = _foreign_storage(tmp_path, marker)
    refusal = _refused(capsys, ["launch", "--storage", url, "--check-seconds", "0"], db, marker)
    # the person has read it: --trust-study with the hash it showed runs it
    assert main(["launch", "--storage", url, "--check-seconds", "0", "--trust-study",
                 shown_hash(refusal), "--log-dir", str(tmp_path / "logs")]) == 0
    assert marker.exists()


def _own_study_running(tmp_path, marker):
    """A study of this user's own whose stored command touches `marker`."""
    db = study_copy(tmp_path / "mine")
    inject(db, marker, command=["sh", "-c", f"touch {marker}"], backend="gloo", machine=False)
    return db


def test_launch_runs_the_command_of_a_study_this_user_created(tmp_path, capsys):
    marker = tmp_path / "mine-ran"
    db = _own_study_running(tmp_path, marker)
    assert not os.stat(db).st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert main(["launch", "--storage", f"sqlite:///{db}", "--check-seconds", "0",
                 "--log-dir", str(tmp_path / "logs")]) == 0
    assert marker.exists()


def test_a_group_writable_study_is_not_only_mine(tmp_path, capsys):
    marker = tmp_path / "group-ran"
    db = _own_study_running(tmp_path, marker)
    db.chmod(0o664)
    _refused_own = main(["launch", "--storage", f"sqlite:///{db}", "--check-seconds", "0"])
    err = capsys.readouterr().err
    assert _refused_own == 2 and "can be written by other users" in err and not marker.exists()


def test_a_postgresql_study_command_needs_trust(tmp_path, capsys):
    from pg_server import postgres_server
    import optuna
    marker = tmp_path / "pg-ran"
    with postgres_server() as url:
        local = study_copy(tmp_path / "local")
        inject(local, marker, command=["sh", "-c", f"touch {marker}"], backend="gloo",
               machine=False)
        optuna.copy_study(from_study_name=open_only(local).study_name,
                          from_storage=f"sqlite:///{local}", to_storage=url)
        rc = main(["launch", "--storage", url, "--check-seconds", "0"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and "database server" in err, err
        assert f"touch {marker}" in err and not marker.exists()


def test_report_prints_no_terminal_escape_from_a_real_process(tmp_path):
    marker = tmp_path / "ran"
    db = hostile_copy(tmp_path / "results", marker, command=["true"])
    for argv in (["report"], ["export"], ["launch", "--dry-run", "--force"]):
        done = subprocess.run([sys.executable, "-m", "autotune", *argv, "--storage",
                               f"sqlite:///{db}"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout + done.stderr, argv
        assert "\\x1b" in done.stdout + done.stderr, argv   # shown, escaped
        assert "\ntouch " not in done.stdout + done.stderr, argv


def test_the_dashboard_says_every_local_user_can_edit_the_study(tmp_path):
    """Another account on this machine reaches the dashboard on 127.0.0.1 and reads the study
    through its API (the same API edits and deletes it): the start-up says so."""
    from test_dashboard_browser import Dashboard
    db = study_copy(tmp_path / "r")
    server = Dashboard(f"sqlite:///{db}")
    try:
        user = other_user()
        got = subprocess.run(["runuser", "-u", user.pw_name, "--", "/usr/bin/python3", "-c",
                              "import sys, urllib.request; sys.stdout.write(urllib.request."
                              f"urlopen('http://127.0.0.1:{server.port}/api/studies').read()"
                              ".decode())"], capture_output=True, text=True, timeout=60)
    finally:
        rc, err = server.stop()
    assert got.returncode == 0 and open_only(db).study_name in got.stdout, got.stderr
    assert rc == 0 and "is reachable by every user of this machine: it has no login, and " \
        "anyone who connects can read the study (its edits are refused)" in err
