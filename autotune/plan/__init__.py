"""Plan: pure functions from (config, topology, workload) to a LaunchPlan, and the one answer to
"can this configuration run here". Nothing in this package touches the machine."""
