"""Measure the study's recommendation against the default launch again, without a new search:
interleaved rounds (D C, C D, ...) as at the end of `autotune search`, going on while the speedup's
95% interval is wider than ±10% and --budget allows. Rounds in which other processes took the
trial cores do not settle a figure; the headline then says "unsettled" with how much they took.

Run it when the machine is quiet, after a search that warned the machine was busy. The new figure
replaces the stored recommendation (what `report`, `export` and `launch` show) only when most of
its rounds were quiet. A study measured on other hardware or with another torch, or without a
recommendation, is refused (exit 2).

A study is data: its stored script command runs (and its module:function workload is imported)
only when the storage is a file only you can write. From any other storage, a shared PostgreSQL
database included, verify prints the exact command and stops; read it, then add --trust-study.

examples:
  autotune verify                      the newest study measured on this machine
  autotune verify --budget 10m --rounds 5
  autotune verify --study NAME --json
  autotune verify --storage postgresql://me@db/autotune --trust-study   after reading its command
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from ..errors import ConfigError
from ..clean import printable
from ..progress import Silent
from ._common import (STORED_COMMAND_HELP, add_idle_arg, add_study_args, add_trust_arg,
                      int_at_least, load_topology, open_study_from_args, storage_url)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--budget", default="5m", metavar="TIME",
                   help="wall-clock budget for the rounds: 90s, 10m (default: 5m)")
    p.add_argument("--rounds", type=int_at_least(1), default=3, metavar="N",
                   help="interleaved rounds, at least; more (up to 4x) while unsettled "
                        "(default: 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_trust_arg(p, "run the study's stored script command or import its module:function "
                     f"workload {STORED_COMMAND_HELP}")
    add_idle_arg(p)


def run(args: argparse.Namespace) -> int:
    from ..export.recommendation import save_recommendation
    from ..probe import torch_build
    from ..recommend.reverify import reverify, store_unless_replaced
    from ..search.lock import MachineLock
    from ..study.storage import default_storage
    from ..run.trial import live_evaluator
    from ..search.budget import parse_budget
    from ..study.attrs import StudyAttrs
    from ..study.provenance import Here, why_not_here
    started = time.monotonic()
    budget_s = parse_budget(args.budget)
    study, url, _notes = open_study_from_args(args)
    attrs = StudyAttrs.of(study)
    _check_trusted(args, attrs, study.study_name)
    topology = load_topology(None)
    reason = why_not_here(attrs, Here(topology=topology, torch=torch_build()))
    if reason:
        raise ConfigError(f"study {study.study_name} was {reason}; verify re-measures on the "
                          "machine and torch that measured it (run `autotune search` here)")
    if attrs.cluster_json:
        raise ConfigError(f"study {study.study_name} was measured across hosts; `autotune "
                          "verify` measures this machine only")
    settings = _settings(attrs, args)
    evaluate = live_evaluator(topology, settings,
                              time_left=lambda: budget_s - (time.monotonic() - started))

    class Rounds(Silent):
        def verify_start(self, *, role: str, round: int, **_: object) -> None:
            if not args.json:
                print(f"autotune: round {round}: {role}", file=sys.stderr, flush=True)

    # The search's machine lock: verify times trials too, and must not run beside a search
    # (whose recommendation it would then overwrite with a figure measured under its load).
    with MachineLock(topology.fingerprint(), advice="run verify once it has finished"):
        measured = StudyAttrs.of(study).recommendation
        result = reverify(study, evaluate, rounds=args.rounds, progress=Rounds(),
                          time_left=lambda: budget_s - (time.monotonic() - started))
        result = store_unless_replaced(
            study, args.storage or default_storage(args.results), measured, result,
            lambda rec: save_recommendation(study, rec, topology,
                                            attrs.workload or settings.workload,
                                            command=settings.script and settings.script.command))
    rec = result.recommendation
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(printable(rec.headline()))
    if result.previous:   # the stored headline: shown, never acted on
        print(printable(f"  before: {result.previous}"))
    print(f"  stored in {url}" if result.replaces else f"  not stored: {result.why_kept}")
    return 0


def _check_trusted(args: argparse.Namespace, attrs, name: str) -> None:
    """The trials would run the study's script command or import its workload: data someone
    wrote, run only from a file only this user can write or with --trust-study."""
    from ..study.trust import check_stored_code, stored_code, storage_file
    check_stored_code(stored_code(attrs.script_command, attrs.workload), f"study {name}",
                      storage_file(storage_url(args)), trusted=args.trust_study,
                      command_hint="")


def _settings(attrs, args: argparse.Namespace):
    """The search's trial settings, from the study: its workload or script, its timed window."""
    from ..config import DEFAULT_WORKLOAD
    from ..plan.launch_plan import TARGET_SECONDS
    from ..run.trial import TrialSettings
    stored = attrs.settings
    return TrialSettings(script=attrs.script(), workload=attrs.workload or DEFAULT_WORKLOAD,
                         target_seconds=float(stored.get("target_seconds") or TARGET_SECONDS),
                         results_dir=args.results, idle_s=args.idle_timeout)
