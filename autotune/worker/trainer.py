"""One rank's training, set up once per window's configuration: the wrapped model, its
optimizer, the batch split and where batches come from; its methods are the steps. A worker that
serves several windows (worker/session.py) keeps a trainer while the configuration, the mode and
the seed stay the same, and builds a new one when an in-process knob changes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import traceback
from typing import Any

import torch

from ..config import REFERENCE_GLOBAL_BATCH
from ..measure.compile_cost import failed_reason
from ..plan.launch_plan import EXIT_BACKEND_UNAVAILABLE, EXIT_WORKLOAD_ERROR, WorkerRequest
from ..result import Outcome
from ..training import lr_at, lr_scale, split_batch
from . import data, device as _device
from .agree import held_out_accuracy
from .compiled import CompileWatch, compile_error, compile_message, forget
from .phases import PhaseClock, tell_allreduce_apart
from .workloads import rank_slice


class Stop(Exception):
    """Ends the rank early with an exit code the runner classifies (78, 79, 80, 1)."""

    def __init__(self, code: int, status: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.status, self.reason = code, status, reason


def say(rank: int, text: str) -> None:
    print(f"[autotune worker rank {rank}] {text}", flush=True)


@dataclasses.dataclass(kw_only=True)
class Trainer:
    req: WorkerRequest
    spec: Any
    rank: int
    world_size: int
    res: dict[str, Any]
    amp: Any
    setup: _device.DeviceSetup
    comm: torch.device            # where collectives' tensors live
    ddp: Any
    step_model: Any               # ddp (of the compiled model, when asked)
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
    clock: PhaseClock
    facts: dict[str, Any]         # what every window's report says of this trainer
    index: int = 0                # the next global step
    watch: CompileWatch | None = None   # this window's, when compiled (worker/compiled.py)

    @classmethod
    def build(cls, req: WorkerRequest, spec, model: torch.nn.Module, rank: int,
              world_size: int, res: dict[str, Any], amp,
              setup: _device.DeviceSetup) -> "Trainer":
        from torch.nn.parallel import DistributedDataParallel as DDP
        cfg = req.config
        global_batch = int(cfg.get("global_batch") or REFERENCE_GLOBAL_BATCH)
        micro, accum = split_batch(global_batch, world_size, cfg.get("batch_size"))
        channels_last = bool(cfg.get("channels_last")) and spec.input_is_image
        model = model.to(setup.name)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        scale = lr_scale(cfg.get("lr_rule", "linear"), global_batch, req.reference_batch)
        opt = torch.optim.SGD(model.parameters(), lr=spec.lr * scale, momentum=0.9)
        facts: dict[str, Any] = {"channels_last_applied": channels_last, "ipex_applied": False,
                                 "global_batch": global_batch, "micro_batch": micro,
                                 "accumulation": accum, "lr": spec.lr * scale,
                                 "compiled": bool(cfg.get("compile"))}
        if cfg.get("ipex") == "on":
            model, opt = _with_ipex(model, opt, cfg, facts)
        if facts["compiled"]:
            # The model is compiled, then wrapped: torch.compile(ddp) on torch 2.13 breaks the
            # graph at DDP's _inside_ddp_forward (dynamo skips it) and compiled nothing at all
            # (no inductor graph, on 1 rank of the mlp), while DDP(torch.compile(model)) compiles
            # the whole model; DDP's reducer stays eager, so its comm hook still tells the
            # all-reduce apart. Its buckets then all-reduce after the compiled backward, not
            # overlapped with it, which the split shows as all-reduce.
            model = torch.compile(model)
        ddp = DDP(model, **_device.ddp_kwargs(setup))
        clock = PhaseClock(cuda=setup.index is not None, enabled=req.time_phases)
        tell_allreduce_apart(ddp, clock, world_size=world_size)
        quality = req.mode == "accuracy"
        total_steps = max(1, math.ceil(req.accuracy_samples / global_batch)) if quality else 0
        run = cls(
            req=req, spec=spec, rank=rank, world_size=world_size, res=res, amp=amp, setup=setup,
            comm=_device.collective_device(setup, cfg.get("backend", "gloo")), ddp=ddp,
            step_model=ddp,
            # fp16 gradients underflow without loss scaling; bf16 has fp32's range, needs none.
            opt=opt, scaler=_device.grad_scaler(setup),
            # Global step `index` covers samples [index*G, (index+1)*G) however it is split, so
            # a DDP configuration trains on exactly the samples of the default launch's step.
            next_batch=data.batch_source(spec, cfg, rank=rank, batch_size=micro * accum,
                                         world_size=world_size, seed=req.seed),
            global_batch=global_batch, micro=micro, accum=accum, channels_last=channels_last,
            scale=scale, quality=quality, total_steps=total_steps, clock=clock, facts=facts,
            # Quality runs follow a schedule (Goyal et al.'s warm-up where the rate was scaled
            # up, then cosine decay to zero): at a constant rate the last iterate oscillates,
            # and its held-out accuracy varied by 12 points between neighbouring checkpoints.
            warmup=math.ceil(0.1 * total_steps) if scale > 1 else 0)
        run.attach(req, res, built=True)
        return run

    def attach(self, req: WorkerRequest, res: dict[str, Any], *, built: bool = False) -> None:
        """Serve the window `req`, reporting into `res` (a kept trainer's next window; `built`:
        this window built it, and compiles it in its first step)."""
        self.req, self.res = req, res
        self.watch = CompileWatch(built=built) if self.facts["compiled"] else None
        res.update(self.facts)
        if self.facts.get("ipex_version") and isinstance(res.get("in_force"), dict):
            res["in_force"]["ipex"] = self.facts["ipex_version"]

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

    def resident(self, count: int = 4):
        """`count` of this rank's batches made once and kept where the step reads them (on the
        GPU for GPUs): a batch source for the ceiling, with nothing to wait for or copy."""
        made = []
        for step in range(count):
            x, y = self.spec.make_batch(*rank_slice(step, self.rank, self.micro * self.accum,
                                                    self.world_size), self.req.seed)
            made.append((self.prepare(x), _device.to_device(self.setup, y)))
        return lambda index: made[index % count]

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
        clock, total = self.clock, None
        clock.begin()
        batches = self.rank_batches(index)
        clock.lap("data")
        for m, (x, y) in enumerate(batches):
            # DDP all-reduces in the last micro-batch's backward; the others only accumulate.
            sync = contextlib.nullcontext() if m == self.accum - 1 else self.ddp.no_sync()
            x, y = self.prepare(x), _device.to_device(self.setup, y)
            clock.lap("copy")
            with sync:
                with self.amp():
                    loss = self.spec.loss_fn(self.step_model(x), y) / self.accum
                self.scaler.scale(loss).backward()
            clock.lap("compute")
            total = loss.detach() if total is None else total + loss.detach()
        self.scaler.step(self.opt)
        self.scaler.update()
        clock.lap("optimizer")
        _device.synchronize(self.setup)
        clock.end_step()
        return total

    def _first_step(self) -> torch.Tensor:
        self.res["first_step_at"] = time.time()
        try:
            return self._step(0)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            if _device.is_oom(exc):
                raise
            if self.watch is not None and compile_error(exc):   # the compiler's, not the workload's
                traceback.print_exc()
                raise Stop(1, Outcome.CRASH, failed_reason(compile_message(exc))) from exc
            traceback.print_exc()
            raise Stop(EXIT_WORKLOAD_ERROR, Outcome.WORKLOAD_ERROR,
                       f"workload {self.req.workload!r} failed in its first step: "
                       f"{type(exc).__name__}: {exc}") from exc

    @property
    def model(self) -> torch.nn.Module:
        """The trained model itself, eager: held-out evaluation and the gradient-noise probe
        run it as it is (the compiled one would compile their no_grad graphs too)."""
        return getattr(self.ddp.module, "_orig_mod", self.ddp.module)

    def evaluate(self, limit: int | None = None) -> float:
        return held_out_accuracy(self.spec, self.model, self.rank, self.world_size,
                                 self.prepare, self.amp, self.comm, limit=limit)

    def close(self) -> None:
        """Let go of the model, its pipeline workers and the device memory they cached (an idle
        worker of a session keeps none of it while the others are timed)."""
        close = getattr(self.next_batch, "close", None)
        if close is not None:
            close()
        self.ddp = self.step_model = self.opt = self.next_batch = None
        if self.facts["compiled"]:
            forget()   # the next trainer compiles afresh, not as a recompile of this one
        if self.setup.index is not None:
            torch.cuda.empty_cache()


def _with_ipex(model: torch.nn.Module, opt: torch.optim.Optimizer, cfg: dict[str, Any],
               facts: dict[str, Any]):
    try:
        import intel_extension_for_pytorch as ipex
    except Exception as exc:  # noqa: BLE001
        raise Stop(EXIT_BACKEND_UNAVAILABLE, Outcome.UNAVAILABLE,
                   f"ipex=on but intel_extension_for_pytorch does not import: {exc}") from exc
    # IPEX's documented DDP order: optimize() first (it may swap modules and re-create the
    # optimizer's state), then wrap the returned model, so DDP hooks the parameters that train.
    # bf16 keeps fp32 master weights inside IPEX's optimizer; everything else stays fp32.
    dtype = torch.bfloat16 if cfg.get("precision") == "bf16" else torch.float32
    model, opt = ipex.optimize(model, optimizer=opt, dtype=dtype)
    facts["ipex_applied"] = True
    facts["ipex_version"] = str(getattr(ipex, "__version__", "unknown"))
    return model, opt
