"""Progress of a long search on the terminal: elapsed against budget, trials done and failed,
best so far against the default launch, and what is running now. Written to stderr so that
stdout stays clean for `--json`. At a terminal the same lines scroll above a live bar
(live.py); anywhere else (a pipe, a file, CI) they are the only output, unchanged. --quiet keeps
only the warnings (`warn`), at a terminal too."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from ..util.clean import one_line, printable
from ..result import Outcome
from ..search.account import describe as describe_account
from ..search.budget import format_seconds
from ..config import Config, describe_changes
from ..study.records import Record, Role
from ..measure.contention import describe_outside, disturbed
from ..measure.split import ceiling_words, split_from
from ..measure.stats import busy
from ..recommend.words import recommendation_lines
from .live import BarState, LiveBar, wanted


def short(config: Config) -> str:
    """Only the knobs that differ from the default launch."""
    return describe_changes(config, none="default launch")


def round_label(r: int, asked: int, most: int) -> str:
    """'2/3' for an asked round; '4 (unsettled, up to 12)' for one past them."""
    return f"{r}/{asked}" if r <= asked else f"{r} (unsettled, up to {most})"


class TerminalProgress:
    """`live`: draw the bar (None: when `live.wanted` says a person is watching). Use it as a
    context manager around the search: the bar runs between __enter__ and __exit__."""

    def __init__(self, *, budget_s: float, quiet: bool = False, started: float | None = None,
                 stream: TextIO | None = None, live: bool | None = None):
        self.budget_s, self.quiet = budget_s, quiet
        self.started = started if started is not None else time.monotonic()
        self.stream = stream or sys.stderr
        self.done = self.failed = self.infeasible = 0
        self.default_thr: float | None = None
        self.best: float | None = None
        self.warned_busy = False
        self.bar = BarState(budget_s=budget_s, started=self.started)
        self._live = None
        if wanted(quiet=quiet, stream=self.stream) if live is None else live:
            try:
                self._live = LiveBar(self.bar, self.stream)
            except ImportError:   # rich missing from a broken install: the plain lines suffice
                self._live = None

    def __enter__(self) -> "TerminalProgress":
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def _print(self, text: str) -> None:
        if not self.quiet:
            self._out(text)

    def _out(self, text: str) -> None:
        text = printable(text)   # notes and reasons may quote a shared study's strings
        if self._live is not None:
            self._live.print(text)
        else:
            print(text, file=self.stream, flush=True)

    def _clock(self) -> str:
        return f"[{format_seconds(time.monotonic() - self.started)}/{format_seconds(self.budget_s)}]"

    def note(self, text: str) -> None:
        self._print(f"{self._clock()} {text}")

    def warn(self, text: str) -> None:
        """Printed even with --quiet (stderr): it changes what the results mean."""
        self._out(f"{self._clock()} {text}")

    def start(self, *, name: str, storage: str, space, stale: int, topology) -> None:
        self._print(f"autotune search: study {name} in {storage}")
        nodes = len(topology.compute_nodes())
        self._print(f"machine: {topology.isa.describe()}, {topology.num_usable_cores()} usable "
                    f"physical cores, {nodes} NUMA node(s); space {space.name}: "
                    f"{len(space.knobs)} knobs, {space.size()} combinations")
        for n in space.notes:
            self._print(f"  note: {n}")
        if stale:
            self._print(f"  recovered {stale} trial(s) left running by a killed search (marked interrupted)")
        self.bar.phase = "search"

    # Each event sets the live bar's phase and what runs now (plain fields; see live.BarState)
    # and prints its line.

    def trial_start(self, *, config: Config, role: str, number: int) -> None:
        what = f"trial {number} ({role}): {short(config)}"
        self.bar.phase, self.bar.trial, self.bar.now = "search", number, what
        self._print(f"{self._clock()} {what}")

    def trial_end(self, *, record: Record, seconds: float) -> None:
        self.bar.phase, self.bar.now = "search", ""   # a trial's quality runs end with it
        self._trial_end(record)

    def knob_held(self, *, knob: str, why: str) -> None:
        self._print(f"{self._clock()} not varying {knob} any more: {why}")

    def verify_start(self, *, config: Config, role: str, round: int, rounds: int,
                     max_rounds: int) -> None:
        what = (f"round {round_label(round, rounds, max_rounds)} ({role}): "
                f"{short(config)}")
        self.bar.phase, self.bar.now = "verify", what
        self._print(f"{self._clock()} verify {what}")

    def quality_start(self, *, config: Config, math_class: str, seed: int,
                      side_by_side: int = 0) -> None:
        self.bar.phase, self.bar.now = "quality check", f"seed {seed}: {math_class}"
        beside = f" ({side_by_side} side by side, on hosts of their own)" if side_by_side else ""
        self._print(f"{self._clock()} quality run, seed {seed}: {math_class}{beside}")

    def confirm_start(self, *, config: Config, seed: int) -> None:
        self.bar.phase, self.bar.now = "quality check", f"confirming, seed {seed}: {short(config)}"
        self._print(f"{self._clock()} confirming quality, seed {seed}: {short(config)}")

    def _trial_end(self, rec: Record) -> None:
        if rec.outcome == Outcome.INFEASIBLE:
            self.infeasible += 1
            return  # ruled out before launch: cheap, and noisy to print each one
        self.done += 1
        if rec.outcome != Outcome.OK:
            self.failed += 1
            what = f"{rec.outcome}: {rec.reason}"
        else:
            if rec.role == Role.DEFAULT:
                self.default_thr = rec.throughput
            ratio = rec.throughput / self.default_thr if self.default_thr else None
            # "best" counts a class shown within (or with no accuracy rule), never one not shown
            if rec.feasible and rec.result.quality in (None, "within") and \
                    (self.best is None or rec.throughput > self.best):
                self.best = rec.throughput
                self.bar.best_config = short(rec.config)
            acc = f", accuracy {rec.accuracy:.3f}" if rec.accuracy is not None else ""
            res = rec.result
            if res.quality_n:
                acc += f" ± {res.quality_sd:.3f} ({res.quality_n} seeds)"
            elif res.quality == "pending":
                acc = ", quality pending (measured if it leads)"
            if res.quality_verdict:   # what its runs showed, in the gate's own words
                acc += f": {res.quality_verdict}" if acc else f", {res.quality_verdict}"
            # A script's score is printed as the number it printed (a time, a loss, seconds per
            # run), never as samples/s it did not measure.
            shown = res.metric_shown or f"{rec.throughput:.1f} samples/s"
            what = shown + (f" ({ratio:.2f}x default)" if ratio else "") + acc + _step(res)
            if disturbed(res.outside_share):
                what += (f" [disturbed: {describe_outside(res.outside_share)}; verification "
                         "re-measures it if it is a candidate]")
                self._warn_busy(res.outside_share)
            elif res.outside_share is None and busy(res.cpu_share):
                what += f" [busy: cpu_share {res.cpu_share:.2f}, re-measured if a candidate]"
            if res.stopped_early:
                what += f" [{res.stopped_early}]"
            if res.note:
                what += f"\n{'':>13}    note: {res.note}"
            if not rec.feasible:
                what += (" [may not lead: its accuracy is not shown within the tolerance]"
                         if res.quality_verdict else " [outside accuracy tolerance]")
            for message in res.unacted:
                what += f"\n{'':>13}    did not act: {message}"
        best = (f", best {self.best / self.default_thr:.2f}x"
                if self.best and self.default_thr else "")
        self.bar.runs, self.bar.failed = self.done, self.failed
        if self.best and self.default_thr:
            self.bar.best_ratio = self.best / self.default_thr
        self._print(f"{'':>13} -> {what} | {self.done} run, {self.failed} failed, "
                    f"{self.infeasible} ruled out{best}")

    def _warn_busy(self, outside_share: float) -> None:
        """Once per run: the machine is not quiet, how much, and what to do about it."""
        if self.warned_busy:
            return
        self.warned_busy = True
        self.warn(f"this machine is busy: {describe_outside(outside_share)} during a timed "
                  "trial. Disturbed trials are re-measured when the budget allows and never "
                  "decide alone; for figures you can trust, run `autotune verify` when the "
                  "machine is quiet")

    def finish(self, result, rec, command: str | None, elapsed: float,
               overridden: dict[str, str] | None = None, stored: dict | None = None,
               summary: dict | None = None) -> None:
        out = sys.stdout
        # configurations ruled out before launch are in the study, never measured: said apart
        # (a 30-minute search read "119 trial(s) run this time, 196 configurations in the
        # study", 77 of them never run)
        unrun = sum(1 for r in result.records if r.outcome == Outcome.INFEASIBLE)
        print(f"\nsearch stopped ({result.stop_reason}) after {format_seconds(elapsed)}: "
              f"{result.measured} trial(s) run this time, {len(result.records)} configurations "
              "in the study" + (f" ({unrun} of them ruled out, never run)" if unrun else ""),
              file=out)
        if stored is not None:  # a shared search whose recommendation another worker wrote
            if not stored:
                print("no recommendation (see the verifying worker's messages)", file=out)
                return
            print(f"{one_line(stored['headline'])} (verified by another worker of this study)",
                  file=out)
            print(f"recommended: {short(Config.from_dict(stored['config']))}", file=out)
            # Its stored command is that worker's text, newlines and all: export rebuilds it here
            # from the study, checking what it holds, instead of this summary echoing it.
            print("tuned launch command: autotune export --format shell|torchrun|json", file=out)
            return
        if rec is None:
            print("no recommendation (see messages above)", file=out)
            return
        # the lines `report` and the dashboard's note state it with (recommend/words.py)
        for line in recommendation_lines(rec.to_json()):
            print(line, file=out)
        if not rec.extra.get("quality") and rec.accuracy is not None \
                and rec.default_accuracy is not None:
            print(f"  accuracy {rec.accuracy:.3f} (default launch {rec.default_accuracy:.3f})",
                  file=out)
        if rec.extra.get("noise_floor"):
            print(f"  noise floor: {rec.extra['noise_floor']}", file=out)
        unproven = {u["why"] for u in rec.extra.get("unproven") or ()}
        refused = [n for n in rec.note.split("; ") if n and not any(n in u for u in unproven)] \
            if rec.note else []
        if refused and rec.verified and rec.config != Config():
            print(f"  not recommended: {'; '.join(refused)}", file=out)
        for line in (summary or {}).get("where_the_time_goes") or ():
            print(f"  {line}", file=out)
        if (summary or {}).get("budget"):
            for line in describe_account(summary["budget"]):
                print(f"  {line}", file=out)
        overridden = {k: v for k, v in (overridden or {}).items() if k in rec.config.to_dict()}
        shown = rec.config.with_(**{k: getattr(Config(), k) for k in overridden
                                    if k not in ("nproc", "ranks_per_numa_node")})
        print(f"recommended: {short(shown)}", file=out)
        for knob, why in overridden.items():
            print(f"  {knob}: not claimed, the script sets its own ({why})", file=out)
        _print_command(command, out)


def _step(res) -> str:
    """' [step: data 62%, compute 30%; 45% of the ceiling]' (empty when nothing was split)."""
    split = split_from(res.split)
    parts = [f"step: {split.brief()}"] if split else []
    if res.of_ceiling is not None:
        parts.append(ceiling_words(res.of_ceiling))
    return f" [{'; '.join(parts)}]" if parts else ""


def _print_command(command: str | None, out: TextIO) -> None:
    if command:
        print("\ntuned launch command (also: autotune export --format shell|torchrun|json):",
              file=out)
        print(printable(command), file=out)   # the script's arguments are the user's own
