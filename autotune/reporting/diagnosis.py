"""Where the time of the default launch and of the recommendation goes, and how close each comes
to its math class's ceiling: the summary's and the report's lines (the arithmetic is
measure/split.py's)."""
from __future__ import annotations

from typing import Callable

from ..config import REFERENCE_GLOBAL_BATCH, Config
from ..measure.split import (Bottleneck, StepSplit, diagnosis, highest_ceilings, of_ceiling,
                             split_from)
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
    if len(shown) == 2:
        fed = fed_line(split_from(shown[0][1].result.split), split_from(shown[1][1].result.split),
                       shown[1][1].config)
        lines += [fed] if fed else []
    return lines


def fed_line(default: StepSplit | None, recommended: StepSplit | None,
             config: Config) -> str | None:
    """What fed the step, when the default launch waited on data: 'the default launch waited on
    data 75% of its step; the recommendation 21%, with 2 DataLoader workers beside 1 compute
    thread' (None otherwise, or when either step was not split)."""
    if default is None or recommended is None or default.bottleneck != Bottleneck.DATA:
        return None
    return (f"the default launch waited on data {default.part_share(Bottleneck.DATA):.0%} of its "
            f"step; the recommendation {recommended.part_share(Bottleneck.DATA):.0%}, with "
            f"{feeder_words(config)}")


def feeder_words(config: Config) -> str:
    """Who makes a launch's batches: '2 DataLoader workers beside 1 compute thread', '... in
    each of 2 ranks', 'its batches made in each of 2 ranks'."""
    ranks = f" in each of {config.nproc} ranks" if config.nproc > 1 else ""
    if not config.dataloader_workers:
        return f"its batches made{ranks or ' in the rank'}"
    threads = "automatic compute threads" if config.threads is None else \
        f"{config.threads} compute thread{'s' if config.threads != 1 else ''}"
    w = config.dataloader_workers
    return f"{w} DataLoader worker{'s' if w != 1 else ''} beside {threads}{ranks}"
