"""Plans for trials that span hosts (pure): which processes run where, started by which launcher.

Each host gets the single-host plan of its share of the ranks (plan.build_plan on that host's own
probed topology), so binding, allocator and threads apply on every host exactly as they do on
one. A launcher then starts those ranks:
- ssh: a trial starts each host's ranks over ssh through the rank shim (`autotune.bind
  --local-ranks`), with torchrun's variables and rank 0's store; the export is one
  `torchrun --nnodes N --rdzv-backend c10d` per host, over ssh;
- mpirun: one Open MPI `mpirun` for all hosts (`-x` env, ranks mapped by node in host order);
- srun: one `srun --overlap` step inside a SLURM allocation (block distribution, in nodelist
  order), started by the one search of the allocation.
Every rank process runs `python -m autotune.bind`, which picks its planned rank's cores and
variables (the launchers give all ranks one command). Every process of the trial carries
AUTOTUNE_TRIAL_MARKER, by which `python -m autotune.run.remote kill MARKER` ends it on each host.
Paths (results dir, python, the working directory) must be the same on every host: a shared
file system, as on most clusters; the rank results are read from it.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace

from ..util.child_python import python_module
from ..util.search_path import clean as clean_search_paths
from ..config import Config
from ..errors import ConfigError
from .hosts import LAUNCHERS, Host, check_argument, check_network
from .build import build_plan
from .launch_plan import (KILL_GRACE_S, RENDEZVOUS_ENV, TRIAL_TIMEOUT_S, LaunchPlan, RankPlan,
                          rank_files_env)
from ..util.channel import LIFELINE_ENV, TOKEN_FILE, TOKEN_FILE_ENV
from ..probe.parse import format_cpulist
from ..probe.topology import Topology

MARKER = "AUTOTUNE_TRIAL_MARKER"
# What a rank inherits from the launcher; everything else the plan sets itself.
FORWARD = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "LANG")
_LAUNCHER_OWNED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "AUTOTUNE_RESULT",
                   "MASTER_ADDR", "MASTER_PORT",
                   "AUTOTUNE_REPORT",
                   # one machine's ranks meet in the trial folder; across hosts at MASTER_ADDR
                   RENDEZVOUS_ENV,
                   # a host's plan says "lo"; across hosts collective_env names the real interface,
                   # or the backend picks the one that reaches MASTER_ADDR (comm/ccl/env.py)
                   "CCL_KVS_IFACE", "FI_TCP_IFACE")


# Seconds a shared ssh connection stays open with nothing running over it: longer than a gap
# between two trials, short enough that nothing lingers long after a search.
SSH_PERSIST_S = 120
# A connection that answers no keep-alive for ALIVE_S * ALIVE_COUNT seconds is given up: a host
# that died without a word (power, network) ends its launcher, and with it the launch, within
# that time rather than TCP's hours.
ALIVE_S, ALIVE_COUNT = 5, 3


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """The hosts a study runs on, as probed: one topology and one reachable address per host."""
    hosts: tuple[Host, ...]
    addresses: tuple[str, ...]           # what the first host is reached at is MASTER_ADDR
    topologies: tuple[Topology, ...]
    launcher: str = "ssh"
    iface: str | None = None             # GLOO_SOCKET_IFNAME and kin
    subnet: str | None = None            # the iface's network (CIDR), for Open MPI's own traffic
    ssh_config: str | None = None        # ssh -F FILE (and mpirun's ssh)
    python: str = "python3"
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)   # forwarded to every remote command
    master_port: int | None = None       # the rendezvous port (None: one free on the first host)
    # A private folder for ssh's shared connections (run/remote.ssh_control_dir): every ssh to a
    # host then rides one connection kept open between trials. None: a new connection each time
    # (an export, whose commands run elsewhere).
    control_dir: str | None = None
    # Why launches over these hosts are not kept between trials (a host's clock, Python or
    # autotune differs from the first host's: run/remote.probe_cluster); "": they may be.
    kept_refusal: str = ""

    def remote(self, host: str, *cmd: str) -> tuple[str, ...]:
        """argv running a short command on `host` the way the ranks get there (env and cwd)."""
        assign = [f"{k}={v}" for k, v in sorted(self.env.items())]
        if self.launcher == "srun":
            return ("srun", "--nodes=1", "--ntasks=1", "--overlap", f"--nodelist={host}",
                    f"--chdir={self.cwd}", "env", *assign, *cmd)
        return self.ssh(host, "env", *assign, *cmd, cwd=self.cwd)

    def lane(self, index: int, width: int) -> "Cluster":
        """The hosts index*width .. (index+1)*width - 1 as a cluster of their own (the first of
        them holds the rendezvous): runs side by side on disjoint hosts."""
        cut = slice(index * width, (index + 1) * width)
        if not self.hosts[cut] or len(self.hosts[cut]) < width:
            raise ConfigError(f"lane {index} of {width} host(s): only {len(self.hosts)} host(s)")
        return replace(self, hosts=self.hosts[cut], addresses=self.addresses[cut],
                       topologies=self.topologies[cut])

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"launcher {self.launcher!r}: choose one of {', '.join(LAUNCHERS)}")
        if not self.hosts or not (len(self.hosts) == len(self.addresses) == len(self.topologies)):
            raise ConfigError("cluster: one address and one topology per host are needed")
        check_argument("ssh config", self.ssh_config)   # what reaches an option's place
        check_argument("python", self.python, spaces_allowed=True)
        check_argument("folder", self.cwd, spaces_allowed=True)
        check_network(self.iface, self.subnet, self.addresses)

    def ssh(self, host: str, *remote: str, cwd: str | None = None) -> tuple[str, ...]:
        """argv that runs the command `remote` on `host` (quoted here for the remote shell)."""
        cfg = ("-F", self.ssh_config) if self.ssh_config else ()
        line = " ".join(shlex.quote(a) for a in remote)
        if cwd is not None:
            line = f"cd {shlex.quote(cwd)} && exec {line}"
        return ("ssh", *cfg, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", f"ServerAliveInterval={ALIVE_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
                *self._shared_connection(), host, "--", line)

    def _shared_connection(self) -> tuple[str, ...]:
        """ssh options that reuse one connection per host: a trial makes 2 to 3 ssh calls per
        host (port, launch, kill), each a new handshake otherwise."""
        if not self.control_dir:
            return ()
        return ("-o", "ControlMaster=auto", "-o", f"ControlPersist={SSH_PERSIST_S}",
                "-o", f"ControlPath={os.path.join(self.control_dir, '%C')}")


def collective_env(iface: str | None) -> dict[str, str]:
    """Pin every library's collectives to the interface that reaches the other hosts."""
    if not iface:
        return {}
    return {"GLOO_SOCKET_IFNAME": iface, "NCCL_SOCKET_IFNAME": iface, "TP_SOCKET_IFNAME": iface,
            "CCL_SOCKET_IFNAME": iface, "CCL_KVS_IFACE": iface, "FI_TCP_IFACE": iface,
            "I_MPI_HYDRA_IFACE": iface}


