"""The accuracy gate's operating characteristics for the whole procedure, simulated (issue 60).

The truth is a normal model with the spreads measured on the built-in cnn (2048 held-out
examples, 8 seeds a side, benchmarks/results/accuracy_gate_paired_runs.jsonl): the default's
seed-to-seed spread SIGMA_D and bf16's paired spread SIGMA_P at the 5- and 10-minute quality
lengths. A seed's default quality is drawn from N(90, SIGMA_D) and a class's from it less a drop
drawn from N(true drop, SIGMA_P), or a spike, or a failure, per arm. Every decision is autotune's
own code on those runs (quality/looks.judge, looks.plan_pairs, the verdict's `contends`), not a
re-implementation, so the figures are the procedure's:

  1. the search's screening: the default's and each candidate's seeds 0-2 (block 0); a candidate
     that may lead (its verdict `contends`) goes on
  2. the confirmation: for each such candidate in turn until one is accepted, one look of new
     seeds 100.. planned from the screening (at most looks.MOST_LOOK_PAIRS, or `pairs` when the
     time holds fewer), judged on them alone
  3. `verify --quality` (the `verify` arms): while no candidate is accepted and looks are left,
     a look of new seeds at the first candidate, as a user who runs it again and again would

A study "accepts" when any candidate is accepted; the rates are per study, family-wise. The
spiky arm also gives its floor: the share of studies in which no seed the procedure ran
spiked (what a test that cannot see the spikes would at best be held to).

    python3 -m benchmarks.accuracy.procedure                 # every arm, 20000 studies each
    python3 -m benchmarks.accuracy.procedure --studies 500   # a quick look

Machine-independent (a simulation, not timed); the figures in docs/benchmarks.md say the date
and the command.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from typing import Any

from autotune.quality.evidence import ClassEvidence
from autotune.quality.gate import Shown
from autotune.quality.looks import (LOOK_SEEDS, MOST_LOOK_PAIRS, MOST_LOOKS, MOST_SETTLE_PAIRS,
                                    judge, looks_spent, plan_pairs)
from autotune.quality.verdict import QualityVerdict, status_of

TOLERANCE = 1.0
# Measured on the built-in cnn, 2048 held-out examples (the search's evaluation), 8 seeds a side:
# (the default's seed-to-seed sd, bf16's paired sd, bf16's drop), points.
SPREADS = {"5m": (0.848, 1.833, 0.11), "10m": (0.770, 0.588, 0.17)}
OUT = "benchmarks/results/accuracy_procedure.json"


@dataclass(frozen=True)
class Arm:
    name: str
    length: str                  # "5m" | "10m": which measured spreads
    drop: float                  # true mean drop of each candidate's ordinary seeds, points
    candidates: int = 1
    verify: bool = False         # `verify --quality` until the looks are spent
    spike_share: float = 0.0     # share of seeds that lose 10-19 pp
    fail_share: float = 0.0      # share of candidate seeds that fail
    pairs: int = MOST_LOOK_PAIRS  # the most pairs the confirmation's time holds


ARMS = (
    Arm("at the tolerance, 1 candidate", "10m", TOLERANCE),
    Arm("at the tolerance, 3 candidates", "10m", TOLERANCE, candidates=3),
    Arm("at the tolerance, 3 candidates + verify --quality", "10m", TOLERANCE, 3, verify=True),
    Arm("at the tolerance, 5m spreads, 3 candidates + verify", "5m", TOLERANCE, 3, verify=True),
    Arm("2 pp, 3 candidates + verify --quality", "10m", 2.0, 3, verify=True),
    Arm("2 pp, 5m spreads, 3 candidates + verify", "5m", 2.0, 3, verify=True),
    Arm("spiky: 0 pp, 15% of seeds lose 10-19 pp", "10m", 0.0, spike_share=0.15),
    Arm("spiky + verify --quality", "10m", 0.0, verify=True, spike_share=0.15),
    Arm("failed: 0 pp, 20% of seeds fail", "10m", 0.0, verify=True, fail_share=0.2),
    Arm("bf16 at 10 minutes", "10m", SPREADS["10m"][2]),
    Arm("bf16 at 10 minutes, time for 6 pairs", "10m", SPREADS["10m"][2], pairs=6),
    Arm("bf16 at 5 minutes", "5m", SPREADS["5m"][2]),
)


class Study:
    """One simulated study: the default's runs and each candidate's, drawn as seeds are asked."""

    def __init__(self, arm: Arm, rng: random.Random) -> None:
        self.arm, self.rng = arm, rng
        self.sigma_d, self.sigma_p, _ = SPREADS[arm.length]
        self.base = ClassEvidence(math_class="D", config={})
        self.cands = [ClassEvidence(math_class=f"C{i}", config={}) for i in range(arm.candidates)]
        self.spiked = False

    def run(self, ev: ClassEvidence, seeds) -> None:
        for s in seeds:
            if s not in self.base.runs:
                self.base.runs[s] = {"quality": (90.0 + self.rng.gauss(0, self.sigma_d)) / 100}
            if ev is self.base or s in ev.runs:
                continue
            if self.rng.random() < self.arm.fail_share:
                ev.runs[s] = {"quality": None, "failure": "crash: simulated"}
                continue
            if self.rng.random() < self.arm.spike_share:
                drop = self.rng.uniform(10.0, 19.0)
                self.spiked = True
            else:
                drop = self.rng.gauss(self.arm.drop, self.sigma_p)
            ev.runs[s] = {"quality": self.base.runs[s]["quality"] - drop / 100}

    def verdict(self, ev: ClassEvidence) -> QualityVerdict:
        g = judge(self.base, ev, TOLERANCE)
        return QualityVerdict(status=status_of(g), gate=g)

    def look(self, ev: ClassEvidence, first: int, most: int) -> bool:
        plan = min(plan_pairs(self.verdict(ev).gate, most), most)
        for s in range(first, first + plan):
            self.run(ev, [s])
            if ev.failures():
                break
        for s in range(first, first + plan):   # a failed look's plan is stored on its runs
            if s in ev.runs:
                ev.runs[s]["plan"] = plan
        return self.verdict(ev).accepted


def one_study(arm: Arm, rng: random.Random) -> dict[str, bool]:
    st = Study(arm, rng)
    st.run(st.base, range(3))
    for ev in st.cands:
        st.run(ev, range(3))
    accepted = False
    for ev in st.cands:                           # the confirmation, candidate by candidate
        v = st.verdict(ev)
        if not v.contends or looks_spent(st.cands, "D") >= MOST_LOOKS:
            continue
        if st.look(ev, LOOK_SEEDS, arm.pairs):
            accepted = True
            break
    block = 2
    while arm.verify and not accepted and looks_spent(st.cands, "D") < MOST_LOOKS:
        ev = st.cands[0]
        v = st.verdict(ev)
        if v.status != Shown.NOT_SHOWN.value or v.gate.failed or v.gate.spiked \
                or v.gate.drop_pp >= TOLERANCE:
            break                                  # settle_quality would not look
        accepted = st.look(ev, block * LOOK_SEEDS, MOST_SETTLE_PAIRS)
        block += 1
    return {"accepted": accepted, "spike_free": not st.spiked,
            "any_failed": any(ev.failures() for ev in st.cands)}


def measure(arm: Arm, studies: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    got = [one_study(arm, rng) for _ in range(studies)]
    acc = sum(g["accepted"] for g in got) / studies
    out: dict[str, Any] = {"arm": arm.name, "length": arm.length, "studies": studies,
                           "accepted": round(acc, 4),
                           "se": round((acc * (1 - acc) / studies) ** 0.5, 4)}
    if arm.spike_share:
        out["floor_no_spike_ran"] = round(sum(g["spike_free"] for g in got) / studies, 4)
        out["accepted_with_a_spike"] = sum(g["accepted"] and not g["spike_free"] for g in got)
    if arm.fail_share:
        out["accepted_with_a_failed_seed"] = sum(g["accepted"] and g["any_failed"] for g in got)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.accuracy.procedure",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--studies", type=int, default=20000, help="studies per arm (20000)")
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    if args.studies < 1:
        print("accuracy_procedure: --studies must be at least 1", file=sys.stderr)
        return 2
    rows = [measure(arm, args.studies, seed=i) for i, arm in enumerate(ARMS)]
    for r in rows:
        extra = "".join(f"  {k} {v}" for k, v in r.items()
                        if k in ("floor_no_spike_ran", "accepted_with_a_spike",
                                 "accepted_with_a_failed_seed"))
        print(f"{r['arm']:<56} accepted {r['accepted']:7.2%} ± {r['se']:.2%}{extra}")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tolerance_pp": TOLERANCE, "spreads": SPREADS, "most_looks": MOST_LOOKS,
                   "arms": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
