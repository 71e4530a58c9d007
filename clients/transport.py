"""The client's gRPC plumbing: one channel per process, chunked model fetch and update upload.

gRPC channels reconnect by themselves; the options below make them do it on the same 0.2 s -> 5 s
schedule the devices use, so a restarted control plane is found again quickly but not stampeded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass

import grpc

from clients.transport_mux import MultiplexedClients
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["CHUNK_BYTES", "MAX_MESSAGE_BYTES", "Stubs", "TransferError", "open_channel", "read_blob", "upload_messages"]

MAX_MESSAGE_BYTES = 64 << 20
CHUNK_BYTES = 1 << 20

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
    ("grpc.keepalive_time_ms", 30_000),
]

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class TransferError(Exception):
    """A streamed payload arrived incomplete or corrupted."""


def open_channel(server: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(server, options=CHANNEL_OPTIONS)


@dataclass(frozen=True)
class Stubs:
    clients: pb_grpc.ClientServiceStub | MultiplexedClients
    data: pb_grpc.DataServiceStub

    @classmethod
    def of(cls, channel: grpc.aio.Channel) -> Stubs:
        """One unary RPC per client call."""
        return cls(pb_grpc.ClientServiceStub(channel), pb_grpc.DataServiceStub(channel))

    @classmethod
    def multiplexed(cls, channel: grpc.aio.Channel) -> Stubs:
        """The devices of this process share one Multiplex stream for check-ins, accepts, heartbeats and
        releases (same answers as the unary RPCs, far less work per call on both ends); ``close()`` it."""
        return cls(MultiplexedClients(channel), pb_grpc.DataServiceStub(channel))

    async def close(self) -> None:
        if isinstance(self.clients, MultiplexedClients):
            await self.clients.close()


async def read_blob(chunks: AsyncIterable[pb.BlobChunk]) -> bytes:
    """Join a chunk stream; check the size and, when it is a sha256 hex digest, the digest of the first chunk."""
    buffer = bytearray()
    total_size, digest = 0, ""
    async for chunk in chunks:
        if not buffer and not total_size:
            total_size, digest = chunk.total_size, chunk.digest
        buffer += chunk.data
    if total_size and len(buffer) != total_size:
        raise TransferError(f"model stream ended at {len(buffer)} of {total_size} bytes")
    if _SHA256_HEX.fullmatch(digest) and hashlib.sha256(buffer).hexdigest() != digest:
        raise TransferError("model payload does not match its digest")
    return bytes(buffer)


def upload_messages(
    header: pb.UploadUpdateRequest, payload: bytes, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[pb.UploadUpdateRequest]:
    """The header message, then the payload in ``chunk_bytes`` pieces."""
    yield header
    view = memoryview(payload)
    for start in range(0, len(view), chunk_bytes):
        yield pb.UploadUpdateRequest(data=bytes(view[start : start + chunk_bytes]))
