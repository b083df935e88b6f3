"""The lines a stored recommendation is stated with: the search's summary, `autotune report` and
the dashboard's note print these very lines, so the three cannot drift apart."""
from __future__ import annotations

from typing import Any

from ..quality.verdict import recommendation_claims
from ..study.records import RUN_CPU_WON, RUN_CPU_WORDS, recommends_run_cpu
from .compile_words import compile_lines
from .settle import shown_in


def recommendation_lines(rec: dict[str, Any]) -> list[str]:
    """A recommendation (its JSON) as the summary states it: the headline, then, indented, the
    verification when the headline lacks its figure, the factor over run_cpu's settings (or that
    the recommendation is them), the figure over the default launch compiled and
    what compiling costs against the run it serves (recommend/compile_words.py), and what it claims of accuracy, each faster launch whose
    accuracy was not shown included (quality/verdict.recommendation_claims)."""
    headline = rec.get("headline") or "recommendation stored"
    out = [headline]
    settling = (rec.get("settling") or {}).get("text")
    # the winner's headline already holds its figure: one range per figure, not two
    if settling and not shown_in(headline, settling):
        out.append(f"  verification: {settling}")
    if rec.get("vs_run_cpu"):
        out.append(f"  {rec['vs_run_cpu']:.2f}x over {RUN_CPU_WORDS}")
    out += [f"  {line}" for line in rec.get("references") or ()]  # a faster reference, why not it
    if recommends_run_cpu(rec):
        out.append(f"  {RUN_CPU_WON}")
    out += [f"  {line}" for line in compile_lines(rec)]   # the compiled reference, the weighing
    return out + [f"  {claim}" for claim in recommendation_claims(rec)]
