"""How long a quality run trains: the one owner of those lengths (in global training samples).

QUALITY_SAMPLES is what a search's seeded quality runs train on, for the built-in workloads and
a user's entry point that names no `quality_samples` of its own (`--quality-samples` overrides
it). It was chosen from measurements on the built-in cnn (docs/benchmarks.md, "Quality runs and
the accuracy gate"): at 4096 one seed's accuracy varied by 4 points; at 16384 the seeds agree to
about half a point while the task is still far from saturated, and three seeds still fit in a
10-minute search.

PLAN_FALLBACK_SAMPLES is the length a launch plan carries when its caller names none: the
exports and `--dry-run` plans build throughput launches, which never train a quality run, and
every search passes its own length (QUALITY_SAMPLES or the workload's).
"""
from __future__ import annotations

QUALITY_SAMPLES = 16384
PLAN_FALLBACK_SAMPLES = 4096
