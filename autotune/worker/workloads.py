"""Workloads a trial trains: the registry of built-in models on synthetic data (synthetic.py,
models.py), torchvision models by name, and users' entry points.

A user's `mypkg.train:build` returns a `WorkloadSpec` (or a dict with its fields); the worker owns
DDP wrapping, precision, channels_last and timing, the spec owns only model, data and loss.
"""
from __future__ import annotations

import importlib
import os
import time
from functools import partial
from dataclasses import dataclass, fields
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..config import BUILTIN_WORKLOADS, DEFAULT_WORKLOAD
from ..errors import WorkloadError
from ..training import QUALITY_SAMPLES
from .models import NUM_CLASSES, SmallResNet, TinyEncoder
from .synthetic import (_sample_seed, _shifted_class_batch, _smooth_templates, _teacher_batch,
                        _token_batch, _unit_rows)

# Held-out samples live far beyond any index training reaches (2**40 samples is years of training).
HELD_OUT_START = 1 << 40
# The held-out set is drawn with this seed whatever the run's seed (see worker/agree.held_out_accuracy).
EVAL_SEED = 0


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """What a workload gives the worker. A user entry point may return one of these.

    build_model(seed) -> nn.Module, deterministic for a seed.
    make_batch(start, count, seed) -> (inputs, targets): global samples [start, start+count).
    loss_fn(outputs, targets) -> scalar loss.
    eval_fn(model) -> float: optional metric on this rank, averaged over ranks by the worker. When
      None and `metric == "accuracy"`, top-1 accuracy on `eval_samples` held-out samples from
      make_batch (indices from HELD_OUT_START) is used.
    """
    name: str
    build_model: Callable[[int], nn.Module]
    make_batch: Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy
    eval_fn: Callable[[nn.Module], float] | None = None
    metric: str = "accuracy"
    eval_samples: int = 2048
    input_is_image: bool = False        # channels_last applies only to 4D NCHW inputs
    lr: float = 0.05
    num_classes: int = NUM_CLASSES
    # Training samples of one seeded quality run (None: autotune's default, QUALITY_SAMPLES).
    quality_samples: int | None = None
    # Its samples cost time to make (decoding, augmenting: a pipeline of its own), so DataLoader
    # workers beside the step can pay on a CPU, where the search then offers them. A user's
    # entry point is taken to have one (say False when make_batch is cheap); the built-in
    # synthetic workloads make a batch in the rank in a fraction of a step and say False.
    data_pipeline: bool = True


# ---- cnn: small ResNet-style network on 32x32 RGB ------------------------------------------------


def cnn(*, width: int = 16, blocks: int = 1, image_size: int = 32, signal: float = 0.35,
        modes: int = 3, shift: int = 4, lr: float = 0.2, data_seed: int = 1234,
        decode_ms: float = 0.0) -> WorkloadSpec:
    """`decode_ms`: CPU time each sample costs to make, as decoding a JPEG does (the same data:
    the time is spent, nothing changes): a data-bound workload, whose per-sample pipeline the
    CPU space then feeds with DataLoader workers (without it the batches are made in the rank
    in a small share of a step, and workers are not offered)."""
    templates = _smooth_templates(data_seed, NUM_CLASSES * modes, 3, image_size, 8, "bilinear")
    templates = templates.view(NUM_CLASSES, modes, 3, image_size, image_size)
    make = partial(_shifted_class_batch, templates=templates, signal=signal, shift=shift)
    return WorkloadSpec(
        name=DEFAULT_WORKLOAD,   # the cnn is the default workload: its name lives in config.py
        build_model=lambda seed: _seeded(seed, lambda: SmallResNet(width, blocks)),
        make_batch=partial(_decoded, make, decode_ms / 1000.0) if decode_ms > 0 else make,
        input_is_image=True, lr=lr, data_pipeline=decode_ms > 0)


def _decoded(make, seconds: float, start: int, count: int, seed: int):
    """`make`'s samples, each after `seconds` of this process's CPU (a busy loop, like a
    decoder's, not a sleep, which a DataLoader worker would overlap for free)."""
    end = time.thread_time() + seconds * count   # this thread's: OpenMP's spinning is not it
    while time.thread_time() < end:
        pass
    return make(start, count, seed)


