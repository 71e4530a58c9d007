"""The synthetic task is learnable by federated averaging: the demo and the e2e tests rely on it."""

import numpy as np

from clients.executors import Task
from clients.executors.models import evaluate, initial_weights
from clients.executors.torch_train import TorchTrainExecutor
from propius.devices import load_dataset_sizes
from propius.specs import TaskConfig


def test_fedavg_reaches_target_accuracy() -> None:
    config = TaskConfig()
    executor = TorchTrainExecutor()
    sizes = load_dataset_sizes()
    weights = initial_weights(config, seed=0)
    accuracy = []
    for round_ in range(1, 5):
        results = [
            executor.run(Task("j", round_, 0, config, weights, f"c{i}", {"dataset_size": sizes[i]}, 100 * round_ + i))
            for i in range(8)
        ]
        total = sum(r.num_samples for r in results)
        weights = {k: np.sum([r.update[k] * (r.num_samples / total) for r in results], axis=0) for k in weights}
        accuracy.append(evaluate(config, weights, n=1000)["accuracy"])
    assert accuracy[-1] >= 0.85, accuracy
    assert accuracy[0] < accuracy[-1]
