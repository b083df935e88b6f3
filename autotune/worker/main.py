"""One rank of a trial: `python -m autotune.worker --request REQUEST.json`.

The protocol (env, request, result file, exit codes) is described in plan/launch_plan.py.

Order matters: threads are set before the process group exists, what is in force is checked before
anything is built (a trial that measures the wrong configuration is worse than a failed one), and
every rank agrees on failure with one collective so a single bad rank cannot leave its peers
blocked in DDP's constructor until the trial timeout.
"""
from __future__ import annotations

import time

_IMPORTED_AT = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from datetime import timedelta  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

_TORCH_AT = time.time()

from ..util.atomic_json import write_json  # noqa: E402
from ..comm.ccl.shm import remove_own  # noqa: E402
from ..plan.launch_plan import (EXIT_BACKEND_UNAVAILABLE, EXIT_BAD_CONFIG,  # noqa: E402
                                EXIT_STRANGER, STANDALONE_SECONDS, RankExpect,
                                WorkerRequest)
from ..util.channel import (FOLDER_ENV, TOKEN_ENV, TOKEN_FILE_ENV, Channel,  # noqa: E402
                            read_token_file)
from ..util.checked_folder import FolderRefused, NotOurs, open_private  # noqa: E402
from . import lifeline, rendezvous  # noqa: E402
from .bounds import request_problem  # noqa: E402
from ..result import Outcome  # noqa: E402
from . import device as _device  # noqa: E402
from .dist import backend_problem  # noqa: E402
from .session import RankContext, Window, serve  # noqa: E402
from .trainer import Stop as _Stop, say as _say  # noqa: E402

SCHEMA_VERSION = 1
# The CPUs this rank may use, read before anything runs (worker/bounds.py says why then)
_CPUS = len(os.sched_getaffinity(0))


def _started_at() -> float:
    try:
        import psutil
        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - psutil is a convenience; import time is close enough
        return _IMPORTED_AT


def _empty_result(rank: int, world_size: int, req: WorkerRequest | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION, "rank": rank, "world_size": world_size, "pid": os.getpid(),
        # status uses the runner's outcome names (autotune/result.py) so a rank can declare its own outcome
        "status": Outcome.CRASH, "reason": None, "bad_config": None, "error": None,
        "mode": req.mode if req else None, "workload": req.workload if req else None,
        "in_force": None, "channels_last_applied": False, "compiled": False, "ipex_applied": False,
        "step_times": [], "warmup_times": [], "window_seconds": None, "timed_steps": 0,
        "samples": 0, "throughput": None, "accuracy": None, "final_loss": None,
        "started_at": _started_at(), "torch_at": _TORCH_AT, "group_at": None,
        "first_step_at": None, "timed_start_at": None,
        "timed_end_at": None, "contention": None, "peak_rss_bytes": None,
        "torch_version": torch.__version__,
    }


def write_result(path: str, result: dict[str, Any]) -> None:
    """Atomic: a reader (the runner) sees the old file or the complete new one, never a torn one."""
    write_json(path, result, indent=1)


def _init_group(backend: str, rank: int, world_size: int, channel: Channel | None,
                comm: torch.device) -> None:
    """The process group, met through the trial's own store, and every peer's proof that it
    is this launch's, before any other collective (worker/rendezvous.py)."""
    problem = backend_problem(backend)
    if problem:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE, f"backend {backend}: {problem}")
    timeout = timedelta(seconds=float(os.environ.get("AUTOTUNE_INIT_TIMEOUT", "300")))
    # A standalone single rank started by hand has no rendezvous variables; a private TCP store
    # on a free port serves it without touching os.environ.
    init, store = "env://", rendezvous.trial_store(channel, backend, rank, world_size, timeout)
    if store is None and world_size == 1 and "MASTER_ADDR" not in os.environ:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            init = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    try:
        dist.init_process_group(backend, init_method=None if store else init, store=store,
                                rank=rank, world_size=world_size, timeout=timeout)
    except (ValueError, NotImplementedError) as exc:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE,
                    f"backend {backend}: {type(exc).__name__}: {exc}") from exc
    if store is not None and channel is not None and \
            (stranger := rendezvous.prove(channel.token, rank, world_size, comm)):
        raise _Stop(EXIT_STRANGER, Outcome.CRASH, stranger)


