"""A launch configuration: one typed, validated value shared by `--set`, spaces, trials and exports
(its knobs are config/table.py's)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from ..errors import ConfigError
from .limits import check as check_limits
from .table import (_AUTO_KNOBS, BOOL_KNOBS, CCL_KNOBS, KNOB_TABLE, KNOBS, REFERENCE_GLOBAL_BATCH,
                    WINDOW_KNOBS)
from .words import _KEY_NAMES, KNOB_ALIASES, coerce, knob_name, unknown_knob


@dataclass(frozen=True, kw_only=True)
class Config:
    nproc: int = 1                      # ranks in total
    ranks_per_numa_node: int | None = None   # ranks per NUMA node; None: spread evenly over nodes
    threads: int | None = None          # intra-op threads per rank; None: torch's default
    binding: str = "none"
    backend: str = "gloo"
    allocator: str = "default"
    omp_runtime: str = "libgomp"
    kmp_affinity: str = "granularity=fine,compact,1,0"   # only used with libiomp5
    kmp_blocktime: int = 1                               # ms; only used with libiomp5
    # Samples per optimizer step over all ranks: the invariant that keeps a DDP configuration's
    # math equal to the default launch's. More ranks take smaller shares of the same samples.
    global_batch: int = REFERENCE_GLOBAL_BATCH
    # Per-rank micro-batch; None: the rank's whole share (global_batch / nproc). A smaller one is
    # reached by gradient accumulation (same math, except BatchNorm statistics per micro-batch).
    batch_size: int | None = None
    # How the learning rate follows a global batch other than the reference (quality.lr_scale).
    lr_rule: str = "linear"
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    ipex: str = "off"
    device: str = "cpu"                 # "cuda": one rank per GPU, GPU r for rank r
    numa_binding: str = "none"          # GPU ranks: CPUs near the rank's GPU (binding = the tool)
    dataloader_workers: int = 0         # DataLoader worker processes per rank (0: in the rank)
    pin_memory: bool = False            # page-locked host batches (faster host-to-GPU copies)
    nnodes: int = 1                     # hosts the nproc ranks are spread over (with --hosts)
    # backend=ccl only: oneCCL progress workers per rank (CCL_WORKER_COUNT), where they run
    # (CCL_WORKER_AFFINITY: on the rank's own cores, or on cores of their own), how they wait
    # (CCL_YIELD). With another backend they mean nothing and keep their defaults.
    ccl_workers: int = 1
    ccl_worker_affinity: str = "shared"
    ccl_yield: str = "sched_yield"
    mem_policy: str = "local"           # where each rank's memory lives (MEM_POLICIES)

    def __post_init__(self) -> None:
        # numbers within what a machine holds, kmp_affinity within its grammar (config/limits.py)
        check_limits(self.__dict__, _AUTO_KNOBS)
        if self.nproc % self.nnodes:
            raise ConfigError(f"nproc={self.nproc} is not a multiple of nnodes={self.nnodes}")
        if self.ranks_per_numa_node is not None and self.ranks_per_numa_node > self.nproc:
            raise ConfigError(f"ranks_per_numa_node={self.ranks_per_numa_node} is larger than nproc={self.nproc}")
        for name, knob in KNOB_TABLE.items():
            value = getattr(self, name)
            if knob.choices and value not in knob.choices:
                raise ConfigError(f"{name}={value!r} is not valid; choose one of: "
                                  f"{', '.join(knob.choices)}")
        for name in BOOL_KNOBS:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r}: must be true or false")

    @property
    def global_batch_size(self) -> int:
        """The name space-file rules use for global_batch."""
        return self.global_batch

    @property
    def micro_batch(self) -> int:
        """Samples per forward pass in each rank (what BatchNorm sees)."""
        if self.batch_size is not None:
            return self.batch_size
        return max(1, self.global_batch // self.nproc)

    @property
    def augmented_batches(self) -> bool:
        """Batches come through the GPU's DataLoader pipeline (autotune/worker/data.py), whose
        crop/flip augmentation makes them different data from the in-process batches. CPU
        DataLoader workers make the rank's own batches, unchanged: the same math."""
        return self.device == "cuda" or self.pin_memory

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """Canonical identity of the configuration (used to never run it twice).

        Stored studies and recorded landscapes are looked up by this text, so a knob added later
        appears in it only when set away from its default: old keys keep meaning the same launch.
        """
        # Every knob is a scalar: reading the fields skips asdict's deep copy, which dominated
        # replays of large spaces (benchmarks/replay/at_scale.py).
        base = _defaults()
        return ",".join(f"{_KEY_NAMES.get(k, k)}={getattr(self, k)}"
                        for k in sorted(base, key=lambda k: _KEY_NAMES.get(k, k))
                        if k in _KEY_V1 or getattr(self, k) != base[k])

    def with_(self, **changes: Any) -> "Config":
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "config") -> "Config":
        data = {knob_name(k): v for k, v in data.items()
                if not (k in KNOB_ALIASES and knob_name(k) in data)}
        unknown = sorted(set(data) - set(KNOBS))
        if unknown:
            raise ConfigError(f"{where}: {unknown_knob(unknown[0])}")
        try:
            return cls(**{k: coerce(k, v, where=where) for k, v in data.items()})
        except TypeError as exc:  # pragma: no cover - every field has a default
            raise ConfigError(f"{where}: {exc}") from None


