"""Thin CLI: parse, build values, call the library; AutotuneError -> one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from ..errors import AutotuneError

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
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    takes_command = hasattr(args, "script")  # set by the commands that run a user's command
    if script is not None and not takes_command:
        parser.error(f"{args.command} takes no command after `--` (search, run, launch and "
                     "compare do)")
    if takes_command:
        args.script = tuple(script) if script is not None else None
    _warn_password_in_argv(getattr(args, "storage", None))
    try:
        return int(args._run(args) or 0)
    except AutotuneError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"autotune: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return 130


PASSWORD_WARNING = ("autotune: warning: the --storage URL holds a password, and any local user "
                    "can read a command line (/proc/PID/cmdline); keep it in ~/.pgpass or "
                    "PGPASSWORD instead (docs/security.md)")


def _warn_password_in_argv(url: str | None) -> None:
    if url:
        from ..study.storage import holds_password
        if holds_password(url):
            print(PASSWORD_WARNING, file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    from ..clean import one_line   # messages quote study strings: no escape reaches the terminal
    return one_line(" ".join(text.split()))
