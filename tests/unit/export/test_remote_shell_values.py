"""Issue 61, holes 2 and 6: a stored subnet, interface or ssh config ran a command on every host
through an exported mpirun line. Open MPI hands every `--mca` value to each remote daemon in
double quotes through the login shell; here `sh -c` stands in for that shell, fed the very argv
the export printed. Each value is now checked as what it is (an interface name, a CIDR, IP
addresses, plain paths), refused in one line otherwise, and shown and hashed by --trust-study."""
from __future__ import annotations

import shlex
import subprocess

import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.errors import ConfigError
from autotune.plan.cluster import Cluster
from autotune.plan.hosts import Host
from autotune.study.attrs import write_cluster
from autotune.study.stored_code import cluster_code
from hostile_study import open_only
from results_study import live_topology, study_copy


def _mpirun_study(tmp_path, **fields):
    """A study across two hosts through mpirun, as `search --hosts` stores it."""
    db = study_copy(tmp_path / "r")
    study = open_only(db)
    topo = study.user_attrs["topology"]
    write_cluster(study, {"hosts": [{"name": "a"}, {"name": "b"}],
                          "addresses": ["10.0.0.1", "10.0.0.2"], "launcher": "mpirun",
                          "python": "python3", "cwd": "/srv/run", "env": {},
                          "iface": "eth0", "subnet": "10.0.0.0/24",
                          "topologies": [topo, topo], **fields})
    rec = study.user_attrs["recommendation"]
    study.set_user_attr("recommendation", dict(rec, config=Config(
        nproc=2, ranks_per_numa_node=1, nnodes=2).to_dict()))
    return db


def _remote_shells(line: str) -> None:
    """Each --mca NAME VALUE of an mpirun line, as Open MPI's rsh agent hands it to the login
    shell on every host: `orted ... --mca NAME "VALUE"` (here `true`, not orted)."""
    argv = shlex.split(line)
    for i, arg in enumerate(argv):
        if arg == "--mca":
            name, value = argv[i + 1], argv[i + 2]
            subprocess.run(["sh", "-c", f'true --mca {name} "{value}"'], check=True)


@pytest.mark.parametrize("field, value, rule", [
    ("subnet", "10.0.0.0/24$(touch {marker})", "not a network in CIDR form"),
    ("iface", "eth0`touch {marker}`", "not an interface name"),
    ("ssh_config", "/etc/ssh/cfg$(touch${{IFS}}{marker})", "would reach a remote shell"),
])
def test_a_stored_value_that_would_run_on_every_host_is_refused(tmp_path, capsys, field, value,
                                                                 rule):
    marker = tmp_path / "ran-on-a-host"
    db = _mpirun_study(tmp_path, **{field: value.format(marker=marker)})
    rc = main(["export", "--storage", f"sqlite:///{db}", "--format", "mpirun"])
    out, err = capsys.readouterr()
    _remote_shells("\n".join(line for line in out.splitlines() if line.startswith("mpirun")))
    assert not marker.exists(), "a stored value ran on the hosts"
    assert rc == 2 and err.count("\n") == 1 and rule in err, err


def test_a_clean_studys_mpirun_line_reaches_the_hosts_shells_as_data(tmp_path, capsys):
    db = _mpirun_study(tmp_path, ssh_config="/etc/ssh/cluster_config")
    assert main(["export", "--storage", f"sqlite:///{db}", "--format", "mpirun"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("mpirun"))
    assert "--mca btl_tcp_if_include 10.0.0.0/24" in line and "-F /etc/ssh/cluster_config" in line
    _remote_shells(line)


@pytest.mark.parametrize("kw, rule", [
    ({"iface": "eth0;reboot"}, "iface 'eth0;reboot': refused, not an interface name"),
    ({"iface": "a-very-long-interface"}, "not an interface name"),
    ({"subnet": "10.0.0.0"}, "subnet '10.0.0.0': refused, not a network in CIDR form"),
    ({"subnet": "10.0.0.0/33"}, "not a network in CIDR form"),
    ({"addresses": ("10.0.0.1", "b$(id)")}, "address 'b$(id)': refused, not an IP address"),
    ({"python": "/opt/py\\thon"}, "python '/opt/py\\\\thon': refused, \\ would reach a remote"),
    ({"cwd": "/srv/'run'"}, "folder \"/srv/'run'\": refused, ' would reach a remote shell"),
    ({"ssh_config": "/etc/cfg;id"}, "ssh config '/etc/cfg;id': refused, ; would reach"),
])
def test_each_value_is_checked_as_what_it_is(kw, rule):
    topo = live_topology()
    fields = {"hosts": (Host(name="a"), Host(name="b")), "addresses": ("10.0.0.1", "10.0.0.2"),
              "topologies": (topo, topo), "launcher": "mpirun", **kw}
    with pytest.raises(ConfigError) as caught:
        Cluster(**fields)
    assert rule in str(caught.value) and "\n" not in str(caught.value)


def test_trust_study_shows_and_hashes_the_network_values():
    topo = live_topology()
    base = Cluster(hosts=(Host(name="a"), Host(name="b")), addresses=("10.0.0.1", "10.0.0.2"),
                   topologies=(topo, topo), launcher="mpirun", iface="eth0",
                   subnet="10.0.0.0/24")
    shown = dict(cluster_code(base).items)
    assert shown["iface"] == "eth0" and shown["subnet"] == "10.0.0.0/24"
    assert shown["addresses"] == "10.0.0.1,10.0.0.2"
    from dataclasses import replace
    for other in (replace(base, iface="eth1"), replace(base, subnet="10.0.1.0/24"),
                  replace(base, addresses=("10.0.0.9", "10.0.0.2"))):
        assert cluster_code(other) != cluster_code(base)
