"""Show the machine as the tuner sees it: CPU topology from sysfs, what this process may use
(affinity, cgroup quota), ISA, GPUs and their links, allocators, OpenMP runtimes, backends,
IPEX/oneCCL, numactl/taskset and a C++ compiler, with a fix for every problem found.

  autotune probe                      the live machine, as a table
  autotune probe --json               the same as one JSON object (a stable contract)
  autotune probe --capture DIR        write the files the probe reads into DIR, and what this
                                      machine can do (capabilities.json: torch's CUDA and
                                      backends, libraries, tools), to plan for it from elsewhere
                                      with `autotune run --sysfs-root DIR ... --dry-run`
  autotune probe --sysfs-root DIR     replay a capture (or any tree laid out like /sys)
"""
from __future__ import annotations

import argparse
import json
import sys

from ..tune import ProbeRequest, probe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (keys documented in docs/how-it-works.md)")
    parser.add_argument("--sysfs-root", metavar="DIR",
                        help="read a captured tree laid out like /sys instead of this machine "
                             "(devices/system/cpu/..., devices/system/node/..., plus cpuinfo, "
                             "affinity, cpu.max and nvidia-smi files at its root)")
    parser.add_argument("--capture", metavar="DIR",
                        help="write every file the probe reads, and this machine's capabilities "
                             "(capabilities.json), into DIR for later --sysfs-root")


def run(args: argparse.Namespace) -> int:
    probed = probe(ProbeRequest(sysfs_root=args.sysfs_root, capture=args.capture))
    if probed.captured:
        # With --json, stdout carries nothing but the JSON object.
        print(probed.captured, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(probed.topology.to_json()))
    else:
        print(probed.text())
    return 0
