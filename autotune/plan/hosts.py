"""Which hosts a trial spans: `--hosts`, an Open MPI / DeepSpeed hostfile or a SLURM allocation.

Pure parsers (tested with literal text) plus the comparison that refuses hosts which differ.
Probing the hosts (ssh) lives in run/remote.py; the plans across them in plan/cluster.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..util.clean import one_line
from ..errors import ConfigError

LAUNCHERS = ("ssh", "mpirun", "srun")
_NAME = re.compile(r"^[A-Za-z0-9_.@\[\]-]+$")   # a hostname, user@host or an ssh alias


@dataclass(frozen=True, kw_only=True)
class Host:
    name: str                 # what ssh / mpirun / srun are given
    slots: int | None = None  # ranks it may take (None: as the plan decides)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name) or self.name.startswith("-"):
            raise ConfigError(f"host {self.name!r}: not a host name")
        if self.slots is not None and (not isinstance(self.slots, int) or self.slots < 1):
            raise ConfigError(f"host {self.name}: slots={self.slots!r} must be a positive integer")


# What a shell reads as code even inside double quotes (Open MPI hands every --mca value to each
# remote daemon that way), or as the end of a command: never in a value that reaches one.
SHELL_CHARS = "$`'\"\\;"
_IFACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")   # Linux: 15 characters at most


def check_argument(what: str, value: str | None, *, spaces_allowed: bool = False) -> None:
    """A value that reaches ssh's or mpirun's command line, typed or stored with a study: one
    starting with '-' is read as an option, and mpirun splits plm_rsh_args at spaces, so an ssh
    config of `x -oProxyCommand=CMD` would have ssh run CMD; and it reaches the remote hosts'
    shells (under mpirun, in double quotes), so none of SHELL_CHARS. Refused (one line). Control
    characters are refused where stored values are shown (study/stored_code.py)."""
    if value is None:
        return
    spaced = any(c.isspace() and c.isprintable() for c in value)
    if value.startswith("-") or (spaced and not spaces_allowed):
        raise ConfigError(f"{what} {one_line(value)!r}: refused, a value that starts with '-'"
                          f"{'' if spaces_allowed else ' or holds a space'} would reach ssh or "
                          "mpirun as an option; give a plain path or name")
    if shell := sorted({c for c in value if c in SHELL_CHARS}):
        raise ConfigError(f"{what} {one_line(value)!r}: refused, {' '.join(shell)} would reach "
                          "a remote shell as code; give a plain path")


def check_network(iface: str | None, subnet: str | None, addresses: tuple[str, ...]) -> None:
    """The values of a cluster that reach every host's shell (mpirun's --mca values, the ranks'
    MASTER_ADDR and *_SOCKET_IFNAME), each as what it is: an interface name, a network in CIDR
    form, IP addresses. Refused otherwise (one line, ConfigError)."""
    import ipaddress
    if iface is not None and (not isinstance(iface, str) or not _IFACE.match(iface)):
        raise ConfigError(f"iface {one_line(str(iface))!r}: refused, not an interface name (1 to "
                          "15 letters, digits, '_', '.', ':' or '-', not starting with one of "
                          "the last four)")
    if subnet is not None:
        try:
            ipaddress.ip_network(subnet, strict=False)
            ok = isinstance(subnet, str) and "/" in subnet
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"subnet {one_line(str(subnet))!r}: refused, not a network in CIDR "
                              "form (like 10.0.0.0/24)")
    for address in addresses:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ConfigError(f"address {one_line(str(address))!r}: refused, not an IP "
                              "address") from None


def parse_hosts(text: str) -> tuple[Host, ...]:
    """`h1:2,h2:2` or `h1,h2` -> hosts. Duplicates are an error (one host, one node rank)."""
    hosts = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            raise ConfigError(f"--hosts {text!r}: empty host name")
        name, sep, slots = item.partition(":")
        hosts.append(Host(name=name, slots=_slots(slots, f"--hosts {item!r}") if sep else None))
    return _unique(hosts, "--hosts")


def parse_hostfile(text: str, *, where: str = "hostfile") -> tuple[Host, ...]:
    """Open MPI / DeepSpeed format: `host slots=N` per line (`max_slots=`, comments ignored)."""
    hosts = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *fields = line.split()
        slots = None
        for f in fields:
            key, sep, value = f.partition("=")
            if not sep:
                raise ConfigError(f"{where}:{n}: {f!r}: expected key=value, e.g. slots=4")
            if key == "slots":
                slots = _slots(value, f"{where}:{n}")
            elif key not in ("max_slots", "max-slots"):
                raise ConfigError(f"{where}:{n}: unknown field {key!r}; expected slots=N")
        hosts.append(Host(name=name, slots=slots))
    if not hosts:
        raise ConfigError(f"{where}: no hosts in it")
    return _unique(hosts, where)


def expand_nodelist(text: str) -> tuple[str, ...]:
    """SLURM's compressed list: `node[01-03,07],gpu5` -> node01 node02 node03 node07 gpu5.
    Zero padding is kept; several bracket groups in one name are expanded in order."""
    names: list[str] = []
    for item in _split_top(text):
        m = re.match(r"^([^\[]*)\[([^\]]+)\](.*)$", item)
        if not m:
            if not item:
                raise ConfigError(f"nodelist {text!r}: empty entry")
            names.append(item)
            continue
        prefix, ranges, rest = m.groups()
        for part in ranges.split(","):
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(hi) < int(lo)):
                raise ConfigError(f"nodelist {text!r}: bad range {part!r}")
            tails = expand_nodelist(rest) if rest else ("",)   # node[1-2]-ib[0-1]
            for i in range(int(lo), int(hi if sep else lo) + 1):
                names.extend(prefix + str(i).zfill(len(lo)) + t for t in tails)
    return tuple(names)


def expand_per_node(text: str, *, var: str = "SLURM_JOB_CPUS_PER_NODE") -> tuple[int, ...]:
    """SLURM's compressed per-node counts (SLURM_JOB_CPUS_PER_NODE, SLURM_TASKS_PER_NODE):
    `2(x3),1` -> (2, 2, 2, 1), in the order of SLURM_JOB_NODELIST."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m or int(m.group(2) or 1) < 1:
            raise ConfigError(f"{var}={text!r}: cannot read {part.strip()!r}; expected counts "
                              "like 2(x3),1")
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return tuple(out)