def run(req: WorkerRequest, rank: int, world_size: int, window: Window, *,
        request_name: str = "") -> None:
    """Threads, device and process group once; then the request's window and, for a session,
    the windows after it (worker/session.py). Nothing is set up before the request is found
    within this rank's own bounds (worker/bounds.py)."""
    cfg = req.config
    problem = request_problem(req, _CPUS)
    if problem:
        raise _Stop(EXIT_BAD_CONFIG, Outcome.BAD_CONFIG, f"the request is out of bounds: {problem}")
    # Across hosts the launcher's rendezvous may number ranks in another order than the plan;
    # the rank shim (autotune.bind) then says which planned rank this process is.
    plan_index = int(os.environ.get("AUTOTUNE_PLAN_INDEX", rank))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    threads = cfg.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    try:  # the GPU is made current before the group: NCCL binds to the current device
        setup = _device.decide_here(cfg, local_rank)
        _device.activate(setup)
    except _device.DeviceProblem as exc:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE, str(exc)) from exc
    _say(rank, f"init {cfg.get('backend', 'gloo')} group, world size {world_size}, {setup.name}")
    backend = cfg.get("backend", "gloo")
    _init_group(backend, rank, world_size, window.channel,
                _device.collective_device(setup, backend))
    window.res["group_at"] = time.time()
    ctx = RankContext(rank=rank, world_size=world_size, local_rank=local_rank,
                      plan_index=plan_index, request_path=request_name,
                      result_path=window.path, first=req, cpus=_CPUS, channel=window.channel)
    serve(ctx, window, lambda r: _empty_result(rank, world_size, r), _finish)


def _finish(window: Window) -> None:
    """A window's result on disk (a session's rank then waits for the next request): in the
    trial folder with the launch's token, and how many files this rank ignored meanwhile."""
    window.res["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if window.channel is None:   # standalone: the path the user's environment names
        write_result(window.path, window.res)
        return
    window.res["ignored_files"] = window.channel.take_ignored()
    window.channel.send(window.path, window.res)


def open_trial(request_path: str) -> tuple[Channel, str, str]:
    """(the launch's channel, the request's name, this rank's result's name): the trial folder
    reached by its path and checked as the runner checked it, and the very one the runner
    checked (util/checked_folder.py); FolderRefused otherwise. The result must be in it.
    Across hosts the token is read from the file the environment names, in that folder (a
    folder that is not the runner's has not the runner's token, and nothing this rank sends
    from there is taken)."""
    folder = open_private(os.path.dirname(os.path.abspath(request_path)),
                          identity=os.environ.get(FOLDER_ENV))
    try:
        result = folder.name_of(os.environ.get("AUTOTUNE_RESULT", ""))
        token = os.environ.get(TOKEN_ENV, "")
        if not token and os.environ.get(TOKEN_FILE_ENV):
            token = read_token_file(folder, os.environ[TOKEN_FILE_ENV])
    except (ValueError, NotOurs) as exc:
        folder.close()
        raise FolderRefused(f"the launch's token: {exc}" if isinstance(exc, NotOurs)
                            else str(exc)) from None
    return Channel(folder, token), os.path.basename(request_path), result


def _first_request(channel: Channel, name: str) -> WorkerRequest:
    data = channel.receive(name)
    if data is None:
        why = "; ".join(channel.reasons) or "no such file"
        raise _Stop(EXIT_BAD_CONFIG, Outcome.BAD_CONFIG,
                    f"the request {name} is not this launch's: {why}")
    return WorkerRequest.from_json(data)


def standalone_request(workload: str, sets: list[str], seconds: float,
                       world_size: int) -> WorkerRequest:
    """The request an exported command implies: the config from --set, the threads torch will
    use (the config's, else OMP_NUM_THREADS), and no CPU-set check (the binding tool set it)."""
    from ..config import parse_sets
    config = parse_sets(sets).to_dict()
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = config.get("threads") or (int(omp) if omp.isdigit() and int(omp) > 0 else None)
    config["threads"] = threads
    # Libraries are checked only when --set names them: under another launcher (run_cpu
    # preloads tcmalloc and libiomp5 on its own) the standalone rank cannot know them.
    named = {item.split("=", 1)[0].strip() for item in sets}
    expect = RankExpect(cpus=None, threads=threads,
                        allocator=config["allocator"] if "allocator" in named else None,
                        omp_runtime=config["omp_runtime"] if "omp_runtime" in named else None,
                        precision=config["precision"])
    return WorkerRequest(workload=workload, config=config, ranks=(expect,) * world_size,
                         target_seconds=seconds)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m autotune.worker",
        description="One rank of a trial (--request, as autotune starts it) or a standalone "
                    "training run (--workload, as an exported command starts it).")
    parser.add_argument("--request", help="WorkerRequest JSON written by the planner")
    parser.add_argument("--workload", help="standalone: workload name or module:function")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KNOB=VALUE",
                        help="standalone: a knob of the configuration (repeatable)")
    parser.add_argument("--seconds", type=float, default=STANDALONE_SECONDS,
                        help="standalone: length of the timed window (default: "
                             f"{STANDALONE_SECONDS:g})")
    args = parser.parse_args(argv)
    if (args.request is None) == (args.workload is None):
        parser.error("give exactly one of --request FILE or --workload NAME")
    return args


