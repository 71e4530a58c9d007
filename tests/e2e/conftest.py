"""End to end: an in-process control plane and real client-daemon processes (``python -m clients.daemon``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Daemon:
    process: subprocess.Popen
    state_dir: Path
    first_device: int
    devices: int
    log: Path

    def client_ids(self, timeout_s: float = 120.0) -> set[str]:
        """The ids its devices persist in the state dir at start-up (written before they check in)."""
        paths = [self.state_dir / f"device-{i}.id" for i in range(self.first_device, self.first_device + self.devices)]
        deadline = time.monotonic() + timeout_s
        while not all(path.exists() for path in paths):
            assert self.process.poll() is None, f"daemon exited early:\n{self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "daemon did not write its device ids"
            time.sleep(0.05)
        return {path.read_text().strip() for path in paths}


class Daemons:
    """Starts client daemons and guarantees that none outlives the test (only its own pids are signalled)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self.started: list[Daemon] = []

    def spawn(self, address: str, count: int, devices: int) -> list[Daemon]:
        spawned = []
        for _ in range(count):
            index = len(self.started)
            state_dir, log = self._root / f"daemon-{index}", self._root / f"daemon-{index}.log"
            command = [sys.executable, "-m", "clients.daemon", "--server", address, "--devices", str(devices),
                       "--device-offset", str(index * devices), "--seed", str(index), "--state-dir", str(state_dir)]
            with log.open("w") as out:
                process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
            daemon = Daemon(process, state_dir, index * devices, devices, log)
            self.started.append(daemon)
            spawned.append(daemon)
        return spawned

    async def terminate(self, daemons: list[Daemon], timeout_s: float = 60.0) -> list[int]:
        """SIGTERM, then the exit codes (a daemon must finish its uploads and exit 0)."""
        for daemon in daemons:
            daemon.process.send_signal(signal.SIGTERM)
        return [await asyncio.to_thread(d.process.wait, timeout_s) for d in daemons]

    def logs(self) -> str:
        return "\n".join(f"--- {d.log.name}\n{d.log.read_text()[-2000:]}" for d in self.started if d.log.exists())

    def kill_all(self) -> None:
        for daemon in self.started:
            if daemon.process.poll() is None:
                daemon.process.kill()
                daemon.process.wait(10)


@pytest.fixture
def daemons(tmp_path) -> Iterator[Daemons]:
    manager = Daemons(tmp_path)
    yield manager
    manager.kill_all()
