"""One rank of a trial: `python -m autotune.worker --request REQUEST.json`.

The protocol (env, request, result file, exit codes) is described in plan_types.py.

Order matters: threads are set before the process group exists, what is in force is checked before
anything is built (a trial that measures the wrong configuration is worse than a failed one), and
every rank agrees on failure with one collective so a single bad rank cannot leave its peers
blocked in DDP's constructor until the trial timeout.
"""
from __future__ import annotations

import time

_IMPORTED_AT = time.time()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from datetime import timedelta  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from . import device as _device  # noqa: E402
from . import gradnoise, inforce, pipeline  # noqa: E402
from .config import REFERENCE_GLOBAL_BATCH  # noqa: E402
from .quality import lr_at, lr_scale, split_batch  # noqa: E402
from ._dist import backend_problem, gather_problems  # noqa: E402
from .plan_types import (EXIT_BACKEND_UNAVAILABLE, EXIT_BAD_CONFIG,  # noqa: E402
                         EXIT_WORKLOAD_ERROR, RankExpect, WorkerRequest)
from .results import BAD_CONFIG, CRASH, OK, OOM, UNAVAILABLE, WORKLOAD_ERROR  # noqa: E402
from .workloads import EVAL_SEED, get_workload, held_out_counts  # noqa: E402

SCHEMA_VERSION = 1


