"""What a knob's value may be beyond its type: bounds on the numbers a machine can hold, and the
grammar of the one free-text knob (kmp_affinity). Config.__post_init__ calls `check`, so a value is
refused wherever it comes from: `--set`, a space file, a manifest, or a study someone else wrote.

Why a grammar: kmp_affinity reaches a shell wherever a user's command takes it as a placeholder
(`launch -- sh -c '... {kmp_affinity}'`), and a stored `x;touch${IFS}...` ran there. Why bounds:
a stored `dataloader_workers=100000` or `global_batch=10**9` was planned as if it could run.
Whether a value fits *this* machine (workers beyond the CPUs a rank has) is the planner's question
(plan/feasible.py); these are the limits no machine passes.

A worker's request carries more numbers than the configuration (steps, seconds, samples): the
planner makes them from the command line and the budget, and a rank checks them again before it
acts (`check_request`, issue 52): a request is a file, and a rank must not start 10**9 steps or
wait a year because a file said so.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ConfigError

MAX_CPUS = 8192                 # Linux's largest NR_CPUS: no rank has more threads or workers
MAX_RANKS = 1 << 16             # ranks (and hosts) of one job
MAX_GLOBAL_BATCH = 1 << 20      # 16x the largest published ImageNet batch (64K, LARS)
MAX_KMP_BLOCKTIME = 2**31 - 1   # ms; libiomp5 reads an int
CCL_MAX_WORKERS = 4
MAX_STEPS = 1_000_000           # steps of one window: 10**6 at 1 ms a step is 17 minutes
MAX_WINDOW_S = 86_400.0         # a day: no timed window, ceiling or idle wait is longer
MAX_SAMPLES = 1 << 30           # samples of one quality run: 2**30 is 800 ImageNet epochs
MAX_CHECKPOINTS = 1024          # held-out evaluations (and noise probes) along one run
MAX_BUDGET_S = 7 * 24 * 3600.0  # the longest --budget a search takes (search/budget.py)

# name: (lowest, highest, what the lowest is called, why the highest); None passes where the knob
# allows "auto" (the table's `auto`).
_BOUNDS: dict[str, tuple[int, int, str, str]] = {
    "nproc": (1, MAX_RANKS, "a positive integer", "ranks in one job"),
    "nnodes": (1, MAX_RANKS, "a positive integer", "hosts in one job"),
    "ranks_per_numa_node": (1, MAX_RANKS, "a positive integer", "ranks in one job"),
    "threads": (1, MAX_CPUS, "a positive integer", "CPUs Linux supports in one machine"),
    "global_batch": (1, MAX_GLOBAL_BATCH, "a positive integer", "samples per step"),
    "batch_size": (1, MAX_GLOBAL_BATCH, "a positive integer", "samples per step"),
    "dataloader_workers": (0, MAX_CPUS, "an integer >= 0", "CPUs Linux supports in one machine"),
    "ccl_workers": (1, CCL_MAX_WORKERS, f"an integer from 1 to {CCL_MAX_WORKERS}",
                    "oneCCL workers per rank"),
    "kmp_blocktime": (0, MAX_KMP_BLOCKTIME, "an integer >= 0 (ms)", "ms, libiomp5's int"),
}

# Intel OpenMP's KMP_AFFINITY: comma-separated modifiers and a type, each a word, a word=value or
# a number (granularity=fine,compact,1,0), and proclist=[...] of CPU numbers and ranges. No
# spaces, quotes, braces or shell characters: none of them is in the grammar.
_KMP_TOKEN = r"(?:[A-Za-z_][A-Za-z0-9_]*(?:=[A-Za-z0-9_.-]+)?|[0-9]+|proclist=\[[0-9,:-]+\])"
_KMP_AFFINITY = re.compile(rf"{_KMP_TOKEN}(?:,{_KMP_TOKEN})*")
_KMP_MAX_CHARS = 1024


def check(values: dict[str, Any], optional: frozenset[str]) -> None:
    """Raise ConfigError (naming the knob and its value) for the first value out of bounds or out
    of grammar; `optional`: the knobs whose None means auto."""
    for name, (low, high, low_words, why) in _BOUNDS.items():
        value = values[name]
        if value is None and name in optional:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{name}={value!r}: must be {low_words}")
        if value > high:
            raise ConfigError(f"{name}={value!r}: more than {high:,} ({why}); "
                              "give a smaller value")
    affinity = values["kmp_affinity"]
    if not isinstance(affinity, str) or len(affinity) > _KMP_MAX_CHARS or \
            not _KMP_AFFINITY.fullmatch(affinity):
        raise ConfigError(f"kmp_affinity={affinity!r}: not Intel OpenMP's KMP_AFFINITY syntax "
                          "(comma-separated words, word=value or numbers; no spaces, quotes or "
                          "shell characters); give one such as granularity=fine,compact,1,0")


# A request's numbers: name -> (lowest, highest); None passes where the field may be absent.
_REQUEST_INTS: dict[str, tuple[int, int]] = {
    "warmup_steps": (0, MAX_STEPS), "min_steps": (1, MAX_STEPS), "max_steps": (1, MAX_STEPS),
    "accuracy_samples": (1, MAX_SAMPLES), "reference_batch": (1, MAX_GLOBAL_BATCH),
    "checkpoints": (0, MAX_CHECKPOINTS), "gns_probes": (0, MAX_CHECKPOINTS),
    "seed": (0, 2**63 - 1)}
_REQUEST_SECONDS = ("target_seconds", "ceiling_seconds", "serve_s")
_REQUEST_RATES = ("leader_throughput", "ceiling_above")


def check_request(values: dict[str, Any]) -> None:
    """Raise ConfigError (naming the field and its value) for a worker request's number out of
    bounds: steps, samples and checkpoints as integers in range, seconds finite, >= 0 and at
    most MAX_WINDOW_S, samples/s finite and >= 0 (or absent)."""
    for name, (low, high) in _REQUEST_INTS.items():
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(f"request {name}={value!r}: must be an integer from {low:,} to "
                              f"{high:,}")
    if values["min_steps"] > values["max_steps"]:
        raise ConfigError(f"request min_steps={values['min_steps']} is more than max_steps="
                          f"{values['max_steps']}")
    for name in _REQUEST_SECONDS:
        value = values.get(name)
        if not _number(value) or not 0 <= value <= MAX_WINDOW_S:
            raise ConfigError(f"request {name}={value!r}: must be seconds from 0 to "
                              f"{MAX_WINDOW_S:g}")
    for name in _REQUEST_RATES:
        value = values.get(name)
        if value is not None and (not _number(value) or value < 0):
            raise ConfigError(f"request {name}={value!r}: must be a finite number >= 0")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)
