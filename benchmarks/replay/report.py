"""What a replay of efficiency.py says: medians and quartiles over seeds, the verdict
against its targets, and the table it prints."""
from __future__ import annotations

import statistics
from typing import Any

LEVELS = (0.95, 0.99)
INF = float("inf")


def _pct(level: float) -> str:
    return str(round(level * 100))


def _summarise(rs: list[dict[str, Any]]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for level in LEVELS:
        for what in ("trials", "seconds"):
            vals = [r[f"{what}_{_pct(level)}"] for r in rs]
            s[f"{what}_{_pct(level)}"] = {"median": statistics.median(vals),
                                          "q1": _q(vals, 0.25), "q3": _q(vals, 0.75),
                                          "never": sum(v == INF for v in vals)}
    return s


def _q(vals: list[float], q: float) -> float:
    xs = sorted(vals)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def _verdict(out: dict[str, Any]) -> str:
    t, s = out["targets"], out["summary"]["autotune"]
    stop = s["at_default_stop"]
    parts = [f"autotune reaches 95% of the oracle in a median {s['trials_95']['median']:g} trials "
             f"(target <= {t['quarter_of_grid']['limit']:g}, a quarter of the grid: "
             f"{'met' if t['quarter_of_grid']['met'] else 'MISSED'}; <= "
             f"{t['half_of_random']['limit']:g}, half of random search: "
             f"{'met' if t['half_of_random']['met'] else 'MISSED'})",
             f"with its default stopping rules (30-minute budget) it stops after a median "
             f"{stop['median_launched']:g} trials at {stop['median_best_fraction']:.1%} of the "
             f"oracle (worst seed {stop['min_best_fraction']:.1%}; {stop['share_at_97pct']:.0%} "
             f"of seeds at >= 97%)"]
    if out["synthetic"]:
        parts.append("SYNTHETIC landscape: says the machinery works, not how a real machine behaves")
    if out["missing_rows"]:
        parts.append(f"PARTIAL landscape: {out['missing_rows']} grid configs not recorded "
                     "(replayed as unavailable at no cost)")
    return "; ".join(parts)


def table(out: dict[str, Any]) -> str:
    def fmt(v: float) -> str:
        return "never" if v == INF else f"{v:.0f}"
    lines = [f"landscape {out['landscape']}: {out['launchable']} launchable of {out['grid_size']} "
             f"grid configs, oracle {out['oracle']['throughput']:.1f} samples/s, "
             f"{out['seeds']} seeds, replayed in {out['replay_seconds']}s",
             f"{'strategy':<10}{'trials@95%':>12}{'trials@99%':>12}{'sim s@95%':>12}{'sim s@99%':>12}"]
    for name in ("autotune", "random", "grid"):
        s = out["summary"][name]
        lines.append(f"{name:<10}" + "".join(f"{fmt(s[k]['median']):>12}" for k in
                                             ("trials_95", "trials_99", "seconds_95", "seconds_99")))
    lines.append("(medians over seeds; grid order is deterministic)")
    lines.append(out["verdict"])
    return "\n".join(lines)
