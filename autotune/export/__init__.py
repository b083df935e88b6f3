"""Export: the launch command a user copies (shell, torchrun, mpirun, slurm, JSON) and the
`autotune launch` plan that runs a training command with the tuned configuration."""
