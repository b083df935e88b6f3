"""Worker: what runs inside each rank (`python -m autotune.worker --request REQUEST.json`).

Nothing here is imported by the tuner except the workload registry and the pure protocol values;
this module stays empty so `python -m autotune.worker` imports no more than the rank needs."""
