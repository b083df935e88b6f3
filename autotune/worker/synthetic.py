"""Synthetic data addressed by *global sample index* (pure functions of seed and index).

Sample i of seed s is always the same tensor, so rank r of a global step takes a disjoint slice
and the data a run sees depends only on (seed, global batch size), not on how the batch is split
over ranks. Labels come from a fixed random "teacher" applied to the input, so the task is
learnable and accuracy is a meaningful check that a faster config did not break the math.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


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
