"""Inside a rank: one window of training. Warmup, then the timed window (or a quality run's
fixed schedule), then what the window was asked for besides: the ceiling (the same step with its
batches resident) or the held-out evaluation of a quality run.

Warmup steps are excluded from the window; every rank agrees on the number of timed steps (one
all-reduce) so no rank waits in a collective its peers never enter.
"""
from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.distributed as dist

from ..measure.early_stop import losing
from ..result import Outcome
from . import device as _device, gradnoise
from .agree import agree_steps
from .trainer import Trainer, say


def train(run: Trainer) -> None:
    """Train this rank's window: results go into `run.res`."""
    req, res = run.req, run.res
    if run.quality:
        n_steps = chunk = run.total_steps
    else:
        n_steps = _warmup(run)
        # Steps keep speeding up for a while after warmup (allocator and oneDNN caches), so the
        # estimate runs short; rank 0 re-decides after each chunk of about a tenth of the window.
        chunk = max(1, n_steps // 10)
    say(run.rank, f"{req.mode}: about {n_steps} steps of global batch {run.global_batch} = "
                  f"{run.world_size} ranks x {run.accum} x {run.micro}")
    _timed_window(run, chunk)
    say(run.rank, f"window {res['window_seconds']:.3f}s, {res['throughput']:.1f} samples/s, "
                  f"loss {res['final_loss']}")
    if run.quality:
        _held_out(run)
    elif _wants_ceiling(run):
        _ceiling(run)
    if run.watch is not None and not run.quality:   # what compiling cost (measure/compile_cost)
        res["compile"] = run.watch.report()
    res["status"] = Outcome.OK


# A compiled run warms up past its warm-up steps while any rank still compiles (a recompile in
# step 2 of a model whose first micro-batch ran under no_sync), at most this many steps more.
MORE_WARMUP_WHILE_COMPILING = 4


def _warmup(run: Trainer) -> int:
    """The untimed warmup steps; returns the timed steps every rank agreed on. A compiled run
    compiles here on every rank (in its first step, which DDP's all-reduce makes every rank
    finish before any goes on), so the window, which opens on a barrier, times none of it."""
    req = run.req
    say(run.rank, f"warmup {req.warmup_steps} steps")
    n = 0
    while n < req.warmup_steps or _still_compiling(run, n):
        t = time.perf_counter()
        run.step(run.index)
        run.index += 1
        run.res["warmup_times"].append(time.perf_counter() - t)
        if run.watch is not None:
            run.watch.warmup_step()
        n += 1
    return agree_steps(req, run.res["warmup_times"], run.comm)


def _still_compiling(run: Trainer, n: int) -> bool:
    """Whether a compiled run takes one more warm-up step: none taken yet, or any rank compiled
    in the last one (a collective every rank reaches after the same steps)."""
    if run.watch is None or n >= run.req.warmup_steps + MORE_WARMUP_WHILE_COMPILING:
        return False
    if n == 0:
        return True
    flag = torch.tensor([1 if run.watch.frames_by_step[-1] else 0], dtype=torch.int64,
                        device=run.comm)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _timed_window(run: Trainer, chunk: int) -> Any:
    """The timed steps, in chunks after each of which rank 0 decides whether the window is long
    enough; records the window in `res`. Returns the last loss."""
    req, res = run.req, run.res
    checkpoints = {max(1, round(run.total_steps * k / req.checkpoints))
                   for k in range(1, req.checkpoints + 1)} if run.quality else set()
    res["curve"] = []
    dist.barrier()
    # Other processes on the machine distort a window (seen: 20x slower with 2 OpenMP threads on
    # 2 busy cores); load average and CPU time actually received let a reader spot such trials.
    load0, cpu0 = os.getloadavg()[0], time.process_time()
    run.clock.reset()
    if run.watch is not None:
        run.watch.window_start()
    t0, res["timed_start_at"] = time.perf_counter(), time.time()
    loss, done, n_steps = None, False, 0
    race = _Race(req.leader_throughput, run.global_batch) if run.rank == 0 else None
    while not done:
        race_t0, race_n = time.perf_counter(), n_steps
        for _ in range(chunk):
            t = time.perf_counter()
            loss = run.step(run.index)
            res["step_times"].append(time.perf_counter() - t)
            run.index += 1
            n_steps += 1
            if run.index in checkpoints:   # the learning curve, for time-to-accuracy
                # a quarter of the held-out set along the way, all of it at the end
                last = run.index == run.total_steps
                q = run.evaluate(limit=None if last else max(1, run.spec.eval_samples // 4))
                res["curve"].append([run.index * run.global_batch, q])
        if run.quality:
            break
        if race is not None:
            race.lap(n_steps - race_n, time.perf_counter() - race_t0)
        done = _window_done(run, n_steps, time.perf_counter() - t0, race)
        chunk = min(chunk, req.max_steps - n_steps) or 1
    dist.barrier()
    window, res["timed_end_at"] = time.perf_counter() - t0, time.time()
    if run.watch is not None:
        run.watch.window_end()
    res["contention"] = {"loadavg_start": load0, "loadavg_end": os.getloadavg()[0],
                         "cpu_seconds": time.process_time() - cpu0}
    res["phases"] = run.clock.report()
    samples = run.global_batch * n_steps
    res.update(window_seconds=window, timed_steps=n_steps, samples=samples,
               throughput=samples / window, final_loss=None if loss is None else float(loss))
    return loss


class _Race:
    """Rank 0's view of a speed run against the search's leader: each chunk of the timed window
    is one window of the early-stopping rule (measure/early_stop.py)."""

    def __init__(self, leader: float | None, global_batch: int) -> None:
        self.leader, self.global_batch = leader, global_batch
        self.windows: list[float] = []

    def lap(self, steps: int, seconds: float) -> None:
        if steps > 0 and seconds > 0:
            self.windows.append(steps * self.global_batch / seconds)

    def losing(self) -> str | None:
        """Why this run stops now (None: it goes on)."""
        if not self.leader:
            return None
        decision = losing(self.windows, self.leader)
        return decision.reason if decision.stop else None


def _window_done(run: Trainer, n_steps: int, elapsed: float, race: _Race | None) -> bool:
    """Rank 0's decision, broadcast: all ranks must run the same number of DDP steps. A run
    clearly losing to the leader ends here too, and rank 0's report says why."""
    req = run.req
    done = n_steps >= req.max_steps or (elapsed >= req.target_seconds
                                        and n_steps >= req.min_steps)
    why = race.losing() if race is not None and not done else None
    if why is not None:
        run.res["stopped_early"] = why
        say(run.rank, why)
    return _agreed(run, done or why is not None)


def _agreed(run: Trainer, yes: bool) -> bool:
    """Rank 0's yes or no, the same on every rank."""
    flag = torch.tensor([1 if yes else 0], dtype=torch.int64, device=run.comm)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _wants_ceiling(run: Trainer) -> bool:
    """Whether this window also times the ceiling: asked for, a whole window (a run stopped as
    losing is far from any ceiling), and faster than the ceiling its class has (rank 0 decides)."""
    req, res = run.req, run.res
    if not req.ceiling_seconds:
        return False
    yes = not res.get("stopped_early") and res["throughput"] >= (req.ceiling_above or 0.0)
    return _agreed(run, yes)


def _ceiling(run: Trainer) -> None:
    """The same step with the rank's batches already resident (nothing to wait for or copy):
    what the device does for this workload and math. The model keeps training on them, which
    changes nothing of what a speed window measures; the data pipeline is left where it was."""
    req, res = run.req, run.res
    source, run.next_batch = run.next_batch, None
    try:
        run.next_batch = run.resident()
        warm = [time.perf_counter()]
        for k in range(2):             # the resident batches' first pass: cache and layout
            run.step(run.index + k + 1)
            warm.append(time.perf_counter())
        per_step = min(b - a for a, b in zip(warm, warm[1:]))
        steps = max(req.min_steps, min(req.max_steps, int(req.ceiling_seconds / max(per_step,
                                                                                    1e-6))))
        t = torch.tensor([steps], dtype=torch.int64, device=run.comm)
        dist.broadcast(t, src=0)
        dist.barrier()
        run.clock.reset()
        t0 = time.perf_counter()
        for k in range(int(t.item())):
            run.step(run.index + k + 3)
        dist.barrier()
        window = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - the window's measurement stands without it
        if _device.is_oom(exc):
            raise
        res["ceiling_problem"] = f"the ceiling could not be timed: {type(exc).__name__}: {exc}"
        say(run.rank, res["ceiling_problem"])
        return
    finally:
        run.next_batch = source
    res["ceiling"] = run.global_batch * int(t.item()) / window
    res["ceiling_phases"] = run.clock.report()
    res["ceiling_steps"], res["ceiling_step_s"] = int(t.item()), window / int(t.item())
    say(run.rank, f"ceiling {res['ceiling']:.1f} samples/s (batches resident)")


def _held_out(run: Trainer) -> None:
    """A quality run's held-out accuracy (the curve's last point) and gradient noise scale."""
    req, res = run.req, run.res
    res["accuracy"] = res["curve"][-1][1] if res["curve"] else run.evaluate()
    probes = [_joined(run.rank_batches(run.index + k), run.prepare, run.setup)
              for k in range(req.gns_probes)]
    res["gns"] = gradnoise.probe(run.model, probes, run.spec.loss_fn, run.amp,
                                 run.world_size, device=run.comm) if req.gns_probes else None
    say(run.rank, f"held-out {run.spec.metric}: {res['accuracy']:.4f}; curve {res['curve']}")


def _joined(batches, prepare, setup):
    return (prepare(torch.cat([x for x, _ in batches])),
            _device.to_device(setup, torch.cat([y for _, y in batches])))
