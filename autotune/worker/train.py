"""Inside a rank: the training loop, the timed window and the held-out evaluation.

Warmup steps are excluded from the window; every rank agrees on the number of timed steps (one
all-reduce) so no rank waits in a collective its peers never enter. `_Stop` ends a rank with an
exit code the runner classifies.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist

from ..config import REFERENCE_GLOBAL_BATCH
from ..measure.early_stop import losing
from ..training import lr_at, lr_scale, split_batch
from ..plan.launch_plan import EXIT_BACKEND_UNAVAILABLE, EXIT_WORKLOAD_ERROR, WorkerRequest
from ..result import Outcome
from . import data, device as _device, gradnoise
from .agree import agree_steps, held_out_accuracy


class _Stop(Exception):
    """Ends the rank early with an exit code the runner classifies (78, 79, 80, 1)."""

    def __init__(self, code: int, status: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.status, self.reason = code, status, reason


def _say(rank: int, text: str) -> None:
    print(f"[autotune worker rank {rank}] {text}", flush=True)


def train(req: WorkerRequest, spec, model: torch.nn.Module, rank: int, world_size: int,
          res: dict[str, Any], amp, setup: _device.DeviceSetup) -> None:
    """Train this rank: warmup (speed runs), then the timed window or the quality run's fixed
    schedule, then the held-out evaluation of a quality run. Results go into `res`."""
    run = _Trainer.build(req, spec, model, rank, world_size, res, amp, setup)
    if run.quality:
        index, n_steps = 0, run.total_steps
        chunk = n_steps
    else:
        index, n_steps = _warmup(run)
        # Steps keep speeding up for a while after warmup (allocator and oneDNN caches), so the
        # estimate runs short; rank 0 re-decides after each chunk of about a tenth of the window.
        chunk = max(1, n_steps // 10)
    _say(rank, f"{req.mode}: about {n_steps} steps of global batch {run.global_batch} = "
               f"{world_size} ranks x {run.accum} x {run.micro}")
    index, loss = _timed_window(run, index, chunk)
    _say(rank, f"window {res['window_seconds']:.3f}s, {res['throughput']:.1f} samples/s, "
               f"loss {res['final_loss']}")
    if run.quality:
        _held_out(run, index)
    res["status"] = Outcome.OK


@dataclasses.dataclass(kw_only=True)
class _Trainer:
    """One rank's training, set up once: the wrapped model, its optimizer and the batch split.
    Its methods are the steps; the only state that changes is the model's and `res`."""
    req: WorkerRequest
    spec: Any
    rank: int
    world_size: int
    res: dict[str, Any]
    amp: Any
    setup: _device.DeviceSetup
    comm: torch.device            # where collectives' tensors live
    ddp: Any
    step_model: Any               # ddp, compiled when asked
    opt: torch.optim.Optimizer
    scaler: Any
    next_batch: Any
    global_batch: int
    micro: int
    accum: int
    channels_last: bool
    scale: float                  # the learning rate's multiplier for this global batch
    quality: bool                 # an accuracy run: a fixed schedule, not a timed window
    total_steps: int              # of a quality run
    warmup: int                   # learning-rate warm-up steps of a quality run

    @classmethod
    def build(cls, req: WorkerRequest, spec, model: torch.nn.Module, rank: int,
              world_size: int, res: dict[str, Any], amp,
              setup: _device.DeviceSetup) -> "_Trainer":
        from torch.nn.parallel import DistributedDataParallel as DDP
        cfg = req.config
        global_batch = int(cfg.get("global_batch") or REFERENCE_GLOBAL_BATCH)
        micro, accum = split_batch(global_batch, world_size, cfg.get("batch_size"))
        channels_last = bool(cfg.get("channels_last")) and spec.input_is_image
        res["channels_last_applied"] = channels_last
        model = model.to(setup.name)
        comm = _device.collective_device(setup, cfg.get("backend", "gloo"))
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        scale = lr_scale(cfg.get("lr_rule", "linear"), global_batch, req.reference_batch)
        opt = torch.optim.SGD(model.parameters(), lr=spec.lr * scale, momentum=0.9)
        res.update(global_batch=global_batch, micro_batch=micro, accumulation=accum,
                   lr=spec.lr * scale)
        if cfg.get("ipex") == "on":
            model, opt = _with_ipex(model, opt, cfg, res)
        ddp = DDP(model, **_device.ddp_kwargs(setup))
        res["compiled"] = bool(cfg.get("compile"))
        quality = req.mode == "accuracy"
        total_steps = max(1, math.ceil(req.accuracy_samples / global_batch)) if quality else 0
        return cls(
            req=req, spec=spec, rank=rank, world_size=world_size, res=res, amp=amp, setup=setup,
            comm=comm, ddp=ddp, step_model=torch.compile(ddp) if cfg.get("compile") else ddp,
            # fp16 gradients underflow without loss scaling; bf16 has fp32's range, needs none.
            opt=opt, scaler=_device.grad_scaler(setup),
            # Global step `index` covers samples [index*G, (index+1)*G) however it is split, so
            # a DDP configuration trains on exactly the samples of the default launch's step.
            next_batch=data.batch_source(spec, cfg, rank=rank, batch_size=micro * accum,
                                         world_size=world_size, seed=req.seed),
            global_batch=global_batch, micro=micro, accum=accum, channels_last=channels_last,
            scale=scale, quality=quality, total_steps=total_steps,
            # Quality runs follow a schedule (Goyal et al.'s warm-up where the rate was scaled
            # up, then cosine decay to zero): at a constant rate the last iterate oscillates,
            # and its held-out accuracy varied by 12 points between neighbouring checkpoints.
            warmup=math.ceil(0.1 * total_steps) if scale > 1 else 0)

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        x = _device.to_device(self.setup, x)
        if self.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def rank_batches(self, index: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        x, y = self.next_batch(index)   # this rank's share of the step, in micro-batches
        if self.accum == 1:
            return [(x, y)]
        return list(zip(x.split(self.micro), y.split(self.micro)))

    def step(self, index: int) -> torch.Tensor:
        """Global step `index`; the first one also tells a broken workload from the rest."""
        if index == 0:
            return self._first_step()
        return self._step(index)

    def _step(self, index: int) -> torch.Tensor:
        if self.quality:
            rate = lr_at(index, base_lr=self.spec.lr, scale=self.scale, warmup_steps=self.warmup)
            rate *= 0.5 * (1.0 + math.cos(math.pi * index / self.total_steps))
            for group in self.opt.param_groups:
                group["lr"] = rate
        self.opt.zero_grad(set_to_none=True)
        total = None
        for m, (x, y) in enumerate(self.rank_batches(index)):
            # DDP all-reduces in the last micro-batch's backward; the others only accumulate.
            sync = contextlib.nullcontext() if m == self.accum - 1 else self.ddp.no_sync()
            with sync:
                with self.amp():
                    out = self.step_model(self.prepare(x))
                    loss = self.spec.loss_fn(out, _device.to_device(self.setup, y)) / self.accum
                self.scaler.scale(loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        self.scaler.step(self.opt)
        self.scaler.update()
        _device.synchronize(self.setup)
        return total

    def _first_step(self) -> torch.Tensor:
        self.res["first_step_at"] = time.time()
        try:
            return self._step(0)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            if _device.is_oom(exc) or self.req.config.get("compile"):
                raise  # out of memory or a compiler failure: not the workload's fault
            traceback.print_exc()
            raise _Stop(EXIT_WORKLOAD_ERROR, Outcome.WORKLOAD_ERROR,
                        f"workload {self.req.workload!r} failed in its first step: "
                        f"{type(exc).__name__}: {exc}") from exc

    def evaluate(self, limit: int | None = None) -> float:
        return held_out_accuracy(self.spec, self.ddp.module, self.rank, self.world_size,
                                 self.prepare, self.amp, self.comm, limit=limit)


def _with_ipex(model: torch.nn.Module, opt: torch.optim.Optimizer, cfg: dict[str, Any],
               res: dict[str, Any]):
    try:
        import intel_extension_for_pytorch as ipex
    except Exception as exc:  # noqa: BLE001
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE,
                    f"ipex=on but intel_extension_for_pytorch does not import: {exc}") from exc
    # IPEX's documented DDP order: optimize() first (it may swap modules and re-create the
    # optimizer's state), then wrap the returned model, so DDP hooks the parameters that train.
    # bf16 keeps fp32 master weights inside IPEX's optimizer; everything else stays fp32.
    dtype = torch.bfloat16 if cfg.get("precision") == "bf16" else torch.float32
    model, opt = ipex.optimize(model, optimizer=opt, dtype=dtype)
    res["ipex_applied"] = True
    if isinstance(res.get("in_force"), dict):
        res["in_force"]["ipex"] = str(getattr(ipex, "__version__", "unknown"))
    return model, opt


def _warmup(run: _Trainer) -> tuple[int, int]:
    """The untimed warmup steps; returns (next step index, timed steps every rank agreed on)."""
    req = run.req
    _say(run.rank, f"warmup {req.warmup_steps} steps")
    for index in range(req.warmup_steps):
        t = time.perf_counter()
        run.step(index)
        run.res["warmup_times"].append(time.perf_counter() - t)
    return req.warmup_steps, agree_steps(req, run.res["warmup_times"], run.comm)


def _timed_window(run: _Trainer, index: int, chunk: int) -> tuple[int, Any]:
    """The timed steps from `index`, in chunks after each of which rank 0 decides whether the
    window is long enough; records the window in `res`. Returns (next index, last loss)."""
    req, res = run.req, run.res
    checkpoints = {max(1, round(run.total_steps * k / req.checkpoints))
                   for k in range(1, req.checkpoints + 1)} if run.quality else set()
    res["curve"] = []
    dist.barrier()
    # Other processes on the machine distort a window (seen: 20x slower with 2 OpenMP threads on
    # 2 busy cores); load average and CPU time actually received let a reader spot such trials.
    load0, cpu0 = os.getloadavg()[0], time.process_time()
    t0, res["timed_start_at"] = time.perf_counter(), time.time()
    loss, done, n_steps = None, False, 0
    race = _Race(req.leader_throughput, run.global_batch) if run.rank == 0 else None
    while not done:
        race_t0, race_n = time.perf_counter(), n_steps
        for _ in range(chunk):
            t = time.perf_counter()
            loss = run.step(index)
            res["step_times"].append(time.perf_counter() - t)
            index += 1
            n_steps += 1
            if index in checkpoints:   # the learning curve, for time-to-accuracy
                # a quarter of the held-out set along the way, all of it at the end
                last = index == run.total_steps
                q = run.evaluate(limit=None if last else max(1, run.spec.eval_samples // 4))
                res["curve"].append([index * run.global_batch, q])
        if run.quality:
            break
        if race is not None:
            race.lap(n_steps - race_n, time.perf_counter() - race_t0)
        done = _window_done(run, n_steps, time.perf_counter() - t0, race)
        chunk = min(chunk, req.max_steps - n_steps) or 1
    dist.barrier()
    window, res["timed_end_at"] = time.perf_counter() - t0, time.time()
    res["contention"] = {"loadavg_start": load0, "loadavg_end": os.getloadavg()[0],
                         "cpu_seconds": time.process_time() - cpu0}
    samples = run.global_batch * n_steps
    res.update(window_seconds=window, timed_steps=n_steps, samples=samples,
               throughput=samples / window, final_loss=None if loss is None else float(loss))
    return index, loss


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


def _window_done(run: _Trainer, n_steps: int, elapsed: float, race: _Race | None) -> bool:
    """Rank 0's decision, broadcast: all ranks must run the same number of DDP steps. A run
    clearly losing to the leader ends here too, and rank 0's report says why."""
    req = run.req
    done = n_steps >= req.max_steps or (elapsed >= req.target_seconds
                                        and n_steps >= req.min_steps)
    why = race.losing() if race is not None and not done else None
    if why is not None:
        run.res["stopped_early"] = why
        _say(run.rank, why)
    flag = torch.tensor([1 if done or why else 0], dtype=torch.int64, device=run.comm)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _held_out(run: _Trainer, index: int) -> None:
    """A quality run's held-out accuracy (the curve's last point) and gradient noise scale."""
    req, res = run.req, run.res
    res["accuracy"] = res["curve"][-1][1] if res["curve"] else run.evaluate()
    probes = [_joined(run.rank_batches(index + k), run.prepare, run.setup)
              for k in range(req.gns_probes)]
    res["gns"] = gradnoise.probe(run.ddp.module, probes, run.spec.loss_fn, run.amp,
                                 run.world_size, device=run.comm) if req.gns_probes else None
    _say(run.rank, f"held-out {run.spec.metric}: {res['accuracy']:.4f}; curve {res['curve']}")


def _joined(batches, prepare, setup):
    return (prepare(torch.cat([x for x, _ in batches])),
            _device.to_device(setup, torch.cat([y for _, y in batches])))
