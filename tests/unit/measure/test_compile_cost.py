"""What torch.compile cost a run (measure/compile_cost.py): literal reports in, the trial's
compile_s, compile_cache and recompiles out."""
from __future__ import annotations

from autotune.measure.compile_cost import (compile_cost, failed_reason, is_compile_failure,
                                           launch_compile_cost)
from autotune.measure.stats import aggregate


def report(warmup, steps, *, frames, built=True, in_window=0, hits=0, misses=3) -> dict:
    return {"warmup_times": warmup, "step_times": steps,
            "compile": {"built": built, "frames_by_step": frames, "in_window": in_window,
                        "hits": hits, "misses": misses}}


def test_the_compiled_steps_less_the_steady_step_are_the_compile_cost():
    # step 0 compiled (12.1 s), steps 1-2 ran at speed; the window's median step is 0.1 s
    r = report([12.1, 0.12, 0.1], [0.1, 0.1, 0.11, 0.09], frames=[1, 0, 0])
    assert compile_cost(r) == (12.0, "cold", 0)


def test_a_recompile_in_the_warm_up_is_counted_and_its_cost_added():
    # a changed shape in step 2 compiled one frame again (1.5 s): 12 + 1.4 s, one recompile
    r = report([12.1, 0.1, 1.5, 0.1], [0.1] * 5, frames=[1, 0, 1, 0], in_window=1, hits=2,
               misses=0)
    assert compile_cost(r) == (13.4, "warm", 2)   # and one more inside the timed window


def test_a_kept_compiled_model_compiled_nothing():
    r = report([0.1, 0.1, 0.1], [0.1] * 4, frames=[0, 0, 0], built=False, misses=0)
    assert compile_cost(r) == (0.0, "warm", 0)
    # a kept model that compiled again (a guard failed): every frame is a recompile
    r = report([0.9, 0.1, 0.1], [0.1] * 4, frames=[1, 0, 0], built=False, misses=0, hits=1)
    assert compile_cost(r) == (0.8, "warm", 1)


def test_an_eager_run_or_a_broken_report_has_no_compile_fields():
    assert compile_cost({"warmup_times": [1.0], "step_times": [0.1]}) == (None, None, None)
    assert compile_cost(report([1.0], [0.1], frames=["x"])) == (None, None, None)


def test_the_launch_waits_for_its_slowest_compiling_rank():
    ranks = [report([12.1, 0.1], [0.1] * 3, frames=[1, 0], misses=0, hits=4),
             report([15.1, 0.1], [0.1] * 3, frames=[1, 0, 0], misses=1, in_window=1)]
    assert launch_compile_cost(ranks) == (15.0, "cold", 1)
    assert launch_compile_cost([{"status": "ok"}]) == (None, None, None)


def test_aggregate_fills_the_trials_compile_fields():
    r0 = {"status": "ok", "step_times": [0.1, 0.1, 0.1], "window_seconds": 0.3, "samples": 96,
          "timed_steps": 3, "throughput": 320.0, "warmup_times": [5.1, 0.1, 0.1],
          "compile": {"built": True, "frames_by_step": [2, 0, 0], "in_window": 0, "hits": 6,
                      "misses": 0}}
    out = aggregate([r0], launched_at=0.0)
    assert (out.compile_s, out.compile_cache, out.recompiles) == (5.0, "warm", 0)
    eager = aggregate([{k: v for k, v in r0.items() if k != "compile"}], launched_at=0.0)
    assert (eager.compile_s, eager.compile_cache, eager.recompiles) == (None, None, None)


def test_a_failed_compile_is_named_by_the_compilers_last_line():
    text = ("backend='inductor' raised:\nInvalidCxxCompiler: No working C++ compiler found in "
            "torch._inductor.config.cpp.cxx: (None, '/opt/bad/c++')\n\nSet TORCHDYNAMO_VERBOSE=1 "
            "for the internal stack trace (please do this especially if you're reporting a bug "
            "to PyTorch). For even more developer context, set TORCH_LOGS=\"+dynamo\"\n")
    reason = failed_reason(text)
    assert reason == ("torch.compile failed: InvalidCxxCompiler: No working C++ compiler found "
                      "in torch._inductor.config.cpp.cxx: (None, '/opt/bad/c++')")
    assert is_compile_failure(f"rank 0 exited with code 1: {reason}")
    assert not is_compile_failure("rank 0: workload 'cnn' failed in its first step")
    assert not is_compile_failure(None)
    assert failed_reason("") == "torch.compile failed: no message"
