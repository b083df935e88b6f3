"""The search's quality judgement, as steps of its Trials (search/trials.py): a class is measured
when it contends for the lead, the default's own math is accepted as it is and its seeds are
measured as the noise floor when another class first needs judging, at a length sized by time
(quality/sizing.py); a script's reported accuracy is gated per trial."""
from __future__ import annotations

from typing import Any

from ..config import Config
from ..quality.script_floor import judge_reported, measure_script_floor, stored_script_floor
from ..quality.sizing import sized_samples
from ..quality.verdict import QualityVerdict
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
        floor = stored_script_floor(A.StudyAttrs.of(self.study))
        violation, judged = judge_reported(ev.accuracy, floor,
                                           base_accuracy=base.accuracy if base else None,
                                           max_drop_pp=o.max_accuracy_drop,
                                           required=o.accuracy_required)
        return ev.accuracy, violation, judged

    def judge(self, config: Config, throughput: float) -> QualityVerdict:
        """Quality of `config`'s math class: the default's own math is accepted as it is; another
        class is measured now when it contends for the lead (with the noise floor first, the
        default's class's seeds, if no class needed it before), else left pending until it
        matters."""
        book, base = self.book, self.base
        if book.class_of(config) == book.class_of(base) or throughput < 0.97 * self.leader() \
                or not book.missing_seeds(config):
            return book.verdict(config)
        floor = self.fastest_of_class(base, (config, throughput))
        self.size_quality(floor)
        floor_cost = self.quality_cost(floor, self._throughput_of(floor) or throughput) \
            if book.missing_seeds(base) else 0.0
        if floor_cost + self.quality_cost(config, throughput) <= max(0.0, self.left()):
            if book.missing_seeds(base):
                book.measure(floor, progress=self.progress)
            book.measure(config, progress=self.progress)
        return book.verdict(config)

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