def infeasible_on_cluster(config: Config, cluster: Cluster) -> str | None:
    """Why `config` cannot run over these hosts (too few hosts or slots, mpi without mpirun,
    or what plan.feasible says of each host's share); None: it can."""
    n = len(cluster.hosts)
    if config.nnodes > n:
        return f"nnodes={config.nnodes} but only {n} host(s) given"
    if config.backend == "mpi" and cluster.launcher != "mpirun":
        return "backend mpi needs the mpirun launcher (--launcher mpirun)"
    per_host = config.nproc // config.nnodes
    for h in cluster.hosts[:config.nnodes]:
        if h.slots is not None and per_host > h.slots:
            return f"{per_host} ranks per host but {h.name} has {h.slots} slot(s)"
    from .feasible import infeasible_reason as on_host
    from .memory import stale_weights
    for h, topo in zip(cluster.hosts[:config.nnodes], cluster.topologies):
        if (why := on_host(config.with_(nproc=per_host, nnodes=1), topo)) is not None:
            return f"{h.name}: {why}"
        # autotune sets the weights on this machine only: another host's must be right already
        if config.mem_policy == "weighted" and (why := stale_weights(topo)) is not None:
            return f"{h.name}: {why}"
    return None


def kept_problem(cluster: Cluster) -> str | None:
    """Why launches over these hosts are not kept between trials, their trials each starting
    afresh (None: they are kept, run/spanning_session.py). Whatever the configuration: one whose
    ranks poll while idle (oneCCL's may) is kept too, as each rank reports the CPU it used while
    waiting, and run/warm.py closes a launch that used too much."""
    return cluster.kept_refusal or None


