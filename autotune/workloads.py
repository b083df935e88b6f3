"""Workloads a trial trains: builtin models on synthetic data, torchvision models, entry points.

Data is synthetic, in-process and addressed by *global sample index*: sample i of seed s is always
the same tensor, so rank r of a global step takes a disjoint slice and the data a run sees depends
only on (seed, global batch size), not on how the batch is split over ranks. Labels come from a
fixed random "teacher" applied to the input, so the task is learnable (a model can reach far above
chance) and accuracy is a meaningful check that a faster config did not break the math.

A user's `mypkg.train:build` returns a `WorkloadSpec` (or a dict with its fields); the worker owns
DDP wrapping, precision, channels_last and timing, the spec owns only model, data and loss.
"""
from __future__ import annotations

import importlib
import math
from functools import partial
from dataclasses import dataclass, fields
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from .errors import WorkloadError

# Held-out samples live far beyond any index training reaches (2**40 samples is years of training).
HELD_OUT_START = 1 << 40
# The held-out set is drawn with this seed whatever the run's seed (see worker._evaluate).
EVAL_SEED = 0
NUM_CLASSES = 10


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


def _sample_seed(seed: int, index: int) -> int:
    # splitmix-style mixing so neighbouring (seed, index) pairs get unrelated streams
    z = (seed * 0x9E3779B97F4A7C15 + index * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % (1 << 64)
    z = ((z ^ (z >> 31)) * 0x94D049BB133111EB) % (1 << 64)
    return z & 0x7FFF_FFFF_FFFF_FFFF


def _teacher_batch(start: int, count: int, seed: int, shape: tuple[int, ...],
                   templates: torch.Tensor, signal: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample generators: sample i = noise + a * template[c_i]; label = teacher(sample i).

    The label is the argmax of the fixed teacher projection of the input (not c_i), so it is a pure
    function of the input; drawing near a template gives the teacher a margin, hence learnable.
    """
    xs = torch.empty((count, *shape))
    for j in range(count):
        g = torch.Generator().manual_seed(_sample_seed(seed, start + j))
        c = int(torch.randint(templates.shape[0], (1,), generator=g))
        amp = signal * (0.5 + float(torch.rand((), generator=g)))
        xs[j] = torch.randn(shape, generator=g) + amp * templates[c].view(shape)
    labels = (xs.flatten(1) @ templates.flatten(1).T).argmax(dim=1)
    return xs, labels


def _unit_rows(t: torch.Tensor) -> torch.Tensor:
    flat = t.flatten(1)
    return (flat / flat.norm(dim=1, keepdim=True) * math.sqrt(flat.shape[1])).view_as(t)


# ---- cnn: small ResNet-style network on 32x32 RGB ------------------------------------------------

class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.short(x))


class SmallResNet(nn.Module):
    def __init__(self, width: int = 16, blocks: int = 1, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        layers, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks):
                layers.append(_Block(cin, cout, 2 if (i > 0 and b == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def _smooth_templates(seed: int, n: int, channels: int, size: int, coarse: int,
                      mode: str = "nearest") -> torch.Tensor:
    # Coarse random patterns upsampled: local colour/texture a conv net with global pooling can see.
    g = torch.Generator().manual_seed(_sample_seed(seed, -1))
    low = torch.randn((n, channels, coarse, coarse), generator=g)
    kw = {} if mode == "nearest" else {"align_corners": False}
    return _unit_rows(F.interpolate(low, size=(size, size), mode=mode, **kw))


def _shifted_class_batch(start: int, count: int, seed: int, *, templates: torch.Tensor,
                         signal: float, shift: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample i: one of its class's K patterns, moved by up to `shift` pixels, at a random
    contrast, under unit Gaussian noise; the label is the class. Translation and several modes
    per class make it a CIFAR-like problem for a small conv net: the held-out accuracy keeps
    rising over tens of thousands of samples instead of saturating at a few thousand, and it
    responds to the learning rate and the global batch."""
    classes, modes = templates.shape[:2]
    shape = templates.shape[2:]
    xs = torch.empty((count, *shape))
    ys = torch.empty((count,), dtype=torch.long)
    for j in range(count):
        g = torch.Generator().manual_seed(_sample_seed(seed, start + j))
        c = int(torch.randint(classes, (1,), generator=g))
        k = int(torch.randint(modes, (1,), generator=g))
        dy, dx = (int(v) for v in torch.randint(-shift, shift + 1, (2,), generator=g))
        amp = signal * (0.5 + float(torch.rand((), generator=g)))
        xs[j] = torch.randn(shape, generator=g) + amp * torch.roll(templates[c, k], (dy, dx), (1, 2))
        ys[j] = c
    return xs, ys


# Training samples of one quality run of the built-in cnn, chosen from measurements
# (benchmarks/README.md, "Quality evidence"): long enough that seeds agree to about half a point,
# short enough that three seeds fit in a 10-minute search.
QUALITY_SAMPLES = 16384


def cnn(*, width: int = 16, blocks: int = 1, image_size: int = 32, signal: float = 0.35,
        modes: int = 3, shift: int = 4, lr: float = 0.2, data_seed: int = 1234) -> WorkloadSpec:
    templates = _smooth_templates(data_seed, NUM_CLASSES * modes, 3, image_size, 8, "bilinear")
    templates = templates.view(NUM_CLASSES, modes, 3, image_size, image_size)
    return WorkloadSpec(
        name="cnn",
        build_model=lambda seed: _seeded(seed, lambda: SmallResNet(width, blocks)),
        make_batch=partial(_shifted_class_batch, templates=templates, signal=signal, shift=shift),
        input_is_image=True, lr=lr)


# ---- transformer: encoder over token sequences --------------------------------------------------

class TinyEncoder(nn.Module):
    def __init__(self, vocab: int, seq_len: int, dim: int, layers: int, heads: int,
                 num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens) + self.pos).mean(dim=1))


