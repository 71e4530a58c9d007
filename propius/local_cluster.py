"""A real Redis Cluster on loopback ports: six ``redis-server`` processes, three primaries with a replica each.

Tests (``PROPIUS_TEST_REDIS=cluster``) and the scale-out benchmarks run the control plane on it; the
chaos run kills a primary and waits for its replica to take over. Nothing persists: the servers run
without RDB or AOF in a temporary folder that is removed with them.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

__all__ = ["LocalCluster", "cluster_available", "local_cluster"]


def cluster_available() -> bool:
    """Whether this machine can run a local cluster (``redis-server`` and ``redis-cli`` on the PATH)."""
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def _free_ports(count: int) -> list[int]:
    """Ports that are free now, and whose cluster-bus port (port + 10000) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


@dataclass
class LocalCluster:
    """The running servers by port; ``url`` is what a control plane's ``redis_url`` takes."""

    folder: Path
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def ports(self) -> list[int]:
        return list(self.processes)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def client(self) -> redis.RedisCluster:
        """A synchronous cluster client (for setup, checks and clean-up)."""
        alive = [port for port, proc in self.processes.items() if proc.poll() is None]
        return redis.RedisCluster(host="127.0.0.1", port=alive[0], decode_responses=True)

    def primaries(self) -> list[int]:
        """The ports of the nodes that serve slots now."""
        return [port for port, role in self._roles().items() if role == "primary"]

    def kill(self, port: int) -> None:
        """SIGKILL one server: no goodbye to the cluster, as a crashed machine."""
        proc = self.processes[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def wait_healthy(self, timeout_s: float = 30.0) -> float:
        """Wait until every live node reports ``cluster_state:ok`` and every slot has a live primary;
        returns the seconds waited."""
        start = time.monotonic()
        while not self._healthy():
            if time.monotonic() - start > timeout_s:
                raise TimeoutError(f"redis cluster not healthy after {timeout_s:.0f} s")
            time.sleep(0.05)
        return time.monotonic() - start

    def _healthy(self) -> bool:
        live = [port for port, proc in self.processes.items() if proc.poll() is None]
        for port in live:
            try:
                info = _node(port).cluster("info")
            except redis.RedisError:
                return False
            if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != 16384:
                return False
        roles = self._roles()
        # every live node known as a slot-serving primary or a replica: a replica not yet attached could
        # not take over from its primary
        primaries = {port for port, role in roles.items() if role == "primary"}
        return primaries <= set(live) and all(roles.get(port) in ("primary", "replica") for port in live)

    def _roles(self) -> dict[int, str]:
        """Each node's role as the first live node sees it: primary (serves slots), replica, or other."""
        for port, proc in self.processes.items():
            if proc.poll() is not None:
                continue
            with contextlib.suppress(redis.RedisError):
                return {int(address.split("@")[0].rsplit(":", 1)[1]): _role(node)
                        for address, node in _node(port).cluster("nodes").items()}
        return {}

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _role(node: dict) -> str:
    flags = node["flags"]
    if "fail" in flags:
        return "other"
    if "master" in flags and node["slots"]:
        return "primary"
    return "replica" if "slave" in flags else "other"


def _node(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=2, decode_responses=True)


@contextlib.contextmanager
def local_cluster(nodes: int = 6, replicas: int = 1, node_timeout_ms: int = 2000) -> Iterator[LocalCluster]:
    """Start ``nodes`` servers, join them into a cluster and wait until it serves every slot; stop them
    however the block ends. ``node_timeout_ms`` is how long a silent primary has before its replica
    takes over (Redis's default is 15 s; 2 s keeps a failover test short)."""
    if not cluster_available():
        raise RuntimeError("redis-server and redis-cli are needed for a local Redis Cluster")
    folder = Path(tempfile.mkdtemp(prefix="propius-cluster-"))
    cluster = LocalCluster(folder)
    try:
        for port in _free_ports(nodes):
            cluster.processes[port] = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(folder / f"nodes-{port}.conf"), "--cluster-node-timeout",
                 str(node_timeout_ms), "--save", "", "--appendonly", "no", "--dir", str(folder),
                 "--logfile", str(folder / f"redis-{port}.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for port in cluster.ports:
            _wait_ping(port, cluster.processes[port])
        addresses = [f"127.0.0.1:{port}" for port in cluster.ports]
        subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", str(replicas),
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        cluster.wait_healthy()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ping(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server on port {port} exited with {proc.returncode}")
        with contextlib.suppress(redis.RedisError):
            if _node(port).ping():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"redis-server on port {port} did not answer in {timeout_s:.0f} s")
        time.sleep(0.02)
