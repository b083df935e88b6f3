"""Argument helpers shared by the subcommands (types that fail with one clear line)."""
from __future__ import annotations

import argparse

from ..probe.topology import Topology
from ..run.trial import TrialSettings


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
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


def add_workload_args(p: argparse.ArgumentParser, *, seconds_default: float | None = 5.0) -> None:
    p.add_argument("--workload", default="cnn", metavar="NAME",
                   help="built-in workload (cnn, transformer, mlp; torchvision models by name when "
                        "torchvision imports) or your own as module:function (default: cnn)")
    p.add_argument("--seconds", type=positive_float, default=seconds_default, metavar="S",
                   help="length of each trial's timed window (default: " +
                        (f"{seconds_default:g})" if seconds_default else "from the budget: 2-5)"))
    p.add_argument("--results", default="autotune-results", metavar="DIR",
                   help="folder for trial logs and the default study file (default: ./autotune-results)")
    p.add_argument("--metric", metavar="REGEX",
                   help="with `-- CMD` (your own script): a pattern over rank 0's output whose "
                        "(group) is the throughput, e.g. 'img/s: ([0-9.]+)'; the median of the "
                        "matches counts. Not needed when the script calls autotune.report()")
    p.add_argument("--lower-is-better", action="store_true",
                   help="with --metric: the number is a time or a loss, e.g. --metric "
                        "'Training time: ([0-9.]+)' --lower-is-better")
    p.set_defaults(script=None)   # filled by main() from everything after `--`


ACCURACY_HELP = ("with `-- CMD`: a pattern over rank 0's output whose (group) is the script's "
                 "accuracy, e.g. 'test acc: ([0-9.]+)%%' (a trailing %% means percent; the last "
                 "match counts)")


