"""Length-prefixed frames between the control plane and its live aggregator shards: a JSON header and raw bytes.

A frame is ``<u32 header length><u64 body length>``, the header (a JSON object, at most
:data:`MAX_HEADER_BYTES`), then the body (safetensors bytes or nothing, at most :data:`MAX_BODY_BYTES`).
Nothing is pickled: a shard reads numbers and names from JSON and tensors through the data plane's own
safetensors reader. The sender side is asyncio (the control plane), the receiver side a blocking socket (a
shard process, which does nothing else while it waits).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "FrameError", "read_frame", "recv_frame", "send_frame",
           "write_frame"]

MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 4 << 30
_PREFIX = struct.Struct("<IQ")


class FrameError(ValueError):
    """A frame over the bounds, or a header that is not a JSON object."""


def _pack(header: dict[str, Any], body_len: int) -> bytes:
    text = json.dumps(header).encode()
    if len(text) > MAX_HEADER_BYTES or body_len > MAX_BODY_BYTES:
        raise FrameError(f"frame over bounds: header {len(text)} B, body {body_len} B")
    return _PREFIX.pack(len(text), body_len) + text


def _header(text: bytes) -> dict[str, Any]:
    header = json.loads(text)
    if not isinstance(header, dict):
        raise FrameError("a frame header must be a JSON object")
    return header


def _check(header_len: int, body_len: int) -> None:
    if header_len > MAX_HEADER_BYTES or body_len > MAX_BODY_BYTES:
        raise FrameError(f"frame over bounds: header {header_len} B, body {body_len} B")


async def write_frame(writer: asyncio.StreamWriter, header: dict[str, Any], body: bytes | memoryview = b"") -> None:
    writer.write(_pack(header, len(body)))
    if body:
        writer.write(body)
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes]:
    """One frame; ``asyncio.IncompleteReadError`` when the peer is gone."""
    header_len, body_len = _PREFIX.unpack(await reader.readexactly(_PREFIX.size))
    _check(header_len, body_len)
    header = _header(await reader.readexactly(header_len))
    return header, await reader.readexactly(body_len) if body_len else b""


def _recv_exactly(sock: socket.socket, size: int) -> bytearray | None:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return buffer


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], bytearray] | None:
    """One frame from a blocking socket; ``None`` at end of stream (the control plane closed it or died)."""
    prefix = _recv_exactly(sock, _PREFIX.size)
    if prefix is None:
        return None
    header_len, body_len = _PREFIX.unpack(prefix)
    _check(header_len, body_len)
    text = _recv_exactly(sock, header_len)
    body = _recv_exactly(sock, body_len) if body_len else bytearray()
    if text is None or body is None:
        return None
    return _header(bytes(text)), body


def send_frame(sock: socket.socket, header: dict[str, Any], body: bytes = b"") -> None:
    sock.sendall(_pack(header, len(body)))
    if body:
        sock.sendall(body)
