"""Start Flower runs on Propius in processes of their own (one ServerApp per process, as Flower has it).

``FlowerRun.start(...)`` is ``propius flower run`` from Python: the run's ServerApp is hosted by a
child process, whose output the handle collects, so several runs can share one pool of clients.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from propius.flower.project import RunOptions

__all__ = ["FlowerRun"]

_FLAGS = {"demand": "--demand", "over_selection": "--over-selection", "partitions": "--partitions",
          "priority": "--priority", "name": "--name"}


@dataclass
class FlowerRun:
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    @classmethod
    def start(cls, app_dir: str | Path, server: str, run_config: Sequence[str] = (),
              options: RunOptions | None = None, env: Mapping[str, str] | None = None) -> FlowerRun:
        """Launch ``python -m propius.flower run``; ``run_config`` items are ``'k=v k2=v2'`` strings."""
        command = [sys.executable, "-m", "propius.flower", "run", str(app_dir), "--server", server]
        for item in run_config:
            command += ["--run-config", item]
        for field, flag in _FLAGS.items():
            value: Any = getattr(options, field, None)
            if value is not None:
                command += [flag, str(value)]
        if options is not None and options.requirements is not None:
            command += ["--requirements", json.dumps(dict(options.requirements))]
        log = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the handle until stop()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
        return cls(process, log)

    def wait(self, timeout_s: float | None = None) -> int:
        return self.process.wait(timeout_s)

    def output(self) -> str:
        """Everything the run printed so far (Flower's log included)."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.log.close()
