"""Compare two configurations yourself: real timed runs of A and B, interleaved (A B, B A, ...),
on the built-in workload, your entry point (--workload module:function) or your script (after
`--`). Prints each window's throughput, the CPU share it received and the share of its cores
other processes took, the median per-round A/B ratio with its spread (half the IQR), and
"inconclusive" when the spread crosses 1.0. The same statistics as the search's verification,
from the same code: the faster side's figure is settled only when quiet rounds agree within
±10%, or else verified by its one-sided 95% lower bound when that reaches 1.02x ("A is faster,
verified ≥1.75x over B (95% lower bound, ...)"), and windows that other processes disturbed are
named in a warning.

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

from ..config import parse_sets
from ..display import RoundLines
from ..tune import CompareRequest, compare
from ._common import (JSON_HELP, add_switch, add_workload_args, int_at_least, positive_float,
                      workload_of)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--a", action="append", required=True, metavar="KNOB=VALUE",
                   help="a knob of configuration A (repeatable)")
    p.add_argument("--b", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob of configuration B (repeatable; default: --set alone)")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="a knob of both (repeatable)")
    p.add_argument("--rounds", type=int_at_least(1), default=4, metavar="N",
                   help="rounds of one A and one B window (default: 4)")
    add_switch(p, "--json", JSON_HELP)
    p.add_argument("--timeout", type=positive_float, default=180.0, metavar="SECONDS",
                   help="kill a window's run after this long (default: 180)")
    add_workload_args(p, seconds_default=3.0)


def run(args: argparse.Namespace) -> int:
    a = parse_sets(args.set + args.a)
    b = parse_sets(args.set + args.b)
    result = compare(CompareRequest(a=a, b=b, rounds=args.rounds, workload=workload_of(args),
                                    timeout_s=args.timeout), RoundLines())
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(result.text())
    return result.exit_code
