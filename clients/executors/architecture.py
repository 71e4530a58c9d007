"""The models' architectures without torch: their options and the name and shape of every weight tensor.

:mod:`clients.executors.models` builds the torch modules from these; what only needs a model's size (the
trace export's parameter count, in the control plane's process) reads it here without importing torch.
"""

from __future__ import annotations

from math import prod

from propius.specs import TaskConfig

__all__ = ["KNOWN_MODELS", "int_option", "mlp_dims", "num_params", "require_known_model", "weight_shapes"]

KNOWN_MODELS = ("mlp",)


def int_option(config: TaskConfig, name: str, default: int, minimum: int = 1) -> int:
    """``config.options[name]`` as an integer ``>= minimum``; ValueError otherwise."""
    value = config.options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < minimum:
        raise ValueError(f"task.options.{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def mlp_dims(config: TaskConfig) -> tuple[int, int, int]:
    """``(in_dim, hidden, classes)`` of the ``mlp`` model and the synthetic task."""
    return (
        int_option(config, "in_dim", 16),
        int_option(config, "hidden", 32),
        int_option(config, "classes", 4),
    )


def require_known_model(config: TaskConfig) -> None:
    if config.model not in KNOWN_MODELS:
        raise ValueError(f"task.model: unknown model {config.model!r}; known: {', '.join(map(repr, KNOWN_MODELS))}")


def weight_shapes(config: TaskConfig) -> dict[str, tuple[int, ...]]:
    """The model's state dict as names and shapes, in its order (``Linear -> ReLU -> Linear``)."""
    require_known_model(config)
    in_dim, hidden, classes = mlp_dims(config)
    return {"0.weight": (hidden, in_dim), "0.bias": (hidden,), "2.weight": (classes, hidden), "2.bias": (classes,)}


def num_params(config: TaskConfig) -> int:
    return sum(prod(shape) for shape in weight_shapes(config).values())
