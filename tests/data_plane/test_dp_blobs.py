"""Content-addressed chunked blobs on the real Redis."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from data_plane.blobs import BlobStore


async def _keys(raw_redis, namespace: str) -> set[bytes]:
    return {key async for key in raw_redis.scan_iter(match=namespace + ":*", count=1000)}


async def test_multi_chunk_round_trip(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=1000, ttl_s=60, batch=2)
    data = np.random.default_rng(0).integers(0, 256, 5500, dtype=np.uint8).tobytes()
    ref = await store.put(namespace, data)
    assert (ref.size, ref.chunks, ref.digest) == (5500, 6, hashlib.sha256(data).hexdigest())
    assert await store.get(namespace, ref.digest) == data
    chunks = [chunk async for chunk in store.iter_chunks(namespace, ref.digest)]
    assert [len(c) for c in chunks] == [1000] * 5 + [500]
    assert 0 < await raw_redis.pttl(f"{namespace}:blob:{ref.digest}:0") <= 60_000


async def test_same_content_is_stored_once(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=100)
    data = b"x" * 350
    first = await store.put(namespace, data)
    keys = await _keys(raw_redis, namespace)
    second = await store.put(namespace, bytes(data))
    assert first == second
    assert await _keys(raw_redis, namespace) == keys and len(keys) == 5  # 4 chunks + meta


async def test_missing_blob_and_lost_chunk(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=10)
    assert await store.ref(namespace, "0" * 64) is None
    with pytest.raises(KeyError):
        await store.get(namespace, "0" * 64)
    ref = await store.put(namespace, b"y" * 35)
    await raw_redis.delete(f"{namespace}:blob:{ref.digest}:2")
    with pytest.raises(KeyError, match="lost chunk"):
        await store.get(namespace, ref.digest)
    await store.delete(namespace, ref.digest)
    assert await _keys(raw_redis, namespace) == set()
