"""benchmarks/timed/compile_cost.py's summary of its rounds, with literal rows (its real runs:
`python3 -m benchmarks.timed.compile_cost --workloads mlp --rounds 1 --seconds 0.3`)."""
from __future__ import annotations

from benchmarks.timed.compile_cost import describe, summarize


def arm(thr, compile_s=None, cache=None, outcome="ok"):
    return {"outcome": outcome, "throughput": thr, "compile_s": compile_s,
            "compile_cache": cache, "recompiles": 0 if compile_s is not None else None}


def test_compiled_over_eager_per_round_and_the_compile_seconds():
    rounds = [{"eager": arm(100.0), "cold": arm(150.0, 20.0, "cold"), "warm": arm(160.0, 4.0, "warm")},
              {"eager": arm(110.0), "cold": arm(160.0, 22.0, "cold"), "warm": arm(176.0, 5.0, "warm")},
              {"eager": arm(100.0), "cold": arm(None, outcome="crash"), "warm": arm(150.0, 4.0, "warm")}]
    s = summarize(rounds)
    assert s["rounds"] == 3 and s["failed_rounds"] == 1
    assert s["warm_over_eager"]["ratios"] == [1.6, 1.6]
    assert s["cold_over_eager"]["ratios"] == [1.5, 1.455]
    assert (s["cold_compile_s"], s["warm_compile_s"], s["recompiles"]) == (21.0, 4.5, 0)
    assert describe("cnn", s) == ("cnn: compiled 1.60x eager (±0.00; cold launch 1.48x), "
                                  "compiling 21.0 s cold, 4.5 s warm, 0 recompile(s), 3 rounds")
    assert describe("mlp", summarize(rounds[2:])) == "mlp: no whole round (1 of 1 failed)"
