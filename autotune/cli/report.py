"""Summarise a study: the verified recommendation against the references, the fastest
configurations, the throughput/accuracy Pareto front, which knobs mattered (PED-ANOVA importances)
and why trials failed. Reads the storage only; nothing is written.

examples:
  autotune report
  autotune report --results runs/ --top 5
  autotune report --storage sqlite:///shared/autotune.db --study autotune-cnn-cpu-0a1b2c3d4e5f --json
"""
from __future__ import annotations

import argparse
import json

from ..util.clean import one_line, printable
from ..tune import ReportRequest, report
from ._common import JSON_HELP, add_study_args, add_switch, int_at_least, study_of


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_study_args(p)
    p.add_argument("--top", type=int_at_least(1), default=10, metavar="N",
                   help="configurations in the top table (default: 10)")
    add_switch(p, "--json", JSON_HELP)


def run(args: argparse.Namespace) -> int:
    reported = report(ReportRequest(study=study_of(args), top=args.top))
    if args.json:
        print(json.dumps(reported.to_json(), indent=2))
    else:   # JSON escapes control characters itself; the text shows them escaped
        print(printable(f"storage: {reported.url}"))
        for note in reported.notes:
            print(f"note: {one_line(note)}")
        print(printable(reported.report.text()))
    return 0
