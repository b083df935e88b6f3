"""THE knob table: each knob's kind, its valid values, whether "auto" (None) is allowed, where it
acts and what it speeds up, with the choices of every str knob. Space files, `--set`, script
mode, exports, the planner and the guide read it; Config's fields (config/model.py) must match
it, in order.

Knob names are a public contract: stored trials and exported manifests use them, so renaming one
breaks every study already on disk.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BINDINGS", "BACKENDS", "ALLOCATORS", "OMP_RUNTIMES", "PRECISIONS", "IPEX_MODES",
           "DEVICES", "NUMA_BINDINGS", "CCL_WORKER_AFFINITIES", "CCL_YIELDS", "MEM_POLICIES",
           "LR_RULES", "REFERENCE_GLOBAL_BATCH", "DEFAULT_WORKLOAD", "BUILTIN_WORKLOADS",
           "KNOB_TABLE", "KNOBS", "CCL_KNOBS", "INT_KNOBS", "BOOL_KNOBS", "IN_PROCESS_KNOBS",
           "TRAINER_FLAGS", "WINDOW_KNOBS", "Knob"]

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
BUILTIN_WORKLOADS = (DEFAULT_WORKLOAD, "transformer", "mlp", "wide_mlp")


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
    # Acts on a workload's own data pipeline: offered only where the trials' batches come
    # through one (GPU trials always; CPU trials where the workload has a per-sample pipeline or
    # a script takes the placeholder: space.resolve's `pipeline`). The built-in CPU workloads
    # make their batches in the rank, where such a knob would only cost trials.
    needs_pipeline: bool = False


_COMM = ("compute", "communication")
# More ranks also make their shares of each step's batch side by side (each rank its own), so
# the ranks address a step that waits on data too.
_RANKS = ("compute", "communication", "data")
KNOB_TABLE: dict[str, Knob] = {
    "nproc": Knob("int", addresses=_RANKS),
    "ranks_per_numa_node": Knob("int", auto=True, addresses=_RANKS),
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
    # offered only where this machine compiles (space/resolve.py drops true, plan/feasible.py)
    "compile": Knob("bool", in_process=True, trainer_flag=True, window=True,
                    only_where_it_varies=True),
    "ipex": Knob("str", IPEX_MODES, in_process=True, trainer_flag=True),
    "device": Knob("str", DEVICES, trainer_flag=True),
    "numa_binding": Knob("str", NUMA_BINDINGS, addresses=("compute", "data")),
    # the DataLoader is the training process's own: a script needs a placeholder for them
    "dataloader_workers": Knob("int", in_process=True, trainer_flag=True, window=True,
                               addresses=("data",), needs_pipeline=True),
    "pin_memory": Knob("bool", in_process=True, trainer_flag=True, window=True,
                       addresses=("data",), needs_pipeline=True),
    "nnodes": Knob("int", addresses=_RANKS),
    "ccl_workers": Knob("int", addresses=("communication",)),
    "ccl_worker_affinity": Knob("str", CCL_WORKER_AFFINITIES, addresses=("communication",)),
    "ccl_yield": Knob("str", CCL_YIELDS, addresses=("communication",)),
    "mem_policy": Knob("str", MEM_POLICIES, only_where_it_varies=True),
}
KNOBS: tuple[str, ...] = tuple(KNOB_TABLE)
CCL_KNOBS = ("ccl_workers", "ccl_worker_affinity", "ccl_yield")
INT_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.kind == "int")
BOOL_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.kind == "bool")
_AUTO_KNOBS = frozenset(k for k, v in KNOB_TABLE.items() if v.auto)
IN_PROCESS_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.in_process)
TRAINER_FLAGS = tuple(k for k, v in KNOB_TABLE.items() if v.trainer_flag)
WINDOW_KNOBS = tuple(k for k, v in KNOB_TABLE.items() if v.window)
