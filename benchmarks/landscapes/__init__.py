"""A machine's landscape: every configuration of a search space with its speed and accuracy,
measured once on a real machine, or answered by a model for the large machines we lack. The
replays (benchmarks/replay/) search these tables instead of running trials.

The table and its file:
  table            the Landscape: its file read and written (the one owner of both), a row, the
                   replay's clock (SimClock)
  formats          files written by earlier versions, read in today's knobs
  synthetic        made-up landscapes with known answers, for tests
  record           recording one on this machine, one trial per configuration
                   (`python -m benchmarks.landscapes.record`)
  checks           which machine a file is from, and whether it holds what a comparison needs
  data/            the recorded ones, landscape-<fingerprint>.json
A many-core machine for real (issue 45):
  many_cores_plan  which configurations a time-boxed recording measures, and their cost (pure)
  many_cores       that recording (`--dry-run`: the plan and its time here)
The model of machines (SIMULATED: no trial runs, every figure the model's):
  model            a launch configuration's throughput on a large CPU machine
  memory_model     where a rank's pages go under each mem_policy; each node's bandwidth, latency
  model_machines   the simulated machines, their modelled landscapes, the calibration on this one
  sixteen_cores    what the model predicts for a captured machine, to set beside a search
  two_machines     the model held out between two recorded machines: fit one, predict the other
"""
