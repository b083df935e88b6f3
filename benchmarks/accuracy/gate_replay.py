"""Which recorded verdicts change under the paired rule of round 6, and why.

The recorded searches (benchmarks/results/*.txt, each the whole output of a real `autotune
search`) state every confirmation the older rule made, with its figures: "accuracy 0.924 ±
0.007 (default 0.944 ± 0.006, 3 new seeds x 16384 samples, side by side): within 1 pp (drop
+2.02 pp, noise 1.26 pp)". The text keeps means and spreads, not the per-seed values the paired
test needs, so a replay decides what the figures decide and says when they do not:

  - a mean drop above the tolerance can never be shown within it (the paired upper bound is at
    least the mean): an older "within" there is "not within" now (not shown, or beyond once
    paired), whatever the pairing;
  - a mean drop within it: the paired bound lies between the mean drop and the mean plus t times
    the unpaired standard error (pairing can only narrow it when the seeds correlate, as they do:
    0.57-0.99, benchmarks/accuracy/gate.py); when even that unpaired bound is within, the verdict
    is "within" now too; otherwise it needs the per-seed values the text did not keep;
  - an older "beyond" whose mean drop minus t times the unpaired error is above the tolerance is
    "beyond" under the paired rule too; otherwise undetermined from the text.

    python3 -m benchmarks.accuracy.gate_replay            # every recorded search, one line per verdict
"""
from __future__ import annotations

import glob
import json
import math
import re
import sys
from typing import Any

from autotune.quality.gate import t95

LINE = re.compile(r"accuracy (?P<c>[0-9.]+) ± (?P<cs>[0-9.]+) \(default (?P<d>[0-9.]+) ± "
                  r"(?P<ds>[0-9.]+), (?P<n>\d+) new seeds x (?P<len>\d+) samples, side by side\): "
                  r"(?P<old>within|beyond) (?P<tol>[0-9.]+) pp \(drop (?P<drop>[+-][0-9.]+) pp, "
                  r"noise (?P<noise>[0-9.]+) pp\)")


def replay(text: str) -> list[dict[str, Any]]:
    """Each distinct confirmation in a search's output, with the older and the new verdict."""
    out, seen = [], set()
    for m in LINE.finditer(text):
        if m.group(0) in seen:
            continue
        seen.add(m.group(0))
        n, tol, drop = int(m["n"]), float(m["tol"]), float(m["drop"])
        se = 100 * math.sqrt((float(m["cs"]) ** 2 + float(m["ds"]) ** 2) / n)
        upper, lower = drop + t95(n - 1) * se, drop - t95(n - 1) * se
        if drop > tol:   # never within; beyond if even the unpaired lower bound says so
            new, why = "not within" if lower <= tol else "beyond", \
                f"mean drop {drop:.2f} pp is past {tol:g} pp"
            why += (f"; even unpaired, the lower bound {lower:.2f} pp is past it" if lower > tol
                    else ": not shown, or beyond once paired (refused either way)")
        elif upper <= tol:
            new, why = "within", f"even unpaired, the upper bound {upper:.2f} pp is within"
        else:
            new, why = "undetermined", (f"mean drop {drop:.2f} pp within {tol:g} pp, unpaired "
                                        f"upper bound {upper:.2f} pp: the paired bound needs "
                                        "the per-seed values the text did not keep")
        out.append({"old": m["old"], "new": new, "why": why, "drop_pp": drop,
                    "samples": int(m["len"]), "seeds": n, "line": m.group(0)})
    return out


def main(argv: list[str] | None = None) -> int:
    files = sorted(glob.glob("benchmarks/results/*.txt"))
    rows = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for r in replay(f.read()):
                rows.append({"file": path, **r})
    def same(r):
        return r["old"] == r["new"] or (r["old"] == "beyond" and r["new"] == "not within")
    changed = [r for r in rows if not same(r)]
    for r in rows:
        mark = "same" if same(r) else "CHANGED"
        print(f"{mark:>7}  {r['old']:>6} -> {r['new']:<12} {r['file'].split('/')[-1]}: "
              f"{r['why']}")
    print(f"\n{len(rows)} recorded verdicts, {len(changed)} changed", file=sys.stderr)
    if "--json" in (argv or sys.argv[1:]):
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
