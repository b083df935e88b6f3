"""What a stored study or manifest carries that runs code or chooses what code runs, as the
StoredCode a refusal shows and --trust-study hashes (study/trust.py), one function per kind: a
command, a `module:function` workload, the fields of a search across hosts, the libraries an
export preloads. docs/security.md has the table of every path a stored string can take."""
from __future__ import annotations

import os
import shlex
import stat
from typing import Any, Iterable

from ..util.clean import one_line
from ..errors import ConfigError
from .trust import StoredCode


def command_code(command: Iterable[str] | None, what: str = "command") -> StoredCode:
    """A stored command (a script's, or a manifest's program), exactly as it would run."""
    command = [str(a) for a in command or ()]
    return StoredCode(((what, shlex.join(command)),) if command else ())


def workload_code(workload: str | None) -> StoredCode:
    """A `module:function` workload, which the trainer imports (a built-in one is autotune's)."""
    return StoredCode((("workload", f"import of {workload}"),) if workload and ":" in workload
                      else ())


def cluster_code(cluster: Any) -> StoredCode:
    """What a study across hosts stores and an export passes on to every host: whom ssh or
    mpirun reach, at which addresses, over which interface and network, with which ssh config,
    which python in which folder, with which PATH, PYTHONPATH and kin."""
    items = [("hosts", ",".join(h.name for h in cluster.hosts)), ("python", cluster.python),
             ("folder", cluster.cwd)]
    if cluster.ssh_config:
        items.append(("ssh config", cluster.ssh_config))
    # what reaches each host's shell and the ranks' rendezvous (mpirun's --mca values too)
    items.append(("addresses", ",".join(cluster.addresses)))
    items += [(what, value) for what, value in (("iface", cluster.iface),
                                                ("subnet", cluster.subnet)) if value]
    items += [(f"env {key}", value) for key, value in sorted(cluster.env.items())]
    return StoredCode(tuple(items))


def check_stored_cluster(stored: Any, source: str) -> None:
    """What a study across hosts stores (its JSON, before it becomes a Cluster) and an export
    passes on, into environments and into the command each host's shell parses (hosts,
    addresses, interface, python, folder, forwarded PATH and kin): a control character in any
    is refused, never passed (one line)."""
    if not isinstance(stored, dict):
        return   # not a cluster: cluster_from_json says so
    hosts = [h.get("name") for h in stored.get("hosts") or () if isinstance(h, dict)]
    env = stored.get("env") if isinstance(stored.get("env"), dict) else {}
    fields = {**{f"host {h}": h for h in hosts},
              **{f"address {a}": a for a in stored.get("addresses") or ()}, **env,
              **{key: stored.get(key) for key in ("iface", "subnet", "ssh_config", "python",
                                                  "cwd")}}
    for key, value in fields.items():
        value = "" if value is None else str(value)
        if one_line(key) != str(key) or one_line(value) != value:
            raise ConfigError(f"{source}: stored {one_line(key)}={one_line(value)} holds a "
                              "control character; refusing to export it")


def foreign_libraries(config: Any, stored: Iterable[Any], local: Any
                      ) -> tuple[StoredCode, list[str]]:
    """The libraries an export would preload from the stored topologies that are not the very
    files this machine's probe finds, and a line for each saying why. A path that could smuggle
    a second library or an option (not absolute, ':' or a space or a control character in it)
    is refused always (ConfigError)."""
    from ..plan.build import preloads
    items, problems = [], []
    for topology in stored:
        for name, path in preloads(config, topology):
            shown = one_line(repr(path))
            if not isinstance(path, str) or not os.path.isabs(path) or any(
                    c == ":" or c.isspace() or not c.isprintable() for c in path):
                raise ConfigError(f"stored {name} library {shown} is not a plain absolute path; "
                                  "refusing to put it in LD_PRELOAD")
            problem = _not_the_local_library(name, path, local)
            if problem:
                items.append((f"{name} library", path))
                problems.append(f"{name} library {shown} {problem}")
    return StoredCode(tuple(items)), problems


def _not_the_local_library(name: str, path: str, local: Any) -> str | None:
    found = {**local.allocators, **local.omp_runtimes}.get(name)
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        regular = False
    if not regular:
        return "is not a file on this machine"
    if not found or os.path.realpath(found) != os.path.realpath(path):
        return f"is not the {name} this machine's probe finds ({found or 'none'})"
    return None
