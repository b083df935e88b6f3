"""How often a winner's ratio is verified after N rounds, from real verification rounds: the
per-round ratios of stored searches, pooled and drawn N at a time through the tool's own verdict
(recommend/settle.py). Issue 62: a 4-minute search of a script whose launch takes ~20 s verified
its leader over 3 rounds and left 27 s unused; the reserve now keeps rounds whole, and a fourth
round replaces its second sampled trial. This says what that round is worth on this machine.

    python3 -m benchmarks.timed.rounds_needed --studies /tmp/r1 /tmp/r2 ... --out results.json
    python3 -m benchmarks.timed.rounds_needed --pool benchmarks/results/slow_start_rounds_zen5_2026-11-29.json

Each study is a results folder (or a storage URL) whose search verified a winner against the
default launch; its winner's quiet per-round ratios join the pool. The pool stands for the
ratio's spread on one script and machine, so pool searches of the same command only. Drawn with
replacement (`--draws`, seeded), each set of N rounds gets the verdict a search would headline:
settled (95% interval within ±10%), a lower bound (one-sided 95% bound at least 1.02x), or
unsettled. Reported per N: the share verified (settled or bound) and the share settled.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Sequence

from autotune.recommend.settle import settle


def winner_rounds(url: str) -> dict[str, Any]:
    """The stored recommendation's winner (its first candidate, the one the rounds past the
    asked ones measured) and its quiet per-round ratios, from a results folder or storage URL."""
    import optuna

    from autotune.measure.contention import disturbed
    from autotune.study.attrs import StudyAttrs
    from autotune.study.storage import open_storage
    if "://" not in url:
        url = f"sqlite:///{Path(url).resolve() / 'autotune.db'}"
    storage = open_storage(url)
    names = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
    if len(names) != 1:
        raise SystemExit(f"{url}: {len(names)} studies; give a folder with one search's study")
    rec = StudyAttrs.of(optuna.load_study(study_name=names[0], storage=storage)).recommendation
    if not rec or not rec.get("candidates"):
        raise SystemExit(f"{url}: no verified recommendation stored")
    winner = rec["candidates"][0]
    outside = winner.get("outside_share") or [None] * len(winner["ratios"])
    return {"study": names[0], "role": winner.get("role"), "config": winner.get("config"),
            "ratios": [r for r, o in zip(winner["ratios"], outside) if not disturbed(o)],
            "headline": rec.get("headline")}


def chances(pool: Sequence[float], rounds: Sequence[int], *, draws: int,
            seed: int = 0) -> dict[int, dict[str, float]]:
    """Per number of rounds: the share of `draws` sets of that many rounds, drawn from `pool`
    with replacement, whose verdict is verified (settled or a lower bound), and settled."""
    rng = random.Random(seed)
    out: dict[int, dict[str, float]] = {}
    for n in rounds:
        verified = settled = 0
        for _ in range(draws):
            got = settle([rng.choice(pool) for _ in range(n)], [None] * n)
            verified += got.verdict.verified
            settled += got.settled
        out[n] = {"verified": verified / draws, "settled": settled / draws}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--studies", nargs="+", metavar="DIR_OR_URL",
                     help="results folders (or storage URLs) of searches of one command")
    src.add_argument("--pool", metavar="JSON", help="a file this wrote: draw from its pool again")
    p.add_argument("--rounds", type=int, nargs="+", default=[3, 4, 5, 6])
    p.add_argument("--draws", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the pool and the shares here (JSON)")
    args = p.parse_args(argv)
    if args.pool:
        stored = json.loads(Path(args.pool).read_text())
        searches, machine = stored["searches"], stored.get("machine")
    else:
        from benchmarks.timed.machine import describe
        searches, machine = [winner_rounds(u) for u in args.studies], describe(fingerprint=True)
    pool = [r for s in searches for r in s["ratios"]]
    if len(pool) < 2:
        raise SystemExit("fewer than two quiet rounds in the pool")
    shares = chances(pool, args.rounds, draws=args.draws, seed=args.seed)
    print(f"{len(pool)} quiet rounds from {len(searches)} "
          f"search{'es' if len(searches) != 1 else ''}, ratios "
          f"{min(pool):.3f}-{max(pool):.3f}")
    for n, s in shares.items():
        print(f"  {n} rounds: verified {s['verified']:.0%} (settled {s['settled']:.0%})")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"machine": machine, "searches": searches, "draws": args.draws, "seed": args.seed,
             "shares": {str(n): s for n, s in shares.items()}}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
