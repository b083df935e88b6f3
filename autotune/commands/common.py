"""What several commands share: the stored study they read (StudyRef, opened with what its
provenance says), this machine as a provenance check sees it, the trial settings of a command
that runs trials, and an ok trial described for people."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import optuna

from ..config import DEFAULT_WORKLOAD
from ..errors import AutotuneError, StorageError
from ..measure.split import ceiling_words, of_ceiling, split_from
from ..measure.stats import busy
from ..plan.launch_plan import TARGET_SECONDS
from ..probe import probe, torch_build
from ..result import TrialResult
from ..run.idle import IDLE_DEADLINE_S
from ..run.trial import TrialSettings
from ..script.spec import ScriptSpec
from ..study.provenance import Here, not_used, why_not_here
from ..study.storage import (default_storage, find_study, open_storage, open_study, redact,
                             redact_message, require_existing)
from ..study.trust import Provenance, storage_provenance

# Where a command says something as it goes (a plain line on stderr, in the CLI).
Say = Callable[[str], None]


def quiet(_line: str) -> None:
    """The Say of a command nobody watches."""


@dataclass(frozen=True, kw_only=True)
class StudyRef:
    """The stored study a command reads: --storage, or the file under --results; then --study,
    or the newest autotune study measured on this hardware with this torch."""
    storage: str | None = None
    results: str = "autotune-results"
    study: str | None = None

    @property
    def url(self) -> str:
        return self.storage or default_storage(self.results)


@dataclass(frozen=True)
class Opened:
    study: optuna.Study
    url: str                 # printable: a password is redacted
    notes: list[str]         # whether the study is this machine's, and which are not
    provenance: Provenance   # whether only this user can change it (judged before the read)


def open_results(ref: StudyRef) -> Opened:
    """The study of `ref` for report/export/dashboard/verify/launch, with provenance notes (the
    study shown was measured elsewhere; the storage's other studies that are not this
    machine's). A storage that does not exist yet is an error here, not something to create:
    these commands read results, and Optuna would otherwise leave an empty database behind.
    The file and every folder above it are judged first, and the study is read through the
    folder that was judged (study/trust.py), not by its name again."""
    url = ref.url
    provenance = storage_provenance(url, redact(url))
    require_existing(url)
    try:
        storage = open_storage(provenance.url)
    except StorageError as exc:   # named as the user gave it, not by the checked folder's fd
        raise StorageError(str(exc).replace(provenance.url, redact(url))) from None
    provenance.hold_for(storage)
    here = this_machine()
    try:
        name = find_study(storage, ref.study, here=here)
        study = open_study(storage, name, create=False)
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except StorageError:
        raise
    except Exception as exc:  # a readable header over damaged pages fails only when queried
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageError(f"storage {redact(url)}: cannot read studies: "
                           f"{redact_message(first, url)}") from None
    return Opened(study, redact(url), provenance_notes(study, summaries, here), provenance)


def this_machine() -> Here | None:
    """This machine and torch, or None when the probe cannot read them (the study is still
    readable; it just cannot be compared)."""
    try:
        return Here(topology=probe(collect_capabilities=False), torch=torch_build())
    except AutotuneError:
        return None


def provenance_notes(study: optuna.Study, summaries, here: Here | None) -> list[str]:
    """Lines saying whether `study` is this machine's, and which other studies are not."""
    if here is None:
        return ["cannot probe this machine: the study's machine is not compared with it"]
    notes = []
    reason = why_not_here(study.user_attrs, here)
    if reason:
        notes.append(f"study {study.study_name} is not this machine's: it was {reason}")
    notes += [f"not used: study {name} ({why})"
              for name, why in not_used(summaries, here, skip=study.study_name)]
    return notes


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the trials of `run`, `compare` and `search` run: a built-in workload, a user's
    module:function, or a script (`workload` None: none was named)."""
    workload: str | None = None
    script: ScriptSpec | None = None
    seconds: float | None = TARGET_SECONDS   # the timed window; None: from the budget
    results: str = "autotune-results"
    idle_timeout: float = IDLE_DEADLINE_S

    def settings(self, **overrides) -> TrialSettings:
        return TrialSettings(**{"script": self.script,
                                "workload": self.workload or DEFAULT_WORKLOAD,
                                "target_seconds": self.seconds, "results_dir": self.results,
                                "idle_s": self.idle_timeout, **overrides})


def split_lines(m: TrialResult) -> list[str]:
    """Where the step's time went, the ceiling, and the fixed cost before the window."""
    split, lines = split_from(m.split), []
    lines.append(f"where the time goes: {split.describe()}" if split else
                 "where the time goes: not split (the workload's step has no timers)")
    if m.ceiling:
        lines.append(f"ceiling: {m.ceiling:.1f} samples/s with the batches resident; this "
                     f"launch reaches {ceiling_words(of_ceiling(m.throughput, m.ceiling))}")
    if m.fixed:
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in m.fixed.items())
        lines.append(f"before the window: {sum(m.fixed.values()):.1f}s ({parts})")
    return lines


def describe_measurement(m: TrialResult) -> str:
    """An ok trial's TrialResult as the few lines a person compares configurations by."""
    rss = ", ".join(f"rank{i} {mb} MiB" for i, mb in enumerate(m.peak_rss_mb) if mb)
    lines = [f"throughput: {m.throughput:.1f} samples/s (±{m.throughput_iqr / 2:.1f}, "
             f"{m.timed_steps} timed steps over {m.window_s:.1f}s)",
             f"step time: median {m.step_median_s * 1000:.1f} ms, "
             f"IQR {m.step_iqr_s * 1000:.1f} ms"]
    if m.startup_s is not None:
        share = f"; {m.timed_share:.0%} of the trial spent in timed steps" if m.timed_share else ""
        lines.append(f"start-up: {m.startup_s:.1f}s from launch to first step{share}")
    lines += split_lines(m)
    if rss:
        lines.append(f"peak RSS: {rss}")
    if m.cpu_share is not None:
        lines.append(f"cpu share: {m.cpu_share:.2f} of rank 0's threads' CPU time over the window"
                     + (" [busy: the machine was busy; measure again]" if busy(m.cpu_share) else ""))
    return "\n".join(lines)
