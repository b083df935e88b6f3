"""Security basics of issue 7 not covered elsewhere: what LD_PRELOAD a trial can ever get, and
passwords in storage URLs on every command's error paths, --debug included.

Covered elsewhere (listed in tests/FAULTS.md): the dashboard binds 127.0.0.1 unless told and warns
when exposed (test_dashboard_browser.py), exported commands are shell-safe for any script
arguments (hypothesis property in test_export.py), export commands preload only found libraries
(test_export.py::test_ld_preload_names_only_libraries_the_probe_found).
"""
from __future__ import annotations

from paths import REPO
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.cli import PASSWORD_WARNING, main
from autotune.plan.build import build_plan
from autotune.probe import probe
from autotune.plan.feasible import ruled_out
from autotune.space.resolve import find_space, load_space, resolve
from autotune.probe.topology import Capabilities

MACHINES = REPO / "tests" / "fixtures" / "machines"
SECRET = "s3cret"
CAPS = Capabilities(allocators={"jemalloc": "/lib/libjemalloc.so.2", "tcmalloc": None},
                    omp_runtimes={"libgomp": None, "libiomp5": "/venv/lib/libiomp5.so"},
                    backends=("gloo",), numactl=True, numactl_membind=True, taskset=True,
                    cxx_compiler="/usr/bin/c++")
HOSTILE_ENV = {"PATH": "/usr/bin", "LD_PRELOAD": "/tmp/evil.so", "MALLOC_CONF": "junk:1"}


def _topologies():
    yield "live", probe()
    for name in ("xeon-2s-icx", "epyc-7763-nps4", "desktop-8c16t", "vm-quirks"):
        topo = probe(str(MACHINES / name), collect_capabilities=False)
        yield name, dataclasses.replace(topo, capabilities=CAPS)


@pytest.mark.parametrize("name,topo", list(_topologies()), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_trial_plans_preload_only_libraries_the_probe_found(name, topo):
    """Every rank of every feasible config of cpu.yaml, with an LD_PRELOAD already in the
    user's environment: only allocator / OpenMP libraries the probe found are preloaded."""
    caps = topo.capabilities
    found = {p for p in {**caps.allocators, **caps.omp_runtimes}.values() if p}
    space = resolve(load_space(find_space("cpu")), topo)
    checked = 0
    for params in space.grid():
        config = space.to_config(params)
        if ruled_out(config, space, topo):
            continue
        plan = build_plan(config, topo, workdir="/tmp/x", master_port=29500,
                          base_env=HOSTILE_ENV)
        for rank in plan.ranks:
            libs = [p for p in rank.env.get("LD_PRELOAD", "").split(":") if p]
            assert set(libs) <= found, (config.key(), libs)
            assert (config.allocator == "default") == (
                not any("malloc" in p for p in libs)), (config.key(), libs)
            assert rank.env.get("MALLOC_CONF") != "junk:1"
        checked += 1
    assert checked >= 4, name


URLS = [f"postgresql://user:{SECRET}@127.0.0.1:1/db",
        f"postgresql://user@127.0.0.1:1/db?password={SECRET}",
        f"sqlite+pysqlcipher://:{SECRET}@/tmp/autotune-no-such.db"]


@pytest.mark.parametrize("debug", [[], ["--debug"]], ids=["plain", "debug"])
@pytest.mark.parametrize("command", ["search", "report", "export", "dashboard"])
def test_storage_passwords_are_never_printed(command, debug, capfd, tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the search's machine lock
    extra = {"search": ["--budget", "2m", "--results", str(tmp_path)],
             "dashboard": ["--port", "0"]}.get(command, [])
    for url in URLS:
        rc = main([command, *debug, "--storage", url, *extra])
        out, err = capfd.readouterr()
        assert rc == 2, err
        assert SECRET not in out + err, (url, out + err)
        assert "***" in err
        if not debug:   # the error, after the warning that a password was typed (issue 34)
            assert err.splitlines()[0] == PASSWORD_WARNING
            assert err.count("\n") == 2 and "Traceback" not in err
    assert not list(tmp_path.rglob("*.log"))


def test_search_password_error_from_a_real_process():
    done = subprocess.run([sys.executable, "-m", "autotune", "search", "--budget", "2m",
                           "--storage", URLS[0]], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(PASSWORD_WARNING + "\nautotune: error: storage "
                                  "postgresql://user:***@127.0.0.1:1/db")
    assert SECRET not in done.stderr
