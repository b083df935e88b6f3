"""Issue 34 without processes: stored strings cleaned wherever they are shown, library paths from
a stored topology checked before they become LD_PRELOAD, storage passwords hidden by SQLAlchemy's
own rendering, and the docs never putting a password on a command line."""
from __future__ import annotations

import os
import re
import shutil

import pytest

from autotune.util.clean import one_line, printable
from autotune.cli import PASSWORD_WARNING, main
from autotune.config import Config
from autotune.errors import ConfigError
from autotune.export.cluster import torchrun_hosts
from autotune.plan.cluster import Cluster
from autotune.plan.hosts import Host
from autotune.study.attrs import write_cluster
from autotune.study.storage import holds_password, redact, redact_message
from hostile_study import ESC, hostile_copy, open_only, shown_hash
from results_study import sha256
from paths import REPO
from results_study import live_topology, study_copy


@pytest.mark.parametrize("raw, shown", [
    ("a\nb", "a\\nb"), ("a\r\nb", "a\\r\\nb"), (ESC, "\\x1b]0;owned\\x07\\x1b[2J"),
    ("abc\u202edef", "abc\\u202edef"),      # right-to-left override: text that reads backwards
    ("x\u2028y", "x\\u2028y"), ("\x9b31m", "\\x9b31m"), ("plain ümlaut", "plain ümlaut")])
def test_one_line_shows_control_characters_escaped(raw, shown):
    assert one_line(raw) == shown
    assert printable(f"{raw}\n{raw}") == f"{shown}\n{shown}".replace("\\n", "\n")


