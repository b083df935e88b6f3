"""A fault-injecting stand-in for autotune/worker/main.py that obeys the same worker protocol.

Started exactly like a real rank (`python tests/fake_trainer.py --request REQUEST.json` with RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, AUTOTUNE_RESULT in its env), it joins a real gloo process
group, so a fault in one rank reaches the others the way it would in real DDP training.

What each rank does comes from the request's `workload_args`:
    {"fault": {"1": "segfault"}}          rank -> behaviour (default "ok")
    {"fault": {"1": "junk+exit3"}}        "+" chains behaviours in order
    {"fault": {"1": "ignore_sigterm+hang_collective"}}   only SIGKILL ends this rank
    {"on_peer_error": "hang"}             a healthy rank whose collective fails sleeps forever
                                          instead of exiting (a rank that never notices its
                                          peer died, as NCCL without a watchdog does)
    {"steps": 5}                          all-reduces an ok rank performs

Imports only torch and the standard library: the runner tests must not depend on autotune's own
worker being finished, and a fault here must be the one asked for, not an import error.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist

BEHAVIOURS = ("ok", "exit3", "segfault", "sigkill", "hang_collective", "hang_before_init", "oom",
              "junk", "malformed", "hang_at_exit", "bad_config", "unavailable", "workload_error",
              "no_result", "spawn_grandchild", "ignore_sigterm")


def say(msg: str) -> None:
    print(f"fake_trainer rank {os.environ.get('RANK')}: {msg}", flush=True)


def hang() -> None:
    while True:
        time.sleep(3600)


def leave(code: int) -> None:
    # os._exit: leaving with a live process group makes torch abort in teardown (rank 0 hosts the
    # store; "terminate called without an active exception"), which would turn exit 3 into SIGABRT.
    sys.stdout.flush()
    os._exit(code)


def write_result(payload: dict | str) -> None:
    # Atomic, like the real worker: a reader never sees half a file. With the launch's token
    # (autotune/util/channel.py), as every result the runner takes carries.
    path = os.environ["AUTOTUNE_RESULT"]
    tmp = f"{path}.tmp{os.getpid()}"
    if isinstance(payload, dict):
        payload = json.dumps({**payload, "token": os.environ.get("AUTOTUNE_LAUNCH_TOKEN", "")})
    with open(tmp, "w") as f:
        f.write(payload)
    os.replace(tmp, path)


def _vms_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def oom() -> None:
    limit = _vms_bytes() + (512 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    say(f"address space limited to {limit >> 20} MiB; allocating until MemoryError")
    hoard = []
    while True:  # the MemoryError propagates: Python prints it and exits 1, as a real OOM would
        hoard.append(bytearray(64 << 20))


def junk() -> None:
    out = sys.stdout.buffer
    out.write(bytes(range(256)) * 16)            # control bytes, NULs, invalid UTF-8
    out.write(b"\n" + b"x" * (1 << 20) + b"\n")  # one 1 MiB line
    out.write(b"\x1b[31mred\x1b[0m\r\n")
    out.flush()
    say("printed junk")


def spawn_grandchild() -> None:
    # Three ways a descendant outlives its parent: a plain child (same process group), one in its
    # own session (escapes killpg), and a double-forked daemon that is reparented at once.
    subprocess.Popen(["sleep", "1000"])
    subprocess.Popen(["sleep", "1001"], start_new_session=True)
    subprocess.Popen(["setsid", "-f", "sleep", "1002"])
    say("spawned grandchildren")


def train(request: dict, rank: int, world: int) -> dict:
    steps = int(request.get("workload_args", {}).get("steps", 5))
    x = torch.ones(1024)
    t0 = time.perf_counter()
    times = []
    for _ in range(steps):
        s = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - s)
    elapsed = time.perf_counter() - t0
    batch = int(request.get("config", {}).get("batch_size", 32))
    return {"rank": rank, "world_size": world, "steps": steps, "step_times": times,
            "samples_per_second": batch * world * steps / max(elapsed, 1e-9),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "in_force": {"threads": torch.get_num_threads(),
                         "cpus": sorted(os.sched_getaffinity(0))}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--request", required=True)
    args = ap.parse_args()
    with open(args.request) as f:
        request = json.load(f)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    wargs = request.get("workload_args", {})
    plan = wargs.get("fault", {}).get(str(rank), "ok").split("+")
    unknown = [b for b in plan if b not in BEHAVIOURS]
    if unknown:
        say(f"unknown behaviour {unknown}; valid: {BEHAVIOURS}")
        return 2
    say(f"pid {os.getpid()} behaviours {plan}")

    # Faults that happen before the process group exists.
    for b in plan:
        if b == "ignore_sigterm":   # only SIGKILL after the grace period ends this rank
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            say("ignoring SIGTERM")
        if b == "hang_before_init":
            say("hanging before init")
            hang()
        if b == "unavailable":
            say("backend 'fake' is unavailable: RuntimeError: Distributed package doesn't have it")
            return 79
        if b == "workload_error":
            say("workload error: ModuleNotFoundError: No module named 'nosuchmodule'")
            return 80
        if b == "bad_config":
            write_result({"rank": rank, "outcome": "bad_config",
                          "bad_config": ["threads: planned 1, in force 2"]})
            say("bad config: threads: planned 1, in force 2")
            return 78

    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    say("process group ready")
    dist.all_reduce(torch.zeros(8))  # everyone is in: a fault below hits a live group

    for b in plan:
        if b == "junk":
            junk()
        elif b == "spawn_grandchild":
            spawn_grandchild()
            if b == plan[-1]:
                hang()
        elif b == "exit3":
            say("exiting with code 3")
            leave(3)
        elif b == "segfault":
            say("segfaulting")
            os.kill(os.getpid(), signal.SIGSEGV)
        elif b == "sigkill":
            say("killing itself with SIGKILL, as the OOM killer would")
            os.kill(os.getpid(), signal.SIGKILL)
        elif b == "hang_collective":
            say("hanging while the others wait in all_reduce")
            hang()
        elif b == "oom":
            oom()
        elif b == "no_result":
            say("exiting 0 without writing a result")
            leave(0)
        elif b == "malformed":
            write_result('{"rank": 1, "samples_per_second": ')
            say("wrote a malformed result")
            leave(0)

    try:
        result = train(request, rank, world)
    except RuntimeError as e:
        say(f"collective failed: {e}")
        if wargs.get("on_peer_error") == "hang":
            say("hanging after the failed collective")
            hang()
        raise
    write_result(result)
    say(f"wrote result: {result['samples_per_second']:.1f} samples/s")
    if "hang_at_exit" in plan:
        say("hanging at exit, as a gloo teardown deadlock does")
        hang()
    leave(0)    # like autotune/worker/main.py: the result is on disk, skip gloo's fragile teardown
    return 0


if __name__ == "__main__":
    sys.exit(main())
