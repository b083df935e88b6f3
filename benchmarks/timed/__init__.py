"""One mechanism timed, or counted, in real trials on this machine, side by side in one run
(rounds interleaved, so drift falls on both sides). On a shared machine the figures are noise:
run these on a quiet one, in the order docs/benchmarks.md gives.

The recommendation, and what a trial costs:
  speedup              the recommendation against the default launch, run_cpu and the grid's best
  overhead             start-up, timed share, run-to-run spread, autotune's own cost per trial
  verification_spread  how far repeated verifications of one candidate agree, quiet and under a
                       CPU hog
  rounds_needed        how often a winner's ratio is verified after N rounds, drawn from the real
                       rounds of stored searches (issue 62: a fourth round for slow starts)
  window_cost          what a window costs besides its timed seconds, started afresh or as the
                       next window of a running launch
  split_timers         what the step split's timers cost one rank's step
  worker_repeat        one configuration N times through the worker alone, and its spread
  concurrent_searches  two searches in one results folder: trials stored as failed that did not
                       fail on their own
The knobs:
  data_bound_search    a search on a data-bound entry point against the default launch and the
                       best launch by hand (issue 51)
  fp16_conv_grad       why fp16 is ruled out on a CPU without amx_fp16
  intel_ab             `autotune compare` under another interpreter: IPEX, libiomp5, KMP_BLOCKTIME
  compile_cost         torch.compile against eager per built-in workload, and its compile seconds
                       cold and warm (issue 59)
  run_worker           the worker as a plain script: the train.py a run_cpu user would write
Communication:
  backends             ccl against gloo: all-reduce and whole DDP steps (backend_ranks: one rank)
  ccl_exit_aborts      do ccl ranks abort at exit: real 2-rank trials, every rank's ending counted
  hosts_startup        what a trial across hosts costs before it measures: one host against two
And:
  machine              the machine a result was measured on, for its file
  dashboard_shown      what `autotune dashboard` shows of a study against what it stores: no
                       accuracy no run gave, nothing that never ran drawn, report's Pareto front
"""