def _trial_window(request: str | None, rank: int, world_size: int) -> tuple[Window, str]:
    """The first window (where its result goes) and the request's name: in the trial folder,
    checked, for a rank of a trial; by the environment's path for a standalone run. A folder
    refused ends the rank at once, with nothing in it read or written."""
    window = Window(res=_empty_result(rank, world_size, None),
                    path=os.environ.get("AUTOTUNE_RESULT", f"rank{rank}.result.json"))
    if request is None:
        return window, ""
    try:
        window.channel, request_name, window.path = open_trial(request)
    except FolderRefused as exc:
        print(f"[autotune worker rank {rank}] refusing the trial folder: {exc}",
              file=sys.stderr, flush=True)
        os._exit(EXIT_BAD_CONFIG)
    return window, request_name


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if args.request is not None:   # across hosts: end with the runner's end of the launch
        lifeline.hold(rank)
    window, request_name = _trial_window(args.request, rank, world_size)
    code = 1
    try:
        if window.channel is not None:
            req = _first_request(window.channel, request_name)
        else:
            req = standalone_request(args.workload, args.sets, args.seconds, world_size)
        window.res = _empty_result(rank, world_size, req)
        run(req, rank, world_size, window, request_name=request_name)
        code = 0
    except _Stop as stop:
        window.res.update(status=stop.status, reason=stop.reason)
        code = stop.code
        print(f"[autotune worker rank {rank}] {stop.status}: {stop.reason}", file=sys.stderr,
              flush=True)
    except BaseException as exc:  # noqa: BLE001 - any failure is still a written result
        oom = _device.is_oom(exc)
        window.res.update(status=Outcome.OOM if oom else Outcome.CRASH,
                          reason=f"{type(exc).__name__}: {exc}", error=traceback.format_exc())
        traceback.print_exc()
    res = window.res
    try:
        _finish(window)
    except OSError as exc:
        print(f"[autotune worker rank {rank}] cannot write result {window.path}: {exc}",
              file=sys.stderr, flush=True)
        code = code or 1
    if args.request is None:  # standalone: one JSON line a wrapper script can parse
        print(json.dumps({k: res[k] for k in ("rank", "world_size", "status", "reason",
                                              "throughput", "samples", "window_seconds",
                                              "bad_config")} | {"result": window.path}),
              flush=True)
    _say(rank, f"exit {code}")
    sys.stdout.flush()
    sys.stderr.flush()
    # gloo can abort or deadlock in ~ProcessGroupGloo when torn down with a live DDP model (seen
    # 3 of 15 runs); the result is on disk, so skip interpreter teardown altogether, and with it
    # oneCCL's removal of its shared memory, which is done here instead.
    remove_own()
    os._exit(code)


if __name__ == "__main__":
    main()
