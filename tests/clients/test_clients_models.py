import subprocess
import sys

import numpy as np
import pytest
import torch

from clients.codec import decode, encode
from clients.executors.architecture import num_params, weight_shapes
from clients.executors.models import (
    build_model,
    evaluate,
    initial_weights,
    load_numpy,
    synthetic_dataset,
    to_numpy,
)
from propius.specs import TaskConfig

CONFIG = TaskConfig()


def test_numpy_round_trip_is_exact_float32_and_owned() -> None:
    weights = initial_weights(CONFIG, seed=3)
    assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in weights.values())
    model = build_model(CONFIG)
    load_numpy(model, weights)
    back = to_numpy(model)
    assert back.keys() == weights.keys()
    assert all(np.array_equal(back[k], weights[k]) for k in weights)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert np.array_equal(back["0.weight"], weights["0.weight"])  # a copy, not a view of the module


def test_weights_survive_the_wire_codec() -> None:
    weights = initial_weights(CONFIG, seed=0)
    decoded = decode(encode(weights))
    assert all(np.array_equal(decoded[k], weights[k]) for k in weights)


def test_initial_weights_are_seeded_and_leave_global_rng_alone() -> None:
    torch.manual_seed(5)
    expected = torch.rand(1)
    torch.manual_seed(5)
    a, b = initial_weights(CONFIG, 1), initial_weights(CONFIG, 1)
    assert torch.rand(1) == expected
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["0.weight"], initial_weights(CONFIG, 2)["0.weight"])


def test_options_shape_the_model() -> None:
    config = TaskConfig(options={"in_dim": 5, "hidden": 7, "classes": 3})
    weights = initial_weights(config, 0)
    assert weights["0.weight"].shape == (7, 5) and weights["2.weight"].shape == (3, 7)
    features, labels = synthetic_dataset(config, seed=0, n=10)
    assert features.shape == (10, 5) and int(labels.max()) < 3


def test_unknown_model_and_bad_option_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        build_model(TaskConfig(model="resnet"))
    with pytest.raises(ValueError, match="hidden"):
        build_model(TaskConfig(options={"hidden": 0}))


def test_data_distribution_depends_only_on_data_seed() -> None:
    features_a, labels_a = synthetic_dataset(CONFIG, seed=1, n=4000)
    features_b, labels_b = synthetic_dataset(CONFIG, seed=2, n=4000)
    assert not torch.equal(features_a, features_b)
    means_a = torch.stack([features_a[labels_a == c].mean(0) for c in range(4)])
    means_b = torch.stack([features_b[labels_b == c].mean(0) for c in range(4)])
    assert torch.allclose(means_a, means_b, atol=0.15)
    other, other_labels = synthetic_dataset(TaskConfig(options={"data_seed": 1}), seed=1, n=4000)
    means_other = torch.stack([other[other_labels == c].mean(0) for c in range(4)])
    assert not torch.allclose(means_a, means_other, atol=0.15)


def test_untrained_model_is_near_chance() -> None:
    result = evaluate(CONFIG, initial_weights(CONFIG, 0), n=500)
    assert set(result) == {"loss", "accuracy"}
    assert result["accuracy"] < 0.7


@pytest.mark.parametrize("options", [{}, {"in_dim": 5, "hidden": 7, "classes": 3}])
def test_weight_shapes_are_the_models_without_torch(options) -> None:
    config = TaskConfig(options=options)
    weights = initial_weights(config, seed=0)
    assert weight_shapes(config) == {name: array.shape for name, array in weights.items()}
    assert list(weight_shapes(config)) == list(weights)  # state-dict order
    assert num_params(config) == sum(array.size for array in weights.values())
    with pytest.raises(ValueError, match="unknown model"):
        weight_shapes(TaskConfig(model="resnet"))
    code = "import sys, clients.executors.architecture; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