def test_the_report_shows_stored_strings_on_their_own_line_escaped(tmp_path, capsys):
    db = hostile_copy(tmp_path / "r", tmp_path / "ran", command=["true"])
    assert main(["report", "--storage", f"sqlite:///{db}"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\\x1b]0;owned" in out
    assert not [line for line in out.splitlines() if line.startswith("touch ")]


def test_export_header_keeps_every_stored_field_in_its_comment(tmp_path, capsys):
    db = hostile_copy(tmp_path / "r", tmp_path / "ran", command=["true"], backend="gloo")
    for fmt in ("shell", "torchrun", "mpirun", "slurm"):
        assert main(["export", "--storage", f"sqlite:///{db}", "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert not [line for line in out.splitlines() if "touch " in line
                    and not line.startswith("#")], (fmt, out)
        for field in ("headline", "machine", "torch", "override"):
            assert f"ran.{field}" in out, (fmt, field)   # shown, inside a comment


def test_sbatch_directives_come_before_anything_from_the_study(tmp_path, capsys):
    db = hostile_copy(tmp_path / "r", tmp_path / "ran", command=["true"], backend="gloo")
    assert main(["export", "--storage", f"sqlite:///{db}", "--format", "slurm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first_from_study = next(i for i, line in enumerate(lines) if "headline" in line)
    assert lines[0] == "#!/bin/bash"
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_from_study


def _cluster_study(tmp_path, address: str):
    """A study across two hosts (as `search --hosts` stores it) whose first address is
    `address`."""
    db = study_copy(tmp_path / "r")
    study = open_only(db)
    topo = study.user_attrs["topology"]
    write_cluster(study, {"hosts": [{"name": "a"}, {"name": "b"}], "addresses": [address, "10.0.0.2"],
                          "launcher": "ssh", "python": "python3", "cwd": ".", "env": {},
                          "topologies": [topo, topo]})
    rec = study.user_attrs["recommendation"]
    study.set_user_attr("recommendation", dict(rec, config=Config(
        nproc=2, ranks_per_numa_node=1, nnodes=2).to_dict()))
    return db


def test_a_stored_rendezvous_address_cannot_add_a_command(tmp_path, capsys):
    db = _cluster_study(tmp_path, "10.0.0.1\ntouch /tmp/owned")
    rc, out, err = _export(capsys, db, "--format", "torchrun")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "stored address 10.0.0.1\\ntouch /tmp/owned" in err and "control character" in err
    topo = live_topology()   # a cluster is never built with it (issue 61: addresses are IPs)
    with pytest.raises(ConfigError, match="not an IP address"):
        Cluster(hosts=(Host(name="a"), Host(name="b")), addresses=("1.2.3.4\ntouch x", "b"),
                topologies=(topo, topo), launcher="ssh")
    cluster = Cluster(hosts=(Host(name="a"), Host(name="b")), addresses=("1.2.3.4", "1.2.3.5"),
                      topologies=(topo, topo), launcher="ssh")
    first = torchrun_hosts(Config(nproc=2, nnodes=2), cluster, ("true",)).splitlines()[0]
    assert first.startswith("# 2 host(s), c10d rendezvous at 1.2.3.4:")


def _with_stored_library(tmp_path, path: str):
    """A study whose stored topology names `path` as its tcmalloc (the recommendation uses it)."""
    db = study_copy(tmp_path / "r")
    study = open_only(db)
    topo = dict(study.user_attrs["topology"])
    topo["allocators"] = dict(topo["allocators"], tcmalloc=path)
    study.set_user_attr("topology", topo)
    assert study.user_attrs["recommendation"]["config"]["allocator"] == "tcmalloc"
    return db


def _export(capsys, db, *more):
    before = sha256(db)
    rc = main(["export", "--storage", f"sqlite:///{db}", *more])
    out, err = capsys.readouterr()
    assert sha256(db) == before
    return rc, out, err


def test_ld_preload_from_a_study_must_be_the_library_this_machine_finds(tmp_path, capsys):
    fake = tmp_path / "libtcmalloc.so.4"
    shutil.copy(live_topology().capabilities.allocators["tcmalloc"], fake)
    db = _with_stored_library(tmp_path, str(fake))
    rc, out, err = _export(capsys, db)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"stored tcmalloc library '{fake}' is not the tcmalloc this machine's probe finds" in err
    rc, out, err = _export(capsys, db, "--trust-study", shown_hash(err))   # the person read it
    assert rc == 0 and f"LD_PRELOAD={fake}" in out and "warning: tcmalloc library" in err


@pytest.mark.parametrize("path", ["/usr/lib/libtcmalloc.so.4:/tmp/evil.so", "libtcmalloc.so.4",
                                  "/tmp/lib tcmalloc.so", "/tmp/lib\ntouch x"])
def test_a_stored_library_path_that_smuggles_more_is_refused_even_when_trusted(tmp_path, capsys,
                                                                                path):
    db = _with_stored_library(tmp_path, path)
    for more in ([], ["--trust-study", "0123456789ab"]):
        rc, out, err = _export(capsys, db, *more)
        assert rc == 2 and out == "" and err.count("\n") == 1, err
        assert "is not a plain absolute path; refusing to put it in LD_PRELOAD" in err


SLASHED = "postgresql://alice:Pa/ss@127.0.0.1:1/db"


@pytest.mark.parametrize("url, shown", [
    (SLASHED, "postgresql://alice:***@127.0.0.1:1/db"),
    ("postgresql://alice:p?x#y@h/db", "postgresql://alice:***@h/db"),
    ("mysql+pymysql://alice:PW%40x@h/db", "mysql+pymysql://alice:***@h/db"),
    ("postgresql://alice:Pa@ss@h/db", "postgresql://***"),   # '@' left over: masked whole
    ("postgresql://alice:Pa/ss@h:notaport/db", "postgresql://***"),   # does not parse
    ("postgresql://u@h/db?sslmode=disable&password=s3/c", "postgresql://u@h/db?password=***"
                                                          "&sslmode=disable"),
    ("sqlite:///results/autotune.db", "sqlite:///results/autotune.db")])
def test_redact_hides_any_password(url, shown):
    assert redact(url) == shown


def test_redact_message_hides_the_password_as_typed_and_encoded():
    text = redact_message(f"failed for Pa/ss (Pa%2Fss) at {SLASHED}", SLASHED)
    assert "Pa" not in text and "ss@" not in text


def test_report_with_a_slashed_password_prints_no_part_of_it(capsys):
    assert main(["report", "--storage", SLASHED]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Pa/ss" not in err and "ss@" not in err
    assert err.splitlines() == [PASSWORD_WARNING, err.splitlines()[1]]
    assert err.splitlines()[1].startswith("autotune: error: storage "
                                          "postgresql://alice:***@127.0.0.1:1/db")


def test_no_warning_without_a_password_in_the_url():
    assert not holds_password("postgresql://alice@db.example/autotune")
    assert holds_password("postgresql://alice@db.example/autotune?password=x")


def test_the_docs_never_put_a_password_on_a_command_line():
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    secret_in_url = re.compile(r"[a-z+]+://[^\s/:@`]+:[^\s@`]+@")
    found = [f"{d.name}: {m.group(0)}" for d in docs for m in secret_in_url.finditer(d.read_text())
             if "***" not in m.group(0)]
    assert found == []
    assert "~/.pgpass" in (REPO / "docs" / "clusters.md").read_text()


@pytest.mark.parametrize("command", ["verify", "launch", "export"])
def test_help_teaches_trust_study(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--trust-study" in text and "docs/security.md" in text


def test_only_mine_is_the_kernels_owner_and_mode_of_file_and_folders(tmp_path):
    from autotune.study.trust import why_not_only_mine
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    db = private / "autotune.db"
    db.write_bytes(b"")
    db.chmod(0o600)
    assert why_not_only_mine(str(db)) is None
    (private / "autotune.db-wal").write_bytes(b"")
    os.chown(private / "autotune.db-wal", 65534, 65534)   # a side file someone else made
    assert "autotune.db-wal belongs to uid 65534" in why_not_only_mine(str(db))
    os.unlink(private / "autotune.db-wal")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)   # as /tmp: anyone may add the side files SQLite reads
    (sticky / "autotune.db").write_bytes(b"")
    assert "its folder" in why_not_only_mine(str(sticky / "autotune.db")) and \
        "written by other users" in why_not_only_mine(str(sticky / "autotune.db"))
    # a link of yours there leads to the file read (and SQLite's side files) in your folder
    link = sticky / "mine.db"
    link.symlink_to(db)
    assert why_not_only_mine(str(link)) is None
    os.lchown(link, 65534, 65534)   # the same link, planted by someone else
    assert f"{link} in the shared folder {sticky} belongs to uid 65534" in \
        why_not_only_mine(str(link))
    assert why_not_only_mine(None).startswith("the storage is a database server")
