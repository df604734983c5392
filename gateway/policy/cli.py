"""`aigw policy test | explain | lint | diff | report | log`: the compliance team's tool.

Each command but `log` loads the gateway config (`--config`) with a policies folder (its own, or
the DIR given) exactly as `aigw run` would, so what they print is what the gateway decides.
`log` reads what a gateway decided: its decision log.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from gateway.loader import ConfigError, LoadedConfig, load_config, policies_folder


def load(config: str, folder: str | None) -> LoadedConfig | None:
    try:
        return load_config(config, policies_dir=Path(folder) if folder else None)
    except ConfigError as exc:
        print(f"{config}: invalid", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return None


def folder_of(loaded: LoadedConfig, given: str | None) -> Path | None:
    return Path(given) if given else policies_folder(loaded)


def cmd_test(args: argparse.Namespace) -> int:
    from gateway.policy.fixtures import report_lines, run_fixtures

    loaded = load(args.config, args.dir)
    folder = folder_of(loaded, args.dir) if loaded else None
    if loaded is None or loaded.bundle is None or folder is None:
        return 2
    run = run_fixtures(loaded.bundle, loaded.settings, folder)
    print("\n".join(report_lines(run, len(loaded.bundle.files))))
    too_little = len(loaded.bundle.files) and args.coverage and \
        100 * (len(loaded.bundle.files) - len(run.uncovered)) < args.coverage * len(
            loaded.bundle.files)
    if too_little:
        print(f"rule coverage is below {args.coverage}%", file=sys.stderr)
    return 1 if run.failed or not run.results or too_little else 0


def cmd_explain(args: argparse.Namespace) -> int:
    from gateway.policy.explain import differs, explain_logged, explain_request

    loaded = load(args.config, args.dir)
    if loaded is None or loaded.bundle is None:
        return 2
    if args.decision_id:
        if not args.log:
            print("--decision-id needs --log (the decision-log file)", file=sys.stderr)
            return 2
        lines = explain_logged(loaded, Path(args.log), args.decision_id)
    else:
        lines = explain_request(loaded, args.request, args.principal)
    if lines is None:
        return 1
    print("\n".join(lines))
    return 1 if differs(lines) else 0


def cmd_lint(args: argparse.Namespace) -> int:
    from gateway.policy.lint import lint

    loaded = load(args.config, args.dir)
    if loaded is None or loaded.bundle is None:
        return 1
    findings = lint(loaded.bundle, loaded.settings)
    for finding in findings:
        print(finding)
    errors = [f for f in findings if f.level == "error"]
    print(f"{len(loaded.bundle.rules)} rules: {len(errors)} error(s), "
          f"{len(findings) - len(errors)} warning(s)")
    return 1 if errors or (args.strict and findings) else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from gateway.policy.diff import diff_lines

    old, new = load(args.config, args.old), load(args.config, args.new)
    if old is None or new is None or old.bundle is None or new.bundle is None:
        return 2
    lines = diff_lines(old.bundle, new.bundle, new.settings)
    print("\n".join(lines) if lines else "no decision changes")
    return 1 if lines and args.exit_code else 0


def cmd_report(args: argparse.Namespace) -> int:
    from gateway.policy.report import facts, markdown_report
    from gateway.policy.report_html import html_report

    loaded = load(args.config, args.dir)
    if loaded is None or loaded.bundle is None:
        return 2
    render = markdown_report if args.format == "markdown" else html_report
    text = render(loaded.bundle, loaded.settings, facts(loaded, folder_of(loaded, args.dir)))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    from gateway.policy.logview import Filters, show

    filters = Filters(args.rule, args.caller, args.effect, args.since, args.surface)
    try:
        source = contextlib.nullcontext(sys.stdin.buffer) if args.file == "-" else \
            open(args.file, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        print(f"{args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        with source as stream:
            skipped = show(stream, sys.stdout.buffer, filters, as_json=args.json,
                           verbose=args.verbose)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` read enough: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if skipped:
        print(f"{skipped} line(s) skipped: not decision records", file=sys.stderr)
    return 0


def _since(text: str) -> float:
    from gateway.policy.logview import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _given(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def add_policy_parser(commands: argparse._SubParsersAction) -> None:
    policy = commands.add_parser("policy", help="test, explain, lint, diff and report "
                                 "policies; read the decision log")
    actions = policy.add_subparsers(dest="policy_command", required=True)

    def action(name: str, help_text: str, handler, folder: bool = True,
               config: bool = True) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text)
        if config:
            parser.add_argument("--config", "-c", default="config/demo.yaml",
                                help="the gateway config the policies serve")
        if folder:
            parser.add_argument("dir", nargs="?", help="policies folder (default: the config's)")
        parser.set_defaults(handler=handler)
        return parser

    test = action("test", "run the *.test.yaml fixtures; exit 1 on any failure", cmd_test)
    test.add_argument("--coverage", type=int, default=0, metavar="PERCENT",
                      help="also fail when fewer rules than this decide a case")
    explain = action("explain", "every rule consulted for one request, and why", cmd_explain)
    explain.add_argument("--request", "-r", default="",
                         help='e.g. "kind=vector_return resource=articles"')
    explain.add_argument("--principal", "-p", default="kind=anonymous",
                         help='e.g. "kind=client scopes=vectors:read client_id=partner"')
    explain.add_argument("--decision-id", help="explain a logged decision instead (exit 1 "
                         "when the policies loaded now decide it otherwise)")
    explain.add_argument("--log", help="the decision-log file to find --decision-id in")
    lint = action("lint", "schema, shadowed or unreachable rules, overlaps, unknown scopes",
                  cmd_lint)
    lint.add_argument("--strict", action="store_true", help="fail on warnings too")
    diff = action("diff", "which decisions change between two policies folders", cmd_diff,
                  folder=False)
    diff.add_argument("old", help="the policies folder before the change")
    diff.add_argument("new", help="the policies folder after the change")
    diff.add_argument("--exit-code", action="store_true", help="exit 1 when decisions change")
    report = action("report", "who can see what, as HTML or Markdown", cmd_report)
    report.add_argument("--format", choices=("html", "markdown"), default="html",
                        help="an HTML page (prints on A4) or Markdown")
    report.add_argument("--output", "-o", help="write to this file instead of stdout")
    log = action("log", "the decision log as lines a person reads, one per request", cmd_log,
                 folder=False, config=False)
    log.add_argument("file", metavar="FILE", help="a decision-log file (JSON lines), or - for "
                     "stdin; other lines are skipped and counted")
    log.add_argument("--rule", type=_given, metavar="R",
                     help="requests in which rule R (or `default`) took a decision")
    log.add_argument("--caller", type=_given, metavar="C",
                     help="requests of this client id, subject (as given, hashed, or a hash's "
                     "start as shown) or principal kind")
    log.add_argument("--effect", choices=("allow", "deny"),
                     help="requests whose deciding decision is this")
    log.add_argument("--since", type=_since, metavar="T",
                     help="requests from T on: an ISO 8601 time (UTC unless it says) or a "
                     "duration back from now: 15m, 2h, 1d")
    log.add_argument("--surface", type=_given, metavar="S",
                     help="requests whose deciding decision is surface S's (`gateway`: a route's)")
    shape = log.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true",
                       help="the records shown, as JSON lines for tools")
    shape.add_argument("--verbose", "-v", action="store_true",
                       help="every decision of each request, indented below it")
