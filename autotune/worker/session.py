"""A rank that serves several timed windows in one process: the first request's window, then
each next request (plan/launch_plan.window_request_path) until a stop, an idle timeout or a
failure. The process, torch, the device, the process group and the workload stay; a window whose
configuration differs only in window knobs (config.WINDOW_KNOBS: precision, batch, channels_last,
the data pipeline) builds a new trainer, and one with the same configuration keeps the last one
(verification's rounds of one configuration). run/session.py is the other side.

What the window must find in force is checked again for every window (precision is a window
knob), and a request whose launch differs from the running one is refused: it would measure a
launch this process is not.
"""
from __future__ import annotations

import gc
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from ..config import Config, launch_part
from ..measure.compile_cost import COMPILE_FAILED
from ..plan.launch_plan import (EXIT_BACKEND_UNAVAILABLE, EXIT_BAD_CONFIG, EXIT_WORKLOAD_ERROR,
                                STOP_REQUEST, WorkerRequest, idle_report_path,
                                window_request_path, window_result_path)
from ..result import Outcome
from ..util.channel import Channel
from ..util.compile_cache import cache_problem
from . import device as _device
from . import in_force
from .bounds import request_problem
from .dist import gather_problems
from .train import train
from .trainer import Stop, Trainer, say
from .workloads import get_workload

POLL_S = 0.01
# While it waits for its next window, a rank says this often how much CPU it has used since its
# last one: across hosts the runner cannot see it, and a launch that polls while idle would take
# the cores of another launch's window (run/spanning_session.py judges it).
IDLE_REPORT_S = 1.0


@dataclass
class Window:
    """The window being served: its request's result dict and where it is written: a name in
    the trial folder, sent through the launch's `channel` (a rank of a trial), or a path (a
    standalone run, which has no trial folder)."""
    res: dict[str, Any]
    path: str
    channel: Channel | None = None


@dataclass
class RankContext:
    """What one rank keeps from window to window."""
    rank: int
    world_size: int
    local_rank: int
    plan_index: int                   # which planned rank this process is (autotune.bind)
    request_path: str                 # names in the trial folder (the first window's)
    result_path: str
    first: WorkerRequest
    cpus: int                         # the CPUs this rank had when it started (worker/bounds.py)
    channel: Channel | None = None    # the launch's channel in its trial folder (util/channel.py)
    spec: Any = None
    trainer: Trainer | None = None
    done: list[float] = field(default_factory=list)   # when each window's result was written


def run_window(ctx: RankContext, req: WorkerRequest, res: dict[str, Any]) -> None:
    """One window: its request within this rank's own bounds, the device and precision for its
    configuration, what is in force checked, the trainer kept or built, the window trained;
    results in `res`."""
    problem = request_problem(req, ctx.cpus)
    if problem:
        raise Stop(EXIT_BAD_CONFIG, Outcome.BAD_CONFIG, f"the request is out of bounds: {problem}")
    cfg = req.config
    if launch_part(Config(**cfg)) != launch_part(Config(**ctx.first.config)) or \
            req.workload != ctx.first.workload or req.workload_args != ctx.first.workload_args:
        raise Stop(EXIT_BAD_CONFIG, Outcome.BAD_CONFIG,
                   "a window asked for another launch than this process runs")
    try:
        setup = _device.decide_here(cfg, ctx.local_rank)
    except _device.DeviceProblem as exc:
        raise Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE, str(exc)) from exc
    amp = _device.autocast(setup)
    _check_in_force(ctx, req, res, setup, amp)
    trainer = ctx.trainer
    if not _keeps(trainer, req):
        _drop_trainer(ctx)
        trainer = ctx.trainer = _build(ctx, req, res, setup, amp)
    else:
        trainer.attach(req, res)
    res["model_at"] = time.time()
    try:
        train(trainer)
    finally:
        if req.mode != "throughput":   # a quality run's model is its seed's: never reused
            _drop_trainer(ctx)


def _check_in_force(ctx: RankContext, req: WorkerRequest, res: dict[str, Any],
                    setup: _device.DeviceSetup, amp) -> None:
    """The launch was checked before the first window; a later one checks what a window can
    change (its precision, its device). Its affinity, read again, would be the main thread's
    alone, which Intel OpenMP with KMP_AFFINITY=compact pins to one core once it has run."""
    import torch.distributed as dist
    with amp():  # the very context the training step enters
        res["in_force"] = in_force.collect(in_force.current_autocast(setup.type))
    res["in_force"].update(_device.in_force(setup), backend=dist.get_backend())
    expect = req.ranks[ctx.plan_index]
    if req is not ctx.first:
        expect = replace(expect, cpus=None, threads=None, allocator=None, omp_runtime=None,
                         mem_node=None, mem_policy=None, backend=None)
    reason = gather_problems(in_force.differences(expect, res["in_force"]), ctx.world_size)
    if reason:
        res["bad_config"] = reason
        raise Stop(EXIT_BAD_CONFIG, Outcome.BAD_CONFIG, reason)
    say(ctx.rank, f"in force: {res['in_force']}")


