"""json-server (npm, installed in .npm/ by `make json-server`) as a real upstream process, over
a database of this machine's Debian packages written by examples/json-server/dataset.py."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from processes import ROOT, Process, free_port, script_module, wait_for_http

EXAMPLE = ROOT / "examples" / "json-server"
BINARY = ROOT / ".npm" / "node_modules" / ".bin" / "json-server"
VERSION = "0.17.4"


def dataset_module() -> ModuleType:
    """examples/json-server/dataset.py, which is a script beside the example, not a package."""
    return script_module(EXAMPLE / "dataset.py", "json_server_dataset")


def write_database(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The database json-server serves, written to `path`; returned as written."""
    dataset = dataset_module()
    db = dataset.build()
    dataset.write(db, path)
    return json.loads(path.read_text(encoding="utf-8"))


def start_json_server(db: Path, logs: Path) -> tuple[Process, str]:
    """json-server on a free loopback port over `db` (which it writes to on POST), answering."""
    if not BINARY.exists() or shutil.which("node") is None:
        raise RuntimeError(f"json-server {VERSION} is not installed: run `make json-server`")
    port = free_port()
    process = Process([str(BINARY), "--host", "127.0.0.1", "--port", str(port), "--quiet",
                       str(db)], logs, f"json-server-{port}")
    url = f"http://127.0.0.1:{port}"
    answering(process, url + "/maintainers?_limit=1")
    return process, url


def start_example_gateway(upstream: str, logs: Path) -> tuple[Process, str]:
    """`aigw run` on examples/json-server/aigw.yaml as it is, in front of `upstream`."""
    port, admin_port = free_port(), free_port()
    env = {"AIGW_PORT": str(port), "AIGW_ADMIN_PORT": str(admin_port),
           "JSON_SERVER_URL": upstream,  # every test of a module shares it: no 429 between them
           "EXAMPLE_RATE_LIMIT": "100000/minute", "EXAMPLE_BURST_LIMIT": "10000/second"}
    process = Process([sys.executable, "-m", "gateway", "run", "--config",
                       str(EXAMPLE / "aigw.yaml")], logs, f"gateway-json-server-{port}", env=env)
    answering(process, f"http://127.0.0.1:{admin_port}/healthz")
    return process, f"http://127.0.0.1:{port}"


def answering(process: Process, url: str) -> None:
    """Wait until `url` answers; a process that never does is stopped, not left behind."""
    try:
        wait_for_http(url, process=process.popen)
    except (RuntimeError, TimeoutError):
        process.stop()
        raise


def example_config(upstream: str, workdir: Path) -> dict[str, Any]:
    """The example config as a dict to vary in a test (an in-process gateway writes it into
    `workdir`): its upstream at `upstream`, its policies and secrets not relative to it."""
    config = yaml.safe_load((EXAMPLE / "aigw.yaml").read_text())
    config["upstreams"]["debian"]["url"] = upstream
    config["public_base_url"] = "https://packages.example.com"
    config["policies"] = str(EXAMPLE / "policies")
    for section in ("aidre", "pdpp"):
        config[section]["cursor_secret"] = f"{section}-cursor-secret-of-{workdir.name}"
    return config
