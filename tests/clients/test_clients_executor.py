import numpy as np
import pytest

from clients.executors import Task, TaskResult, UnknownExecutor, load_executor
from clients.executors.models import initial_weights, synthetic_dataset
from clients.executors.torch_train import TorchTrainExecutor
from propius.specs import TaskConfig

CONFIG = TaskConfig(local_steps=20)


def task(seed: int, model: dict[str, np.ndarray] | None = None, size: float = 128) -> Task:
    return Task(
        job_id="j", round=1, attempt=0, config=CONFIG, model=model or initial_weights(CONFIG, 0),
        client_id="c", private={"dataset_size": size}, seed=seed,
    )


def test_registry_loads_torch_train() -> None:
    assert isinstance(load_executor("torch-train"), TorchTrainExecutor)


def test_registry_names_unknown_executor_and_known_ones() -> None:
    with pytest.raises(UnknownExecutor, match=r"'flower-app'.*torch-train"):
        load_executor("flower-app")


def test_same_seed_same_update() -> None:
    a, b = TorchTrainExecutor().run(task(7)), TorchTrainExecutor().run(task(7))
    assert all(np.array_equal(a.update[k], b.update[k]) for k in a.update)
    assert a.metrics == b.metrics
    other = TorchTrainExecutor().run(task(8))
    assert not np.array_equal(a.update["0.weight"], other.update["0.weight"])


def test_training_returns_weights_and_improves_local_loss() -> None:
    import torch
    from torch.nn import functional as F

    from clients.executors.models import build_model, load_numpy

    start = initial_weights(CONFIG, 0)
    result: TaskResult = TorchTrainExecutor().run(task(3, start, size=200))
    assert result.num_samples == 200
    assert set(result.metrics) == {"loss", "accuracy"}
    assert result.update.keys() == start.keys()
    features, labels = synthetic_dataset(CONFIG, seed=3, n=200)

    def loss(weights: dict[str, np.ndarray]) -> float:
        model = build_model(CONFIG)
        load_numpy(model, weights)
        with torch.no_grad():
            return F.cross_entropy(model(features), labels).item()

    assert loss(result.update) < loss(start) - 0.1


def test_private_dataset_size_defaults() -> None:
    bare = Task("j", 1, 0, CONFIG, initial_weights(CONFIG, 0), "c", {}, seed=1)
    assert TorchTrainExecutor().run(bare).num_samples == 256
