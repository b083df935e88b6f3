"""Issue 46: what a study stores that runs code (a script's command, a module:function workload,
the ssh config, python, folder and environment of a search across hosts) is passed on by
`export`, `launch --config` and `launch` only from a storage that only this user can change,
judged on the file actually opened and every folder above it; from any other, only with
--trust-study and the hash of exactly what the refusal showed. Each test writes the study as a
co-user could (a real second uid owns it), then runs the real command; nothing planted may run,
and a refusal is one line, exit 2, naming the file, its owner and the value, the study unchanged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.study.attrs import write_cluster
from hostile_study import give_to, inject, open_only, other_user, shown_hash
from results_study import sha256, study_copy

FORMATS = ("shell", "torchrun", "mpirun", "slurm", "json")


def _refusal(capsys, argv: list[str], db: Path | None = None) -> str:
    """The one line of a refused command (exit 2, nothing on stdout, the study unchanged)."""
    before = sha256(db) if db else None
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("autotune: error:"), \
        (rc, out, err)
    assert db is None or sha256(db) == before
    return err


def _theirs(tmp_path: Path, marker: Path, **kw) -> tuple[Path, str]:
    """A study in a folder of another account whose stored script command touches `marker`."""
    shared = tmp_path / "shared"
    db = study_copy(shared)
    inject(db, marker, command=["sh", "-c", f"touch {marker}"], backend="gloo", machine=False,
           **kw)
    give_to(shared, other_user())
    return db, f"sqlite:///{db}"


def _mine(tmp_path: Path, marker: Path, name: str = "mine") -> tuple[Path, str]:
    db = study_copy(tmp_path / name)
    inject(db, marker, command=["sh", "-c", f"touch {marker}"], backend="gloo", machine=False)
    return db, f"sqlite:///{db}"


# ------------------------------------------------------------------------- item 1: export

@pytest.mark.parametrize("fmt", FORMATS)
def test_export_refuses_another_users_stored_command_in_every_format(tmp_path, capsys, fmt):
    marker = tmp_path / "ran"
    db, url = _theirs(tmp_path, marker)
    err = _refusal(capsys, ["export", "--storage", url, "--format", fmt], db)
    owner = f"uid {other_user().pw_uid} ({other_user().pw_name})"
    assert f"the storage {db} (owner {owner})" in err and f"touch {marker}" in err
    assert f"belongs to {owner}" in err and f"--trust-study {shown_hash(err)}" in err
    assert main(["export", "--storage", url, "--format", fmt,
                 "--trust-study", shown_hash(err)]) == 0   # read, then trusted: exported
    assert f"touch {marker}" in capsys.readouterr().out and not marker.exists()


def test_export_refuses_another_users_module_workload(tmp_path, capsys):
    db = study_copy(tmp_path / "shared")
    open_only(db).set_user_attr("workload", "planted_mod:run")
    give_to(tmp_path / "shared", other_user())
    err = _refusal(capsys, ["export", "--storage", f"sqlite:///{db}", "--format", "json"], db)
    assert "workload import of planted_mod:run" in err and "--trust-study" in err


def test_export_of_a_postgresql_study_command_needs_trust(tmp_path, capsys):
    import optuna
    from pg_server import postgres_server
    marker = tmp_path / "pg-ran"
    with postgres_server() as url:
        local, _ = _mine(tmp_path, marker, "local")
        optuna.copy_study(from_study_name=open_only(local).study_name,
                          from_storage=f"sqlite:///{local}", to_storage=url)
        err = _refusal(capsys, ["export", "--storage", url, "--format", "json"])
        assert "is a database server" in err and f"touch {marker}" in err


def test_a_manifest_does_not_launder_an_untrusted_study(tmp_path, capsys):
    """`export --format json > launch.json` of another user's study, trusted once it was read:
    the manifest is this user's own file, yet `launch --config` asks again, with its own hash,
    because the manifest records where its program came from."""
    marker = tmp_path / "ran"
    db, url = _theirs(tmp_path, marker)
    err = _refusal(capsys, ["export", "--storage", url, "--format", "json"], db)
    assert main(["export", "--storage", url, "--format", "json",
                 "--trust-study", shown_hash(err)]) == 0
    manifest = tmp_path / "mine" / "launch.json"
    manifest.parent.mkdir(mode=0o700)
    manifest.write_text(capsys.readouterr().out)
    manifest.chmod(0o600)
    launch = ["launch", "--config", str(manifest), "--check-seconds", "0",
              "--log-dir", str(tmp_path / "logs")]
    err = _refusal(capsys, launch)
    assert f"manifest {manifest} holds what would run" in err and f"touch {marker}" in err
    assert f"its program was exported from {db}" in err and not marker.exists()
    assert main([*launch, "--trust-study", shown_hash(err)]) == 0 and marker.exists()


def test_a_manifest_of_a_study_of_mine_launches_and_one_without_provenance_does_not(
        tmp_path, capsys):
    marker = tmp_path / "ran"
    _db, url = _mine(tmp_path, marker)
    assert main(["export", "--storage", url, "--format", "json"]) == 0
    manifest = tmp_path / "mine" / "launch.json"
    data = json.loads(capsys.readouterr().out)
    assert data["manifest"]["provenance"] == {"from": str(tmp_path / "mine" / "autotune.db"),
                                              "why": None}
    manifest.write_text(json.dumps(data))
    launch = ["launch", "--config", str(manifest), "--check-seconds", "0",
              "--log-dir", str(tmp_path / "logs")]
    assert main(launch) == 0 and marker.exists()
    capsys.readouterr()
    marker.unlink()
    del data["manifest"]["provenance"]   # as an older autotune, or a hand, wrote it
    manifest.write_text(json.dumps(data))
    err = _refusal(capsys, launch)
    assert "does not say where its program came from" in err and not marker.exists()


# ------------------------------------------------- item 3: the file opened, every folder above

def test_a_study_under_a_folder_others_can_write_is_not_trusted(tmp_path, capsys):
    marker = tmp_path / "ran"
    db, url = _mine(tmp_path / "open", marker)
    (tmp_path / "open").chmod(0o777)   # two levels above the study: mine/ itself is 0700
    for command in (["launch", "--check-seconds", "0"], ["verify", "--budget", "1m"],
                    ["export", "--format", "json"]):
        err = _refusal(capsys, [*command, "--storage", url], db)
        assert f"the folder {tmp_path / 'open'} above it can be written by other users" in err
        assert f"touch {marker}" in err and not marker.exists()


def test_a_co_user_swapping_the_path_never_gets_the_planted_command_run(tmp_path, capsys):
    """The attack of issue 46: a real second uid renames the user's study folder away and its
    own into its place, again and again, while the user launches; the planted command must
    never run (the 0777 folder above makes every launch a refusal; the read is the checked one)."""
    import shutil
    import tempfile
    user = other_user()
    scratch = Path(tempfile.mkdtemp(prefix="autotune-46-"))   # pytest's own folders are 0700
    try:
        scratch.chmod(0o777)
        codes = _launch_while_swapped(tmp_path, capsys, scratch, user)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert set(codes) == {2} and len(codes) >= 3, codes


def _launch_while_swapped(tmp_path: Path, capsys, scratch: Path, user) -> list[int]:
    planted = tmp_path / "planted"
    _mine(scratch, tmp_path / "mine-ran", "proj")
    evil = study_copy(scratch / "evil")
    inject(evil, planted, command=["sh", "-c", f"touch {planted}"], backend="gloo", machine=False)
    give_to(scratch / "evil", user)
    swap = ("import os, time\nos.chdir(%r)\nwhile True:\n"
            "    os.rename('proj', 'held'); os.rename('evil', 'proj'); time.sleep(0.02)\n"
            "    os.rename('proj', 'evil'); os.rename('held', 'proj'); time.sleep(0.02)\n"
            % str(scratch))
    swapper = subprocess.Popen(["/usr/bin/python3", "-c", swap], user=user.pw_uid,
                               group=user.pw_gid, extra_groups=[], stderr=subprocess.PIPE)
    codes: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(codes) < 20:
            codes.append(main(["launch", "--storage", f"sqlite:///{scratch}/proj/autotune.db",
                               "--check-seconds", "0", "--log-dir", str(tmp_path / "logs")]))
            capsys.readouterr()
            assert not planted.exists(), codes
        assert swapper.poll() is None, swapper.stderr.read()
    finally:
        swapper.kill()
        swapper.wait()
    return codes


# ---------------------------------------------------------- item 5: the hash of what was shown

def test_trust_study_runs_only_what_was_shown(tmp_path, capsys):
    shown, swapped = tmp_path / "shown-ran", tmp_path / "swapped-ran"
    db, url = _theirs(tmp_path, shown)
    launch = ["launch", "--storage", url, "--check-seconds", "0", "--log-dir",
              str(tmp_path / "logs")]
    first = shown_hash(_refusal(capsys, launch, db))
    # a co-writer replaces the command the person read
    study = open_only(db)
    study.set_user_attr("script_command", ["sh", "-c", f"touch {swapped}"])
    give_to(tmp_path / "shared", other_user())
    err = _refusal(capsys, [*launch, "--trust-study", first], db)
    assert f"--trust-study {first} is not its hash: it changed after it was shown" in err
    assert f"touch {swapped}" in err and not swapped.exists() and not shown.exists()
    second = shown_hash(err)
    assert main([*launch, "--trust-study", second]) == 0 and swapped.exists()
    assert f"autotune: running: sh -c 'touch {swapped}'" in capsys.readouterr().err


def test_a_bare_trust_study_is_refused_in_one_line(tmp_path, capsys):
    db, url = _theirs(tmp_path, tmp_path / "ran")
    for command in ("launch", "verify", "export"):
        err = _refusal(capsys, [command, "--storage", url, "--trust-study"], db)
        assert "--trust-study: give the 12-digit hash that autotune printed" in err


# ------------------------------------------------------------ item 6: a study across hosts

def _cluster_study(tmp_path: Path, **fields) -> Path:
    """A study across two hosts as `search --hosts` stores it, with `fields` over the defaults."""
    db = study_copy(tmp_path / "shared")
    study = open_only(db)
    topo = study.user_attrs["topology"]
    write_cluster(study, {"hosts": [{"name": "a"}, {"name": "b"}],
                          "addresses": ["10.0.0.1", "10.0.0.2"],
                          "launcher": "ssh", "python": "python3", "cwd": ".", "env": {},
                          "topologies": [topo, topo], **fields})
    rec = study.user_attrs["recommendation"]
    study.set_user_attr("recommendation", dict(rec, config=Config(
        nproc=2, ranks_per_numa_node=1, nnodes=2).to_dict()))
    return db


@pytest.mark.parametrize("fmt", ["torchrun", "mpirun", "slurm"])
def test_cluster_exports_refuse_another_users_code_carrying_fields(tmp_path, capsys, fmt):
    db = _cluster_study(tmp_path, ssh_config="/home/them/ssh_config", python="/home/them/python",
                        cwd="/home/them", env={"PATH": "/home/them/bin",
                                               "PYTHONPATH": "/home/them/lib"})
    give_to(tmp_path / "shared", other_user())
    err = _refusal(capsys, ["export", "--storage", f"sqlite:///{db}", "--format", fmt], db)
    for shown in ("ssh config /home/them/ssh_config", "python /home/them/python",
                  "folder /home/them", "env PATH /home/them/bin", "env PYTHONPATH /home/them/lib"):
        assert shown in err, shown
    assert main(["export", "--storage", f"sqlite:///{db}", "--format", fmt,
                 "--trust-study", shown_hash(err)]) == 0
    assert "/home/them/ssh_config" in capsys.readouterr().out or fmt != "mpirun"


@pytest.mark.parametrize("field, value", [
    ("ssh_config", "/tmp/cfg -oProxyCommand=touch${IFS}/tmp/owned"),
    ("ssh_config", "-oProxyCommand=touch /tmp/owned"), ("python", "-Spython3"),
    ("cwd", "-P")])
def test_option_looking_stored_values_are_refused_even_in_a_study_of_mine(tmp_path, capsys,
                                                                           field, value):
    db = _cluster_study(tmp_path, **{field: value})
    err = _refusal(capsys, ["export", "--storage", f"sqlite:///{db}", "--format", "mpirun"], db)
    assert "would reach ssh or mpirun as an option" in err
