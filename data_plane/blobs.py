"""Content-addressed, chunked blobs in plain Redis (no modules).

A model is stored once per content (sha256) as fixed-size chunks, so a 1 GB model never becomes one huge
Redis value, publishing the same model twice stores it once, and a broadcast to K clients is one copy,
not K. The meta hash is written last and expires first: a reader that sees it finds every chunk.

Keys (``namespace`` is a job key prefix such as ``propius:{job:<id>}``, so one job's blobs share a slot)::

    {namespace}:blob:{digest}        hash  size, chunks
    {namespace}:blob:{digest}:{i}    string, chunk i

The store needs a bytes client (``decode_responses=False``): chunks are binary.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import redis.asyncio as aioredis

__all__ = ["BlobRef", "BlobStore"]

_GRACE_MS = 60_000  # chunks outlive their meta by this much: a read that began just before expiry completes


@dataclass(frozen=True)
class BlobRef:
    digest: str  # sha256 hex of the content
    size: int
    chunks: int


class BlobStore:
    def __init__(self, redis: aioredis.Redis, *, chunk_bytes: int = 1 << 20, ttl_s: float = 86400.0,
                 batch: int = 8) -> None:
        if chunk_bytes < 1 or batch < 1:
            raise ValueError("chunk_bytes and batch must be positive")
        self._redis = redis
        self._chunk = chunk_bytes
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._batch = batch  # chunks per round trip: bounds what one pipeline holds to batch * chunk_bytes

    @staticmethod
    def _meta(namespace: str, digest: str) -> str:
        return f"{namespace}:blob:{digest}"

    @staticmethod
    def _part(namespace: str, digest: str, index: int) -> str:
        return f"{namespace}:blob:{digest}:{index}"

    async def put(self, namespace: str, data: bytes | bytearray | memoryview) -> BlobRef:
        """Store ``data`` (which must not change meanwhile) unless the same content is already there."""
        view = memoryview(data).cast("B")
        digest = await asyncio.to_thread(lambda: hashlib.sha256(view).hexdigest())  # ~1 s per GB: off the loop
        ref = BlobRef(digest, len(view), max(1, -(-len(view) // self._chunk)))
        if await self._refresh(namespace, ref):
            return ref
        for start in range(0, ref.chunks, self._batch):
            async with self._redis.pipeline(transaction=False) as pipe:
                for index in range(start, min(start + self._batch, ref.chunks)):
                    # A memoryview slice goes to the socket without a copy.
                    pipe.set(self._part(namespace, digest, index),
                             view[index * self._chunk: (index + 1) * self._chunk], px=self._ttl_ms + _GRACE_MS)
                await pipe.execute()
        async with self._redis.pipeline(transaction=True) as pipe:  # never a meta without its TTL
            pipe.hset(self._meta(namespace, digest), mapping={"size": ref.size, "chunks": ref.chunks})
            pipe.pexpire(self._meta(namespace, digest), self._ttl_ms)
            await pipe.execute()
        return ref

    async def _refresh(self, namespace: str, ref: BlobRef) -> bool:
        """Extend a stored blob's TTL; False when it is absent or lost a chunk (then it is written anew)."""
        if not await self._redis.pexpire(self._meta(namespace, ref.digest), self._ttl_ms):
            return False
        async with self._redis.pipeline(transaction=False) as pipe:
            for index in range(ref.chunks):
                pipe.pexpire(self._part(namespace, ref.digest, index), self._ttl_ms + _GRACE_MS)
            return all(await pipe.execute())

    async def ref(self, namespace: str, digest: str) -> BlobRef | None:
        size, chunks = await self._redis.hmget(self._meta(namespace, digest), ["size", "chunks"])
        if size is None or chunks is None:
            return None
        return BlobRef(digest, int(size), int(chunks))

    async def iter_chunks(self, namespace: str, digest: str) -> AsyncIterator[bytes]:
        """The blob's chunks in order, ``batch`` per round trip; KeyError if it is missing or incomplete."""
        ref = await self.ref(namespace, digest)
        if ref is None:
            raise KeyError(f"blob {digest} not found")
        seen = 0
        for start in range(0, ref.chunks, self._batch):
            keys = [self._part(namespace, digest, i) for i in range(start, min(start + self._batch, ref.chunks))]
            for key, part in zip(keys, await self._redis.mget(keys), strict=True):
                if part is None:
                    raise KeyError(f"blob {digest} lost chunk {key}")
                seen += len(part)
                yield part
        if seen != ref.size:
            raise KeyError(f"blob {digest} holds {seen} bytes, its meta says {ref.size}")

    async def get(self, namespace: str, digest: str) -> bytes:
        return b"".join([part async for part in self.iter_chunks(namespace, digest)])

    async def delete(self, namespace: str, digest: str) -> None:
        """Remove the meta first, so no reader starts on a blob whose chunks are going."""
        ref = await self.ref(namespace, digest)
        if ref is None:
            return
        await self._redis.delete(self._meta(namespace, digest))
        for start in range(0, ref.chunks, 512):
            await self._redis.delete(*(self._part(namespace, digest, i)
                                       for i in range(start, min(start + 512, ref.chunks))))
