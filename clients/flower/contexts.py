"""Flower Contexts of (run, node): kept across rounds, in Redis when the daemon is given one.

A Flower node keeps ``context.state`` between the messages of a run. A Propius client may be served by
another worker process, or another daemon, in the next round; with ``PROPIUS_REDIS_URL`` set the
Context lives in Redis (Flower's protobuf encoding, TTL'd), so whichever process serves the node next
continues from the same state. Without it, the daemon process keeps Contexts in memory.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Protocol

import redis
from flwr.app import Context
from flwr.common.serde import context_from_proto, context_to_proto
from flwr.proto.message_pb2 import Context as ProtoContext

from propius.config import Settings
from propius.keys import global_key

__all__ = ["ContextStore", "MemoryContexts", "RedisContexts", "context_store", "decode_context", "encode_context"]

CONTEXT_TTL_S = 7 * 24 * 3600


class ContextStore(Protocol):
    """Encoded Contexts (:func:`encode_context`) by (run, node): the worker decodes them, not the daemon."""

    def load(self, run_id: int, node_id: int) -> bytes | None: ...

    def save(self, run_id: int, node_id: int, data: bytes) -> None: ...


def encode_context(context: Context) -> bytes:
    return context_to_proto(context).SerializeToString()


def decode_context(data: bytes) -> Context:
    return context_from_proto(ProtoContext.FromString(data))


class MemoryContexts:
    """Per process."""

    def __init__(self) -> None:
        self._data: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()

    def load(self, run_id: int, node_id: int) -> bytes | None:
        with self._lock:
            return self._data.get((run_id, node_id))

    def save(self, run_id: int, node_id: int, data: bytes) -> None:
        with self._lock:
            self._data[(run_id, node_id)] = data


class RedisContexts:
    def __init__(self, url: str, prefix: str, ttl_s: float = CONTEXT_TTL_S) -> None:
        self._redis = redis.Redis.from_url(url)
        self._prefix = prefix
        self._ttl_ms = int(ttl_s * 1000)

    def _key(self, run_id: int, node_id: int) -> str:
        return global_key(self._prefix, "flower", "context", run_id, node_id)

    def load(self, run_id: int, node_id: int) -> bytes | None:
        return self._redis.get(self._key(run_id, node_id))

    def save(self, run_id: int, node_id: int, data: bytes) -> None:
        self._redis.set(self._key(run_id, node_id), data, px=self._ttl_ms)


@cache
def context_store() -> ContextStore:
    """The process's store: Redis when ``PROPIUS_REDIS_URL`` is set, else memory."""
    settings = Settings()
    return RedisContexts(settings.redis_url, settings.key_prefix) if settings.redis_url else MemoryContexts()
