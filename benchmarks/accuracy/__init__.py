"""The accuracy side measured: what the accuracy gate can tell apart, and what a shorter quality
run costs. Real seeded quality runs of autotune's worker, stored one by one as they finish (a run
resumes); the verdicts are autotune/quality's own arithmetic on them.

  gate            the gate's operating characteristics: how often a class that truly loses 2 pp
                  is accepted, and how often one that loses nothing is shown within 1 pp
  gate_runs       the seeded quality runs behind it, each held-out example's outcome kept
                  (the workload: benchmarks/workloads/gate_probe.py)
  gate_replay     which recorded verdicts change under the paired rule of round 6, and why
  quality_length  the built-in cnn's spread over seeds, and the gate's noise, at several run
                  lengths
  compile_same_math  compiled against eager in seed-paired quality runs on the built-in
                  workloads, against eager's own seed-to-seed spread (issue 59)
"""
