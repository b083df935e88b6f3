"""The search's quality judgement, as steps of its Trials (search/trials.py): a class is measured
when it contends for the lead, the default's own math is accepted as it is and its seeds are
measured as the noise floor when another class first needs judging, at a length sized by time
(quality/sizing.py); a script's reported accuracy is gated per trial."""
from __future__ import annotations

from typing import Any

from ..config import Config, describe_changes
from ..quality.script_floor import (floor_by_seed, judge_reported, measure_script_floor,
                                    stored_script_floor)
from ..quality.sizing import sized_samples
from ..quality.goodput import predicted_goodput
from ..quality.verdict import QualityStatus, QualityVerdict
from ..result import Outcome, TrialResult
from ..study import attrs as A
from ..study.records import Role


class Judging:
    """Mixed into Trials: every attribute it reads is set by Trials.__init__."""

    def _judge_reported(self, config: Config, role: str,
                        ev: TrialResult) -> tuple[float | None, float, dict[str, Any]]:
        """Script mode: the accuracy the script reported, gated against the default launch's
        seeds when it has them (the default launch measures them). Returns (accuracy,
        violation, the TrialResult fields)."""
        o = self.options
        if role == Role.DEFAULT:
            floor = measure_script_floor(self.study, self.evaluate, config, ev, o.script_seeds,
                                         time_left=self.left, progress=self.progress)
            return ev.accuracy, 0.0, ({"quality_sd": floor.sd, "quality_n": floor.n}
                                      if floor is not None else {})
        base = self.known.get(self.key(self.base))
        attrs = A.StudyAttrs.of(self.study)
        floor, by_seed = stored_script_floor(attrs), floor_by_seed(attrs)
        judge = dict(base_accuracy=base.accuracy if base else None,
                     max_drop_pp=o.max_accuracy_drop, required=o.accuracy_required,
                     seeded=len(o.script_seeds) >= 2)
        violation, judged = judge_reported(ev.accuracy, floor, **judge)
        if ev.accuracy is not None and judged.get("quality") == QualityStatus.NOT_SHOWN \
                and by_seed and (ev.throughput or 0.0) >= 0.97 * self.leader():
            own = self._paired_runs(config, ev, by_seed)
            if own:
                violation, judged = judge_reported(ev.accuracy, floor, own=own,
                                                   floor_seeds=by_seed, **judge)
        return ev.accuracy, violation, judged

    def _paired_runs(self, config: Config, ev: TrialResult,
                     by_seed: dict[int, float]) -> dict[int, float]:
        """A contending script configuration's accuracy on the default's seeds: the trial's own
        run is the first seed's (seed 0, as the default's reference run); the others run now,
        while the time left holds them ({} when it holds none)."""
        first = min(by_seed)
        more = [s for s in sorted(by_seed) if s != first]
        if not more or (ev.seconds or 0.0) * len(more) > self.left():
            return {}
        own = {first: float(ev.accuracy)}
        for seed in more:
            self.progress.note(f"accuracy paired with the default launch's: seed {seed}, "
                               f"{describe_changes(config)}")
            run = self.evaluate(config, "throughput", seed=seed)
            if run.outcome == Outcome.OK and run.accuracy is not None:
                own[seed] = run.accuracy
        return own

    def judge(self, config: Config, throughput: float) -> QualityVerdict:
        """Quality of `config`'s math class: the default's own math is accepted as it is; another
        class is measured now when it contends for the lead (with the noise floor first, the
        default's class's seeds, if no class needed it before), else left pending until it
        matters."""
        book, base = self.book, self.base
        if book.class_of(config) == book.class_of(base) or throughput < 0.97 * self.leader() \
                or not book.missing_seeds(config) or book.beyond_showing(config):
            return book.verdict(config)
        floor = self.fastest_of_class(base, (config, throughput))
        self.size_quality(floor)
        floor_cost = self.quality_cost(floor, self._throughput_of(floor) or throughput) \
            if book.missing_seeds(base) else 0.0
        if floor_cost + self.quality_cost(config, throughput) <= max(0.0, self.left()):
            if book.missing_seeds(base):
                book.measure(floor, progress=self.progress)
            unworthy = self.not_worth_quality(config, throughput)
            if unworthy is not None:
                book.predicted[book.class_of(config)] = unworthy
                return unworthy
            book.measure(config, progress=self.progress)
        return book.verdict(config)

    def not_worth_quality(self, config: Config, throughput: float) -> QualityVerdict | None:
        """A global batch whose goodput, predicted from the default's gradient noise scale
        (quality/goodput.py), is below the default launch's throughput: not worth quality runs,
        whatever its speed (the prediction stands in for them; it is never a claim of accuracy).
        None: worth measuring, or nothing to predict with."""
        base = self.known.get(self.key(self.base))
        book = self.book
        if config.global_batch == self.base.global_batch or base is None or not base.throughput:
            return None
        predicted = predicted_goodput(throughput, book.b_noise(), config.global_batch,
                                      self.base.global_batch)
        if predicted is None or predicted.goodput >= base.throughput:
            return None
        return QualityVerdict(status=QualityStatus.NOT_SHOWN, math_class=book.class_of(config),
                              why=predicted.words(base.throughput))

    def size_quality(self, floor: Config) -> None:
        """Fix the study's quality run length from the budget and the speed of `floor`, the
        quickest launch of the default's math, which runs the noise floor (quality/sizing.py);
        once per study, and only where the length is not the user's or the workload's own."""
        o = self.options
        if o.size_quality and self.book.length is None:
            thr = self._throughput_of(floor)
            if thr:
                self.book.fix_length(sized_samples(throughput=thr, budget_s=o.budget_s,
                                                   most=o.quality_samples))

    def _throughput_of(self, config: Config) -> float | None:
        rec = self.known.get(self.key(config))
        return rec.throughput if rec is not None else None

    def fastest_of_class(self, config: Config, now: tuple[Config, float]) -> Config:
        """The quickest measured launch of `config`'s class (`now`: one being judged, not stored
        yet), which runs that class's seeded quality runs (QualityBook.quickest)."""
        seen = [(r.config, r.throughput) for r in self.known.values()
                if r.outcome == Outcome.OK and r.throughput]
        return self.book.quickest(config, seen + [now])

    def rejected(self, config: Config) -> bool:
        """A class the quality gate rejected is no place to look (script mode: the script's
        number, judged per trial)."""
        return not self.options.reported_accuracy and self.book.verdict(config).violation > 0
