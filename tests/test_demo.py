"""`aigw demo`: starts the backend and the gateway; the printed curl commands work as printed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import ROOT, free_port, wait_for_http


def printed_commands(banner: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", "", banner)
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("curl ")]


@pytest.fixture
def demo(tmp_path: Path):
    env = {**os.environ, "AIGW_PORT": str(free_port()), "AIGW_ADMIN_PORT": str(free_port()),
           "PYTHONUNBUFFERED": "1"}
    out = (tmp_path / "demo.out").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "demo", "--backend-port", str(free_port())],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
    )
    wait_for_http(f"http://127.0.0.1:{env['AIGW_ADMIN_PORT']}/readyz", process=process)
    yield process, tmp_path / "demo.out"
    if process.poll() is None:
        process.kill()
    out.close()


def test_demo_curl_commands_work_as_printed_and_ctrl_c_stops_it(demo):
    process, output = demo
    commands = printed_commands(output.read_text())
    assert len(commands) >= 4
    time.sleep(0.5)  # the backend's readiness is probed by /readyz; give it one cycle
    for command in commands:
        result = subprocess.run(["bash", "-c", command + " -w '\\n%{http_code}'"],
                                capture_output=True, text=True, timeout=30)
        body, _, status = result.stdout.rpartition("\n")
        assert result.returncode == 0 and status == "200", (command, result.stdout)
        assert json.loads(body)
    search = subprocess.run(["bash", "-c", commands[0]], capture_output=True, text=True)
    items = json.loads(search.stdout)["items"]
    assert items and any("refund" in item["title"].lower() for item in items)
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0
