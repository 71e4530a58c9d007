"""Models and the synthetic learning task, shared by the job side and the executor so both agree.

The job builds its initial weights and measures test accuracy with the very code a client trains
with, so a weight layout or data distribution can never differ between the two.

The task: Gaussian blobs, one centre per class. The centres depend only on ``options["data_seed"]``,
so every client's local data (drawn with its own seed) comes from one distribution, and a held-out test
set drawn with :data:`TEST_SEED` measures what federated averaging achieved.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from clients.executors.architecture import int_option, mlp_dims, require_known_model
from propius.specs import TaskConfig

__all__ = [
    "TEST_SEED",
    "build_model",
    "evaluate",
    "initial_weights",
    "load_numpy",
    "synthetic_dataset",
    "to_numpy",
]

TEST_SEED = 1_000_003
"""Seed of the held-out test set; client seeds are derived hashes, so they do not hit it in practice."""

_CENTRE_RADIUS = 2.6
"""Distance of each class centre from the origin, in units of the noise: with orthogonal centres the
best possible accuracy is about 0.92, so the task needs a few rounds, not one step."""


def build_model(config: TaskConfig) -> nn.Module:
    """The model named by ``config.model``; only ``mlp`` (options in_dim, hidden, classes) exists. Its weights
    are :func:`clients.executors.architecture.weight_shapes`."""
    require_known_model(config)
    in_dim, hidden, classes = mlp_dims(config)
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def initial_weights(config: TaskConfig, seed: int) -> dict[str, np.ndarray]:
    """Seeded initial weights, without disturbing the caller's global torch RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return to_numpy(build_model(config))


def to_numpy(module: nn.Module) -> dict[str, np.ndarray]:
    """The state dict as float32 C-contiguous copies (safetensors needs contiguous, owned arrays)."""
    return {
        name: np.array(tensor.detach().cpu().numpy(), dtype=np.float32, order="C")
        for name, tensor in module.state_dict().items()
    }


def load_numpy(module: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Load weights into ``module``; names and shapes must match exactly (strict)."""
    # A copy: decoded payloads are read-only views of the received bytes.
    state = {name: torch.from_numpy(np.array(array, dtype=np.float32, order="C")) for name, array in weights.items()}
    module.load_state_dict(state, strict=True)


def _data_seed(config: TaskConfig) -> int:
    return int_option(config, "data_seed", 0, minimum=0)


def _centres(config: TaskConfig) -> np.ndarray:
    """Orthogonal centres (random directions when classes exceed dimensions): every data seed gets an
    equally hard task."""
    in_dim, _, classes = mlp_dims(config)
    directions = np.random.default_rng((_data_seed(config), 0)).standard_normal((in_dim, classes))
    if classes <= in_dim:
        directions, _ = np.linalg.qr(directions)
    else:
        directions /= np.linalg.norm(directions, axis=0)
    return directions.T * _CENTRE_RADIUS


def synthetic_dataset(config: TaskConfig, seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples (features float32, labels int64) of the task, drawn with ``seed``."""
    centres = _centres(config)
    rng = np.random.default_rng((_data_seed(config), 1, seed))
    labels = rng.integers(0, centres.shape[0], size=n)
    features = centres[labels] + rng.standard_normal((n, centres.shape[1]))
    return torch.from_numpy(features.astype(np.float32)), torch.from_numpy(labels.astype(np.int64))


def evaluate(
    config: TaskConfig, weights: dict[str, np.ndarray], n: int = 2000, seed: int = TEST_SEED
) -> dict[str, float]:
    """Loss and accuracy of ``weights`` on ``n`` held-out samples."""
    model = build_model(config)
    load_numpy(model, weights)
    features, labels = synthetic_dataset(config, seed, n)
    with torch.no_grad():
        logits = model(features)
        loss = F.cross_entropy(logits, labels).item()
        accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
    return {"loss": loss, "accuracy": accuracy}
