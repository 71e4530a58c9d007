"""The pluggable executor interface: a task goes in, an update and metrics come out.

The daemon knows nothing about training; it hands an executor a :class:`Task` and uploads the
:class:`TaskResult`. That keeps the seam narrow enough that other runtimes (a Flower ClientApp, an
on-device trainer) can be plugged in through the ``propius.executors`` entry-point group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from propius.specs import TaskConfig

__all__ = ["Executor", "Task", "TaskResult"]


@dataclass(frozen=True)
class Task:
    """One bound round: the job's task config, its current model and the device's private context."""

    job_id: str
    round: int
    attempt: int
    config: TaskConfig
    model: dict[str, np.ndarray]
    client_id: str
    private: Mapping[str, float | str]
    seed: int


@dataclass(frozen=True)
class TaskResult:
    """The new weights (not a delta), their aggregation weight and executor metrics."""

    update: dict[str, np.ndarray]
    num_samples: float
    metrics: dict[str, float]


class Executor(ABC):
    """Runs tasks synchronously; the daemon calls :meth:`run` from a worker thread."""

    name: ClassVar[str]

    def admits(self, config: TaskConfig) -> bool:
        """Whether this device will run tasks of ``config`` at all; checked before an offer is accepted."""
        return True

    @abstractmethod
    def run(self, task: Task) -> TaskResult: ...
