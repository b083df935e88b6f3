"""A fault-injecting user workload (`--workload fault_workload:build`) for search-level fault tests.

Every fault fires inside the real autotune worker (`python -m autotune.worker`), so what a search
sees is exactly what a broken user workload would give it. Which fault a trial gets is chosen by
its *configuration*: $AUTOTUNE_FAULTS maps a `kmp_blocktime` value (a knob that changes nothing
with libgomp, so one small space gives each config its own fault) to rank -> behaviour:

    AUTOTUNE_FAULTS='{"2": {"1": "exit3"}, "3": {"1": "hold+segfault"}}'

Behaviours fire in the timed window (make_batch call number AT_BATCH), while the peer rank is on
its way into DDP's gradient all-reduce:
    exit3            os._exit(3)
    segfault         SIGSEGV to itself
    hang_collective  stop calling make_batch (the peer waits in all-reduce forever)
    oom              RLIMIT_AS = current + 256 MiB, allocate until MemoryError, raise it
    junk             1 MiB line, control bytes, invalid UTF-8 on stdout; then carry on (ok)
    malformed        write a truncated JSON result to $AUTOTUNE_RESULT and _exit(0)
    hold+X           first fork a child that keeps the rank's gloo sockets open, so the peer
                     is not told by a reset connection and only the runner can end the trial
    hang_before_init hang before torch is even imported (via tests/fault_site/sitecustomize.py)

Each rank appends a JSON line to $AUTOTUNE_FAULT_LOG when it builds the workload ("start") and
when it fires a fault: fault, pid, pids of forked holders, rendezvous port, trial dir and the wall
time, so tests can check that everything is gone afterwards and how long teardown took.

Entry points for bad-input tests: `not_a_spec` returns the wrong type, `raises` fails at once.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time

AT_BATCH = 5   # warmup takes 3 make_batch calls per rank, so call 5 is in the timed window


def _request() -> dict:
    argv = sys.argv
    path = argv[argv.index("--request") + 1] if "--request" in argv else None
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def planned_fault(request: dict | None = None) -> list[str]:
    """This rank's behaviours for this trial's configuration (empty: behave)."""
    table = json.loads(os.environ.get("AUTOTUNE_FAULTS") or "{}")
    request = _request() if request is None else request
    key = str(request.get("config", {}).get("kmp_blocktime"))
    plan = table.get(key, {}).get(os.environ.get("RANK", "0"), "")
    return [b for b in plan.split("+") if b]


def _note(fault: str, **extra) -> None:
    log = os.environ.get("AUTOTUNE_FAULT_LOG")
    if not log or "RANK" not in os.environ:   # the search itself loads the workload once too
        return
    entry = {"fault": fault, "pid": os.getpid(), "rank": os.environ.get("RANK"),
             "port": os.environ.get("MASTER_PORT"), "at": time.time(),
             "trial_dir": os.path.dirname(os.environ.get("AUTOTUNE_RESULT", "")), **extra}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _say(text: str) -> None:
    print(f"fault_workload rank {os.environ.get('RANK')}: {text}", flush=True)


def _hang() -> None:
    while True:
        time.sleep(3600)


def _hold_sockets() -> int:
    """A forked child inherits every fd, gloo's sockets included: while it lives, the peer's
    all-reduce sees no reset connection and waits."""
    pid = os.fork()
    if pid == 0:
        try:
            while True:
                time.sleep(3600)
        finally:
            os._exit(0)
    return pid


def _oom() -> None:
    import resource
    with open("/proc/self/statm") as f:
        vms = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vms + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _say(f"address space limited to {limit >> 20} MiB; allocating until MemoryError")
    hoard = []
    try:
        while True:
            hoard.append(bytearray(32 << 20))
    except MemoryError:
        n = len(hoard)
        hoard.clear()   # leave room for the worker to format and write its report
        raise MemoryError(f"fault_workload: address space exhausted after {n * 32} MiB") from None


def _junk() -> None:
    out = sys.stdout.buffer
    out.write(bytes(range(256)) * 16)
    out.write(b"\n" + b"x" * (1 << 20) + b"\n")
    out.write(b"\x1b[31mred\x1b[0m\r\n\xff\xfe invalid utf-8 \xc3\x28\n")
    out.flush()
    _say("printed junk")


def fire(plan: list[str]) -> None:
    holders = []
    for b in plan:
        if b == "hold":
            holders.append(_hold_sockets())
            _say(f"forked {holders[-1]} to hold the gloo sockets open")
            continue
        _note(b, holders=holders)
        if b == "exit3":
            _say("exiting with code 3")
            sys.stdout.flush()
            os._exit(3)
        elif b == "segfault":
            _say("segfaulting")
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(5)
        elif b == "hang_collective":
            _say("hanging while the peer waits in all-reduce")
            _hang()
        elif b == "oom":
            _oom()
        elif b == "junk":
            _junk()
        elif b == "malformed":
            path = os.environ["AUTOTUNE_RESULT"]
            with open(path, "w", encoding="utf-8") as f:
                f.write('{"schema": 1, "status": "ok", "throughput": ')
            _say("wrote a malformed result and exits 0")
            sys.stdout.flush()
            os._exit(0)
        else:
            raise ValueError(f"fault_workload: unknown behaviour {b!r}")


def before_init() -> None:
    """Called from tests/fault_site/sitecustomize.py at interpreter start-up of every rank."""
    if "--request" not in sys.argv or "AUTOTUNE_FAULTS" not in os.environ:
        return
    try:
        plan = planned_fault()
    except Exception:  # noqa: BLE001 - start-up hook: never break an unrelated interpreter
        return
    if "hang_before_init" in plan:
        _note("hang_before_init")
        _say("hanging before init")
        _hang()


def build(**kwargs):
    """mlp, small, with this rank's planned fault injected into make_batch."""
    from autotune.worker.workloads import get_workload
    spec = get_workload("mlp", {"features": 64, "hidden": 256, "depth": 2, **kwargs})
    plan = [b for b in planned_fault() if b != "hang_before_init"]
    _note("start", plan=plan)
    if not plan:
        return spec
    calls = [0]

    def make_batch(start: int, count: int, seed: int):
        calls[0] += 1
        if calls[0] == AT_BATCH:
            fire(plan)
        return spec.make_batch(start, count, seed)
    return dataclasses.replace(spec, make_batch=make_batch)


def not_a_spec():
    return 42


def raises():
    raise RuntimeError("fault_workload.raises: the user's build failed")
