"""A launch configuration: one typed, validated value shared by `--set`, spaces, trials and exports.

Knob names are a public contract: stored trials and exported manifests use them, so renaming one
breaks every study already on disk.
"""
from __future__ import annotations

import re

import difflib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

from .errors import ConfigError
from .knob_limits import check as check_limits

BINDINGS = ("none", "taskset", "taskset_smt", "numactl", "numactl_smt")
BACKENDS = ("gloo", "ccl", "nccl", "mpi")
ALLOCATORS = ("default", "jemalloc", "tcmalloc")
OMP_RUNTIMES = ("libgomp", "libiomp5")
PRECISIONS = ("fp32", "bf16", "fp16")
IPEX_MODES = ("off", "on")
DEVICES = ("cpu", "cuda")
# Where a GPU rank's CPUs come from, named as torchrun's --numa-binding modes (torch/numa/binding.py)
NUMA_BINDINGS = ("none", "node", "socket", "exclusive", "core-complex")

# oneCCL's own knobs (used only with backend=ccl; see autotune/comm/ccl/env.py for what each does)
CCL_WORKER_AFFINITIES = ("shared", "dedicated")
CCL_YIELDS = ("sched_yield", "pause", "sleep")

# Where a rank's memory lives (plan/memory.py; local: the launch as it always was)
MEM_POLICIES = ("local", "interleave", "preferred_fast", "weighted")

LR_RULES = ("linear", "sqrt", "none")
# The global batch of the default launch. Learning rates of workloads are tuned for it, and the
# lr_rule scales them for another global batch (see autotune/training.py).
REFERENCE_GLOBAL_BATCH = 32
# The built-in workload trials train when none is named. Its registry (worker/workloads.py)
# imports torch, so the name lives here, where the planner and the CLI read it without torch.
DEFAULT_WORKLOAD = "cnn"
# The registry's built-in names, for --help without importing torch (the registry asserts that
# its keys are these).
BUILTIN_WORKLOADS = ("cnn", "transformer", "mlp", "wide_mlp")


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
        # numbers within what a machine holds, kmp_affinity within its grammar (knob_limits.py)
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
    def data_pipeline(self) -> bool:
        """Batches come through the DataLoader pipeline (autotune/worker/data.py), whose crop/flip
        augmentation makes them different data from the in-process batches."""
        return self.device == "cuda" or self.dataloader_workers > 0 or self.pin_memory

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """Canonical identity of the configuration (used to never run it twice).

        Stored studies and recorded landscapes are looked up by this text, so a knob added later
        appears in it only when set away from its default: old keys keep meaning the same launch.
        """
        # Every knob is a scalar: reading the fields skips asdict's deep copy, which dominated
        # replays of large spaces (benchmarks/search_at_scale.py).
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


# THE knob table: each knob's kind, its valid values, whether "auto" (None) is allowed, and where
# it acts. Space files, `--set`, script mode and exports all read it; Config's fields must match.
@dataclass(frozen=True)
class Knob:
    kind: str                       # "int" | "bool" | "str"
    choices: tuple[str, ...] = ()   # the valid values of a str knob (empty: free text)
    auto: bool = False              # None ("auto", "default") means torch's or the plan's default
    # Acts only inside the training process (precision, batch...): a user's script that takes no
    # placeholder for it cannot be affected by it, so script mode does not tune it.
    in_process: bool = False
    # Passed to the built-in trainer with --set by an exported command (the rest act through the
    # environment and the binding).
    trainer_flag: bool = False
    # Offered only where it can matter: a space resolving it to the default's value alone leaves
    # it out, so the space is the one before the knob existed (mem_policy on one NUMA node).
    only_where_it_varies: bool = False
    # Changes between the timed windows of one running worker (worker/session.py), no new
    # process: the launch (ranks, binding, libraries, backend) stays as it is.
    window: bool = False
    # The parts of a step it can speed up (measure/split.Bottleneck's values): the guide moves
    # first the knobs that address the measured bottleneck (search/guide.py).
    addresses: tuple[str, ...] = ("compute",)


