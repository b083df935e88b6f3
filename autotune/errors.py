"""One exception hierarchy. The CLI maps every AutotuneError to a one-line message and exit 2."""


class AutotuneError(Exception):
    """Base of every error autotune raises on purpose (bad input, unusable machine, ...)."""


class ProbeError(AutotuneError):
    """The machine (or a captured sysfs tree) could not be read or parsed."""


class ConfigError(AutotuneError):
    """A configuration, knob or value is invalid."""


class SpaceError(AutotuneError):
    """A search-space file is invalid."""


class WorkloadError(AutotuneError):
    """A workload name, entry point or script is invalid or failed at once."""


class StorageError(AutotuneError):
    """The study storage cannot be opened or read."""


class BudgetError(AutotuneError):
    """A budget string cannot be parsed."""


class LockError(AutotuneError):
    """Another search already holds this machine."""


class MachineStateError(AutotuneError):
    """A kernel setting autotune was asked to change (weighted-interleave weights,
    numa_balancing) cannot be changed; nothing was left changed."""
