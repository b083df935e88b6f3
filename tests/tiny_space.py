"""The space of the searches across hosts in the integration tests (ssh and SLURM alike).

One binding and one rank of one thread per host: the search's only choice is then nnodes (1 or
all hosts), which it adds itself, so a short budget measures both layouts."""
from __future__ import annotations


def one_rank_per_host(name: str) -> str:
    return f"""name: {name}
knobs:
  binding:
    choices: [taskset]
fixed:
  threads: 1
  ranks_per_numa_node: 1
constraints: []
"""
