"""The built-in executor: a few local SGD steps of a :mod:`clients.executors.models` model."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from clients.executors.base import Executor, Task, TaskResult
from clients.executors.models import build_model, load_numpy, synthetic_dataset, to_numpy

__all__ = ["TorchTrainExecutor"]

DEFAULT_DATASET_SIZE = 256


class TorchTrainExecutor(Executor):
    """Trains ``config.local_steps`` minibatch SGD steps on the device's synthetic local data.

    The data, the batch order and therefore the result depend only on ``task.seed`` and the model.
    """

    name = "torch-train"

    def __init__(self) -> None:
        # Many simulated devices share a process: one thread each keeps them from oversubscribing cores.
        torch.set_num_threads(1)

    def run(self, task: Task) -> TaskResult:
        config = task.config
        size = int(float(task.private.get("dataset_size", DEFAULT_DATASET_SIZE)))
        if size < 1:
            raise ValueError(f"dataset_size must be positive, got {size}")
        features, labels = synthetic_dataset(config, seed=task.seed, n=size)
        model = build_model(config)
        load_numpy(model, task.model)
        optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
        generator = torch.Generator().manual_seed(task.seed)
        batch = min(config.batch_size, size)
        order = torch.randperm(size, generator=generator)
        position, losses, correct, seen = 0, [], 0, 0
        model.train()
        for _ in range(config.local_steps):
            if position + batch > size:
                order, position = torch.randperm(size, generator=generator), 0
            index = order[position : position + batch]
            position += batch
            logits = model(features[index])
            loss = F.cross_entropy(logits, labels[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            correct += int((logits.argmax(dim=1) == labels[index]).sum())
            seen += len(index)
        metrics = {"loss": sum(losses) / len(losses), "accuracy": correct / seen}
        return TaskResult(update=to_numpy(model), num_samples=float(size), metrics=metrics)
