"""What both ends of ``ClientService.Multiplex`` share: cutting pending messages into batches."""

from __future__ import annotations

from typing import Protocol, TypeVar

__all__ = ["take_batch"]


class _Sized(Protocol):
    def ByteSize(self) -> int: ...  # noqa: N802 - protobuf's name


M = TypeVar("M", bound=_Sized)


def take_batch(pending: list[M], max_bytes: int) -> list[M]:
    """Remove and return the messages for one batch: all of them, or as many as fit ``max_bytes``
    (at least one, so an oversized message still goes out alone)."""
    size = 0
    for i, message in enumerate(pending):
        size += message.ByteSize() + 8
        if size > max_bytes and i > 0:
            batch = pending[:i]
            del pending[:i]
            return batch
    batch = pending[:]
    pending.clear()
    return batch