# ---- transformer: encoder over token sequences --------------------------------------------------


def transformer(*, vocab: int = 256, seq_len: int = 32, dim: int = 128, layers: int = 2,
                heads: int = 4, bias: float = 1.0, data_seed: int = 1234) -> WorkloadSpec:
    g = torch.Generator().manual_seed(_sample_seed(data_seed, -2))
    affinity = torch.randn((vocab, NUM_CLASSES), generator=g)
    return WorkloadSpec(
        name="transformer",
        build_model=lambda seed: _seeded(seed, lambda: TinyEncoder(vocab, seq_len, dim, layers,
                                                                   heads)),
        make_batch=partial(_token_batch, seq_len=seq_len, affinity=affinity, bias=bias),
        lr=0.02, data_pipeline=False)


# ---- mlp ----------------------------------------------------------------------------------------

def mlp(*, features: int = 256, hidden: int = 1024, depth: int = 3, signal: float = 0.3,
        data_seed: int = 1234, name: str = "mlp") -> WorkloadSpec:
    g = torch.Generator().manual_seed(_sample_seed(data_seed, -3))
    templates = _unit_rows(torch.randn((NUM_CLASSES, features), generator=g))

    def build() -> nn.Module:
        dims = [features] + [hidden] * depth
        body: list[nn.Module] = []
        for a, b in zip(dims, dims[1:]):
            body += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*body, nn.Linear(dims[-1], NUM_CLASSES))

    return WorkloadSpec(
        name=name,
        build_model=lambda seed: _seeded(seed, build),
        make_batch=partial(_teacher_batch, shape=(features,), templates=templates, signal=signal),
        lr=0.05, data_pipeline=False)


def wide_mlp(*, features: int = 1024, hidden: int = 4096, depth: int = 2, signal: float = 0.3,
             data_seed: int = 1234) -> WorkloadSpec:
    """21M parameters (84 MB of fp32 gradient) for about 4 GFLOP a step at 32 samples: the
    all-reduce is large next to the compute, so the communication backend shows end to end
    (the cnn all-reduces about 0.3 MB a step, where the backend barely matters)."""
    return mlp(features=features, hidden=hidden, depth=depth, signal=signal, data_seed=data_seed,
               name="wide_mlp")


# ---- torchvision models by name -----------------------------------------------------------------

def _torchvision_models() -> Any | None:
    # The CPU torch wheel and a mismatched torchvision fail at import with RuntimeError
    # ("operator torchvision::nms does not exist"), not ImportError: any failure means "absent".
    try:
        return importlib.import_module("torchvision.models")
    except Exception:  # noqa: BLE001
        return None


def torchvision_names() -> list[str]:
    models = _torchvision_models()
    if models is None:
        return []
    try:
        return sorted(models.list_models(module=models))
    except Exception:  # noqa: BLE001
        return []


def torchvision_workload(name: str, *, image_size: int = 224, signal: float = 0.35,
                         data_seed: int = 1234) -> WorkloadSpec:
    models = _torchvision_models()
    if models is None:
        raise WorkloadError(f"workload {name!r} needs torchvision, which does not import here")
    shape = (3, image_size, image_size)
    templates = _smooth_templates(data_seed, NUM_CLASSES, 3, image_size, 4)
    return WorkloadSpec(
        name=name,
        build_model=lambda seed: _seeded(seed, lambda: models.get_model(name, weights=None,
                                                                         num_classes=NUM_CLASSES)),
        make_batch=partial(_teacher_batch, shape=shape, templates=templates, signal=signal),
        input_is_image=True, lr=0.02, data_pipeline=False)


def quality_facts(name: str, args: dict[str, Any] | None = None) -> tuple[bool, int, bool]:
    """(whether the model has BatchNorm layers, whose statistics are per rank; the training
    samples of one quality run; whether that length is the workload's own, not to be sized by
    the budget) for a workload, from one model built in this process."""
    spec = get_workload(name, args)
    model = spec.build_model(0)
    bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    return bn, spec.quality_samples or QUALITY_SAMPLES, spec.quality_samples is not None


