"""A compiled trial's timeout (run/evaluate.py): the eager timeout the first good trial taught,
plus a compile allowance, 240 s until a compile was measured, then 3x the longest one."""
from __future__ import annotations

from autotune.config import Config
from autotune.result import Outcome, TrialResult
from autotune.run.evaluate import COMPILE_ALLOWANCE_S, LiveEvaluator
from autotune.run.trial import TrialSettings


def test_a_compiled_trial_may_take_its_compile_beyond_the_eager_timeout(tmp_path):
    ev = LiveEvaluator(None, TrialSettings(timeout_s=120.0, results_dir=str(tmp_path)),
                       warm=False)
    eager, compiled = Config(), Config(compile=True)
    ev._learn(eager, "throughput", TrialResult(outcome=Outcome.OK, throughput=100.0,
                                               seconds=12.0))
    assert ev._settings(eager, "throughput", None, None).timeout_s == 48.0
    assert ev._settings(compiled, "throughput", None, None).timeout_s == 48.0 + COMPILE_ALLOWANCE_S
    ev._learn(compiled, "throughput", TrialResult(outcome=Outcome.OK, throughput=150.0,
                                                  seconds=40.0, compile_s=25.0))
    assert ev._settings(compiled, "throughput", None, None).timeout_s == 48.0 + 75.0
    ev._learn(compiled, "throughput", TrialResult(outcome=Outcome.OK, throughput=150.0,
                                                  seconds=20.0, compile_s=5.0))   # a warm one
    assert ev._settings(compiled, "throughput", None, None).timeout_s == 48.0 + 75.0
