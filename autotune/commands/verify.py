"""`autotune verify`: the study's recommendation measured against the default launch again,
interleaved, on the machine and torch that measured it, under the search's machine lock."""
from __future__ import annotations

import contextlib

import time
from dataclasses import dataclass, field

from ..util.clean import one_line, printable
from ..config import DEFAULT_WORKLOAD
from ..errors import ConfigError
from ..export.recommendation import save_recommendation
from ..plan.launch_plan import TARGET_SECONDS
from ..probe import probe, torch_build
from ..progress import SILENT, Progress
from ..recommend.reverify import (Reverified, reverify, seeded_confirmation,
                                  store_unless_replaced)
from ..recommend.compile_words import compile_lines
from ..recommend.weigh import RunLength
from ..run.idle import IDLE_DEADLINE_S
from ..run.evaluate import live_evaluator
from ..run.trials_dir import check_results
from ..run.trial import TrialSettings
from ..search.lock import MachineLock
from ..study.attrs import StudyAttrs
from ..study.provenance import Here, why_not_here
from ..study.stored_code import command_code, workload_code
from ..study.trust import check_trusted, require_hash
from .common import StudyRef, open_results


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    budget_s: float
    rounds: int = 3
    study: StudyRef = field(default_factory=StudyRef)
    trust_study: str | None = None  # the hash of a stored command others could have written
    idle_timeout: float = IDLE_DEADLINE_S
    # settle the accuracy of the faster launch the search could not show, then verify it
    quality: bool = False
    # the user's run a compile is weighed against (None: the one the search stored)
    run_length: RunLength | None = None


@dataclass(frozen=True)
class Verified:
    result: Reverified
    url: str                        # printable storage URL

    def text(self) -> str:
        """The new headline, the stored one it replaces, and whether it was stored."""
        out = [printable(self.result.recommendation.headline())]
        # the compiled reference and the weighing of a compile, as the search's summary says them
        out += [f"  {printable(line)}" for line in
                compile_lines(self.result.recommendation.to_json())]
        if self.result.previous:   # the stored headline: shown, never acted on
            out.append(f"  before: {one_line(self.result.previous)}")
        out.append(f"  stored in {self.url}" if self.result.replaces
                   else f"  not stored: {self.result.why_kept}")
        return "\n".join(out)


def verify(req: VerifyRequest, progress: Progress = SILENT,
           started: float | None = None) -> Verified:
    """Re-measure within `budget_s` from `started` (monotonic; None: now)."""
    started = time.monotonic() if started is None else started
    require_hash(req.trust_study)
    check_results(req.study.results)   # trial folders the user's alone, before anything
    opened = open_results(req.study)   # judged before it is read, and read as judged
    study = opened.study
    attrs = StudyAttrs.of(study)       # one read: what is checked below is what the trials run
    check_trusted(command_code(attrs.script_command) + workload_code(attrs.workload),
                  f"study {study.study_name}", opened.provenance.why, req.trust_study)
    topology = probe(None)
    reason = why_not_here(attrs, Here(topology=topology, torch=torch_build()))
    if reason:
        raise ConfigError(f"study {study.study_name} was {reason}; verify re-measures on the "
                          "machine and torch that measured it (run `autotune search` here)")
    if req.quality and attrs.script_command:
        raise ConfigError(f"study {study.study_name} tuned a script: --quality settles a math "
                          "class's accuracy with autotune's own quality runs, which a script "
                          "does not have; its accuracy comes from its own runs")
    if req.run_length is not None and req.run_length.steps is not None and attrs.script_command:
        raise ConfigError(f"--run-length {req.run_length.text()}: study {study.study_name} "
                          "tuned a script, whose score is not samples per second; give the "
                          "run's length as a time, e.g. 2h")
    if attrs.cluster_json:
        raise ConfigError(f"study {study.study_name} was measured across hosts; `autotune "
                          "verify` measures this machine only")
    settings = _settings(attrs, req)

    def time_left() -> float:
        return req.budget_s - (time.monotonic() - started)

    evaluate = live_evaluator(topology, settings, time_left=time_left)
    # The search's machine lock: verify times trials too, and must not run beside a search
    # (whose recommendation it would then overwrite with a figure measured under its load).
    with MachineLock(topology.fingerprint(), advice="run verify once it has finished"), \
            contextlib.closing(evaluate):
        measured = StudyAttrs.of(study).recommendation
        accept = seeded_confirmation(study, evaluate, time_left=time_left, progress=progress)
        result = reverify(study, evaluate, rounds=req.rounds, progress=progress,
                          time_left=time_left, accept=accept, quality=req.quality,
                          run_length=req.run_length)
        result = store_unless_replaced(
            study, req.study.url, measured, result,
            lambda rec: save_recommendation(study, rec, topology,
                                            attrs.workload or settings.workload,
                                            command=settings.script and settings.script.command))
    return Verified(result, opened.url)


def _settings(attrs: StudyAttrs, req: VerifyRequest) -> TrialSettings:
    """The search's trial settings, from the study: its workload or script, its timed window."""
    stored = attrs.settings
    return TrialSettings(script=attrs.script(), workload=attrs.workload or DEFAULT_WORKLOAD,
                         target_seconds=float(stored.get("target_seconds") or TARGET_SECONDS),
                         results_dir=req.study.results, idle_s=req.idle_timeout)