def build_cluster_plan(config: Config, cluster: Cluster, *, workdir: str, master_port: int,
                       base_env: dict[str, str], trial_id: str,
                       timeout_s: float = TRIAL_TIMEOUT_S, grace_s: float = KILL_GRACE_S,
                       program: tuple[str, ...] | None = None,
                       script: bool = False, export: bool = False,
                       script_env: dict[str, str] | None = None,
                       **worker: object) -> LaunchPlan:
    """The launch of one trial over the first `config.nnodes` hosts. Raises ConfigError.
    `export`: the command a user runs (no trial marker, logs or result files). `script_env`:
    what every rank of a user's script is given beside the plan's own (its seed): on one machine
    the trial adds it to each rank, here it must travel in the launchers' command."""
    if (why := infeasible_on_cluster(config, cluster)) is not None:
        raise ConfigError(why)
    nn, per_host = config.nnodes, config.nproc // config.nnodes
    python = cluster.python
    request = os.path.join(workdir, "request.json")
    program = program or python_module("autotune.worker", "--request", request, python=python)
    local = config.with_(nproc=per_host, nnodes=1)
    hosts = []
    for topo in cluster.topologies[:nn]:
        hosts.append(build_plan(local, topo, workdir=workdir, master_port=master_port,
                                base_env={}, program=program, script=script, python=python,
                                trial_id=trial_id, timeout_s=timeout_s, grace_s=grace_s, **worker))
    ranks_env = [r.env for hp in hosts for r in hp.ranks]
    owned = _LAUNCHER_OWNED + (("AUTOTUNE_TRIAL_ID",) if export else ())
    ranks_env = [{k: v for k, v in e.items() if k not in owned} for e in ranks_env]
    common = _common_env(ranks_env, cluster, base_env, master_port, trial_id, export=export,
                         script_env=script_env if script else None)
    per_rank = sorted({k for e in ranks_env for k, v in e.items() if common.get(k) != v})
    flat = [r for hp in hosts for r in hp.ranks]
    shim = _bind_shim(config, python, workdir, export, per_rank, ranks_env, flat)
    launchers = _launchers(config, cluster, shim, list(program), common, master_port, trial_id,
                           workdir, export)
    # The shim gives each rank its files (above); the plan says so too, where the runner reads
    # a script's report (run/runner.py).
    ranks = tuple(RankPlan(rank=i, argv=tuple(shim + ["--", *program]),
                           env={**common, **e, **({} if export else rank_files_env(workdir, i))},
                           cpus=r.cpus, mem_node=r.mem_node, mem_policy=r.mem_policy,
                           log_path=os.path.join(workdir, f"rank{i}.log"),
                           result_path=os.path.join(workdir, f"rank{i}.json"))
                  for i, (r, e) in enumerate(zip(flat, ranks_env)))
    expects = tuple(x for hp in hosts for x in hp.request.ranks)
    req = hosts[0].request
    return LaunchPlan(ranks=ranks, request_path=request,
                      request=replace(req, config=config.to_dict(), ranks=expects),
                      timeout_s=timeout_s, grace_s=grace_s, master_port=master_port,
                      workdir=workdir, env_delta={**hosts[0].env_delta,
                                                  **collective_env(cluster.iface)},
                      script=script, launchers=launchers,
                      # a ccl rank killed there leaves its shared memory (comm/ccl/shm.py)
                      host_kill=tuple(cluster.remote(h.name, *python_module(
                          "autotune.run.remote", "kill", trial_id,
                          *(["--ccl"] if config.backend == "ccl" else []), python=python))
                          for h in cluster.hosts[:nn]),
                      kill_hosts=tuple(h.name for h in cluster.hosts[:nn]),
                      master_addr=cluster.addresses[0])


