"""`aigw demo`: starts the backend and the gateway; the printed curl commands work as printed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from processes import ROOT, free_port, wait_for_http


def printed_commands(banner: str) -> list[tuple[str, int]]:
    """(command, expected status) for each curl line, the status read from its `# NNN` note."""
    joined = re.sub(r"\\\n\s*", "", banner)
    commands = []
    for line in joined.splitlines():
        if line.strip().startswith("curl "):
            status = re.search(r"#\s*(\d{3})", line)
            assert status, f"no expected status noted on: {line}"
            commands.append((line.strip(), int(status.group(1))))
    return commands


@pytest.fixture
def demo(tmp_path: Path):
    """`aigw demo` as on a fresh checkout: the shipped config and policies, no `.aigw/` yet,
    run from that checkout (so all it writes is in it) with the usual umask (022)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "config", checkout / "config")
    shutil.copytree(ROOT / "policies", checkout / "policies")
    env = {name: value for name, value in os.environ.items() if not name.startswith("AIGW_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    admin = free_port()
    out = (tmp_path / "demo.out").open("w+")
    process = subprocess.Popen(  # ports by flag only: the printed commands must follow them
        [sys.executable, "-m", "gateway", "demo", "--backend-port", str(free_port()),
         "--port", str(free_port()), "--admin-port", str(admin),
         "--issuer-port", str(free_port()), "--config", str(checkout / "config" / "demo.yaml")],
        cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, umask=0o022,
    )
    try:  # a busy machine may take a while to start it; one that never starts is not left
        wait_for_http(f"http://127.0.0.1:{admin}/readyz", timeout=60, process=process)
    except BaseException:
        process.kill()
        raise
    yield process, tmp_path / "demo.out", env
    if process.poll() is None:
        process.kill()
    out.close()


def test_demo_curl_commands_work_as_printed_and_ctrl_c_stops_it(demo):
    process, output, env = demo  # the commands run with no AIGW_* variable set
    commands = printed_commands(output.read_text())
    assert len(commands) >= 6 and {status for _, status in commands} == {200, 400, 401, 403}
    for command, expected in commands:
        with_status = command.replace("curl -s ", "curl -s -w '\\n%{http_code}' ", 1)
        result = subprocess.run(["bash", "-c", with_status], capture_output=True, text=True,
                                timeout=30, env=env)
        body, _, status = result.stdout.rpartition("\n")
        assert result.returncode == 0 and int(status) == expected, (command, result.stdout)
        assert json.loads(body)
    search = subprocess.run(["bash", "-c", commands[1][0]], capture_output=True, text=True,
                            env=env)
    items = json.loads(search.stdout)["items"]
    assert items and any("refund" in item["title"].lower() for item in items)
    [signed] = [command for command, _ in commands if " aip sign " in command]
    dump = signed.replace("curl -s ", "curl -s -D - -o /dev/null ", 1)
    headers = subprocess.run(["bash", "-c", dump], capture_output=True, text=True,
                             env=env).stdout.lower()
    assert "x-aip-signature: v1=" in headers  # verified, so the answer is signed
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0


def test_the_printed_aigw_check_passes_the_demo(demo):
    _, output, env = demo
    joined = re.sub(r"\\\n\s*", "", output.read_text())
    [command] = [line.strip() for line in joined.splitlines() if " check http" in line]
    result = subprocess.run(["bash", "-c", command + " --json"], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert not report["must_failures"]


def test_the_demo_makes_its_own_secrets_and_commits_none(demo):
    _, output, _ = demo
    state = output.parent / "checkout" / ".aigw"
    made = sorted(path.name for path in state.glob("demo-*.secret"))
    assert "demo-aidre-cursor.secret" in made and "demo-aip-platform.secret" in made
    for name in made:
        assert (state / name).stat().st_mode & 0o777 == 0o600
        assert re.fullmatch(r"[0-9a-f]{64}\n", (state / name).read_text())
    agent = (state / "demo-client-demo-agent.secret").read_text().strip()
    banner = output.read_text()
    assert f"-u demo-agent:{agent} " in banner and "demo-agent-secret" not in banner
    assert not list((ROOT / "config").glob("*.secret"))  # none committed


def test_everything_the_demo_writes_is_its_owners_alone(demo):
    """Its indexes of the subjects' records (and their -wal and -shm), secrets, keys, events
    and request bodies: every file 0600 and every folder 0700, under a umask of 022."""
    process, output, env = demo
    for command, _ in printed_commands(output.read_text()):  # its indexes built, events kept
        subprocess.run(["bash", "-c", command], capture_output=True, timeout=60, env=env)
    checkout = output.parent / "checkout"
    index = checkout / ".aigw" / "pdpp-index"
    assert list(index.glob("*.db")) and list(index.glob("*.db-wal"))  # while it runs
    assert list((checkout / ".aigw").glob("*.secret"))
    written = [path for path in checkout.rglob("*")
               if path.relative_to(checkout).parts[0] not in ("config", "policies")]
    loose = [f"{path.relative_to(checkout)}: {oct(mode)}" for path in written
             if (mode := stat.S_IMODE(path.stat().st_mode)) != (0o700 if path.is_dir()
                                                                else 0o600)]
    assert not loose, loose
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0


def test_a_taken_port_is_one_clear_line_not_a_traceback(tmp_path: Path):
    """Before the banner: which port is taken, the flag that moves it, exit 2 (it was the
    banner, then a lifespan traceback and exit 3)."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "config", checkout / "config")
    shutil.copytree(ROOT / "policies", checkout / "policies")
    env = {name: value for name, value in os.environ.items() if not name.startswith("AIGW_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "demo", "--backend-port", str(free_port()),
             "--port", str(free_port()), "--admin-port", str(taken),
             "--issuer-port", str(free_port()), "--config", str(checkout / "config" / "demo.yaml")],
            cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"the admin port 127.0.0.1:{taken} is taken (--admin-port)" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "curl" not in done.stdout
