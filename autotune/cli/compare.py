"""Compare two configurations yourself: real timed runs of A and B, interleaved (A B, B A, ...),
on the built-in workload, your entry point (--workload module:function) or your script (after
`--`). Prints each window's throughput, the CPU share it received and the share of its cores
other processes took, the median per-round A/B ratio with its spread (half the IQR), and
"inconclusive" when the spread crosses 1.0. The same statistics as the search's verification,
from the same code: the ratio is settled only when quiet rounds agree within ±10%, and windows
that other processes disturbed are named in a warning.

--a and --b take the knobs of `autotune run --set` (repeatable); --set applies to both; B without
--b is the configuration --set alone describes.

examples:
  autotune compare --a allocator=tcmalloc --b allocator=default --set threads=2 --rounds 6
  autotune compare --a precision=bf16 --workload mypkg.train:build --json
  autotune compare --a omp_runtime=libiomp5 --set binding=taskset --set threads=2
  autotune compare --a allocator=jemalloc --metric 'img/s: ([0-9.]+)' -- python train.py
"""
from __future__ import annotations

import argparse
import json
import sys

from ..recommend.compare import compare, describe
from ..config import parse_sets
from ..errors import ConfigError
from ..plan.feasible import infeasible_reason
from ..progress import Silent
from ..run.trial import live_evaluator
from ._common import (add_workload_args, check_workload_args, int_at_least, load_topology,
                      positive_float, script_of, settings_from_args)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--a", action="append", required=True, metavar="KNOB=VALUE",
                   help="a knob of configuration A (repeatable)")
    p.add_argument("--b", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob of configuration B (repeatable; default: --set alone)")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob of both (repeatable)")
    p.add_argument("--rounds", type=int_at_least(1), default=4, metavar="N",
                   help="rounds of one A and one B window (default: 4)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=positive_float, default=180.0, metavar="SECONDS",
                   help="kill a window's run after this long (default: 180)")
    add_workload_args(p, seconds_default=3.0)


def run(args: argparse.Namespace) -> int:
    a = parse_sets(args.set + args.a)
    b = parse_sets(args.set + args.b)
    script = script_of(args)
    check_workload_args(args, script)
    topology = load_topology(None)
    for side, config in (("A", a), ("B", b)):
        why = infeasible_reason(config, topology)
        if why:
            raise ConfigError(f"configuration {side} cannot run here: {why}")
    settings = settings_from_args(args, script, timeout_s=args.timeout)
    evaluate = live_evaluator(topology, settings, adapt_timeout=False)

    class Rounds(Silent):
        def verify_start(self, *, role: str, round: int, rounds: int, **_: object) -> None:
            print(f"autotune: round {round}/{rounds}: {role}", file=sys.stderr, flush=True)

    result = compare(a, b, evaluate, rounds=args.rounds, progress=Rounds())
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(describe(result, "samples/s" if settings.script is None else "per s (metric)"))
    return 0 if result.stats is not None else 1
