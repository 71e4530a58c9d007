"""How a shard process joins its group: the backend (NCCL when CUDA has a device per shard, else gloo) and
the device its tensors live on. One rule for the benchmark tier and the live shard pool, so every shard of
a group decides alike."""

from __future__ import annotations

from typing import Any

__all__ = ["default_backend", "shard_device"]


def default_backend(world: int) -> str:
    """``nccl`` when CUDA has at least ``world`` devices, else ``gloo``; torch must be installed."""
    import torch

    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo"


def shard_device(backend: str, rank: int) -> Any:
    """The torch device of shard ``rank``: its own GPU under NCCL (made current), the CPU under gloo."""
    import torch

    if backend != "nccl":
        return torch.device("cpu")
    device = torch.device(f"cuda:{rank % torch.cuda.device_count()}")
    torch.cuda.set_device(device)
    return device