def _common_env(ranks_env: list[dict[str, str]], cluster: Cluster, base_env: dict[str, str],
                master_port: int, trial_id: str, *, export: bool,
                script_env: dict[str, str] | None) -> dict[str, str]:
    """What every rank of the launch is given alike: what all the hosts' plans agree on, the
    forwarded search paths, the collectives' interface, the rendezvous and (not in an export) a
    script's own variables, the trial's marker, token file and lifeline."""
    common = {k: v for k, v in ranks_env[0].items() if all(e.get(k) == v for e in ranks_env)}
    forwarded = clean_search_paths(base_env)   # PATH and PYTHONPATH, as on this machine's ranks
    common.update({k: forwarded[k] for k in FORWARD if k in forwarded})
    common.update(collective_env(cluster.iface))
    if not export:
        common.update(script_env or {})
    # A trial's ranks read the launch's token from its folder, and end with the runner's end
    # of the launch (util/channel.py, worker/lifeline.py): neither reaches an export.
    common.update(MASTER_ADDR=cluster.addresses[0], MASTER_PORT=str(master_port),
                  **({} if export else {MARKER: trial_id, TOKEN_FILE_ENV: TOKEN_FILE,
                                        LIFELINE_ENV: "1"}))
    return common


def _bind_shim(config: Config, python: str, workdir: str, export: bool, per_rank: list[str],
               ranks_env: list[dict[str, str]], flat: list[RankPlan]) -> list[str]:
    """The autotune.bind command every launched rank runs first: its log and result files, the
    variables that differ by rank, and each rank's CPUs and memory node (autotune/bind.py)."""
    shim = list(python_module("autotune.bind", python=python))
    if not export:
        # whole, never split at ';' as per-rank lists are: the folder's path may hold one
        shim += ["--rank-log", os.path.join(workdir, "rank{rank}.log"),
                 *(a for k, v in rank_files_env(workdir, "{rank}").items()
                   for a in ("--env-all", f"{k}={v}"))]
    shim += [a for k in per_rank for a in ("--env", f"{k}=" + ";".join(e.get(k, "")
                                                                      for e in ranks_env))]
    if config.binding != "none":
        shim += [f"--tool={config.binding.split('_')[0]}",
                 "--cpus=" + ";".join(format_cpulist(r.cpus or ()) for r in flat)]
        if any(r.mem_node is not None for r in flat):
            shim.append("--membind=" + ";".join(str(r.mem_node) for r in flat))
    if any(r.mem_policy for r in flat):   # mem_policy: numactl's memory flags, per rank
        shim.append("--mem=" + ";".join(r.mem_policy or "" for r in flat))
    return shim


