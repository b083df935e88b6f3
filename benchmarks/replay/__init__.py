"""The real search replayed on a landscape (benchmarks/landscapes/): autotune's own search loop,
sampler and budget, each trial answered from the table while a simulated clock advances by what
the trial cost. A whole search takes about a second, so strategies are compared over many seeds.

  efficiency        trials and seconds autotune, random and grid search need to reach 95% / 99%
                    of the best
  report            what a replay says: medians and quartiles over seeds, the verdict, the table
  variants          variants replayed beside the search's default: a hardware-informed warm start,
                    losing trials ended after their first windows
  guides            which way of proposing trials reaches the optimum soonest, machine by machine
  at_scale          will a 30-minute search find the optimum on large machines (the model's tables)
  recorded          the search on a recorded landscape, within the accuracy gate; the gaps of a
                    few-dozen-row table answered by the model fitted on it
  memory_placement  what the mem_policy knob costs and gains a simulated 30-minute search
  data_stage        a simulated data-bound GPU machine: does the guide find its feed first
  short_budgets     5-, 10- and 30-minute searches, verification included, launches kept: trials,
                    trials to 95%, the verified share of the best and the budget left unused
"""
