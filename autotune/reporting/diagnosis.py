"""Where the time of the default launch and of the recommendation goes, and how close each comes
to its math class's ceiling: the summary's and the report's lines (the arithmetic is
measure/split.py's)."""
from __future__ import annotations

from typing import Callable

from ..config import REFERENCE_GLOBAL_BATCH, Config
from ..measure.split import diagnosis, highest_ceilings, of_ceiling, split_from
from ..result import Outcome
from ..study.records import Record, Role


def math_words(config: Config) -> str:
    """'bf16' or 'bf16 at global batch 128': the math a ceiling is for, as people say it."""
    words = config.precision
    if config.global_batch != REFERENCE_GLOBAL_BATCH:
        words += f" at global batch {config.global_batch}"
    return words


def diagnosis_lines(records: list[Record], *, recommended: Config | None,
                    class_of: Callable[[Config], str], workload: str,
                    script: bool = False) -> list[str]:
    """One line for the default launch and one for the recommendation (when it is another
    launch), or why there are none."""
    if script:
        return ["no ceiling: a script's step cannot be timed with its data resident, and the "
                "split is the script's own (autotune.report_metrics(split=...)) where it gives one"]
    ceilings = highest_ceilings((class_of(r.config), r.result.ceiling) for r in records)
    ok = {r.config.key(): r for r in records if r.outcome == Outcome.OK and r.throughput}
    default = next((r for r in ok.values() if r.role == Role.DEFAULT), None)
    shown: list[tuple[str, Record]] = [("the default launch", default)] if default else []
    if recommended is not None and recommended.key() != (default.config.key() if default else ""):
        chosen = ok.get(recommended.key())
        if chosen is not None:
            shown.append(("the recommendation", chosen))
    lines = []
    for who, r in shown:
        device = "GPU" if r.config.device == "cuda" else "CPU"
        share = of_ceiling(r.throughput, ceilings.get(class_of(r.config)))
        lines.append(diagnosis(who, split_from(r.result.split), share, device=device,
                               workload=workload, math=math_words(r.config)))
    return lines
