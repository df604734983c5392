"""`aigw` command line: run, demo, validate, schema, token, policy, check."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from gateway import registry
from gateway.check.cli import add_check_parser
from gateway.console import load_or_exit, log_warnings, redact
from gateway.demo.token_command import add_token_parser
from gateway.loader import LoadedConfig
from gateway.policy.cli import add_policy_parser


def config_schema() -> dict:
    schema = registry.settings_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "aigw gateway configuration"
    return schema


def cmd_run(args: argparse.Namespace) -> int:
    from gateway import workers

    loaded = load_or_exit(args.config)
    try:
        count = workers.worker_count(args.workers)
    except ValueError:
        print(f"aigw: --workers takes a number >= 1 or auto, not {args.workers!r}",
              file=sys.stderr)
        return 2
    if count > 1 and args.worker_fd is None:
        local = workers.local_state(loaded)
        if local and not args.allow_memory_store:
            print("aigw: several workers would each keep their own copy of: "
                  + "; ".join(local) + ". Use Redis for them, or --allow-memory-store.",
                  file=sys.stderr)
            return 2
        workers.prepare_metrics_dir()  # before prometheus_client is first imported
    from gateway.observability import configure_logging

    configure_logging(loaded.settings.logging.level)
    if args.worker_fd is None:
        log_warnings(loaded)
    try:
        if count > 1 and args.worker_fd is None:
            workers.run_workers(loaded, count)
        else:
            _serve(loaded, args.worker_fd)
    except Exception as exc:  # e.g. a listener port in use, or a store that cannot be built
        print(f"aigw: cannot start: {type(exc).__name__}: {redact(str(exc))}", file=sys.stderr)
        return 1
    return 0


def _serve(loaded: LoadedConfig, worker_fd: int | None) -> None:
    import socket

    from gateway.server import run

    sock = None if worker_fd is None else socket.socket(fileno=worker_fd)
    run(loaded, sock=sock)


def cmd_validate(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.config)
    if loaded.warnings:
        label = "error" if args.strict else "warning"
        for issue in loaded.warnings:
            print(f"  {label}: {issue}", file=sys.stderr)
        if args.strict:
            print(f"{args.config}: invalid with --strict ({len(loaded.warnings)} warning(s))",
                  file=sys.stderr)
            return 1
    upstreams = ", ".join(loaded.settings.upstreams)
    print(f"{args.config}: valid (upstreams: {upstreams}; policy files: {len(loaded.policies)}; "
          f"warnings: {len(loaded.warnings)})")
    for where, note in registry.config_notes(loaded.settings):
        print(f"  note: {where}: {note}")
    return 0


def policy_schema() -> dict:
    schema = registry.policy_pack_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "aigw policy file"
    return schema


def cmd_schema(args: argparse.Namespace) -> int:
    schema = policy_schema() if args.policies else config_schema()
    print(json.dumps(schema, indent=2, sort_keys=True))
    return 0


def package_version() -> str:
    try:
        return version("aigw")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def cmd_demo(args: argparse.Namespace) -> int:
    from gateway.demo.launcher import run_demo

    ports = {"AIGW_PORT": args.port, "AIGW_ADMIN_PORT": args.admin_port,
             "AIGW_ISSUER_PORT": args.issuer_port}
    return run_demo(args.config, args.backend_port,
                    {name: str(port) for name, port in ports.items() if port is not None})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aigw", description=__doc__)
    parser.add_argument("--version", action="version", version=f"aigw {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="serve the gateway from a config file")
    run.add_argument("--config", "-c", required=True, help="the gateway's config file")
    run.add_argument("--workers", default="1",
                     help="processes serving the public listener: a number or auto (= cores)")
    run.add_argument("--allow-memory-store", action="store_true",
                     help="with several workers, accept per-process memory stores (each "
                     "worker then counts and remembers on its own)")
    run.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)
    run.set_defaults(handler=cmd_run)
    validate = commands.add_parser("validate", help="check a config; exit 1 listing every error")
    validate.add_argument("config", help="the config file to check")
    validate.add_argument("--strict", action="store_true",
                          help="treat warnings (e.g. an unlimited capability) as errors")
    validate.set_defaults(handler=cmd_validate)
    schema = commands.add_parser("schema", help="print the JSON Schema of the config file")
    schema.add_argument("--policies", action="store_true",
                        help="print the JSON Schema of a policy file instead")
    schema.set_defaults(handler=cmd_schema)
    demo = commands.add_parser(
        "demo", help="run the demo backend with the gateway in front",
        description="Run the demo backend, the demo token issuer and the gateway in one process. "
        "The shipped config reads its ports from AIGW_PORT, AIGW_ADMIN_PORT and "
        "AIGW_ISSUER_PORT; the flags below set them, and the commands the banner prints "
        "(`aigw token` included) follow.")
    demo.add_argument("--config", "-c", default="config/demo.yaml", help="the demo's config")
    demo.add_argument("--port", type=int, help="gateway port (AIGW_PORT, default 8080)")
    demo.add_argument("--admin-port", type=int,
                      help="admin port, /metrics /healthz /readyz (AIGW_ADMIN_PORT, default 9090)")
    demo.add_argument("--issuer-port", type=int,
                      help="demo token issuer port (AIGW_ISSUER_PORT, default 8082)")
    demo.add_argument("--backend-port", type=int, default=8081,
                      help="demo backend port (default 8081)")
    demo.set_defaults(handler=cmd_demo)
    add_token_parser(commands)
    add_policy_parser(commands)
    add_check_parser(commands)
    for surface in registry.surfaces():
        surface.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
