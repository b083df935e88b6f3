"""Thin CLI: parse, build values, call the library; AutotuneError -> one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback

from ..errors import AutotuneError
from ..tune import relative_entry

# Subcommand name -> module under autotune.cli that defines add_arguments(parser) and run(args).
COMMANDS = {
    "probe": ("probe", "show the machine as the tuner sees it"),
    "run": ("run", "run one configuration as a real, measured DDP trial"),
    "search": ("search", "search for the fastest launch configuration within a time budget"),
    "report": ("report", "summarise a study: top configs, Pareto front, knob importances"),
    "export": ("export", "print the tuned launch command"),
    "launch": ("launch", "run your training command with the tuned configuration"),
    "compare": ("compare", "interleaved A/B of two configurations on your workload"),
    "verify": ("verify", "measure the recommendation against the default launch again"),
    "dashboard": ("dashboard", "open the study in optuna-dashboard"),
}

# The commands that start no process of their own (the dashboard's server is optuna's): every
# other one refuses a relative search-path entry first (util/search_path.py).
_STARTS_NOTHING = ("report", "export", "dashboard")

EPILOG = """\
typical session on a new machine:
  autotune probe                      what autotune sees (cores, NUMA, ISA, allocators, backends)
  autotune run --set nproc=2 --dry-run    the launch plan for one configuration
  autotune search --budget 30m        tune; prints a verified speedup and the tuned command
  autotune export --format shell      the tuned command again, ready to paste
  autotune launch -- python train.py  run your training with the tuned configuration
  autotune compare --a allocator=tcmalloc --b allocator=default    check one change yourself
  autotune verify                     re-measure the recommendation (after a busy search)
run `autotune COMMAND --help` for the options of each command."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's own convention too)
        self.exit(2, f"autotune: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="autotune", description="Find the fastest way to launch PyTorch "
                     "distributed training on this machine.", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        try:
            mod = importlib.import_module(f".{module}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(f"cli.{module}"):
                continue  # command not built yet
            raise
        p = sub.add_parser(name, help=help_text, description=(mod.__doc__ or help_text).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show tracebacks on errors")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` is the user's own training command (script mode), kept
    # verbatim: argparse would otherwise read its --flags as ours.
    script = None
    if "--" in argv:
        cut = argv.index("--")
        argv, script = argv[:cut], argv[cut + 1:]
    args = parser.parse_args(_negative_values(argv))
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    takes_command = hasattr(args, "script")  # set by the commands that run a user's command
    if script is not None and not takes_command:
        parser.error(f"{args.command} takes no command after `--` (search, run, launch and "
                     "compare do)")
    if takes_command:
        _refuse_misplaced_flags(parser, args, script)
        args.script = tuple(script) if script is not None else None
    _warn_password_in_argv(getattr(args, "storage", None))
    if args.command not in _STARTS_NOTHING and (why := relative_entry(os.environ)):
        print(f"autotune: error: {why}", file=sys.stderr)   # before anything starts
        return 2
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()   # a reader that left shows here, not in Python's flush at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except AutotuneError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"autotune: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return 130


# `--budget -5m`: argparse takes any token that starts with '-' and is not a plain negative
# number for an option, and says "expected one argument". No option of ours starts with '-' and a
# digit, so such a token after a long option is its value (`--budget=-5m`), refused by its own
# check in words ("must be positive").
_NEGATIVE = re.compile(r"-\d")


def _negative_values(argv: list[str]) -> list[str]:
    out: list[str] = []
    for token in argv:
        if out and _NEGATIVE.match(token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


# Flags that change whether or how long autotune runs: after `--` they would silently become
# the user's own arguments, and `launch -- python train.py --dry-run` would really train.
_OURS_ONLY = ("--dry-run", "--budget")


def _refuse_misplaced_flags(parser: argparse.ArgumentParser, args: argparse.Namespace,
                            script: list[str] | None) -> None:
    for token in script or ():
        flag = token.split("=", 1)[0]
        # the command has this option when the parsed arguments carry its destination
        if flag in _OURS_ONLY and hasattr(args, flag[2:].replace("-", "_")):
            parser.error(f"{flag} comes after `--`, so it would go to your command, not to "
                         f"autotune; put it before `--` (autotune {args.command} {flag} ... -- "
                         "CMD)")


def _reader_gone() -> int:
    """stdout's reader left (`autotune export | head -1`): stop quietly, as Unix tools do. What
    is still buffered would fail again when Python flushes at exit, so stdout points at
    /dev/null from here on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):   # no real file descriptor (a test's captured stdout)
        pass
    return 128 + 13   # killed by SIGPIPE, as the shell reports `head`'s writer


PASSWORD_WARNING = ("autotune: warning: the --storage URL holds a password, and any local user "
                    "can read a command line (/proc/PID/cmdline); keep it in ~/.pgpass or "
                    "PGPASSWORD instead (docs/security.md)")


def _warn_password_in_argv(url: str | None) -> None:
    if url:
        from ..tune import holds_password
        if holds_password(url):
            print(PASSWORD_WARNING, file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    from ..util.clean import one_line   # messages quote study strings: no escape reaches the terminal
    return one_line(" ".join(text.split()))
