"""A launch configuration: one typed, validated value shared by `--set`, spaces, trials and exports.

Knob names are a public contract: stored trials and exported manifests use them, so renaming one
breaks every study already on disk.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .errors import ConfigError

BINDINGS = ("none", "taskset", "taskset_smt", "numactl", "numactl_smt")
BACKENDS = ("gloo", "ccl", "nccl", "mpi")
ALLOCATORS = ("default", "jemalloc", "tcmalloc")
OMP_RUNTIMES = ("libgomp", "libiomp5")
PRECISIONS = ("fp32", "bf16", "fp16")
IPEX_MODES = ("off", "on")

# Knobs that change the arithmetic of training (and so accuracy). All others only change speed,
# which is why accuracy is measured once per distinct value of these and reused.
MATH_KNOBS = ("global_batch_size", "precision")


@dataclass(frozen=True, kw_only=True)
class Config:
    nproc: int = 1                      # ranks in total
    nproc_per_node: int | None = None   # ranks per NUMA node; None: spread evenly over nodes
    threads: int | None = None          # intra-op threads per rank; None: torch's default
    binding: str = "none"
    backend: str = "gloo"
    allocator: str = "default"
    omp_runtime: str = "libgomp"
    kmp_affinity: str = "granularity=fine,compact,1,0"   # only used with libiomp5
    kmp_blocktime: int = 1                               # ms; only used with libiomp5
    batch_size: int = 32                # per rank
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    ipex: str = "off"

    def __post_init__(self) -> None:
        _positive("nproc", self.nproc)
        if self.nproc_per_node is not None:
            _positive("nproc_per_node", self.nproc_per_node)
            if self.nproc_per_node > self.nproc:
                raise ConfigError(f"nproc_per_node={self.nproc_per_node} is larger than nproc={self.nproc}")
        if self.threads is not None:
            _positive("threads", self.threads)
        _positive("batch_size", self.batch_size)
        if not isinstance(self.kmp_blocktime, int) or isinstance(self.kmp_blocktime, bool) \
                or self.kmp_blocktime < 0:
            raise ConfigError(f"kmp_blocktime={self.kmp_blocktime!r}: must be an integer >= 0 (ms)")
        if not isinstance(self.kmp_affinity, str) or not self.kmp_affinity or \
                any(ch.isspace() for ch in self.kmp_affinity):
            raise ConfigError(f"kmp_affinity={self.kmp_affinity!r}: must be a non-empty string without spaces")
        for name, valid in (("binding", BINDINGS), ("backend", BACKENDS), ("allocator", ALLOCATORS),
                            ("omp_runtime", OMP_RUNTIMES), ("precision", PRECISIONS),
                            ("ipex", IPEX_MODES)):
            value = getattr(self, name)
            if value not in valid:
                raise ConfigError(f"{name}={value!r} is not valid; choose one of: {', '.join(valid)}")
        for name in ("channels_last", "compile"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r}: must be true or false")

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.nproc

    @property
    def math_key(self) -> tuple:
        """Configs with the same math_key train identically, so they share one accuracy."""
        return (self.global_batch_size, self.precision)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """Canonical identity of the configuration (used to never run it twice)."""
        # Every knob is a scalar: reading the fields skips asdict's deep copy, which dominated
        # replays of large spaces (benchmarks/search_at_scale.py); the text is the same.
        return ",".join(f"{k}={getattr(self, k)}" for k in sorted(f.name for f in fields(self)))

    def with_(self, **changes: Any) -> "Config":
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "config") -> "Config":
        unknown = sorted(set(data) - set(KNOBS))
        if unknown:
            raise ConfigError(f"{where}: unknown knob {unknown[0]!r}; valid knobs: {', '.join(KNOBS)}")
        try:
            return cls(**{k: coerce(k, v, where=where) for k, v in data.items()})
        except TypeError as exc:  # pragma: no cover - every field has a default
            raise ConfigError(f"{where}: {exc}") from None


KNOBS: tuple[str, ...] = tuple(f.name for f in fields(Config))
_INT_KNOBS = {"nproc", "nproc_per_node", "threads", "batch_size", "kmp_blocktime"}
_BOOL_KNOBS = {"channels_last", "compile"}
_OPTIONAL_KNOBS = {"nproc_per_node", "threads"}  # accept "auto"/"default"/None


def _positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name}={value!r}: must be a positive integer")


def coerce(knob: str, value: Any, *, where: str = "config") -> Any:
    """Turn a text or YAML value into the knob's type; errors name the knob and the value."""
    if knob not in KNOBS:
        raise ConfigError(f"{where}: unknown knob {knob!r}; valid knobs: {', '.join(KNOBS)}")
    if knob in _OPTIONAL_KNOBS and (value is None or str(value).lower() in ("auto", "default", "none")):
        return None
    if knob in _INT_KNOBS:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer") from None
    if knob in _BOOL_KNOBS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: {knob}={value!r} must be true or false")
    if knob == "ipex" and isinstance(value, bool):  # YAML reads `on`/`off` as booleans
        return "on" if value else "off"
    return str(value).strip()


def parse_sets(items: list[str], base: Config | None = None) -> Config:
    """`--set knob=value` items applied over `base` (the default launch when None)."""
    changes: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected knob=value, e.g. --set threads=2")
        knob, _, value = item.partition("=")
        knob = knob.strip()
        changes[knob] = coerce(knob, value, where=f"--set {item}")
    merged = {**(base or Config()).to_dict(), **changes}
    try:
        return Config(**merged)
    except ConfigError as exc:
        raise ConfigError(f"--set: {exc}") from None
