"""Seeded quality evidence per math class, stored in the study and reused.

The default launch's class is measured first with `seeds` seeds: the runs every other class is
paired with (quality/gate.py). Another class is measured with the same seeds only when it matters
(a configuration of that class would lead the search), and each class is measured once:
configurations that share the math share the quality. Runs of one seed on both sides share the
initial weights (build_model(seed)), the data order (sample i of seed s, whatever the batch split)
and the held-out examples (one set for every seed), so the class is judged on the per-seed
differences. Every class of a study trains one length (`length`), so the confirmation's new seeds
pool with the search's.
"""
from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import optuna

from ..config import Config
from ..progress import SILENT, Progress
from ..result import Outcome, SideBySide
from .gate import DropBound, Sample
from .looks import judge, looks_spent
from .goodput import NoiseScale, noise_scale
from .verdict import QualityStatus, QualityVerdict, status_of
from .math_class import math_class
from .sizing import run_seconds
from ..study import attrs as A
from ..study import bounded

DEFAULT_SEEDS = (0, 1, 2)
CONFIRM_SEEDS = (100, 101, 102)


@dataclass
class ClassEvidence:
    """Every quality run of one math class (JSON in a study user attribute)."""
    math_class: str
    config: dict[str, Any]
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)   # seed -> run

    def sample(self, seeds: tuple[int, ...] | None = None) -> Sample | None:
        """The seeds' qualities (all runs of the study's own length when `seeds` is None)."""
        vals = list(self.by_seed(seeds).values())
        return Sample(tuple(vals)) if vals else None

    def by_seed(self, seeds: tuple[int, ...] | None = None) -> dict[int, float]:
        """{seed: quality} of the runs that gave one, at the study's own length (of `seeds`, when
        given): what the paired test pairs. Runs of another length (an older study's
        twice-as-long confirmations) pair only among themselves, when `seeds` names them."""
        return {s: float(r["quality"]) for s, r in sorted(self.runs.items())
                if r.get("quality") is not None and not r.get("failure") and _chosen(s, r, seeds)}

    def failures(self, seeds: tuple[int, ...] | None = None) -> dict[int, str]:
        """{seed: why} of the runs that gave no quality (failed, timed out, not a finite number,
        or a stored value that is not a quality at all): evidence against the class."""
        return {s: str(r.get("failure") or r.get("reason") or "quality run failed")
                for s, r in sorted(self.runs.items())
                if (r.get("failure") or r.get("quality") is None) and _chosen(s, r, seeds)}

    @property
    def failed(self) -> str | None:
        """The first failure's reason (None: every run gave a quality)."""
        return next(iter(self.failures().values()), None)

    def spread_pp(self) -> float | None:
        """The seed-to-seed standard deviation of the class's qualities in points (None under
        2 runs): the default's is what the worst-seed rule measures a spike against."""
        s = self.sample()
        return s.sd * 100.0 if s is not None and s.n >= 2 else None

    def curves(self, seeds: tuple[int, ...] | None = None) -> list[list[tuple[int, float]]]:
        return [[(int(n), float(q)) for n, q in r.get("curve") or ()]
                for s, r in sorted(self.runs.items())
                if r.get("curve") and _chosen(s, r, seeds)]

    def noise_scale(self) -> NoiseScale | None:
        probes = [r["gns"] for r in self.runs.values() if r.get("gns")]
        if not probes:
            return None
        small = {p["small"] for p in probes}
        big = {p["big"] for p in probes}
        if len(small) != 1 or len(big) != 1 or small == big:
            return None
        return noise_scale([v for p in probes for v in p["small_sq"]],
                             [v for p in probes for v in p["big_sq"]], small.pop(), big.pop())

    def seconds(self) -> float:
        return sum(float(r.get("seconds") or 0.0) for r in self.runs.values())

    def to_json(self) -> str:
        return json.dumps({"math_class": self.math_class, "config": self.config,
                           "runs": {str(k): v for k, v in self.runs.items()}})

    @classmethod
    def from_json(cls, text: str) -> "ClassEvidence":
        """The evidence a study stores, each run within bounds (study/bounded.py: what a
        shared study holds is data); ValueError for what is not evidence at all."""
        d = json.loads(text)
        if not isinstance(d, dict) or not isinstance(d.get("math_class"), str) or \
                not isinstance(d.get("config"), dict) or not isinstance(d.get("runs"), dict):
            raise ValueError("not a class's quality evidence")
        runs = {seed: run for k, v in d["runs"].items()
                if (seed := bounded.integer(_int(k), 0, 2**63 - 1)) is not None
                and (run := bounded.quality_run(v)) is not None}
        return cls(math_class=d["math_class"], config=d["config"], runs=runs)


