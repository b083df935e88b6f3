"""Argument helpers shared by the subcommands (types that fail with one clear line), and the
request values built from their flags."""
from __future__ import annotations

import argparse

from ..config import BUILTIN_WORKLOADS, DEFAULT_WORKLOAD, MAX_WINDOW_S
from ..tune import (DEFAULT_RUN_LENGTH, IDLE_DEADLINE_S, TARGET_SECONDS, ScriptSpec, StudyRef,
                    Workload, script_from_flags)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def window_seconds(text: str) -> float:
    """A timed window's length: more than 0 and at most a day (a rank refuses a longer one,
    config/limits.py MAX_WINDOW_S)."""
    value = positive_float(text)
    if value > MAX_WINDOW_S:
        raise argparse.ArgumentTypeError(f"{text!r} is more than {MAX_WINDOW_S:.0f} s (a day)")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def percentage_points(text: str) -> float:
    """An argparse type: a drop in percentage points, 0 <= value < 100 (an accuracy cannot lose
    100 points and still say anything)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 100:   # NaN fails both
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0 to below 100 percentage "
                                         "points")
    return value


def int_at_least(minimum: int, what: str = "a whole number", most: int | None = None):
    """An argparse type: an integer >= minimum (and <= most), with a one-line message
    otherwise."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
        if most is not None and n > most:
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {most}")
        return n
    return parse


def add_switch(p: argparse.ArgumentParser, flag: str, what: str) -> None:
    """An on/off flag (off unless given)."""
    p.add_argument(flag, action="store_true", help=what)


JSON_HELP = "print one JSON object"
RUN_LENGTH_HELP = (
    "the length of your real training run, which torch.compile's one-off cost is weighed "
    "against: a time as --budget takes it (2h, 30m, 90s, 1h30m: the work the default launch "
    "does in that time) or a step count (5000steps, or '5000 steps': optimizer steps of the "
    "default launch's global batch; built-in workloads only). The recommendation is the launch "
    "that finishes that run first, its compile included, and the summary, `report` and the "
    "export header say after how much training compiling pays for itself; a compile that does "
    f"not pay at this length is named, not recommended (default: {DEFAULT_RUN_LENGTH}, a short "
    "real run next to compiles of seconds to a few minutes; give yours)")


def add_workload_args(p: argparse.ArgumentParser, *,
                      seconds_default: float | None = TARGET_SECONDS) -> None:
    # None: not given, which differs from naming the default (a command after `--` excludes it)
    p.add_argument("--workload", default=None, metavar="NAME",
                   help=f"built-in workload ({', '.join(BUILTIN_WORKLOADS)}; torchvision models by "
                        "name when torchvision imports) or your own as module:function (default: "
                        f"{DEFAULT_WORKLOAD})")
    p.add_argument("--seconds", type=window_seconds, default=seconds_default, metavar="S",
                   help="length of each trial's timed window (default: " +
                        (f"{seconds_default:g})" if seconds_default else "from the budget: 2-5)"))
    p.add_argument("--results", default="autotune-results", metavar="DIR",
                   help="folder for trial logs and the default study file (default: ./autotune-results)")
    p.add_argument("--metric", metavar="REGEX",
                   help="with `-- CMD` (your own script): a pattern over rank 0's output whose "
                        "(group) is the throughput, e.g. 'img/s: ([0-9.]+)'; the median of the "
                        "matches counts. Numbers are read as printed: 6,508, 1.2e4, or with the "
                        "unit left in ('([^ ]+ samples/s)'). Matched line by line (lines cut to "
                        "1000 characters); a pattern still matching after 10 s fails the trial. "
                        "Not needed when the script calls autotune.report_metrics()")
    add_switch(p, "--lower-is-better", "with --metric: the number is a time or a loss, e.g. "
               "--metric 'Training time: ([0-9.]+)' --lower-is-better")
    add_idle_arg(p)
    p.set_defaults(script=None)   # filled by main() from everything after `--`


def add_idle_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--idle-timeout", type=non_negative_float, default=IDLE_DEADLINE_S,
                   metavar="S",
                   help="once a rank has exited cleanly, a rank that then uses no CPU and prints "
                        "nothing for S seconds is stuck (gloo's teardown, typically): it is ended, "
                        "named with where it sat, and counts as finished; a rank still computing "
                        f"is left alone; 0: never end one (default: {IDLE_DEADLINE_S:g})")


ACCURACY_HELP = ("with `-- CMD`: a pattern over rank 0's output whose (group) is the script's "
                 "accuracy, e.g. 'test acc: ([0-9.]+)%%' (a trailing %% means percent; the last "
                 "match counts; matched line by line, as --metric)")


def script_of(args: argparse.Namespace) -> ScriptSpec | None:
    """The command after `--` with its --metric, --accuracy and --lower-is-better, scanned once
    (None without a command, where those flags are refused)."""
    return script_from_flags(getattr(args, "script", None), metric=args.metric,
                             accuracy=accuracy_pattern(args), lower_is_better=args.lower_is_better)


def workload_of(args: argparse.Namespace) -> Workload:
    """The workload flags of `run`, `compare` and `search`, with the command after `--`."""
    return Workload(workload=args.workload, script=script_of(args), seconds=args.seconds,
                    results=args.results, idle_timeout=args.idle_timeout)


def accuracy_pattern(args: argparse.Namespace) -> str | None:
    """--accuracy REGEX (`run --accuracy` alone asks the built-in workload for its accuracy)."""
    value = getattr(args, "accuracy", None)
    return value if isinstance(value, str) else None


def add_storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", metavar="URL",
                   help="Optuna storage URL (default: sqlite:///autotune-results/autotune.db "
                        "under --results); PostgreSQL or journal:///file.log for shared use")


STORED_COMMAND_HELP = ("even though the storage is not a file only you can write (a shared "
                       "database, another user's file or a folder above it): a study is data, "
                       "and what it stores runs only after you have read it")


def add_trust_arg(p: argparse.ArgumentParser, what: str) -> None:
    """--trust-study HASH: the hash is required (a bare flag is refused in one line, by the
    command): it accepts exactly what a refusal showed, not what is stored when it runs."""
    p.add_argument("--trust-study", metavar="HASH", nargs="?", const="",
                   help=f"{what}; HASH is the one the refusal printed with what it would run, "
                        "and it runs only while the stored content still hashes to it (see "
                        "docs/security.md)")


def study_of(args: argparse.Namespace) -> StudyRef:
    """--storage, --results and --study: the stored study a command reads."""
    return StudyRef(storage=args.storage, results=getattr(args, "results", "autotune-results"),
                    study=getattr(args, "study", None))


def add_study_args(p: argparse.ArgumentParser) -> None:
    add_storage_arg(p)
    p.add_argument("--results", default="autotune-results", metavar="DIR",
                   help="folder holding the default study file (default: ./autotune-results)")
    p.add_argument("--study", metavar="NAME",
                   help="study name (default: the most recent autotune study in the storage)")