def slurm_hosts(env: Mapping[str, str]) -> tuple[Host, ...] | None:
    """The allocation this process runs in (None outside SLURM). A node's slots are the CPUs the
    allocation gives it (SLURM_JOB_CPUS_PER_NODE), not its tasks: `srun -N2
    --ntasks-per-node=1` has one task per node, yet every CPU of the node is the job's, and the
    trials' own `srun` steps place as many ranks as the CPUs allow."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    names = expand_nodelist(nodelist)
    slots: tuple[int | None, ...] = (None,) * len(names)
    if env.get("SLURM_JOB_CPUS_PER_NODE"):
        slots = expand_per_node(env["SLURM_JOB_CPUS_PER_NODE"])
        if len(slots) != len(names):
            raise ConfigError(f"SLURM_JOB_CPUS_PER_NODE={env['SLURM_JOB_CPUS_PER_NODE']!r} "
                              f"counts {len(slots)} node(s), SLURM_JOB_NODELIST={nodelist!r} "
                              f"{len(names)}")
        if 0 in slots:
            raise ConfigError(f"SLURM_JOB_CPUS_PER_NODE={env['SLURM_JOB_CPUS_PER_NODE']!r}: "
                              "a node with 0 CPUs")
    return _unique([Host(name=n, slots=s) for n, s in zip(names, slots)], "SLURM_JOB_NODELIST")


def within_allocation(asked: tuple[Host, ...], allocation: tuple[Host, ...],
                      where: str = "--hosts") -> tuple[Host, ...]:
    """The hosts the user named, checked against the allocation srun can start steps in; a
    host named without slots gets the CPUs the allocation gives it."""
    given = {h.name: h for h in allocation}
    for h in asked:
        if h.name not in given:
            names = ", ".join(given) if len(given) <= 8 else ", ".join(list(given)[:8]) + ", ..."
            raise ConfigError(f"{where}: {h.name} is not a node of this SLURM allocation "
                              f"({names}); name its nodes, or --launcher ssh for other hosts")
    return tuple(h if h.slots is not None else given[h.name] for h in asked)


def other_slurm_task(env: Mapping[str, str], command: str) -> str | None:
    """Under `srun -N2 ... autotune search` every task starts the command; one search per
    allocation is wanted (it starts its own steps on every node), so the tasks but SLURM_PROCID 0
    say why they do nothing (None: this process is the one that runs)."""
    procid = env.get("SLURM_PROCID", "0").strip()
    if procid in ("", "0") or not procid.isdigit():
        return None
    total = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or "?"
    return (f"SLURM task {procid} of {total}: task 0 runs the {command} (one per allocation, its "
            "trials started on every node by srun); this task exits")


def node_address(scontrol_text: str) -> str | None:
    """NodeAddr from `scontrol show node NAME` (how SLURM itself reaches the node; a node name
    need not resolve where NodeAddr is set)."""
    m = re.search(r"(?:^|\s)NodeAddr=(\S+)", scontrol_text)
    return m.group(1) if m and m.group(1) not in ("(null)", "") else None


def interface_of(ip_addr_text: str, address: str) -> str | None:
    """From `ip -o -4 addr show` text, the interface that holds `address` (None: not here)."""
    for line in ip_addr_text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet" and parts[3].split("/")[0] == address:
            return parts[1].split("@")[0]
    return None


def network_of(ip_addr_text: str, address: str) -> str | None:
    """The subnet (CIDR) of the interface holding `address`: Open MPI's daemons and the machine
    running mpirun may name their interfaces differently, a subnet means the same to all."""
    import ipaddress
    for line in ip_addr_text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet" and parts[3].split("/")[0] == address:
            return str(ipaddress.ip_interface(parts[3]).network)
    return None


def ssh_hostname(ssh_g_text: str) -> str | None:
    """The address ssh really connects to, from `ssh -G HOST` (aliases of an ssh config)."""
    for line in ssh_g_text.splitlines():
        key, _, value = line.partition(" ")
        if key == "hostname":
            return value.strip()
    return None


# The parts of a probe that must agree between hosts for one plan to mean the same thing on each.
SHAPE_KEYS = ("sockets", "physical_cores", "usable_physical_cores", "cpu_quota", "torch_version",
              "backends", "allocators", "omp_runtimes", "numactl", "taskset")


def shape(probe_json: dict[str, Any]) -> dict[str, Any]:
    s = {k: probe_json.get(k) for k in SHAPE_KEYS}
    s["model"] = probe_json.get("isa", {}).get("model_name")
    s["numa_nodes"] = [len(n.get("cpus", [])) for n in probe_json.get("numa_nodes", [])]
    # Library paths may differ between hosts; what counts is that the library is there.
    for k in ("allocators", "omp_runtimes"):
        s[k] = sorted(name for name, path in (s[k] or {}).items() if path)
    return s


def differences(probes: Mapping[str, dict[str, Any]]) -> list[str]:
    """Why these hosts cannot share one plan: `host2: physical_cores 8 (host1: 16)`, ..."""
    names = list(probes)
    if not names:
        return []
    first = shape(probes[names[0]])
    out = []
    for name in names[1:]:
        other = shape(probes[name])
        out.extend(f"{name}: {k} {other[k]} ({names[0]}: {first[k]})"
                   for k in first if other[k] != first[k])
    return out


# Kept launches across hosts (run/spanning_session.py): a window's fixed costs and its place in
# the budget's account are read from the ranks' timestamps against this machine's clock, and a
# window's fixed cost is about 0.3 s; a clock off by more than this would misstate it.
CLOCK_TOLERANCE_S = 0.5


def kept_refusal(facts: Mapping[str, Mapping[str, Any]]) -> str:
    """Why launches over these hosts must not be kept between trials ("": they may), from each
    host's facts in host order (run/host_facts.py: `python`, `autotune`, `digest` of its
    sources, `offset`: how far its clock is at least from this machine's, in seconds): a host
    whose Python or autotune differs from the first host's, or whose clock is off, serves
    windows by another program or on another time than the first host's ranks."""
    names = list(facts)
    if not names:
        return ""
    first_name, first = names[0], facts[names[0]]
    out = []
    for name in names[1:]:
        f = facts[name]
        if f.get("python") != first.get("python"):
            out.append(f"{name}: Python {f.get('python')} ({first_name}: {first.get('python')})")
        if f.get("autotune") != first.get("autotune"):
            out.append(f"{name}: autotune {f.get('autotune')} ({first_name}: "
                       f"{first.get('autotune')})")
        elif f.get("digest") != first.get("digest"):
            out.append(f"{name}: autotune's files differ from {first_name}'s (digest "
                       f"{f.get('digest')}, {first_name}: {first.get('digest')})")
        apart = float(f.get("offset", 0.0)) - float(first.get("offset", 0.0))
        if abs(apart) > CLOCK_TOLERANCE_S:
            out.append(f"{name}: clock {abs(apart):.1f} s {'ahead of' if apart > 0 else 'behind'} "
                       f"{first_name}'s")
    off = float(first.get("offset", 0.0))
    if abs(off) > CLOCK_TOLERANCE_S:
        out.append(f"{first_name}: clock {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} "
                   "this machine's")
    return "; ".join(out)


def _slots(text: str, where: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ConfigError(f"{where}: slots {text!r} must be a whole number") from None
    if n < 1:
        raise ConfigError(f"{where}: slots {n} must be at least 1")
    return n


def _unique(hosts: list[Host], where: str) -> tuple[Host, ...]:
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise ConfigError(f"{where}: host {h.name} is named twice")
        seen.add(h.name)
    return tuple(hosts)


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text.strip():
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out]