def failure_of(out: Any) -> str | None:
    """Why a quality run gave no quality (None: it did): its outcome, or a quality that is not a
    finite number (a run that diverged to NaN trains "ok" and is the class's failure all the
    same)."""
    if out.outcome != Outcome.OK or out.accuracy is None:
        return f"{out.outcome}: {out.reason}" if out.reason else str(out.outcome)
    if not math.isfinite(out.accuracy):
        return f"diverged: its quality is {out.accuracy}"
    return None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _chosen(seed: int, run: dict[str, Any], seeds: tuple[int, ...] | None) -> bool:
    return (not run.get("samples")) if seeds is None else seed in seeds


def stored_classes(study_attrs: dict[str, Any] | A.StudyAttrs) -> dict[str, ClassEvidence]:
    """Every class's evidence stored on a study (from its user attributes)."""
    out = {}
    for value in A.StudyAttrs(study_attrs).quality_evidence:
        try:
            ev = ClassEvidence.from_json(value)
        except ValueError:     # not evidence a search wrote: as if not stored
            continue
        out[ev.math_class] = ev
    return out


class QualityBook:
    """The study's quality evidence. `evaluate(config, "accuracy", seed=s)` runs one seed."""

    def __init__(self, study: optuna.Study, evaluate: Callable[..., Any], *, batchnorm: bool,
                 tolerance_pp: float, seeds: tuple[int, ...] = DEFAULT_SEEDS,
                 lower_is_better: bool = False, base: Config | None = None,
                 claims: Any = None, most_samples: int | None = None) -> None:
        """`claims` (shared.ConfigClaims): a search shared by several workers; each quality run
        (math class, seed) is then claimed through the study and run by one worker only.
        `most_samples`: the longest run this search would size itself; a stored length beyond it
        is not taken (a study is data: one stored length made a quality run take the budget)."""
        self.most_samples = most_samples
        self.study, self.evaluate, self.claims = study, evaluate, claims
        self.batchnorm, self.tolerance_pp, self.seeds = batchnorm, tolerance_pp, seeds
        self.lower_is_better = lower_is_better
        self.base = base or Config()
        self.classes: dict[str, ClassEvidence] = {}
        # Classes judged without runs (a global batch whose predicted goodput is below the
        # default's: search/judging.py), until runs of them exist
        self.predicted: dict[str, QualityVerdict] = {}
        # The samples of a search-length run, fixed once for the study (quality/sizing.py);
        # None: not decided yet (the caller's length applies, as in studies before sizing).
        self.length: int | None = None
        self.refresh()

    def refresh(self) -> None:
        """Read the evidence stored on the study again (other workers, or a later run, may
        have added classes and seeds since)."""
        attrs = A.StudyAttrs.of(self.study)
        self.classes.update(stored_classes(attrs))
        stored = attrs.quality_length
        if stored is not None and (self.most_samples is None or stored <= self.most_samples):
            self.length = stored

    def fix_length(self, samples: int) -> int:
        """The study's search-length runs train `samples` from now on, unless a length was
        fixed before (then that one stands: every class is judged at one length)."""
        if self.length is None:
            self.length = int(samples)
            A.write_quality_length(self.study, self.length)
        return self.length

    def verdict(self, config: Config) -> QualityVerdict:
        """The verdict for `config`'s class on the evidence held now (quality/looks.judge: the
        same for every reader of the study)."""
        ev, gated = self.evidence(config), self.gate_result(config)
        cls = self.class_of(config)
        if cls == self.class_of(self.base):
            # the default's own math: shown by definition; its seeds are what the other classes
            # pair with, measured when one first needs judging
            return QualityVerdict(status=QualityStatus.WITHIN, math_class=cls,
                                  sample=ev.sample() if ev else None,
                                  why="same math as the default launch")
        if ev is not None and ev.failed and (gated is None or not gated.n):
            return QualityVerdict(status=QualityStatus.FAILED, math_class=cls, gate=gated,
                                  why=ev.failed)
        if gated is None:
            return self.predicted.get(cls) or QualityVerdict(status=QualityStatus.PENDING,
                                                            math_class=cls)
        return QualityVerdict(status=status_of(gated), math_class=cls,
                              sample=ev.sample(gated.seeds), gate=gated)

    def class_of(self, config: Config) -> str:
        return math_class(config, batchnorm=self.batchnorm,
                            reference_batch=self.base.global_batch)

    def evidence(self, config: Config) -> ClassEvidence | None:
        return self.classes.get(self.class_of(config))

    def missing_seeds(self, config: Config, seeds: tuple[int, ...] | None = None) -> list[int]:
        ev = self.evidence(config)
        have = set(ev.runs) if ev else set()
        return [s for s in (seeds or self.seeds) if s not in have]

    def measure(self, config: Config, seeds: tuple[int, ...] | None = None,
                progress: Progress = SILENT,
                samples: int | None = None, plan: int | None = None) -> ClassEvidence:
        """Run the class's missing seeds (storing each as it finishes: a crash keeps them).
        `samples` overrides the run length (the confirmation's longer runs use their own seeds);
        `plan`: the pairs of the look these seeds belong to (quality/looks.py), stored on each.
        Across hosts, as many seeds run side by side as the configuration has lanes of hosts.
        A class other than the default's stops at its first failure (it can no longer be
        shown); the default's runs every seed (a failure there leaves one pair out)."""
        cls = self.class_of(config)
        self.classes.setdefault(cls, ClassEvidence(math_class=cls, config=config.to_dict()))
        missing = [] if self.beyond_showing(config) else self.missing_seeds(config, seeds)
        width = self.lanes(config)
        for batch in (missing[i:i + width] for i in range(0, len(missing), width)):
            if self.claims is not None:   # another worker's run is waited for, not repeated
                seed = batch[0]
                self.claims.accuracy(f"{cls}@seed{seed}", lambda seed=seed: self._runs(
                    config, cls, [seed], progress, samples, plan)[0])
                self.refresh()
            else:
                self._runs(config, cls, batch, progress, samples, plan)
            if self.beyond_showing(config):
                break   # no further seed could show the class: the rest would be time lost
        ev = self.classes[cls]
        if cls == self.class_of(self.base):
            self._store_noise_floor(ev)
        return ev

    def beyond_showing(self, config: Config) -> bool:
        """Can no number of further seeds show `config`'s class within the tolerance? True once
        one of its seeds failed, diverged or spiked (quality/gate.py: any one makes the class not
        shown, whatever its other seeds say); never for the default's own class. Its screening
        stops there: a 5-minute search spent two more seeds (10 s) on a global batch of 128 whose
        first seed had lost 17 pp."""
        if self.class_of(config) == self.class_of(self.base):
            return False
        ev = self.evidence(config)
        if ev is not None and ev.failed:
            return True
        g = self.gate_result(config)
        return g is not None and g.lost_a_seed

    def quickest(self, config: Config, measured: list[tuple[Config, float]]) -> Config:
        """The fastest eager launch of the (configuration, samples/s) measured in `config`'s math
        class, else `config`: it runs the class's quality runs. Ranks, threads, binding,
        allocator and OpenMP runtime leave the math alone (quality/math_class.py), so the class
        is measured as well by its quickest launch: run_cpu's settings ran the default's class
        1.6x faster than the default launch on the namespace hosts (issue 35). Quality runs train
        eager (`_runs`), so a compiled launch's rate says nothing of theirs: the default launch
        compiled (1.28x) had run a 5-minute search's default seeds as the default launch eager
        (1.00x), where run_cpu's settings ran 1.26x."""
        cls = self.class_of(config)
        same = [(thr, c) for c, thr in measured
                if thr and not c.compile and self.class_of(c) == cls]
        return max(same, key=lambda t: t[0], default=(0.0, config))[1]

    def lanes(self, config: Config) -> int:
        """Seeds of `config` that run side by side (1 on one machine, or in a shared search,
        whose runs are claimed one by one)."""
        if self.claims is not None or not isinstance(self.evaluate, SideBySide):
            return 1
        return max(1, self.evaluate.lanes(config))

    def _runs(self, config: Config, cls: str, seeds: list[int], progress: Progress,
              samples: int | None, plan: int | None = None) -> list[tuple[float | None, float]]:
        """Run `seeds` (side by side when several) and store each; (quality, seconds) each."""
        for seed in seeds:
            progress.quality_start(config=config, math_class=cls, seed=seed,
                                   **({"side_by_side": len(seeds)} if len(seeds) > 1 else {}))
        length = samples or self.length   # a confirmation's own length, else the study's
        kw = {"samples": length} if length else {}
        # compiled is its eager twin's math (quality/math_class.py): run the seeds eager, with
        # no compile to pay per seed
        run_as = config.with_(compile=False) if config.compile else config
        outs = self.evaluate.at_once(run_as, "accuracy", list(seeds), **kw) if len(seeds) > 1 \
            else [self.evaluate(run_as, "accuracy", seed=seeds[0], **kw)]
        done = []
        for seed, out in zip(seeds, outs):
            why = failure_of(out)
            ok = why is None
            self._store(cls, config, seed, {
                "quality": out.accuracy if ok else None, "failure": why, "reason": why,
                "curve": [list(p) for p in out.curve] or None, "gns": out.gns,
                "seconds": round(out.seconds, 2), "samples": samples, "plan": plan})
            done.append(((out.accuracy if ok else None), out.seconds))
        return done

    def _store(self, cls: str, config: Config, seed: int, run: dict[str, Any]) -> None:
        """One run into the class's stored evidence (re-read first when shared: other workers
        add seeds to the same attribute)."""
        held = self.claims.lock.held() if self.claims is not None else contextlib.nullcontext()
        with held:
            if self.claims is not None:
                self.refresh()
            ev = self.classes.setdefault(cls, ClassEvidence(math_class=cls,
                                                            config=config.to_dict()))
            # as a reader after a refresh will see it (study/bounded.py): one verdict either way
            ev.runs[seed] = bounded.quality_run(run)
            A.write_quality_evidence(self.study, cls, ev.to_json())
            # the shared claim's "stored" marker (shared.ConfigClaims.accuracy reads it)
            if self.claims is not None:
                A.write_accuracy(self.study, f"{cls}@seed{seed}", run["quality"])

    def _store_noise_floor(self, ev: ClassEvidence) -> None:
        s = ev.sample(self.seeds)
        if s is None:
            return
        ns = ev.noise_scale()
        A.write_noise_floor(self.study, {
            "mean": s.mean, "sd": s.sd, "n": s.n, "values": list(s.values),
            "math_class": ev.math_class,
            "b_noise": ns.b_noise if ns else None})

    def default_sample(self, seeds: tuple[int, ...] | None = None) -> Sample | None:
        """The default's qualities on `seeds` (every seed at the study's length when None)."""
        ev = self.evidence(self.base)
        return ev.sample(seeds) if ev else None

    def gate_result(self, config: Config) -> DropBound | None:
        """The test of `config`'s class against the default's (quality/looks.judge), or None
        while they share no seed, or for the default's own class."""
        base, ev = self.evidence(self.base), self.evidence(config)
        if base is None or ev is None or self.class_of(config) == self.class_of(self.base):
            return None
        return judge(base, ev, self.tolerance_pp, lower_is_better=self.lower_is_better)

    def looks_spent(self) -> int:
        return looks_spent(self.classes.values(), self.class_of(self.base))

    def b_noise(self) -> float | None:
        ev = self.evidence(self.base)
        ns = ev.noise_scale() if ev else None
        return ns.b_noise if ns else None

    def cost(self, config: Config, throughput: float, samples: int) -> float:
        """Seconds the class's missing seeds would take (side by side where they have lanes of
        hosts): runs of it seen so far, else an estimate from the trial's throughput and the run
        length `samples`; none for a class no seed could show any more (beyond_showing)."""
        if self.beyond_showing(config):
            return 0.0
        seen = self.run_seconds(config)
        per_run = seen if seen else run_seconds(samples, throughput)
        return per_run * -(-len(self.missing_seeds(config)) // self.lanes(config))

    def run_seconds(self, config: Config) -> float | None:
        """Typical length of one quality run of this class (or of the default's), for budgeting."""
        for ev in (self.evidence(config), self.evidence(self.base)):
            runs = [r for r in (ev.runs.values() if ev else ()) if not r.get("samples")]
            if runs:
                return sum(float(r.get("seconds") or 0) for r in runs) / len(runs)
        return None