_COMM = ("compute", "communication")
KNOB_TABLE: dict[str, Knob] = {
    "nproc": Knob("int", addresses=_COMM),
    "ranks_per_numa_node": Knob("int", auto=True, addresses=_COMM),
    # the threads a rank keeps for itself also feed its in-process data path
    "threads": Knob("int", auto=True, trainer_flag=True, addresses=("compute", "data")),
    "binding": Knob("str", BINDINGS, addresses=("compute", "data")),
    "backend": Knob("str", BACKENDS, trainer_flag=True, addresses=("communication",)),
    "allocator": Knob("str", ALLOCATORS, trainer_flag=True),
    "omp_runtime": Knob("str", OMP_RUNTIMES, trainer_flag=True),
    "kmp_affinity": Knob("str"),
    "kmp_blocktime": Knob("int"),
    # fewer, larger steps: each step's fixed cost and all-reduce over more samples
    "global_batch": Knob("int", in_process=True, trainer_flag=True, window=True,
                         addresses=_COMM),
    "batch_size": Knob("int", auto=True, in_process=True, trainer_flag=True, window=True),
    "lr_rule": Knob("str", LR_RULES, in_process=True, trainer_flag=True, window=True,
                    addresses=()),
    "precision": Knob("str", PRECISIONS, in_process=True, trainer_flag=True, window=True),
    "channels_last": Knob("bool", in_process=True, trainer_flag=True, window=True),
    "compile": Knob("bool", in_process=True, trainer_flag=True, window=True),
    "ipex": Knob("str", IPEX_MODES, in_process=True, trainer_flag=True),
    "device": Knob("str", DEVICES, trainer_flag=True),
    "numa_binding": Knob("str", NUMA_BINDINGS, addresses=("compute", "data")),
    "dataloader_workers": Knob("int", trainer_flag=True, window=True, addresses=("data",)),
    "pin_memory": Knob("bool", trainer_flag=True, window=True, addresses=("data",)),
    "nnodes": Knob("int", addresses=_COMM),
    "ccl_workers": Knob("int", addresses=("communication",)),
    "ccl_worker_affinity": Knob("str", CCL_WORKER_AFFINITIES, addresses=("communication",)),
    "ccl_yield": Knob("str", CCL_YIELDS, addresses=("communication",)),
    "mem_policy": Knob("str", MEM_POLICIES, only_where_it_varies=True),
}
KNOBS: tuple[str, ...] = tuple(f.name for f in fields(Config))
assert tuple(KNOB_TABLE) == KNOBS, "KNOB_TABLE and Config's fields differ"
CCL_KNOBS = ("ccl_workers", "ccl_worker_affinity", "ccl_yield")
INT_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.kind == "int")
BOOL_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.kind == "bool")
_AUTO_KNOBS = frozenset(k for k, v in KNOB_TABLE.items() if v.auto)
IN_PROCESS_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.in_process)
TRAINER_FLAGS = tuple(k for k, v in KNOB_TABLE.items() if v.trainer_flag)
WINDOW_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.window)


def launch_part(config: "Config") -> "Config":
    """`config` with every window knob at the default's value: configurations that share it run
    in the same processes, one window each (run/session.py)."""
    return replace(config, **{k: getattr(Config(), k) for k in WINDOW_KNOBS})

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


# Knobs renamed since, by their old names: studies, manifests, space files and `--set` written
# with those still read. `nproc_per_node` counted ranks per NUMA node, which a torchrun user reads
# as ranks per host (torchrun's --nproc-per-node, and `autotune launch`'s).
KNOB_ALIASES: dict[str, str] = {"nproc_per_node": "ranks_per_numa_node"}
# Config.key() spells a renamed knob by its old name, so keys stored before the rename (studies,
# recorded landscapes) keep naming the same launch.
_KEY_NAMES = {new: old for old, new in KNOB_ALIASES.items()}


def knob_name(name: str) -> str:
    """A knob's current name, from a current or an old one (KNOB_ALIASES)."""
    return KNOB_ALIASES.get(name, name)


def renamed_knobs(text: str) -> str:
    """A rule or expression of a space file with old knob names in their current spelling."""
    for old, new in KNOB_ALIASES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def unknown_knob(name: str) -> str:
    """The words for a knob name the table lacks, with the closest names when it looks like a
    typo (`nprocs` -> did you mean 'nproc'?): every place that rejects a knob name says this."""
    return f"unknown knob {name!r}{did_you_mean(name)}; valid knobs: {', '.join(KNOBS)}"


def did_you_mean(name: str, names: Sequence[str] = KNOBS) -> str:
    """' (did you mean 'nproc'?)' for a near miss among `names`, else ''."""
    close = difflib.get_close_matches(str(name), names, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(Config)}


def coerce(knob: str, value: Any, *, where: str = "config") -> Any:
    """Turn a text or YAML value into the knob's type; errors name the knob and the value."""
    if knob not in KNOBS:
        raise ConfigError(f"{where}: {unknown_knob(knob)}")
    if KNOB_TABLE[knob].auto and (value is None or str(value).lower() in ("auto", "default", "none")):
        return None
    if knob in INT_KNOBS:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer")
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{where}: {knob}={value!r} must be an integer") from None
    if knob in BOOL_KNOBS:
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
        knob = knob_name(knob.strip())
        changes[knob] = coerce(knob, value, where=f"--set {item}")
    merged = {**(base or Config()).to_dict(), **changes}
    try:
        # (whether it can run here, a global batch the ranks cannot split included, is the
        # planner's question: plan.infeasible_reason)
        return Config(**merged)
    except ConfigError as exc:
        raise ConfigError(f"--set: {exc}") from None
