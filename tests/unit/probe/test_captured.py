"""Planning for another machine from its capture: `autotune probe --capture` records what the
machine can do (torch's CUDA and backends, libraries, tools) and a replay is judged by that, so a
CPU login node can print the plan of the GPU server it will run on. Real captures: this machine's,
and the GPU servers in tests/fixtures/machines with a capabilities file written as such a server's
probe writes it."""
from __future__ import annotations

import json
import shutil

import pytest

from autotune.cli import main
from autotune.probe import capture, probe
from autotune.probe.captured import CAPABILITIES, read_facts
from autotune.probe.collect_capabilities import collect_capabilities
from paths import TESTS

DGX = TESTS / "fixtures" / "machines" / "dgx-h100-8gpu"
# What the torch check prints on a GPU server with a CUDA build of torch (and with a CPU build)
CUDA_TORCH = {"version": "2.13.0+cu128", "distributed": True, "gloo": True, "mpi": False,
              "nccl": True, "cuda": True, "cuda_devices": 8}
CPU_TORCH = {**CUDA_TORCH, "version": "2.13.0+cpu", "nccl": False, "cuda": False,
             "cuda_devices": 0}


def gpu_server(tmp_path, torch_check: dict | None) -> str:
    """The DGX capture, with the capabilities file its probe would have written (this machine's
    real library and tool facts, that server's torch), or without one (an older capture)."""
    root = tmp_path / "dgx"
    shutil.copytree(DGX, root)
    if torch_check is not None:
        facts = collect_capabilities()
        facts["results"]["torch"] = {"rc": 0, "stdout": json.dumps(torch_check) + "\n",
                                     "stderr": ""}
        (root / CAPABILITIES).write_text(json.dumps({"schema": 1, "facts": facts}))
    return str(root)


def dry_run(capsys, root: str, *sets: str) -> tuple[int, str, str]:
    argv = ["run", "--sysfs-root", root, "--dry-run", "--json"]
    for s in sets:
        argv += ["--set", s]
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_capture_records_what_the_machine_can_do_and_replays_it(tmp_path):
    dest = tmp_path / "here"
    written = capture(str(dest))
    assert str(dest / CAPABILITIES) in written
    live, replay = probe(), probe(str(dest))
    assert replay.capabilities == live.capabilities and replay.warnings == live.warnings
    # the file is small: only the ldconfig lines the parser reads are kept
    assert (dest / CAPABILITIES).stat().st_size < 20_000
    # a capture of a capture copies the captured machine's facts, never this machine's
    again = tmp_path / "again"
    capture(str(again), sysfs_root=str(dest))
    assert read_facts(str(again)) == read_facts(str(dest))
    plain = tmp_path / "plain"
    capture(str(plain), sysfs_root=str(DGX))
    assert not (plain / CAPABILITIES).exists()


def test_a_dry_run_plans_for_the_captured_gpu_server(tmp_path, capsys):
    root = gpu_server(tmp_path, CUDA_TORCH)
    rc, out, err = dry_run(capsys, root, "device=cuda", "nproc=8", "backend=nccl")
    assert rc == 0, err
    plan = json.loads(out)
    assert len(plan["ranks"]) == 8 and plan["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert err == ""     # judged by the capture's own facts: nothing assumed
    caps = probe(root).capabilities
    assert caps.cuda and caps.backends[:2] == ("gloo", "nccl") and caps.torch_version == \
        "2.13.0+cu128"
    assert main(["probe", "--sysfs-root", root]) == 0
    table = capsys.readouterr().out
    assert "gpus         8 (NVLink between all pairs)" in table
    assert "torch        2.13.0+cu128" in table


def test_a_gpu_server_whose_torch_cannot_use_cuda_is_refused_by_its_own_facts(tmp_path, capsys):
    root = gpu_server(tmp_path, CPU_TORCH)
    rc, out, err = dry_run(capsys, root, "device=cuda", "nproc=8")
    assert rc == 2 and out == ""
    assert err == ("autotune: error: --set: device=cuda: this torch cannot use CUDA (a CPU-only "
                   f"build, or no driver) (on the machine in {root})\n")


def test_an_older_capture_assumes_what_its_gpus_imply_and_says_so(tmp_path, capsys):
    root = gpu_server(tmp_path, None)
    rc, out, err = dry_run(capsys, root, "device=cuda", "nproc=4", "backend=nccl")
    assert rc == 0, err
    assert json.loads(out)["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert err.startswith(f"note: the capture has no {CAPABILITIES} (older than this autotune): "
                          "assuming its 8 GPU(s) have a CUDA build of torch with NCCL")
    assert err.count("\n") == 1
    # a CPU capture without the file is judged as before, with nothing assumed
    cpu = TESTS / "fixtures" / "machines" / "desktop-8c16t"
    assert not any(CAPABILITIES in w for w in probe(str(cpu)).warnings)


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),
    ('{"schema": 1}', 'no "facts" object'),
    ('{"schema": 99, "facts": {}}', "schema 99, this autotune reads 1"),
])
def test_a_broken_capabilities_file_is_one_line_and_exit_2(tmp_path, capsys, text, says):
    root = gpu_server(tmp_path, None)
    (tmp_path / "dgx" / CAPABILITIES).write_text(text)
    rc, out, err = dry_run(capsys, root, "device=cuda", "nproc=2")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"autotune: error: {root}/{CAPABILITIES}: {says}")
