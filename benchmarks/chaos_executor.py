"""The chaos suite's executor: the built-in training, after ``task.options["train_s"]`` seconds of "work".

It makes every task outlast the control plane's ``client_ttl_s`` without burning the CPU. The chaos run
registers it for its daemons through a ``propius.executors`` entry point of its own (no install).
"""

from __future__ import annotations

import time

from clients.executors.base import Task, TaskResult
from clients.executors.torch_train import TorchTrainExecutor

__all__ = ["SlowTrainExecutor"]


class SlowTrainExecutor(TorchTrainExecutor):
    name = "slow-train"

    def run(self, task: Task) -> TaskResult:
        time.sleep(float(task.config.options.get("train_s", 0.0)))
        return super().run(task)