def _launchers(config: Config, cluster: Cluster, shim: list[str], program: list[str],
               env: dict[str, str], port: int, trial_id: str, workdir: str, export: bool):
    nn, per_host = config.nnodes, config.nproc // config.nnodes
    hosts = cluster.hosts[:nn]
    assign = [f"{k}={v}" for k, v in sorted(env.items())]
    if cluster.launcher == "ssh" and not export:
        # A trial starts each host's ranks through the shim (no torchrun agent: its own import of
        # torch and its rendezvous cost seconds per trial and measure nothing); rank 0 holds the
        # store at MASTER_ADDR:MASTER_PORT. The export stays one torchrun per host.
        return tuple((h.name, cluster.ssh(h.name, "env", *assign, f"WORLD_SIZE={config.nproc}",
                                          f"GROUP_WORLD_SIZE={nn}",
                                          f"TORCHELASTIC_RUN_ID={trial_id}", *shim,
                                          f"--node-rank={i}", f"--local-ranks={per_host}", "--",
                                          *program, cwd=cluster.cwd),
                      os.path.join(workdir, f"launcher-{h.name}.log"))
                     for i, h in enumerate(hosts))
    if cluster.launcher == "ssh":
        out = []
        for i, h in enumerate(hosts):
            run = [*python_module("torch.distributed.run", python=cluster.python),
                   f"--nnodes={nn}", f"--nproc-per-node={per_host}", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint={cluster.addresses[0]}:{port}", f"--rdzv-id={trial_id}",
                   f"--local-addr={cluster.addresses[i]}", "--max-restarts=0",
                   # Which agent hosts the rendezvous store is said, not guessed from hostnames.
                   f"--rdzv-conf=is_host={int(i == 0)},join_timeout=60",
                   "--no-python", *shim, f"--node-rank={i}", "--", *program]
            out.append((h.name, cluster.ssh(h.name, "env", *assign, *run, cwd=cluster.cwd),
                        os.path.join(workdir, f"launcher-{h.name}.log")))
        return tuple(out)
    if cluster.launcher == "mpirun":
        argv = ["mpirun", "--allow-run-as-root", "-np", str(config.nproc),
                "-H", ",".join(f"{h.name}:{per_host}" for h in hosts),
                "--map-by", f"ppr:{per_host}:node", "--bind-to", "none", "-wdir", cluster.cwd]
        if cluster.ssh_config:
            argv += ["--mca", "plm_rsh_args", f"-F {cluster.ssh_config}"]
        if cluster.subnet or cluster.iface:   # Open MPI's own traffic where the ranks talk
            net = cluster.subnet or cluster.iface
            argv += ["--mca", "btl_tcp_if_include", net, "--mca", "oob_tcp_if_include", net]
        for k in sorted(env):
            argv += ["-x", f"{k}={env[k]}"]
        argv += [*shim, "--", *program]
        return (("mpirun", tuple(argv), os.path.join(workdir, "launcher-mpirun.log")),)
    # A trial is one step of the allocation the search runs in: --overlap, or under `srun
    # autotune search` it waits for ever behind the step running the search, which holds the
    # CPUs. No --cpus-per-task (it implies --exact): the step gets every CPU the job has on its
    # nodes, and the shim binds each rank within them as planned.
    argv = ["srun", f"--nodes={nn}", f"--ntasks={config.nproc}",
            f"--ntasks-per-node={per_host}", "--distribution=block", "--cpu-bind=none",
            "--kill-on-bad-exit=1",
            *([] if export else ["--overlap", f"--nodelist={','.join(h.name for h in hosts)}"]),
            # env, not --export: srun splits --export on commas, which MALLOC_CONF contains.
            "env", *assign, *shim, "--", *program]
    return (("srun", tuple(argv), os.path.join(workdir, "launcher-srun.log")),)


def cluster_to_json(cluster: Cluster) -> dict:
    """Stored with a study, so `autotune export` can rebuild commands for these hosts."""
    return {"hosts": [{"name": h.name, "slots": h.slots} for h in cluster.hosts],
            "addresses": list(cluster.addresses), "launcher": cluster.launcher,
            "iface": cluster.iface, "subnet": cluster.subnet, "ssh_config": cluster.ssh_config,
            "python": cluster.python, "cwd": cluster.cwd, "env": dict(cluster.env),
            "topologies": [t.to_json() for t in cluster.topologies]}


def cluster_from_json(d: dict) -> Cluster:
    return Cluster(hosts=tuple(Host(name=h["name"], slots=h.get("slots")) for h in d["hosts"]),
                   addresses=tuple(d["addresses"]), launcher=d["launcher"], iface=d.get("iface"),
                   subnet=d.get("subnet"), ssh_config=d.get("ssh_config"), python=d["python"],
                   cwd=d["cwd"], env=dict(d.get("env", {})), topologies=tuple(Topology.from_json(t) for t in d["topologies"]))
