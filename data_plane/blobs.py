"""Content-addressed, chunked blobs in plain Redis (no modules).

A model is stored once per content (sha256), as fixed-size chunks, so a 1 GB model never becomes one
huge Redis value and a broadcast to K clients is one copy, not K. The meta key is written last: a
reader either sees a complete blob or none.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import redis.asyncio as aioredis

__all__ = ["BlobRef", "BlobStore"]


@dataclass(frozen=True)
class BlobRef:
    digest: str
    size: int
    chunks: int


class BlobStore:
    def __init__(self, redis: aioredis.Redis, *, chunk_bytes: int = 1 << 20, ttl_s: float = 86400.0,
                 batch: int = 8) -> None:
        self._redis = redis
        self._chunk = chunk_bytes
        self._ttl_ms = int(ttl_s * 1000)
        self._batch = batch  # chunks per round trip: bounds memory held in a pipeline

    @staticmethod
    def _meta(namespace: str, digest: str) -> str:
        return f"{namespace}:blob:{digest}"

    @staticmethod
    def _part(namespace: str, digest: str, index: int) -> str:
        return f"{namespace}:blob:{digest}:{index}"

    async def put(self, namespace: str, data: bytes | bytearray | memoryview) -> BlobRef:
        view = memoryview(data)
        digest = hashlib.sha256(view).hexdigest()
        meta = self._meta(namespace, digest)
        chunks = max(1, -(-len(view) // self._chunk))
        if await self._redis.exists(meta):
            await self._touch(namespace, digest, chunks)
            return BlobRef(digest, len(view), chunks)
        for start in range(0, chunks, self._batch):
            async with self._redis.pipeline(transaction=False) as pipe:
                for index in range(start, min(start + self._batch, chunks)):
                    part = bytes(view[index * self._chunk: (index + 1) * self._chunk])
                    pipe.set(self._part(namespace, digest, index), part, px=self._ttl_ms)
                await pipe.execute()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(meta, mapping={"size": len(view), "chunks": chunks})
            pipe.pexpire(meta, self._ttl_ms)
            await pipe.execute()
        return BlobRef(digest, len(view), chunks)

    async def _touch(self, namespace: str, digest: str, chunks: int) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.pexpire(self._meta(namespace, digest), self._ttl_ms)
            for index in range(chunks):
                pipe.pexpire(self._part(namespace, digest, index), self._ttl_ms)
            await pipe.execute()

    async def ref(self, namespace: str, digest: str) -> BlobRef | None:
        meta = await self._redis.hgetall(self._meta(namespace, digest))
        if not meta:
            return None
        get = lambda key: meta.get(key) or meta.get(key.encode())  # noqa: E731 - bytes or str clients
        return BlobRef(digest, int(get("size")), int(get("chunks")))

    async def iter_chunks(self, namespace: str, digest: str) -> AsyncIterator[bytes]:
        ref = await self.ref(namespace, digest)
        if ref is None:
            raise KeyError(f"blob {digest} not found")
        for start in range(0, ref.chunks, self._batch):
            keys = [self._part(namespace, digest, i) for i in range(start, min(start + self._batch, ref.chunks))]
            parts = await self._redis.mget(keys)
            for key, part in zip(keys, parts, strict=True):
                if part is None:
                    raise KeyError(f"blob {digest} lost chunk {key}")
                yield part if isinstance(part, bytes) else part.encode()

    async def get(self, namespace: str, digest: str) -> bytes:
        return b"".join([part async for part in self.iter_chunks(namespace, digest)])

    async def delete(self, namespace: str, digest: str) -> None:
        ref = await self.ref(namespace, digest)
        if ref is not None:
            await self._redis.delete(self._meta(namespace, digest),
                                     *(self._part(namespace, digest, i) for i in range(ref.chunks)))
