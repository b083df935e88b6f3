"""Measure the study's recommendation against the default launch again, without a new search:
interleaved rounds (D C, C D, ...) as at the end of `autotune search`, going on while the speedup's
95% interval is wider than ±10% and --budget allows. A figure whose interval stays wider is
headlined by its one-sided 95% lower bound when that reaches 1.02x ("verified speedup ≥1.75x ...
(95% lower bound, 12 rounds; median 1.90x)"). Rounds in which other processes took the trial
cores do not count; the headline then says "unsettled" with how much they took.

Run it when the machine is quiet, after a search that warned the machine was busy. The new figure
replaces the stored recommendation (what `report`, `export` and `launch` show) only when most of
its rounds were quiet. When the search recommended the default launch (no candidate held up or
settled), verify measures the search's best candidates against it again, with the seeded quality
confirmation for one that changes the math. A study measured on other hardware or with another
torch, or without a recommendation, is refused (exit 2).

A study is data: its stored script command runs (and its module:function workload is imported)
only when the storage is a file only you can write, in folders only you (or root) can write. From
any other storage, a shared PostgreSQL database included, verify prints the exact command with a
short hash and stops; read it, then add --trust-study HASH.

examples:
  autotune verify                      the newest study measured on this machine
  autotune verify --budget 10m --rounds 5
  autotune verify --study NAME --json
  autotune verify --quality --budget 15m
      (the faster launch whose accuracy the search could not show: more paired seeds of it and
      of the default launch until its drop is shown within --max-accuracy-drop or beyond it,
      then its speed verified; it replaces the recommendation only when shown within)
  autotune verify --storage postgresql://me@db/autotune --trust-study HASH   once read
"""
from __future__ import annotations

import argparse
import json
import time

from ..display import RoundLines
from ..tune import (MAX_ASKED_ROUNDS, MAX_ROUNDS_FACTOR, VerifyRequest, parse_budget,
                    parse_run_length, verify)
from ._common import (JSON_HELP, RUN_LENGTH_HELP, STORED_COMMAND_HELP, add_idle_arg, add_study_args, add_switch,
                      add_trust_arg, int_at_least, study_of)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--budget", default="5m", metavar="TIME",
                   help="wall-clock budget for the rounds: 90s, 10m (default: 5m)")
    p.add_argument("--rounds", type=int_at_least(1, most=MAX_ASKED_ROUNDS), default=3,
                   metavar="N",
                   help=f"interleaved rounds, at least; more (up to {MAX_ROUNDS_FACTOR}x) while "
                        f"unsettled (1-{MAX_ASKED_ROUNDS}, default: 3)")
    add_switch(p, "--quality", "settle the accuracy of the faster launch the search named as "
               "'not shown': paired seeds, a pair at a time, while --budget allows and more "
               "seeds could show it; then verify it against the default launch")
    p.add_argument("--run-length", default=None, metavar="TIME|Nsteps",
                   help=RUN_LENGTH_HELP + " (default here: the length the search was given)")
    add_switch(p, "--json", JSON_HELP)
    add_trust_arg(p, "run the study's stored script command or import its module:function "
                     f"workload {STORED_COMMAND_HELP}")
    add_idle_arg(p)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    req = VerifyRequest(budget_s=parse_budget(args.budget), rounds=args.rounds,
                        study=study_of(args), trust_study=args.trust_study,
                        idle_timeout=args.idle_timeout, quality=args.quality,
                        run_length=None if args.run_length is None
                        else parse_run_length(args.run_length))
    verified = verify(req, RoundLines(of_rounds=False, quiet=args.json, named=True), started=started)
    print(json.dumps(verified.result.to_json(), indent=2) if args.json else verified.text())
    return 0
