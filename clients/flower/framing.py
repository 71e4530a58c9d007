"""Length-prefixed frames over a pipe: how a daemon and its ClientApp worker exchange Flower bytes.

A request is a JSON header (the message id, the ids of the objects that follow, and what the worker
needs to build the node's Context), the deflated Flower objects the message inflates from, and the
node's Context (Flower's protobuf encoding; empty: the node has none yet). A reply is the same shape:
the reply's id and objects, deflated and id-stamped by the worker, and the updated Context (empty:
unchanged). The daemon only moves bytes; the worker does the Flower (de)serialisation, in parallel
with the other workers.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

__all__ = ["READY", "Exchange", "read_exchange", "read_frames", "write_exchange", "write_frames"]

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


@dataclass(frozen=True)
class Exchange:
    """One request or reply: a message by id, the objects it inflates from, a Context, and header fields."""

    message_id: str
    objects: Mapping[str, bytes]
    context: bytes = b""
    header: Mapping[str, Any] = field(default_factory=dict)


def write_exchange(stream: BinaryIO, exchange: Exchange) -> None:
    head = {**exchange.header, "message_id": exchange.message_id, "object_ids": list(exchange.objects)}
    write_frames(stream, [json.dumps(head).encode(), *exchange.objects.values(), exchange.context])


def read_exchange(stream: BinaryIO) -> Exchange | None:
    """The next exchange, or None when the stream ended cleanly before it."""
    first = read_frames(stream, 1)
    if first is None:
        return None
    head = json.loads(first[0])
    ids = head.pop("object_ids")
    rest = read_frames(stream, len(ids) + 1)
    if rest is None:
        raise EOFError("stream ended inside an exchange")
    return Exchange(head.pop("message_id"), dict(zip(ids, rest[:-1], strict=True)), rest[-1], head)
