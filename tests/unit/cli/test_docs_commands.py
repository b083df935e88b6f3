"""Every `autotune ...` command shown in a code block of README.md or docs/*.md parses: its
subcommand exists and the CLI's own argparse parser accepts every flag and value, spelt out in
full (argparse would also take an abbreviation, which a reader then copies). Nothing runs: the
commands are only parsed, and each subcommand's `--help` is read through `main()`. A command in
running text (a code span such as `autotune run --sysfs-root DIR --dry-run`) holds placeholders,
so it is not parsed, but its subcommand must exist and its flags be in that `--help`.

A subcommand that another branch is adding may be shown before it lands; it is listed in
NOT_YET_BUILT, and its commands are checked in full as soon as the CLI has it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest
from paths import REPO

from autotune.cli import COMMANDS as CLI_COMMANDS, build_parser, main

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# Subcommand -> why the docs may show it before the CLI has it. Remove an entry once it lands.
NOT_YET_BUILT: dict[str, str] = {}

# Code blocks in these languages hold shell commands or their output; python/yaml hold neither.
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
# `autotune` as a command word followed by a subcommand-like word, not `autotune:` or
# `autotune-results` or `python -m autotune.worker`.
MENTION = re.compile(r"(?:^|[\s/])autotune\s+[a-z-]")
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}


def _logical_lines(block: str) -> list[tuple[int, str]]:
    """(offset of its first line, text) with backslash continuations joined, as the shell reads."""
    lines, start, pending = [], 0, ""
    for i, line in enumerate(block.splitlines()):
        if not pending:
            start = i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append((start, pending + line))
        pending = ""
    return lines


def _argv(line: str) -> list[str] | None:
    """The arguments after the `autotune` command word on a shell line (None: no command)."""
    line = line.strip().removeprefix("$ ")
    if not MENTION.search(line):
        return None
    words = shlex.split(line, comments=True)
    for i, word in enumerate(words):
        after_m = word == "autotune" and i > 0 and words[i - 1] == "-m"
        if word == "autotune" or word.endswith("/autotune") or after_m:
            rest = words[i + 1:]
            cut = next((j for j, w in enumerate(rest) if w in SHELL_OPERATORS), len(rest))
            return rest[:cut]
    return None


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) for every autotune command in the docs' shell code blocks."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for block in FENCE.finditer(text):
            if block.group(1) not in SHELL_BLOCKS:
                continue
            first = text.count("\n", 0, block.start(2)) + 1
            for offset, line in _logical_lines(block.group(2)):
                argv = _argv(line)
                if argv is not None:
                    found.append((f"{doc.relative_to(REPO)}:{first + offset}", argv))
    return found


COMMANDS = documented_commands()
# The CLI's registry, less a command whose module is not there yet (build_parser skips those too).
SUBCOMMANDS = {name for name, (module, _) in CLI_COMMANDS.items()
               if importlib.util.find_spec(f"autotune.cli.{module}") is not None}


def _own_flags(argv: list[str]) -> list[str]:
    """autotune's flags in argv: those before a `--` (after it is the user's command)."""
    ours = argv[:argv.index("--")] if "--" in argv else argv
    return [w.split("=", 1)[0] for w in ours if w.startswith("--") and w != "--"]


def _help(subcommand: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([subcommand, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


def test_the_docs_show_the_commands_a_reader_needs():
    """Not vacuous: the extraction finds the README's walk-through and the docs' examples."""
    readme = {argv[0] for where, argv in COMMANDS if where.startswith("README.md") and argv}
    assert {"search", "export", "launch", "compare", "verify", "dashboard", "run"} <= readme
    assert len(COMMANDS) >= 40, [where for where, _ in COMMANDS]
    assert any(where.startswith("docs/") for where, _ in COMMANDS)


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_parses(where, argv):
    assert argv, f"{where}: `autotune` with no subcommand"
    if argv[0] not in SUBCOMMANDS:
        assert argv[0] in NOT_YET_BUILT, \
            f"{where}: `autotune {argv[0]}` is not a subcommand ({', '.join(sorted(SUBCOMMANDS))})"
        return
    ours = argv[:argv.index("--")] if "--" in argv else argv
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(ours)
        except SystemExit:
            pytest.fail(f"{where}: `autotune {shlex.join(argv)}` does not parse: "
                        f"{err.getvalue().strip()}")


@pytest.mark.parametrize("subcommand", sorted({argv[0] for _, argv in COMMANDS if argv}
                                                & SUBCOMMANDS))
def test_each_flag_shown_is_in_the_subcommands_help(subcommand):
    """The flags are spelt as `--help` spells them, not abbreviations argparse happens to take."""
    text = _help(subcommand)
    shown = {flag for _, argv in COMMANDS if argv[:1] == [subcommand] for flag in _own_flags(argv)}
    missing = sorted(f for f in shown if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text))
    assert not missing, f"autotune {subcommand} --help does not know {missing}"


# A command in running text, e.g. `autotune run --sysfs-root DIR --dry-run` or the README's table
# row `autotune probe [--json] [--capture DIR]`: the span starts with the command (an error
# message that merely mentions `autotune search` in troubleshooting.md does not).
INLINE = re.compile(r"`((?:python3? -m |\S*/)?autotune [a-z][^`\n]*)`")


def inline_commands() -> list[tuple[str, list[str]]]:
    """(where, words after `autotune`) for every command in a code span outside code blocks.
    Placeholders (`DIR`, `KNOB=V`, `...`) stay words; `[--json]` loses its brackets."""
    found = []
    for doc in DOCS:
        text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), doc.read_text())
        for m in INLINE.finditer(text):
            words = m.group(1).replace("[", " ").replace("]", " ").split()
            at = next(i for i, w in enumerate(words) if w == "autotune" or w.endswith("/autotune"))
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{doc.relative_to(REPO)}:{line}", words[at + 1:]))
    return found


INLINE_COMMANDS = inline_commands()


def test_the_running_text_s_commands_are_found():
    assert len(INLINE_COMMANDS) >= 30, INLINE_COMMANDS
    readme = {argv[0] for where, argv in INLINE_COMMANDS if where.startswith("README.md")}
    assert {"probe", "run", "search", "export", "launch", "compare", "verify"} <= readme


@pytest.mark.parametrize("where,argv", INLINE_COMMANDS, ids=[w for w, _ in INLINE_COMMANDS])
def test_a_command_in_running_text_names_a_subcommand_and_its_flags(where, argv):
    """Commands in running text hold placeholders, so they are not parsed; their subcommand must
    exist and each flag must be one its `--help` lists."""
    assert argv[0] in SUBCOMMANDS, f"{where}: `autotune {argv[0]}` is not a subcommand"
    text = _help(argv[0])
    missing = [f for f in _own_flags(argv)
               if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text)]
    assert not missing, f"{where}: autotune {argv[0]} --help does not know {missing}"


# Pages other branches are writing (issues 25 and 27); README links them already.
COMING = {"docs/busy-machines.md", "docs/search-at-scale.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_links_between_the_pages_point_at_files_and_headings():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(FENCE.sub("", doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue                                   # http:, mailto:
            path, _, anchor = target.partition("#")
            page = (doc.parent / path).resolve() if path else doc
            if str(page.relative_to(REPO.resolve())) in COMING and not page.exists():
                continue
            if not page.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}: no such file")
            elif anchor and page.suffix == ".md" and anchor not in _anchors(page):
                broken.append(f"{doc.relative_to(REPO)}: {target}: no such heading")
    assert not broken, "\n".join(broken)