class _Stop(Exception):
    """Ends the rank early with an exit code the runner classifies (78, 79, 80, 1)."""

    def __init__(self, code: int, status: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.status, self.reason = code, status, reason


def _started_at() -> float:
    try:
        import psutil
        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - psutil is a convenience; import time is close enough
        return _IMPORTED_AT


def _say(rank: int, text: str) -> None:
    print(f"[autotune worker rank {rank}] {text}", flush=True)


def _empty_result(rank: int, world_size: int, req: WorkerRequest | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION, "rank": rank, "world_size": world_size, "pid": os.getpid(),
        # status uses the runner's outcome names (results.py) so a rank can declare its own outcome
        "status": CRASH, "reason": None, "bad_config": None, "error": None,
        "mode": req.mode if req else None, "workload": req.workload if req else None,
        "in_force": None, "channels_last_applied": False, "compiled": False, "ipex_applied": False,
        "step_times": [], "warmup_times": [], "window_seconds": None, "timed_steps": 0,
        "samples": 0, "throughput": None, "accuracy": None, "final_loss": None,
        "started_at": _started_at(), "first_step_at": None, "timed_start_at": None,
        "timed_end_at": None, "contention": None, "peak_rss_bytes": None,
        "torch_version": torch.__version__,
    }


def write_result(path: str, result: dict[str, Any]) -> None:
    """Atomic: a reader (the runner) sees the old file or the complete new one, never a torn one."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _init_group(backend: str, rank: int, world_size: int) -> None:
    problem = backend_problem(backend)
    if problem:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, UNAVAILABLE, f"backend {backend}: {problem}")
    timeout = timedelta(seconds=float(os.environ.get("AUTOTUNE_INIT_TIMEOUT", "300")))
    # A standalone single rank started by hand has no rendezvous variables; a private TCP store
    # on a free port serves it without touching os.environ.
    init = "env://"
    if world_size == 1 and "MASTER_ADDR" not in os.environ:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            init = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    try:
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world_size,
                                timeout=timeout)
    except (ValueError, NotImplementedError) as exc:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, UNAVAILABLE,
                    f"backend {backend}: {type(exc).__name__}: {exc}") from exc


def run(req: WorkerRequest, rank: int, world_size: int, res: dict[str, Any]) -> None:
    cfg = req.config
    # Across hosts the launcher's rendezvous may number ranks in another order than the plan;
    # the rank shim (autotune.bind) then says which planned rank this process is.
    expect = req.ranks[int(os.environ.get("AUTOTUNE_PLAN_INDEX", rank))]
    threads = cfg.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    try:  # the GPU is made current before the group: NCCL binds to the current device
        setup = _device.decide_here(cfg, int(os.environ.get("LOCAL_RANK", rank)))
        _device.activate(setup)
    except _device.DeviceProblem as exc:
        raise _Stop(EXIT_BACKEND_UNAVAILABLE, UNAVAILABLE, str(exc)) from exc
    _say(rank, f"init {cfg.get('backend', 'gloo')} group, world size {world_size}, {setup.name}")
    _init_group(cfg.get("backend", "gloo"), rank, world_size)

    amp = _device.autocast(setup)
    with amp():  # the very context the training step enters
        res["in_force"] = inforce.collect(inforce.current_autocast(setup.type))
    res["in_force"].update(_device.in_force(setup), backend=dist.get_backend())
    reason = gather_problems(inforce.differences(expect, res["in_force"]), world_size)
    if reason:
        res["bad_config"] = reason
        raise _Stop(EXIT_BAD_CONFIG, BAD_CONFIG, reason)
    _say(rank, f"in force: {res['in_force']}")

    model = spec = error = None
    try:
        spec = get_workload(req.workload, req.workload_args)
        model = spec.build_model(req.seed)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"build_model returned {type(model).__name__}, "
                            "expected torch.nn.Module")
    except Exception as exc:  # noqa: BLE001 - the user's own error text is the message
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    problem = gather_problems([error] if error else [], world_size)
    if problem:
        raise _Stop(EXIT_WORKLOAD_ERROR, WORKLOAD_ERROR, f"workload {req.workload!r}: {problem}")
    assert spec is not None and model is not None
    train(req, spec, model, rank, world_size, res, amp, setup)


def train(req: WorkerRequest, spec, model: torch.nn.Module, rank: int, world_size: int,
          res: dict[str, Any], amp, setup: _device.DeviceSetup) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    cfg = req.config
    global_batch = int(cfg.get("global_batch") or REFERENCE_GLOBAL_BATCH)
    micro, accum = split_batch(global_batch, world_size, cfg.get("batch_size"))
    share = micro * accum
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
        try:
            import intel_extension_for_pytorch as ipex
        except Exception as exc:  # noqa: BLE001
            raise _Stop(EXIT_BACKEND_UNAVAILABLE, UNAVAILABLE,
                        f"ipex=on but intel_extension_for_pytorch does not import: {exc}") from exc
        # IPEX's documented DDP order: optimize() first (it may swap modules and re-create the
        # optimizer's state), then wrap the returned model, so DDP hooks the parameters that train.
        # bf16 keeps fp32 master weights inside IPEX's optimizer; everything else stays fp32.
        dtype = torch.bfloat16 if cfg.get("precision") == "bf16" else torch.float32
        model, opt = ipex.optimize(model, optimizer=opt, dtype=dtype)
        res["ipex_applied"] = True
        if isinstance(res.get("in_force"), dict):
            res["in_force"]["ipex"] = str(getattr(ipex, "__version__", "unknown"))
    ddp = DDP(model, **_device.ddp_kwargs(setup))
    step_model = torch.compile(ddp) if cfg.get("compile") else ddp
    res["compiled"] = bool(cfg.get("compile"))
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none.
    scaler = _device.grad_scaler(setup)
    quality = req.mode == "accuracy"
    total_steps = max(1, math.ceil(req.accuracy_samples / global_batch)) if quality else 0
    # Quality runs follow a schedule (Goyal et al.'s warm-up where the rate was scaled up, then
    # cosine decay to zero): at a constant rate the last iterate oscillates, and its held-out
    # accuracy varied by 12 points between neighbouring checkpoints of one run here.
    warmup = math.ceil(0.1 * total_steps) if scale > 1 else 0
    # Global step `index` covers samples [index*G, (index+1)*G) however it is split, so a DDP
    # configuration trains on exactly the samples of the default launch's step.
    next_batch = pipeline.batch_source(spec, cfg, rank=rank, batch_size=share,
                                       world_size=world_size, seed=req.seed)

    def prepare(x: torch.Tensor) -> torch.Tensor:
        x = _device.to_device(setup, x)
        if channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def rank_batches(index: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        x, y = next_batch(index)   # this rank's share of the step, in micro-batches
        return [(x, y)] if accum == 1 else list(zip(x.split(micro), y.split(micro)))

    def step(index: int) -> torch.Tensor:
        if quality:
            rate = lr_at(index, base_lr=spec.lr, scale=scale, warmup_steps=warmup)
            rate *= 0.5 * (1.0 + math.cos(math.pi * index / total_steps))
            for group in opt.param_groups:
                group["lr"] = rate
        opt.zero_grad(set_to_none=True)
        total = None
        for m, (x, y) in enumerate(rank_batches(index)):
            # DDP all-reduces in the last micro-batch's backward; the others only accumulate.
            sync = contextlib.nullcontext() if m == accum - 1 else ddp.no_sync()
            with sync:
                with amp():
                    loss = spec.loss_fn(step_model(prepare(x)), _device.to_device(setup, y)) / accum
                scaler.scale(loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        scaler.step(opt)
        scaler.update()
        _device.synchronize(setup)
        return total

    def first_step(index: int) -> torch.Tensor:
        res["first_step_at"] = time.time()
        try:
            return step(index)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            if _device.is_oom(exc) or cfg.get("compile"):
                raise  # out of memory or a compiler failure: not the workload's fault
            traceback.print_exc()
            raise _Stop(EXIT_WORKLOAD_ERROR, WORKLOAD_ERROR,
                        f"workload {req.workload!r} failed in its first step: "
                        f"{type(exc).__name__}: {exc}") from exc

    index = 0
    if quality:
        n_steps = chunk = total_steps
    else:
        _say(rank, f"warmup {req.warmup_steps} steps")
        for _ in range(req.warmup_steps):
            t = time.perf_counter()
            first_step(index) if index == 0 else step(index)
            res["warmup_times"].append(time.perf_counter() - t)
            index += 1
        n_steps = _agree_steps(req, res["warmup_times"], comm)
        # Steps keep speeding up for a while after warmup (allocator and oneDNN caches), so the
        # estimate runs short; rank 0 re-decides after each chunk of about a tenth of the window.
        chunk = max(1, n_steps // 10)
    _say(rank, f"{req.mode}: about {n_steps} steps of global batch {global_batch} = {world_size} "
               f"ranks x {accum} x {micro}")
    checkpoints = {max(1, round(total_steps * k / req.checkpoints))
                   for k in range(1, req.checkpoints + 1)} if quality else set()
    res["curve"] = []

    dist.barrier()
    # Other processes on the machine distort a window (seen: 20x slower with 2 OpenMP threads on 2
    # busy cores); load average and CPU time actually received let a reader spot such trials.
    load0, cpu0 = os.getloadavg()[0], time.process_time()
    t0, res["timed_start_at"] = time.perf_counter(), time.time()
    loss, done, n_steps = None, False, 0
    while not done:
        for _ in range(chunk):
            t = time.perf_counter()
            loss = first_step(index) if index == 0 else step(index)
            res["step_times"].append(time.perf_counter() - t)
            index += 1
            n_steps += 1
            if index in checkpoints:   # the learning curve, for time-to-accuracy
                # a quarter of the held-out set along the way, all of it at the end
                last = index == total_steps
                q = _evaluate(spec, ddp.module, rank, world_size, prepare, amp, comm,
                              limit=None if last else max(1, spec.eval_samples // 4))
                res["curve"].append([index * global_batch, q])
        if quality:
            break
        elapsed = time.perf_counter() - t0
        done = n_steps >= req.max_steps or (elapsed >= req.target_seconds
                                            and n_steps >= req.min_steps)
        flag = torch.tensor([1 if done else 0], dtype=torch.int64, device=comm)
        dist.broadcast(flag, src=0)   # all ranks must run the same number of DDP steps
        done = bool(flag.item())
        chunk = min(chunk, req.max_steps - n_steps) or 1
    dist.barrier()
    window, res["timed_end_at"] = time.perf_counter() - t0, time.time()
    res["contention"] = {"loadavg_start": load0, "loadavg_end": os.getloadavg()[0],
                         "cpu_seconds": time.process_time() - cpu0}

    samples = global_batch * n_steps
    res.update(window_seconds=window, timed_steps=n_steps, samples=samples,
               throughput=samples / window, final_loss=None if loss is None else float(loss))
    _say(rank, f"window {window:.3f}s, {samples / window:.1f} samples/s, loss {res['final_loss']}")
    if quality:
        res["accuracy"] = res["curve"][-1][1] if res["curve"] else \
            _evaluate(spec, ddp.module, rank, world_size, prepare, amp, comm)
        probes = [_joined(rank_batches(index + k), prepare, setup)
                  for k in range(req.gns_probes)]
        res["gns"] = gradnoise.probe(ddp.module, probes, spec.loss_fn, amp, world_size,
                                     device=comm) if req.gns_probes else None
        _say(rank, f"held-out {spec.metric}: {res['accuracy']:.4f}; curve {res['curve']}")
    res["status"] = OK


def _joined(batches, prepare, setup):
    return (prepare(torch.cat([x for x, _ in batches])),
            _device.to_device(setup, torch.cat([y for _, y in batches])))


def _agree_steps(req: WorkerRequest, warmup: list[float], comm: torch.device) -> int:
    """Rank 0 sizes the timed window from warmup speed; one broadcast so every rank agrees."""
    n = req.min_steps
    if warmup:
        # The first warmup step pays for lazy init (and compilation), and the next few still run
        # slower than steady state (oneDNN primitive caches, momentum buffers, page faults), so
        # the fastest one is the best predictor of a timed step.
        per_step = min(warmup[1:] or warmup)
        n = math.ceil(req.target_seconds / max(per_step, 1e-6))
    t = torch.tensor([min(max(n, req.min_steps), req.max_steps)], dtype=torch.int64, device=comm)
    dist.broadcast(t, src=0)
    return int(t.item())


def _evaluate(spec, model: torch.nn.Module, rank: int, world_size: int, prepare, amp,
              comm: torch.device, limit: int | None = None) -> float:
    if spec.eval_fn is not None:
        t = torch.tensor([float(spec.eval_fn(model)), 1.0], dtype=torch.float64, device=comm)
    else:
        def context():
            stack = contextlib.ExitStack()
            stack.enter_context(torch.no_grad())
            stack.enter_context(amp())
            return stack
        # One held-out set for every seed: seeds vary initialisation and data order, and the
        # comparison between configurations is not diluted by the sampling of the test set.
        correct, total = held_out_counts(spec, model, EVAL_SEED, rank, world_size,
                                         prepare=prepare, context=context, limit=limit)
        t = torch.tensor([float(correct), float(total)], dtype=torch.float64, device=comm)
    dist.all_reduce(t)
    return float(t[0] / t[1]) if t[1] else float("nan")


def standalone_request(workload: str, sets: list[str], seconds: float,
                       world_size: int) -> WorkerRequest:
    """The request an exported command implies: the config from --set, the threads torch will
    use (the config's, else OMP_NUM_THREADS), and no CPU-set check (the binding tool set it)."""
    from .config import parse_sets
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m autotune.worker",
        description="One rank of a trial (--request, as autotune starts it) or a standalone "
                    "training run (--workload, as an exported command starts it).")
    parser.add_argument("--request", help="WorkerRequest JSON written by the planner")
    parser.add_argument("--workload", help="standalone: workload name or module:function")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KNOB=VALUE",
                        help="standalone: a knob of the configuration (repeatable)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="standalone: length of the timed window (default: 60)")
    args = parser.parse_args(argv)
    if (args.request is None) == (args.workload is None):
        parser.error("give exactly one of --request FILE or --workload NAME")
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    result_path = os.environ.get("AUTOTUNE_RESULT", f"rank{rank}.result.json")
    req = None
    res = _empty_result(rank, world_size, None)
    code = 1
    try:
        if args.request is not None:
            with open(args.request, encoding="utf-8") as f:
                req = WorkerRequest.from_json(json.load(f))
        else:
            req = standalone_request(args.workload, args.sets, args.seconds, world_size)
        res = _empty_result(rank, world_size, req)
        run(req, rank, world_size, res)
        code = 0
    except _Stop as stop:
        res.update(status=stop.status, reason=stop.reason)
        code = stop.code
        print(f"[autotune worker rank {rank}] {stop.status}: {stop.reason}", file=sys.stderr,
              flush=True)
    except BaseException as exc:  # noqa: BLE001 - any failure is still a written result
        oom = _device.is_oom(exc)
        res.update(status=OOM if oom else CRASH, reason=f"{type(exc).__name__}: {exc}",
                   error=traceback.format_exc())
        traceback.print_exc()
    res["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        write_result(result_path, res)
    except OSError as exc:
        print(f"[autotune worker rank {rank}] cannot write result {result_path}: {exc}",
              file=sys.stderr, flush=True)
        code = code or 1
    if args.request is None:  # standalone: one JSON line a wrapper script can parse
        print(json.dumps({k: res[k] for k in ("rank", "world_size", "status", "reason",
                                              "throughput", "samples", "window_seconds",
                                              "bad_config")} | {"result": result_path}),
              flush=True)
    _say(rank, f"exit {code}")
    sys.stdout.flush()
    sys.stderr.flush()
    # gloo can abort or deadlock in ~ProcessGroupGloo when torn down with a live DDP model (seen
    # 3 of 15 runs); the result is on disk, so skip interpreter teardown altogether.
    os._exit(code)


if __name__ == "__main__":
    main()
