"""The client's gRPC plumbing: one channel per process, chunked model fetch and update upload.

Channels are TLS unless plaintext is asked for (``ChannelSecurity.insecure``), see ``channel_credentials``.

gRPC channels reconnect by themselves; the options below make them do it on the same 0.2 s -> 5 s
schedule the devices use, so a restarted control plane is found again quickly but not stampeded.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass

import grpc

from clients.transport_mux import MultiplexedClients
from propius.config import ChannelSecurity
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["CHUNK_BYTES", "MAX_MESSAGE_BYTES", "Stubs", "TransferError", "channel_credentials", "open_channel",
           "read_blob", "upload_messages"]

log = logging.getLogger(__name__)

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


class _PlaintextNoted:
    """A client's plaintext is logged once per process, at INFO (the daemon's default level; the CLI's one-shot
    commands stay quiet): the control plane logs its own plaintext as a WARNING."""

    done = False


def channel_credentials(security: ChannelSecurity) -> grpc.ChannelCredentials | None:
    """TLS credentials from the PEM files ``security`` names (no CA: the system's roots); None for plaintext.
    A file that cannot be read raises ``OSError`` naming it."""
    if security.insecure:
        if not _PlaintextNoted.done:
            _PlaintextNoted.done = True
            log.info("plaintext gRPC to the control plane (insecure): traffic and credentials are readable "
                     "on the network")
        return None
    read = lambda path: path.read_bytes() if path is not None else None  # noqa: E731
    return grpc.ssl_channel_credentials(root_certificates=read(security.tls_ca), private_key=read(security.tls_key),
                                        certificate_chain=read(security.tls_cert))


def open_channel(server: str, security: ChannelSecurity | None = None,
                 options: list[tuple[str, int]] | None = None) -> grpc.aio.Channel:
    """An asyncio channel to ``server``; ``security`` None: from the ``PROPIUS_TLS_*``/``PROPIUS_INSECURE``
    environment."""
    credentials = channel_credentials(security if security is not None else ChannelSecurity())
    options = CHANNEL_OPTIONS if options is None else options
    if credentials is None:
        return grpc.aio.insecure_channel(server, options=options)
    return grpc.aio.secure_channel(server, credentials, options=options)


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
