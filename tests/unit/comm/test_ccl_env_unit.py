"""The ccl backend's pure parts (autotune/comm/ccl): the environment each rank gets, what a script
started without autotune's plan is given, and the cache's pruning of stale builds. The backend
itself runs in tests/integration/test_ccl.py."""
from __future__ import annotations

import os

from autotune.comm.ccl.build import RUNTIME_MARK, prune_stale
from autotune.comm.ccl.env import CCL_ENV, defaults, interface_towards, rank_env, script_env, shim_dir


def test_a_rank_gets_every_variable_oneccl_needs_and_only_owned_ones():
    env = rank_env(local_rank=1, local_size=2, workers=2, yield_mode="sched_yield",
                   worker_cpus=(1, 3))
    assert env["CCL_LOCAL_RANK"] == "1" and env["CCL_LOCAL_SIZE"] == "2"
    assert env["CCL_PROCESS_LAUNCHER"] == "none" and env["CCL_ATL_TRANSPORT"] == "ofi"
    assert env["CCL_WORKER_COUNT"] == "2" and env["CCL_YIELD"] == "sched_yield"
    assert env["CCL_WORKER_AFFINITY"] == "1,3"
    assert env["CCL_KVS_IFACE"] == env["FI_TCP_IFACE"] == "lo"   # one host: loopback
    assert set(env) <= set(CCL_ENV)      # the plan owns every variable it may set
    # no worker cores named: oneCCL places its workers itself
    assert "CCL_WORKER_AFFINITY" not in rank_env(local_rank=0, local_size=1, workers=1,
                                                 yield_mode="pause", worker_cpus=None)


def test_a_hand_started_rank_gets_the_missing_variables_and_keeps_the_users():
    got = defaults({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "CCL_YIELD": "pause",
                    "MASTER_ADDR": "127.0.0.1"}, rank=5, size=8)
    assert got["CCL_LOCAL_RANK"] == "1" and got["CCL_LOCAL_SIZE"] == "4"   # torchrun's, not global
    assert "CCL_YIELD" not in got          # the user's choice stands
    assert got["CCL_KVS_IFACE"] == "lo"
    # without torchrun's variables the global rank and size stand in
    bare = defaults({}, rank=1, size=2)
    assert (bare["CCL_LOCAL_RANK"], bare["CCL_LOCAL_SIZE"]) == ("1", "2")


def test_the_interface_towards_a_loopback_or_unknown_master_is_lo():
    assert interface_towards(None) == "lo"
    assert interface_towards("127.0.0.1") == "lo"
    assert interface_towards("localhost") == "lo"
    assert interface_towards("no-such-host.invalid") == "lo"


def test_a_script_finds_the_stand_in_first_once():
    shim = str(shim_dir())
    path = script_env({"PYTHONPATH": os.pathsep.join(["/a", shim, "/b"])})["PYTHONPATH"]
    assert path.split(os.pathsep) == [shim, "/a", "/b"]
    assert (shim_dir() / "oneccl_bindings_for_pytorch" / "__init__.py").exists()


def test_a_build_prunes_its_torchs_stale_builds_and_keeps_other_torchs(tmp_path):
    runtime, elsewhere = tmp_path / "venv-a" / "ccl", tmp_path / "venv-b" / "ccl"
    runtime.mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    cache = tmp_path / "cache"
    builds = {name: cache / f"torch2.13.0_cpu-{name * 12}" for name in "abcdef"}
    marks = {"a": runtime, "b": runtime, "c": elsewhere, "d": tmp_path / "removed-venv",
             "e": None, "f": runtime}
    for name, d in builds.items():
        d.mkdir(parents=True)
        (d / "m.so").write_bytes(b"x")
        if marks[name] is not None:
            (d / RUNTIME_MARK).write_text(str(marks[name]))
    other_torch = cache / "torch2.8.0_cpu-cccccccccccc"
    other_torch.mkdir()
    (other_torch / RUNTIME_MARK).write_text(str(runtime))
    gone = prune_stale(builds["a"])
    # the same runtime's older sources, and a build whose virtualenv is gone
    assert sorted(gone) == sorted([builds["b"], builds["d"], builds["f"]])
    # kept: the build itself, the same torch in another virtualenv (a fresh clone beside this
    # one: pruning it broke the other's ccl), a build older than the mark, another torch
    for d in (builds["a"], builds["c"], builds["e"], other_torch):
        assert d.exists()


def test_another_checkouts_shim_is_not_taken_for_intels_package(tmp_path, monkeypatch):
    import shutil
    import sys
    from autotune.comm import ccl
    # a command exported by another checkout puts that checkout's shim on PYTHONPATH: taking it
    # for Intel's package made each shim import the other until the recursion limit
    other = tmp_path / "other-checkout-shim"
    shutil.copytree(shim_dir(), other)
    intel = tmp_path / "site"
    (intel / "oneccl_bindings_for_pytorch").mkdir(parents=True)
    (intel / "oneccl_bindings_for_pytorch" / "__init__.py").write_text("# Intel's\n")
    installed = ccl.intel_spec()      # Intel's own, where this Python has it (the IPEX lane)
    monkeypatch.setattr(sys, "path", [str(other), str(shim_dir()), *sys.path])
    assert ccl.intel_spec() == installed
    # behind the shims, Intel's own package is still found
    monkeypatch.setattr(sys, "path", [str(other), str(intel), *sys.path])
    assert ccl.intel_spec().origin == str(intel / "oneccl_bindings_for_pytorch" / "__init__.py")