assert tuple(f.name for f in fields(Config)) == KNOBS, "KNOB_TABLE and Config's fields differ"


def launch_part(config: "Config") -> "Config":
    """`config` with every window knob at the default's value: configurations that share it run
    in the same processes, one window each (run/session.py). One exception: a CPU rank bound
    with a thread count keeps its whole share of the cores when it has DataLoader workers, and
    only its threads' cores without (plan/placement.py), so whether it has workers is part of
    its launch (how many is a window's)."""
    part = replace(config, **{k: getattr(Config(), k) for k in WINDOW_KNOBS})
    if config.dataloader_workers and config.device == "cpu" and config.binding != "none" \
            and config.threads is not None:
        part = replace(part, dataloader_workers=1)
    return part

# The knobs of the first release: always part of Config.key(). (batch_size left it when it became
# the per-rank micro-batch of a fixed global batch: an old key with batch_size=32 and nproc=2
# named a global batch of 64, a different launch from any new key.)
_KEY_V1 = frozenset(("nproc", "ranks_per_numa_node", "threads", "binding", "backend", "allocator",
                     "omp_runtime", "kmp_affinity", "kmp_blocktime", "precision",
                     "channels_last", "compile", "ipex"))


def changed_knobs(config: "Config | Mapping[str, Any]") -> dict[str, Any]:
    """The knobs whose value differs from the default launch's, in the given order. A mapping
    (a stored configuration) may name knobs this version no longer has: they are left out."""
    base = Config().to_dict()
    values = config.to_dict() if isinstance(config, Config) else \
        {knob_name(k): v for k, v in config.items()}
    # oneCCL's knobs mean nothing to another backend (the search samples them regardless, and
    # plan.placement.canonical counts such a launch as the one without them)
    idle = CCL_KNOBS if values.get("backend", base["backend"]) != "ccl" else ()
    return {k: v for k, v in values.items() if k in base and v != base[k] and k not in idle}


def describe_changes(config: "Config | Mapping[str, Any]", *,
                     none: str = "the default launch") -> str:
    """A configuration as people read it: only the knobs that differ from the default launch,
    e.g. 'precision=bf16 global_batch=64'; `none` when nothing differs. Every progress line,
    report, export header and note renders a configuration through this."""
    return " ".join(f"{k}={v}" for k, v in changed_knobs(config).items()) or none


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(Config)}


def parse_sets(items: list[str], base: Config | None = None) -> Config:
    """`--set knob=value` items applied over `base` (the default launch when None)."""
    changes: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected knob=value, e.g. --set threads=2")
        knob, _, value = item.partition("=")
        knob = knob_name(knob.strip())
        changes[knob] = coerce(knob, value, where=f"--set {item}")
    merged = {**(base or Config()).to_dict(), **changes}
    try:
        # (whether it can run here, a global batch the ranks cannot split included, is the
        # planner's question: plan.infeasible_reason)
        return Config(**merged)
    except ConfigError as exc:
        raise ConfigError(f"--set: {exc}") from None