def check_workload_args(args: argparse.Namespace) -> str:
    """Validate the workload in this process before any trial; returns its label for studies.

    Script mode (`-- CMD`): program, script file, placeholders and --metric pattern. Otherwise
    the workload is loaded here once: a typo in `module:function`, an import error or a wrong
    return type is one line at once, not two failed reference trials."""
    import hashlib
    import os

    from ..errors import WorkloadError
    from ..measure.script import check_command
    command = getattr(args, "script", None)
    if command is None:
        for given, flag in ((args.metric, "--metric"), (accuracy_pattern(args), "--accuracy"),
                            (args.lower_is_better, "--lower-is-better")):
            if given:
                raise WorkloadError(f"{flag} reads a script's output: give the command after `--`")
        from ..worker.workloads import get_workload
        try:
            get_workload(args.workload)
        except WorkloadError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's own code failed: its words
            raise WorkloadError(f"workload {args.workload!r} failed when loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
        return args.workload
    if args.workload != "cnn":
        raise WorkloadError("give either --workload or a command after `--`, not both")
    check_command(command, args.metric, accuracy_pattern(args), args.lower_is_better)
    named = next((os.path.basename(a) for a in command[1:] if a.endswith(".py")),
                 os.path.basename(command[0]))
    digest = hashlib.sha1(repr((command, args.metric, os.getcwd())).encode()).hexdigest()[:8]
    if args.lower_is_better:   # another score for the same numbers: another study
        digest = hashlib.sha1(f"{digest}:lower".encode()).hexdigest()[:8]
    return f"script-{named}-{digest}"


def settings_from_args(args: argparse.Namespace, **overrides) -> TrialSettings:
    return TrialSettings(**{**script_settings(args), "workload": args.workload,
                            "target_seconds": args.seconds, "results_dir": args.results,
                            **overrides})


def accuracy_pattern(args: argparse.Namespace) -> str | None:
    """--accuracy REGEX (`run --accuracy` alone asks the built-in workload for its accuracy)."""
    value = getattr(args, "accuracy", None)
    return value if isinstance(value, str) else None


def script_settings(args: argparse.Namespace) -> dict:
    """The TrialSettings fields script mode takes from the command line and the script's text."""
    command = getattr(args, "script", None)
    if not command:
        return {"command": None}
    from ..measure.script_scan import scan_command
    scan = scan_command(command)
    return {"command": command, "metric": args.metric, "accuracy": accuracy_pattern(args),
            "lower_is_better": args.lower_is_better, "local_rank_arg": scan.local_rank_arg,
            "self_launching": scan.self_launching}


def load_topology(sysfs_root: str | None) -> Topology:
    from ..probe import probe
    return probe(sysfs_root)


def describe_measurement(m) -> str:
    """A Measurement as the few lines a person compares configurations by."""
    rss = ", ".join(f"rank{i} {b / 2**20:.0f} MiB" for i, b in enumerate(m.peak_rss_bytes) if b)
    lines = [f"throughput: {m.throughput:.1f} samples/s (±{m.throughput_iqr / 2:.1f}, "
             f"{m.timed_steps} timed steps over {m.window_seconds:.1f}s)",
             f"step time: median {m.step_stats.median * 1000:.1f} ms, "
             f"IQR {m.step_stats.iqr * 1000:.1f} ms"]
    if m.startup_seconds is not None:
        share = f"; {m.timed_share:.0%} of the trial spent in timed steps" if m.timed_share else ""
        lines.append(f"start-up: {m.startup_seconds:.1f}s from launch to first step{share}")
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


def save_recommendation(study, rec, topology: Topology, workload: str,
                        command: tuple[str, ...] | None = None, cluster=None) -> str | None:
    """Store the recommendation and its launch command on the study (and as a dashboard note)."""
    if rec is None:
        return None
    from ..export.command import launch_command, render
    from ..study.storage import library_versions
    manifest = {"fingerprint": topology.fingerprint(), "machine": topology.isa.describe(),
                "library_versions": library_versions(), "workload": workload,
                "headline": rec.headline(), "speedup": rec.speedup, "spread": rec.spread,
                "verified": rec.verified}
    program, script = None, {}
    if command:
        from ..measure.script import fill
        from .export import script_launch
        program = fill(command, rec.config)
        script = script_launch(study.user_attrs)
    python = cluster.python if cluster is not None else None
    command = render(launch_command(rec.config, topology, workload=workload, program=program,
                                    manifest=manifest, cluster=cluster, **script,
                                    **({"python": python} if python else {})), "shell")
    study.set_user_attr("recommendation", {**rec.to_json(), "command": command})
    try:
        from ..dashboard import save_study_note
        save_study_note(study, rec, command)
    except ImportError:
        pass
    return command


def open_study_from_args(args: argparse.Namespace):
    """(study, printable storage URL, provenance notes) for report/export/dashboard: `--storage`
    or the default file under `--results`, then `--study` or the newest autotune study measured
    on this hardware with this torch (else the newest at all). The notes say when the study shown
    was measured elsewhere and list the storage's other studies that are not this machine's.

    A storage that does not exist yet is an error here, not something to create: these commands
    read results, and Optuna would otherwise leave a fresh empty database behind a typo.
    """
    import os

    from ..errors import StorageError
    from ..study.storage import default_storage, find_study, open_storage, open_study, redact
    url = args.storage or default_storage(getattr(args, "results", "autotune-results"))
    for scheme in ("sqlite:///", "journal:///"):
        path = url[len(scheme):] if url.startswith(scheme) else None
        if path and path != ":memory:":
            if not os.path.exists(path):
                raise StorageError(f"storage {redact(url)}: {path} does not exist; run "
                                   "`autotune search` first, or pass --results DIR / --storage URL")
            if not os.path.isfile(path):
                raise StorageError(f"storage {redact(url)}: {path} is not a file")
            if os.path.getsize(path) == 0:
                raise StorageError(f"storage {redact(url)}: {path} is empty: no study recorded")
            if scheme == "sqlite:///":
                _check_sqlite(path, redact(url))
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
        raise StorageError(f"storage {redact(url)}: cannot read studies: {redact(first)}") from None
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


def _check_sqlite(path: str, shown: str) -> None:
    """Read-only look before Optuna opens the file: Optuna would add its tables to any SQLite
    database it is pointed at, and a damaged one fails later with a driver traceback."""
    import sqlite3

    from ..errors import StorageError
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise StorageError(f"storage {shown}: {path} is not a readable SQLite database ({exc})") \
            from None
    if "studies" not in tables:
        raise StorageError(f"storage {shown}: {path} is an SQLite database without Optuna studies "
                           "(not written by `autotune search`)")


def add_study_args(p: argparse.ArgumentParser) -> None:
    add_storage_arg(p)
    p.add_argument("--results", default="autotune-results", metavar="DIR",
                   help="folder holding the default study file (default: ./autotune-results)")
    p.add_argument("--study", metavar="NAME",
                   help="study name (default: the most recent autotune study in the storage)")