def _keeps(trainer: Trainer | None, req: WorkerRequest) -> bool:
    """The last window's trainer serves this one: the same configuration, both speed windows
    (its model may go on training; a quality run starts from its seed)."""
    return trainer is not None and req.mode == "throughput" and \
        trainer.req.mode == "throughput" and trainer.req.config == req.config and \
        trainer.req.seed == req.seed and trainer.req.time_phases == req.time_phases


def _build(ctx: RankContext, req: WorkerRequest, res: dict[str, Any],
           setup: _device.DeviceSetup, amp) -> Trainer:
    if req.config.get("compile"):
        _check_compile_cache(ctx)
    model = error = None
    try:
        if ctx.spec is None:
            ctx.spec = get_workload(req.workload, req.workload_args)
        model = ctx.spec.build_model(req.seed)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"build_model returned {type(model).__name__}, "
                            "expected torch.nn.Module")
    except Exception as exc:  # noqa: BLE001 - the user's own error text is the message
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    problem = gather_problems([error] if error else [], ctx.world_size)
    if problem:
        raise Stop(EXIT_WORKLOAD_ERROR, Outcome.WORKLOAD_ERROR,
                   f"workload {req.workload!r}: {problem}")
    assert model is not None
    return Trainer.build(req, ctx.spec, model, ctx.rank, ctx.world_size, res, amp, setup)


def _check_compile_cache(ctx: RankContext) -> None:
    """Every rank's compile cache is this user's own before any rank compiles (issue 59: never
    torch's default under /tmp; util/compile_cache.py); agreed, so no rank waits for a peer
    that stopped."""
    problem = gather_problems([p] if (p := cache_problem(os.environ)) else [], ctx.world_size)
    if problem:
        # named as a failed compile: the search stops offering compiled launches after it
        raise Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE, f"{COMPILE_FAILED}: {problem}")


def _drop_trainer(ctx: RankContext) -> None:
    if ctx.trainer is not None:
        ctx.trainer.close()
        ctx.trainer = None
        gc.collect()


def serve(ctx: RankContext, window: Window, new_result: Callable[[WorkerRequest], dict],
          finish: Callable[[Window], None]) -> None:
    """The first window, then while the first request asks for a session, each next one:
    `finish` writes a window's result; `window` is updated to the one being served (a failure
    propagates with it, and the caller writes its result)."""
    run_window(ctx, ctx.first, window.res)
    n = 0
    while ctx.first.serve_s > 0 and ctx.channel is not None:
        finish(window)
        n += 1
        req = _next_request(ctx.channel, window_request_path(ctx.request_path, n),
                            ctx.first.serve_s, _idle_reporter(ctx, n - 1))
        if req is None:
            return
        window.res, window.path = new_result(req), window_result_path(ctx.result_path, n)
        window.res["request_seen_at"] = time.time()
        run_window(ctx, req, window.res)


def _idle_reporter(ctx: RankContext, after: int) -> Callable[[float, float], None]:
    """Sends, through the launch's channel, the CPU seconds this process (every thread of it:
    a backend's progress threads too) used in the wall seconds since window `after` ended."""
    assert ctx.channel is not None
    channel, name = ctx.channel, idle_report_path(ctx.result_path)
    return lambda cpu_s, wall_s: channel.send(name, {"after_window": after, "cpu_s": cpu_s,
                                                     "wall_s": wall_s})


def _next_request(channel: Channel, name: str, wait_s: float,
                  report: Callable[[float, float], None]) -> WorkerRequest | None:
    """The next window's request once a file of this launch's has the name (the runner writes it
    whole, with the launch's token: one without it is ignored and counted, util/channel.py);
    None on a stop request or after `wait_s` without one. Meanwhile, every IDLE_REPORT_S, the
    CPU used since the wait began is `report`ed."""
    began, cpu_began = time.monotonic(), time.process_time()
    deadline, report_at = began + wait_s, began + IDLE_REPORT_S
    while (now := time.monotonic()) < deadline:
        data = channel.receive(name)
        if data is not None:
            return None if data == STOP_REQUEST else WorkerRequest.from_json(data)
        if now >= report_at:
            report(time.process_time() - cpu_began, now - began)
            report_at = now + IDLE_REPORT_S
        time.sleep(POLL_S)
    return None
