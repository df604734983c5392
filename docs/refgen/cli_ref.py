"""The command-line reference: every `aigw` command and option, read from the argparse parser
`gateway.cli.build_parser()` builds (surfaces' own commands included)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from gateway import cli
from refgen.markdown import GENERATED, code, table, text

INTRO = """\
`aigw` is installed with the package (`make install` puts it in `.venv/bin/`). A command that
checks something exits 1 when the check fails; a usage error exits 2. This page is read from
the parser itself, so it lists what `aigw COMMAND --help` prints.
"""


def commands(parser: argparse.ArgumentParser, path: str = "aigw",
             summary: str = "") -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, one-line help, its parser) of each command, depth first."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path != "aigw":
        yield path, summary, parser
    for action in subparsers:
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            yield from commands(sub, f"{path} {name}", helps.get(name, ""))


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction) \
                or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.dest.upper()
        if action.option_strings and action.nargs != 0:
            names += " " + (action.metavar or action.dest.upper())
        default = "" if action.default in (None, False, argparse.SUPPRESS) or action.required \
            else code(action.default)
        if action.required and action.option_strings:
            default = "**required**"
        rows.append((code(names), default, text(action.help or "")))
    return rows


def _wide(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=100)  # the same usage lines on every terminal


def page() -> str:
    parser = cli.build_parser()
    out = ["# Command line\n", GENERATED, INTRO]
    for line, summary, sub in commands(parser):
        out.append(f"## `{line}`\n")
        said = sub.description or summary
        if said:
            out.append(text(said[0].upper() + said[1:]) + "\n")
        sub.formatter_class = _wide
        usage = sub.format_usage().removeprefix("usage: ").strip()
        out.append(f"```\n{usage}\n```\n")
        options = _options(sub)
        if options:
            out.append(table(("argument", "default", "what"), options))
    return "\n".join(out)
