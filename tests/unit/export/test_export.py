"""`autotune export`: commands rebuilt from the stored topology, shell-safe for any script argument,
LD_PRELOAD limited to libraries the probe found, a manifest, a warning on another machine, and
running the exported command really reproduces the measured configuration."""
from __future__ import annotations

from paths import REPO
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from hypothesis import given, settings, strategies as st

from autotune.result import Outcome, TrialResult
from autotune.cli import PASSWORD_WARNING, main
from autotune.config import Config
from autotune.export.command import launch_command, render
from autotune.plan.feasible import infeasible_reason, ruled_out
from autotune.probe import probe
from autotune.space.resolve import find_space, load_space, resolve
from autotune.study.storage import describe_study, open_storage, open_study, study_name
from autotune.study.records import record_trial
from hostile_study import shown_hash
from results_study import live_topology, study_copy

MACHINES = REPO / "tests" / "fixtures" / "machines"
ARGS = st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=12),
                max_size=5)


@pytest.fixture
def db(tmp_path):
    return study_copy(tmp_path / "results")


def export(capsys, *argv):
    rc = main(["export", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_exports_the_stored_recommendation_in_every_format(db, capsys):
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{db}")
    rec = study.user_attrs["recommendation"]
    rc, shell, err = export(capsys, "--results", str(db.parent))
    assert rc == 0 and "differs" not in err  # same machine: no topology warning
    assert rec["headline"] in shell and study.user_attrs["fingerprint"] in shell
    assert shell.splitlines()[0].startswith("# autotune tuned launch:")
    rc, torchrun, _ = export(capsys, "--results", str(db.parent), "--format", "torchrun")
    assert rc == 0 and "torch.distributed.run" in torchrun
    rc, text, _ = export(capsys, "--results", str(db.parent), "--format", "json")
    data = json.loads(text)
    m = data["manifest"]
    assert m["fingerprint"] == study.user_attrs["fingerprint"]
    assert m["library_versions"]["torch"] and m["speedup"] == rec["speedup"]
    assert m["verified"] is True and data["config"] == rec["config"]
    assert data["shell"].splitlines()[-1] == shell.splitlines()[-1]


def test_export_a_trial_by_number(db, capsys):
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{db}")
    t = next(t for t in study.trials if t.user_attrs.get("outcome") == Outcome.OK
             and t.user_attrs["role"] == "search")
    rc, text, _ = export(capsys, "--storage", f"sqlite:///{db}", "--trial", str(t.number),
                         "--format", "json")
    data = json.loads(text)
    assert rc == 0 and data["config"] == t.user_attrs["config"]
    assert data["manifest"]["trial"] == t.number and data["manifest"]["verified"] is False
    crashed = next(t for t in study.trials if t.user_attrs.get("outcome") == Outcome.TIMEOUT)
    rc, _, err = export(capsys, "--storage", f"sqlite:///{db}", "--trial", str(crashed.number))
    assert rc == 0 and f"trial {crashed.number} did not complete (timeout" in err


def _other_machine_study(tmp_path) -> str:
    """A study recorded on a two-socket Xeon (a captured sysfs tree), read back here."""
    topo = probe(str(MACHINES / "xeon-2s-icx"), collect_capabilities=False)
    topo = dataclasses.replace(topo, capabilities=dataclasses.replace(
        topo.capabilities, numactl=True, numactl_membind=True, taskset=True,
        allocators={"tcmalloc": "/opt/lib/libtcmalloc.so.4"}))
    url = f"sqlite:///{tmp_path}/other.db"
    study = open_study(open_storage(url), study_name("cnn", topo))
    describe_study(study, topology=topo, workload="cnn", space={}, settings={})
    record_trial(study, config=Config(nproc=2, ranks_per_numa_node=1, threads=32, binding="numactl",
                                      allocator="tcmalloc"),
                 result=TrialResult(outcome=Outcome.OK, throughput=900.0, accuracy=0.8),
                 role="reference:run_cpu")
    return url


def test_command_is_rebuilt_from_the_stored_topology_and_warns_elsewhere(tmp_path, capsys):
    # the Xeon's tcmalloc is not a file here: exported only when the person says so
    url = _other_machine_study(tmp_path)
    rc, out, err = export(capsys, "--storage", url, "--trial", "0")
    assert rc == 2 and "is not a file on this machine" in err
    rc, out, err = export(capsys, "--storage", url, "--trial", "0", "--trust-study",
                          shown_hash(err))
    assert rc == 0
    assert "is not this machine's: it was measured on other hardware: Intel(R) Xeon(R) Platinum " \
        "8358 CPU @ 2.60GHz (intel family 6 model 106 stepping 1); this is" in err
    # the binding is the Xeon's: one rank per socket, its own cores and memory node
    assert "--membind=0" in out and "--membind=1" in out
    assert "LD_PRELOAD=/opt/lib/libtcmalloc.so.4" in out


def _tokens(text: str) -> list[str]:
    return shlex.split(text, comments=True)


@settings(max_examples=150, deadline=None)
@given(args=ARGS, two_ranks=st.booleans())
def test_any_script_arguments_survive_shell_quoting(args, two_ranks):
    topo = live_topology()
    config = Config(nproc=2, threads=1, binding="taskset") if two_ranks else Config()
    program = ("python3", "train.py", *args)
    cmd = launch_command(config, topo, program=program)
    tokens = _tokens(render(cmd, "shell"))
    n = len(program)
    starts = [i for i in range(len(tokens) - n + 1) if tokens[i:i + n] == list(program)]
    assert len(starts) == len(cmd.ranks)
    for (_, argv), i in zip(cmd.ranks, starts):
        assert tokens[i - len(argv) + n:i + n] == list(argv)  # binding prefix, then the program
    torchrun = _tokens(render(cmd, "torchrun"))
    assert torchrun[-n:] == list(program)


NASTY = ["", " ", "a b", "it's", '"q"', "$(touch pwned)", "`id`", "x;y", "a\nb", "*", "~",
         "--flag=$HOME", "é日本", "\\", "#not-a-comment", "&", "|", ">out"]


@pytest.mark.parametrize("config", [Config(), Config(nproc=2, threads=1, binding="taskset")],
                         ids=["one-rank", "two-ranks"])
def test_bash_runs_the_exported_command_with_the_exact_arguments(tmp_path, config):
    # Each rank writes its argv to a file of its own: two ranks sharing one stdout pipe may
    # interleave their lines.
    out_dir = tmp_path / "argv"
    out_dir.mkdir()
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    script = ("import json,os,sys; open(os.path.join(sys.argv[1], os.environ.get('RANK', '0')),"
              " 'w').write(json.dumps(sys.argv[2:]))")
    program = (sys.executable, "-c", script, str(out_dir), *NASTY)
    text = render(launch_command(config, live_topology(), program=program), "shell")
    subprocess.run(["bash", "-c", text], cwd=run_dir, capture_output=True, text=True,
                   timeout=60, check=True)
    written = sorted(os.listdir(out_dir))
    assert written == [str(r) for r in range(config.nproc)]
    assert [json.loads((out_dir / r).read_text()) for r in written] == [NASTY] * config.nproc
    assert os.listdir(run_dir) == []  # nothing was executed or redirected


def test_ld_preload_names_only_libraries_the_probe_found():
    topo = live_topology()
    caps = topo.capabilities
    found = {p for p in {**caps.allocators, **caps.omp_runtimes}.values() if p}
    space = resolve(load_space(find_space("cpu")), topo)
    checked = 0
    for params in space.grid():
        config = space.to_config(params)
        if ruled_out(config, space, topo):
            continue
        cmd = launch_command(config, topo)
        envs = [cmd.env] + [e for e, _ in cmd.ranks]
        for env in envs:
            for lib in env.get("LD_PRELOAD", "").replace(":", " ").split():
                assert lib in found, f"{config.key()}: LD_PRELOAD names {lib}"
        checked += 1
    assert checked > 10
    # a topology that found nothing preloads nothing, whatever was asked
    bare = dataclasses.replace(topo, capabilities=dataclasses.replace(
        caps, allocators={}, omp_runtimes={"libgomp": None}))
    assert infeasible_reason(Config(allocator="jemalloc"), bare)


# ---- bad input: one line on stderr, exit 2, no traceback, nothing written -----------------------

SECRET = "s3cretpw"


def _storage_cases(tmp: Path, good: Path) -> dict[str, tuple[list[str], Path | None, str]]:
    """name -> (arguments, file that must stay as it is (or stay absent), expected words)."""
    import sqlite3
    (tmp / "garbage.db").write_bytes(os.urandom(4096))
    (tmp / "truncated.db").write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    (tmp / "zero.db").write_bytes(b"")
    con = sqlite3.connect(tmp / "other-app.db")
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    # Optuna's tables, no study; queried once so it is in WAL mode like any storage autotune made
    optuna.get_all_study_summaries(open_storage(f"sqlite:///{tmp}/no-studies.db"))
    (tmp / "garbage.log").write_bytes(os.urandom(3000))
    (tmp / "folder.db").mkdir()
    return {
        "missing file": (["--storage", f"sqlite:///{tmp}/absent/autotune.db"],
                         tmp / "absent", "does not exist"),
        "results dir without study": (["--results", str(tmp / "nothing")], tmp / "nothing",
                                      "does not exist"),
        "garbage bytes": (["--storage", f"sqlite:///{tmp}/garbage.db"], tmp / "garbage.db",
                          "not a readable SQLite database"),
        "damaged sqlite": (["--storage", f"sqlite:///{tmp}/truncated.db"], tmp / "truncated.db",
                           "not a readable SQLite database"),
        "empty file": (["--storage", f"sqlite:///{tmp}/zero.db"], tmp / "zero.db", "is empty"),
        "another app's sqlite": (["--storage", f"sqlite:///{tmp}/other-app.db"],
                                 tmp / "other-app.db", "without Optuna studies"),
        "storage without studies": (["--storage", f"sqlite:///{tmp}/no-studies.db"],
                                    tmp / "no-studies.db", "no autotune study"),
        "password in URL": (["--storage", f"postgresql://alice:{SECRET}@127.0.0.1:1/autotune"],
                            None, "alice:***@127.0.0.1"),
        "encoded password": (["--storage", f"mysql+pymysql://alice:{SECRET}%40x@127.0.0.1:1/db"],
                             None, "alice:***@"),
        "not a URL": (["--storage", str(good)], good, "not a URL"),
        "folder as file": (["--storage", f"sqlite:///{tmp}/folder.db"], None, "is not a file"),
        "garbage journal": (["--storage", f"journal:///{tmp}/garbage.log"], tmp / "garbage.log",
                            "garbage.log"),
        "unknown study": (["--storage", f"sqlite:///{good}", "--study", "nope"], good,
                          "no study named 'nope'; studies here: autotune-cnn-"),
    }


def _state(path: Path | None):
    if path is None or not path.exists():
        return None
    return path.read_bytes() if path.is_file() else sorted(os.listdir(path))


def _one_line_error(rc: int, err: str, expect: str) -> None:
    assert rc == 2, err
    # a password typed in --storage is also warned about (docs/security.md), before the error
    lines = [line for line in err.strip().splitlines() if line != PASSWORD_WARNING]
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), err
    assert expect in lines[0] and "Traceback" not in err and SECRET not in err


@pytest.mark.parametrize("command", ["report", "export", "dashboard"])
def test_bad_storage_is_one_line_exit_2_and_nothing_is_written(tmp_path, capsys, command):
    good = study_copy(tmp_path / "good")
    good_hash = good.read_bytes()
    cases = _storage_cases(tmp_path, good)
    extra = ["--port", "0"] if command == "dashboard" else []
    for name, (args, keep, expect) in cases.items():
        before = _state(keep)
        rc = main([command, *args, *extra])
        out, err = capsys.readouterr()
        _one_line_error(rc, err, expect)
        assert SECRET not in out and out == "", f"{name}: printed {out!r}"
        assert _state(keep) == before, f"{name}: {keep} was changed"
    assert good.read_bytes() == good_hash


@pytest.mark.parametrize("argv, expect", [
    (["export", "--trial", "999"], "--trial 999: study"),
    (["export", "--trial", "-1"], "must be at least 0"),
    (["export", "--trial", "two"], "is not a trial number"),
    (["export", "--format", "zsh"], "invalid choice: 'zsh'"),
    (["export", "--seconds", "0"], "must be greater than 0"),
    (["report", "--top", "0"], "must be at least 1"),
    (["dashboard", "--port", "70000"], "not a port number"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_arguments_on_a_good_study(tmp_path, capsys, argv, expect):
    good = study_copy(tmp_path)
    before = good.read_bytes()
    try:
        rc = main([argv[0], "--storage", f"sqlite:///{good}", *argv[1:]])
    except SystemExit as exc:  # argparse's own errors exit from inside parse_args
        rc = exc.code
    _one_line_error(rc, capsys.readouterr().err, expect)
    assert good.read_bytes() == before


def test_password_never_reaches_the_terminal_from_a_real_process():
    done = subprocess.run([sys.executable, "-m", "autotune", "report", "--storage",
                           f"postgresql://alice:{SECRET}@127.0.0.1:1/autotune"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    _one_line_error(done.returncode, done.stderr, "postgresql://alice:***@127.0.0.1:1/autotune")
    assert done.stdout == ""


def _stored_by(db: Path, **attrs) -> None:
    """Set study attributes, or (trial=N) one trial's, in the stored SQLite study as a newer or
    foreign writer would have left them (SQL: Optuna cannot change a finished trial)."""
    import json
    import sqlite3
    trial = attrs.pop("trial", None)
    con = sqlite3.connect(db)
    try:
        for key, value in attrs.items():
            if trial is None:
                con.execute("UPDATE study_user_attributes SET value_json=? WHERE key=?",
                            (json.dumps(value), key))
            else:
                con.execute("UPDATE trial_user_attributes SET value_json=? WHERE key=? AND "
                            "trial_id=(SELECT trial_id FROM trials WHERE number=?)",
                            (json.dumps(value), key, trial))
        con.commit()
    finally:
        con.close()


@pytest.mark.parametrize("change, expect", [
    ({"schema_version": 99}, "written by a newer autotune (schema version 99"),
    ({"autotune_version": "9.0.0"}, "written by a newer autotune (autotune 9.0.0"),
    ({"trial": 3, "autotune_version": "9.0.0"}, "written by a newer autotune (autotune 9.0.0"),
    ({"trial": 3, "config": {"nproc": "many"}}, "cannot be read: "),
], ids=["newer schema", "newer autotune", "a trial of a newer autotune", "unreadable trial"])
def test_dashboard_refuses_a_study_it_cannot_show_in_one_line(tmp_path, capsys, change, expect):
    """Issue 63: a study written by a newer autotune, or one whose trials cannot be read, is
    named with what to do, exit 2, before anything is served; nothing is written."""
    good = study_copy(tmp_path)
    _stored_by(good, **change)
    before = good.read_bytes()
    rc = main(["dashboard", "--storage", f"sqlite:///{good}", "--port", "0"])
    err = capsys.readouterr().err
    _one_line_error(rc, err, expect)
    assert "dashboard: study 'autotune-cnn-" in err
    assert "upgrade autotune" in err or "open another study with --study" in err
    assert good.read_bytes() == before
