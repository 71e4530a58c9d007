"""The pluggable executor interface: a task goes in, an update and metrics come out.

The daemon knows nothing about training: it hands an executor a :class:`Task` and uploads the
:class:`TaskResult`. That keeps the seam narrow enough that other runtimes (a Flower ClientApp, an
on-device trainer) plug in through the ``propius.executors`` entry-point group, and a job names the
one it needs in its spec's ``task.executor``.
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
    """One bound task: the job's task config, its current model and the device's private context.

    Attributes
    ----------
    job_id : str
        The job the device is bound to.
    round, attempt : int
        The round and its attempt; a task belongs to exactly one.
    config : TaskConfig
        The job's ``task`` section: ``executor``, ``model``, ``local_steps``, ``batch_size``,
        ``learning_rate`` and free-form ``options``.
    model : dict of str to numpy.ndarray
        The round's model, decoded from the data plane; the executor may modify it.
    client_id : str
        The device's id.
    private : Mapping[str, float or str]
        The device's private attributes (e.g. ``dataset_size``); they never leave the device.
    seed : int
        Derived from the device's seed and the round: an executor that draws only from it is reproducible.
    """

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
    """What a task produced.

    Attributes
    ----------
    update : dict of str to numpy.ndarray
        The new weights (not a delta), with the model's names, dtypes and shapes; the data plane refuses
        anything else.
    num_samples : float
        The update's aggregation weight, usually the samples trained on; must be positive.
    metrics : dict of str to float
        Executor metrics (loss, accuracy, ...); the round reports each one's weighted mean.
    """

    update: dict[str, np.ndarray]
    num_samples: float
    metrics: dict[str, float]


class Executor(ABC):
    """Runs tasks of one kind on a device; subclasses set ``name`` and define ``run``.

    A device creates one instance per executor name, on first use, with no arguments, and calls
    :meth:`run` synchronously from a worker thread, one task at a time. Register the class under the
    ``propius.executors`` entry-point group; a job selects it with ``task.executor: <name>``.

    Attributes
    ----------
    name : str
        The executor's name, as in its entry point.

    Examples
    --------
    An executor that returns the model unchanged, weighted by the device's dataset size:

    >>> class Identity(Executor):
    ...     name = "identity"
    ...
    ...     def run(self, task: Task) -> TaskResult:
    ...         size = float(task.private.get("dataset_size", 1))
    ...         return TaskResult(update=task.model, num_samples=size, metrics={"size": size})

    Registered in its package's ``pyproject.toml``::

        [project.entry-points."propius.executors"]
        identity = "my_package.executors:Identity"
    """

    name: ClassVar[str]

    def admits(self, config: TaskConfig) -> bool:
        """Whether this device will run tasks of ``config`` at all.

        Checked before an offer is accepted, so a task the executor cannot run (an unknown model, an app
        the device's owner does not allow) is declined and the round binds another client.

        Parameters
        ----------
        config : TaskConfig
            The offered job's task config.

        Returns
        -------
        bool
            Default True.
        """
        return True

    @abstractmethod
    def run(self, task: Task) -> TaskResult:
        """Run one task.

        Parameters
        ----------
        task : Task
            The bound task, with the round's model.

        Returns
        -------
        TaskResult
            The new weights, their aggregation weight and metrics, uploaded by the daemon.

        Raises
        ------
        Exception
            Any exception fails the task: the device releases its binding (the round's slot is refilled from
            the other clients), logs the error and checks in again.
        """
        ...
