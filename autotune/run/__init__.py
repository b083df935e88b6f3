"""Run: the one place that spawns, watches and kills trial processes (locally or across hosts),
the pure classification of how a trial ended, and one trial end to end (plan -> run -> measure)."""
