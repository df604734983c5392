"""Private Redis topologies on loopback for the tests: a Redis Cluster (3 primaries, each with a
replica) and a primary + replica watched by one Sentinel. Each node is its own redis-server in
a temporary folder, with no persistence; `stop()` ends them all."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from processes import free_port


def _require_redis() -> None:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail("redis-server and redis-cli are missing: run `make test`, which installs them")


def _wait(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s")
        time.sleep(0.1)


class Nodes:
    """redis-server processes started with the same base options."""

    def __init__(self, workdir: Path) -> None:
        _require_redis()
        self.workdir = workdir
        self.processes: list[subprocess.Popen] = []

    def start(self, port: int, *options: str, sentinel: bool = False) -> None:
        folder = self.workdir / str(port)
        folder.mkdir(parents=True)
        conf = folder / "redis.conf"
        conf.write_text("")  # sentinels write their state back to the config file
        args = ["redis-server", str(conf), "--port", str(port), "--bind", "127.0.0.1",
                "--dir", str(folder), "--save", "", "--appendonly", "no", *options]
        if sentinel:
            args.append("--sentinel")
        self.processes.append(subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        _wait(lambda: redis.Redis(port=port).ping(), f"redis on port {port} did not answer")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(10)


class Cluster:
    """Three primaries with one replica each; `url` is the redis+cluster:// URL of the seeds."""

    def __init__(self, workdir: Path) -> None:
        self.nodes = Nodes(workdir)
        self.ports = [free_port() for _ in range(6)]
        try:
            for port in self.ports:
                self.nodes.start(port, "--cluster-enabled", "yes", "--cluster-port",
                                 str(free_port()), "--cluster-node-timeout", "2000",
                                 "--cluster-config-file", "nodes.conf")
            subprocess.run(["redis-cli", "--cluster", "create",
                            *(f"127.0.0.1:{port}" for port in self.ports),
                            "--cluster-replicas", "1", "--cluster-yes"],
                           check=True, capture_output=True, timeout=30)
            _wait(self._healthy, "the cluster did not become healthy")
        except BaseException:
            self.nodes.stop()
            raise
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def _healthy(self) -> bool:
        return all(redis.Redis(port=port).cluster("INFO")["cluster_state"] == "ok"
                   for port in self.ports)

    def primaries(self) -> list[int]:
        return [port for port in self.ports
                if redis.Redis(port=port).info("replication")["role"] == "master"]

    def fail_over_every_primary(self) -> None:
        """CLUSTER FAILOVER on every replica: each primary hands over to its replica.

        A replica takes over only once its link to the primary is up and in sync, and a manual
        failover that has not completed in 5 s is abandoned by Redis: so wait for the links,
        and ask again any replica that has not taken over after 5 s (a busy machine)."""
        replicas = [port for port in self.ports if port not in self.primaries()]
        _wait(lambda: all(self._in_sync(port) for port in replicas),
              "the replicas did not catch up with their primaries")
        asked = {port: 0.0 for port in replicas}

        def taken_over() -> bool:
            primaries = set(self.primaries())
            for port in replicas:
                if port not in primaries and time.monotonic() - asked[port] > 5:
                    redis.Redis(port=port).execute_command("CLUSTER FAILOVER")
                    asked[port] = time.monotonic()
            return primaries == set(replicas)

        _wait(taken_over, "the replicas did not take over", timeout=40.0)
        _wait(self._healthy, "the cluster did not settle after the failover")

    @staticmethod
    def _in_sync(port: int) -> bool:
        info = redis.Redis(port=port).info("replication")
        return info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")

    def keys(self, pattern: str) -> list[tuple[bytes, int]]:
        """(key, slot) of every key matching the pattern, over every primary."""
        found = []
        for port in self.primaries():
            client = redis.Redis(port=port)
            for key in client.scan_iter(match=pattern):
                found.append((key, client.execute_command("CLUSTER KEYSLOT", key)))
        return found

    def stop(self) -> None:
        self.nodes.stop()


class Sentinel:
    """A primary, its replica and one Sentinel; `url` is the redis+sentinel:// URL."""

    service = "aigw-test"

    def __init__(self, workdir: Path) -> None:
        self.nodes = Nodes(workdir)
        self.primary, self.replica, self.sentinel = free_port(), free_port(), free_port()
        try:
            self.nodes.start(self.primary)
            self.nodes.start(self.replica, "--replicaof", "127.0.0.1", str(self.primary))
            self.nodes.start(self.sentinel, sentinel=True)
            watcher = redis.Redis(port=self.sentinel)
            watcher.execute_command("SENTINEL MONITOR", self.service, "127.0.0.1",
                                    self.primary, 1)
            for option, value in (("down-after-milliseconds", 1000),
                                  ("failover-timeout", 5000)):
                watcher.execute_command("SENTINEL SET", self.service, option, value)
            _wait(lambda: watcher.execute_command("SENTINEL REPLICAS", self.service),
                  "the sentinel did not find the replica")
        except BaseException:
            self.nodes.stop()
            raise
        self.url = f"redis+sentinel://127.0.0.1:{self.sentinel}/{self.service}"

    def current_primary(self) -> int:
        _host, port = redis.Redis(port=self.sentinel).execute_command(
            "SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)
        return int(port)

    def fail_over(self) -> None:
        before = self.current_primary()
        _wait(lambda: redis.Redis(port=before).info("replication")["connected_slaves"] >= 1,
              "the replica is not connected")
        redis.Redis(port=self.sentinel).execute_command("SENTINEL FAILOVER", self.service)
        _wait(lambda: self.current_primary() != before, "the sentinel did not fail over")
        after = self.current_primary()
        _wait(lambda: redis.Redis(port=after).info("replication")["role"] == "master",
              "the new primary did not take the role")

    def stop(self) -> None:
        self.nodes.stop()
