"""Argument helpers shared by the subcommands (types that fail with one clear line)."""
from __future__ import annotations

import argparse

from ..config import BUILTIN_WORKLOADS, DEFAULT_WORKLOAD
from ..plan.launch_plan import TARGET_SECONDS
from ..probe.topology import Topology
from ..run.trial import TrialSettings
from ..script.spec import ScriptSpec, script_from_flags


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def int_at_least(minimum: int, what: str = "a whole number"):
    """An argparse type: an integer >= minimum, with a one-line message otherwise."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
        return n
    return parse


def add_workload_args(p: argparse.ArgumentParser, *,
                      seconds_default: float | None = TARGET_SECONDS) -> None:
    # None: not given, which differs from naming the default (a command after `--` excludes it)
    p.add_argument("--workload", default=None, metavar="NAME",
                   help=f"built-in workload ({', '.join(BUILTIN_WORKLOADS)}; torchvision models by "
                        "name when torchvision imports) or your own as module:function (default: "
                        f"{DEFAULT_WORKLOAD})")
    p.add_argument("--seconds", type=positive_float, default=seconds_default, metavar="S",
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
    p.add_argument("--lower-is-better", action="store_true",
                   help="with --metric: the number is a time or a loss, e.g. --metric "
                        "'Training time: ([0-9.]+)' --lower-is-better")
    add_idle_arg(p)
    p.set_defaults(script=None)   # filled by main() from everything after `--`


def add_idle_arg(p: argparse.ArgumentParser) -> None:
    from ..run.idle import IDLE_DEADLINE_S
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


def check_workload_args(args: argparse.Namespace, script: ScriptSpec | None) -> str:
    """The workload of `run`, `compare` and `search`, checked before any trial (tune.check_workload);
    returns its label for studies."""
    from ..tune import check_workload
    return check_workload(args.workload, script)


def settings_from_args(args: argparse.Namespace, script: ScriptSpec | None,
                       **overrides) -> TrialSettings:
    return TrialSettings(**{"script": script, "workload": args.workload or DEFAULT_WORKLOAD,
                            "target_seconds": args.seconds, "results_dir": args.results,
                            "idle_s": args.idle_timeout, **overrides})


def accuracy_pattern(args: argparse.Namespace) -> str | None:
    """--accuracy REGEX (`run --accuracy` alone asks the built-in workload for its accuracy)."""
    value = getattr(args, "accuracy", None)
    return value if isinstance(value, str) else None


def load_topology(sysfs_root: str | None) -> Topology:
    from ..probe import probe
    return probe(sysfs_root)


def describe_measurement(m) -> str:
    """An ok trial's TrialResult as the few lines a person compares configurations by."""
    rss = ", ".join(f"rank{i} {mb} MiB" for i, mb in enumerate(m.peak_rss_mb) if mb)
    lines = [f"throughput: {m.throughput:.1f} samples/s (±{m.throughput_iqr / 2:.1f}, "
             f"{m.timed_steps} timed steps over {m.window_s:.1f}s)",
             f"step time: median {m.step_median_s * 1000:.1f} ms, "
             f"IQR {m.step_iqr_s * 1000:.1f} ms"]
    if m.startup_s is not None:
        share = f"; {m.timed_share:.0%} of the trial spent in timed steps" if m.timed_share else ""
        lines.append(f"start-up: {m.startup_s:.1f}s from launch to first step{share}")
    if rss:
        lines.append(f"peak RSS: {rss}")
    if m.cpu_share is not None:
        from ..measure.stats import busy
        lines.append(f"cpu share: {m.cpu_share:.2f} of rank 0's threads' CPU time over the window"
                     + (" [busy: the machine was busy; measure again]" if busy(m.cpu_share) else ""))
    return "\n".join(lines)


def add_storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", metavar="URL",
                   help="Optuna storage URL (default: sqlite:///autotune-results/autotune.db "
                        "under --results); PostgreSQL or journal:///file.log for shared use")


def open_study_from_args(args: argparse.Namespace):
    """(study, printable storage URL, provenance notes) for report/export/dashboard: `--storage`
    or the default file under `--results`, then `--study` or the newest autotune study measured
    on this hardware with this torch (else the newest at all). The notes say when the study shown
    was measured elsewhere and list the storage's other studies that are not this machine's.

    A storage that does not exist yet is an error here, not something to create: these commands
    read results, and Optuna would otherwise leave a fresh empty database behind a typo.
    """
    from ..errors import StorageError
    from ..study.storage import (find_study, open_storage, open_study, redact,
                                 redact_message, require_existing)
    url = storage_url(args)
    require_existing(url)
    storage = open_storage(url)
    here = _here()
    try:
        name = find_study(storage, getattr(args, "study", None), here=here)
        import optuna
        study = open_study(storage, name, create=False)
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except StorageError:
        raise
    except Exception as exc:  # a readable header over damaged pages fails only when queried
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageError(f"storage {redact(url)}: cannot read studies: "
                           f"{redact_message(first, url)}") from None
    return study, redact(url), provenance_notes(study, summaries, here)


def _here():
    """This machine and torch, or None when the probe cannot read them (the study is still
    readable; it just cannot be compared)."""
    from ..errors import AutotuneError
    from ..probe import probe, torch_build
    from ..study.provenance import Here
    try:
        return Here(topology=probe(collect_capabilities=False), torch=torch_build())
    except AutotuneError:
        return None


def provenance_notes(study, summaries, here) -> list[str]:
    """Lines saying whether `study` is this machine's, and which other studies are not."""
    from ..study.provenance import not_used, why_not_here
    if here is None:
        return ["cannot probe this machine: the study's machine is not compared with it"]
    notes = []
    reason = why_not_here(study.user_attrs, here)
    if reason:
        notes.append(f"study {study.study_name} is not this machine's: it was {reason}")
    notes += [f"not used: study {name} ({why})"
              for name, why in not_used(summaries, here, skip=study.study_name)]
    return notes


STORED_COMMAND_HELP = ("even though the storage is not a file only you can write (a shared "
                       "database, another user's file or folder): a study is data, and what it "
                       "stores runs only after you have read it (the refusal prints it); see "
                       "docs/security.md")


def add_trust_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--trust-study", action="store_true", help=what)


def storage_url(args: argparse.Namespace) -> str:
    """The storage URL the study commands open: --storage, or the file under --results."""
    from ..study.storage import default_storage
    return args.storage or default_storage(getattr(args, "results", "autotune-results"))


def add_study_args(p: argparse.ArgumentParser) -> None:
    add_storage_arg(p)
    p.add_argument("--results", default="autotune-results", metavar="DIR",
                   help="folder holding the default study file (default: ./autotune-results)")
    p.add_argument("--study", metavar="NAME",
                   help="study name (default: the most recent autotune study in the storage)")
