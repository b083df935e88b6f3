"""What a knob's value may be beyond its type: bounds on the numbers a machine can hold, and the
grammar of the one free-text knob (kmp_affinity). Config.__post_init__ calls `check`, so a value is
refused wherever it comes from: `--set`, a space file, a manifest, or a study someone else wrote.

Why a grammar: kmp_affinity reaches a shell wherever a user's command takes it as a placeholder
(`launch -- sh -c '... {kmp_affinity}'`), and a stored `x;touch${IFS}...` ran there. Why bounds:
a stored `dataloader_workers=100000` or `global_batch=10**9` was planned as if it could run.
Whether a value fits *this* machine (workers beyond the CPUs a rank has) is the planner's question
(plan/feasible.py); these are the limits no machine passes.
"""
from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError

MAX_CPUS = 8192                 # Linux's largest NR_CPUS: no rank has more threads or workers
MAX_RANKS = 1 << 16             # ranks (and hosts) of one job
MAX_GLOBAL_BATCH = 1 << 20      # 16x the largest published ImageNet batch (64K, LARS)
MAX_KMP_BLOCKTIME = 2**31 - 1   # ms; libiomp5 reads an int
CCL_MAX_WORKERS = 4

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
