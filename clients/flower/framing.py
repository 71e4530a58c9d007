"""Length-prefixed frames over a pipe: how a daemon and its ClientApp worker exchange Flower bytes."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import BinaryIO

__all__ = ["READY", "read_frames", "write_frames"]

_LENGTH = struct.Struct("<Q")
READY = b"ready"  # a worker's first frame: its app is loaded


def write_frames(stream: BinaryIO, frames: Sequence[bytes]) -> None:
    stream.write(b"".join(_LENGTH.pack(len(frame)) + frame for frame in frames))
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"stream ended after {len(data)} of {size} bytes")
    return data


def read_frames(stream: BinaryIO, count: int) -> list[bytes] | None:
    """``count`` frames, or None when the stream ended cleanly before the first."""
    head = stream.read(_LENGTH.size)
    if not head:
        return None
    frames = []
    for index in range(count):
        if index:
            head = _read_exact(stream, _LENGTH.size)
        elif len(head) != _LENGTH.size:
            raise EOFError("stream ended inside a frame header")
        (size,) = _LENGTH.unpack(head)
        frames.append(_read_exact(stream, size))
    return frames