def _seeded(seed: int, build: Callable[[], nn.Module]) -> nn.Module:
    # fork_rng keeps model construction from disturbing the caller's global RNG state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


# ---- registry -----------------------------------------------------------------------------------

WORKLOADS: dict[str, Callable[..., WorkloadSpec]] = dict(zip(
    BUILTIN_WORKLOADS, (cnn, transformer, mlp, wide_mlp)))


def workload_names() -> list[str]:
    return list(WORKLOADS) + [n for n in torchvision_names() if n not in WORKLOADS]


def get_workload(name: str, args: dict[str, Any] | None = None) -> WorkloadSpec:
    """A registry name, a torchvision model name, or "module:function" returning a WorkloadSpec."""
    args = dict(args or {})
    if ":" in name:
        return _load_entry_point(name, args)
    factory = WORKLOADS.get(name)
    if factory is not None:
        return _call(factory, name, args)
    if name in torchvision_names():
        return _call(lambda **kw: torchvision_workload(name, **kw), name, args)
    raise WorkloadError(f"unknown workload {name!r}; valid workloads: {', '.join(workload_names())}"
                        " (or module:function returning a WorkloadSpec)")


def _call(factory: Callable[..., WorkloadSpec], name: str, args: dict[str, Any]) -> WorkloadSpec:
    try:
        return factory(**args)
    except TypeError as exc:
        raise WorkloadError(f"workload {name!r}: bad workload arguments {args}: {exc}") from None


def _load_entry_point(name: str, args: dict[str, Any]) -> WorkloadSpec:
    module_name, _, func_name = name.partition(":")
    if not module_name or not func_name:
        raise WorkloadError(f"workload {name!r}: expected module:function, e.g. mypkg.train:build")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - the user's own import error is the message
        raise WorkloadError(f"workload {name!r}: cannot import {module_name}: "
                            f"{type(exc).__name__}: {exc}{_in_this_folder(module_name)}") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise WorkloadError(f"workload {name!r}: {module_name} has no callable {func_name!r}")
    spec = func(**args)
    if isinstance(spec, dict):
        known = {f.name for f in fields(WorkloadSpec)}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise WorkloadError(f"workload {name!r}: unknown spec field(s) {unknown}; "
                                f"valid: {', '.join(sorted(known))}")
        spec = WorkloadSpec(**{"name": name, **spec})
    if not isinstance(spec, WorkloadSpec):
        raise WorkloadError(f"workload {name!r}: {func_name}() returned {type(spec).__name__}, "
                            "expected autotune.workloads.WorkloadSpec (or a dict of its fields)")
    return spec


def _in_this_folder(module_name: str) -> str:
    """A hint when the module is in the current folder, which autotune's own Pythons leave off
    their import path (a co-user's `torch.py` there ran as the user: autotune/util/child_python.py)."""
    top = module_name.split(".")[0]
    if os.path.exists(f"{top}.py") or os.path.isdir(top):
        return (f" ({top} is in the current folder, which autotune does not import from; "
                "add the folder to PYTHONPATH)")
    return ""


def rank_slice(step: int, rank: int, batch_size: int, world_size: int) -> tuple[int, int]:
    """Global sample range (start, count) rank `rank` trains on at `step`."""
    return step * batch_size * world_size + rank * batch_size, batch_size


@torch.no_grad()
def held_out_counts(spec: WorkloadSpec, model: nn.Module, seed: int, rank: int, world_size: int,
                    *, batch: int = 256,
                    prepare: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                    context: Callable[[], Any] = torch.no_grad,
                    limit: int | None = None) -> tuple[int, int]:
    """(correct, total) top-1 on this rank's share of the held-out set (its first `limit`
    samples when given); callers sum over ranks."""
    was_training = model.training
    model.eval()
    correct = total = 0
    end = min(spec.eval_samples, limit or spec.eval_samples)
    for start in range(rank * batch, end, batch * world_size):
        count = min(batch, end - start)
        x, y = spec.make_batch(HELD_OUT_START + start, count, seed)
        with context():
            out = model(prepare(x))
        correct += int((out.argmax(dim=1).cpu() == y).sum())  # out may live on a GPU
        total += count
    model.train(was_training)
    return correct, total
