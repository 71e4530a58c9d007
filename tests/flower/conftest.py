"""Flower on Propius: a live control plane, client daemons, fake nodes and test apps."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.supercore.task_identity import TaskIdentity

from propius.config import Settings

REPO = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
TINYFED = REPO / "propius" / "examples" / "tinyfed"  # a copy of shared/flower-apps/tinyfed


@pytest.fixture
def flower_identity() -> None:
    """Messages built in a test process need the task identity a ServerApp process has."""
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 7, SUPERLINK_NODE_ID


class Daemons:
    """``python -m clients.daemon`` processes; Flower Contexts go to the test's Redis key prefix."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", "PROPIUS_REDIS_URL": settings.redis_url,
                     "PROPIUS_KEY_PREFIX": settings.key_prefix,
                     "PROPIUS_FLOWER_APPS": os.pathsep.join([str(APPS), str(TINYFED)])}
        self._root = root
        self.processes: list[tuple[subprocess.Popen[bytes], Path]] = []

    def spawn(self, address: str, devices: int, offset: int = 0, flower_apps: Path | None = None) -> None:
        log = self._root / f"daemon-{len(self.processes)}.log"
        command = [sys.executable, "-m", "clients.daemon", "--server", address, "--devices", str(devices),
                   "--device-offset", str(offset), "--log-level", "WARNING"]
        with log.open("w") as out:
            env = self._env if flower_apps is None else {**self._env, "PROPIUS_FLOWER_APPS": str(flower_apps)}
            process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.processes.append((process, log))

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for _, log in self.processes)

    def stop(self) -> None:
        for process, _ in self.processes:
            process.terminate()
        for process, _ in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.fixture
def daemons(settings, tmp_path) -> Iterator[Daemons]:
    manager = Daemons(settings, tmp_path)
    yield manager
    manager.stop()