def _token_batch(start: int, count: int, seed: int, seq_len: int, affinity: torch.Tensor,
                 bias: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens drawn with a lean towards one class's favourite tokens; label = argmax of the
    teacher's summed token-class affinities (a bag-of-words teacher)."""
    vocab = affinity.shape[0]
    toks = torch.empty((count, seq_len), dtype=torch.long)
    for j in range(count):
        g = torch.Generator().manual_seed(_sample_seed(seed, start + j))
        c = int(torch.randint(affinity.shape[1], (1,), generator=g))
        probs = torch.softmax(bias * affinity[:, c], dim=0)
        toks[j] = torch.multinomial(probs, seq_len, replacement=True, generator=g)
    labels = affinity[toks].sum(dim=1).argmax(dim=1)
    return toks, labels


def transformer(*, vocab: int = 256, seq_len: int = 32, dim: int = 128, layers: int = 2,
                heads: int = 4, bias: float = 1.0, data_seed: int = 1234) -> WorkloadSpec:
    g = torch.Generator().manual_seed(_sample_seed(data_seed, -2))
    affinity = torch.randn((vocab, NUM_CLASSES), generator=g)
    return WorkloadSpec(
        name="transformer",
        build_model=lambda seed: _seeded(seed, lambda: TinyEncoder(vocab, seq_len, dim, layers,
                                                                   heads)),
        make_batch=partial(_token_batch, seq_len=seq_len, affinity=affinity, bias=bias),
        lr=0.02)


# ---- mlp ----------------------------------------------------------------------------------------

def mlp(*, features: int = 256, hidden: int = 1024, depth: int = 3, signal: float = 0.3,
        data_seed: int = 1234) -> WorkloadSpec:
    g = torch.Generator().manual_seed(_sample_seed(data_seed, -3))
    templates = _unit_rows(torch.randn((NUM_CLASSES, features), generator=g))

    def build() -> nn.Module:
        dims = [features] + [hidden] * depth
        body: list[nn.Module] = []
        for a, b in zip(dims, dims[1:]):
            body += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*body, nn.Linear(dims[-1], NUM_CLASSES))

    return WorkloadSpec(
        name="mlp",
        build_model=lambda seed: _seeded(seed, build),
        make_batch=partial(_teacher_batch, shape=(features,), templates=templates, signal=signal),
        lr=0.05)


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
        input_is_image=True, lr=0.02)


def quality_facts(name: str, args: dict[str, Any] | None = None) -> tuple[bool, int]:
    """(whether the model has BatchNorm layers, whose statistics are per rank; the training
    samples of one quality run) for a workload, from one model built in this process."""
    spec = get_workload(name, args)
    model = spec.build_model(0)
    bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    return bn, spec.quality_samples or QUALITY_SAMPLES


def _seeded(seed: int, build: Callable[[], nn.Module]) -> nn.Module:
    # fork_rng keeps model construction from disturbing the caller's global RNG state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


# ---- registry -----------------------------------------------------------------------------------

WORKLOADS: dict[str, Callable[..., WorkloadSpec]] = {
    "cnn": cnn, "transformer": transformer, "mlp": mlp}
DEFAULT_WORKLOAD = "cnn"


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
                            f"{type(exc).__name__}: {exc}") from exc
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
