"""benchmarks/timed/dashboard_shown on a study made through the real pipeline (results_study):
what is shown holds no accuracy no run gave and draws nothing that never ran, and its Pareto
front is report's."""
from __future__ import annotations

import optuna

from benchmarks.timed.dashboard_shown import counts, main
from results_study import study_copy


def test_what_is_shown_is_what_was_measured(tmp_path, capsys):
    db = study_copy(tmp_path / "results")
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    got = counts(optuna.load_study(study_name=None, storage=storage), storage)
    assert got["shown"] == {"accuracy_0_unmeasured": 0, "never_ran_drawn": 0}
    assert got["pareto_same"] and got["report_pareto"]
    assert main(["--storage", f"sqlite:///{db}"]) == 0
    assert '"pareto_same": true' in capsys.readouterr().out
