"""What `autotune dashboard` shows of a stored study, against what the study stores (issue 63):
trials at an accuracy no run measured, trials that never ran at 0 samples/s, and whether the
dashboard's Pareto front holds `report`'s configurations. Counted, not timed: run it on any study,
e.g. the study of a 30-minute search:

  python3 -m benchmarks.timed.dashboard_shown --storage sqlite:///results/autotune.db

The "shown" figures must be 0, 0 and `pareto_same: true`.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.dashboard import ShownStorage
from autotune.reporting.report import build_report


def _unmeasured_accuracy_at_zero(trials: list) -> int:
    """COMPLETE trials whose accuracy objective is 0 with no measured accuracy attribute."""
    return sum(1 for t in trials if t.state == TrialState.COMPLETE and t.values
               and t.values[1] == 0.0 and t.user_attrs.get("accuracy") is None)


def _never_ran_drawn(trials: list) -> int:
    """Trials that never ran (ruled out before launch) yet carry a throughput to draw."""
    return sum(1 for t in trials if t.user_attrs.get("outcome") == "infeasible" and t.values)


def dashboard_front(trials: list) -> set[int]:
    """The trials the dashboard's Pareto chart marks best: COMPLETE, every constraint met, a
    finite accuracy, none better in both objectives."""
    ok = [t for t in trials if t.state == TrialState.COMPLETE and t.values
          and all(c <= 0 for c in t.constraints.values()) and t.values[1] != float("-inf")]
    return {t.number for t in ok if not any(
        o.values[0] >= t.values[0] and o.values[1] >= t.values[1] and o.values != t.values
        for o in ok)}


def counts(study: optuna.Study, storage: optuna.storages.BaseStorage) -> dict[str, Any]:
    """The figures of `study`, read from `storage` (its storage) as stored and as shown."""
    stored = study.get_trials(deepcopy=False)
    view = ShownStorage(storage)
    shown = view.get_all_trials(view.get_study_id_from_name(study.study_name), deepcopy=False)
    report_front = {r.number for r in build_report(study).pareto}
    return {"trials": len(stored),
            "stored": {"accuracy_0_unmeasured": _unmeasured_accuracy_at_zero(stored),
                       "never_ran_at_0_samples_s": _never_ran_drawn(stored)},
            "shown": {"accuracy_0_unmeasured": _unmeasured_accuracy_at_zero(shown),
                      "never_ran_drawn": _never_ran_drawn(shown)},
            "report_pareto": sorted(report_front),
            "pareto_same": dashboard_front(shown) == report_front}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--storage", required=True, help="the study's storage URL")
    p.add_argument("--study", default=None, help="its name (default: the storage's only one)")
    args = p.parse_args(argv)
    storage = optuna.storages.RDBStorage(args.storage)
    study = optuna.load_study(study_name=args.study, storage=storage)
    print(json.dumps(counts(study, storage), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
