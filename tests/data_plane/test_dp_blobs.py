"""Content-addressed chunked blobs on the real Redis."""

from __future__ import annotations

import hashlib

import pytest

from data_plane.blobs import BlobStore


async def _keys(raw_redis, namespace: str) -> set[bytes]:
    return {key async for key in raw_redis.scan_iter(match=namespace + "*", count=1000)}


async def test_multi_chunk_round_trip_with_ttl(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=1000, ttl_s=60, batch=2)
    data = bytes(range(256)) * 21 + b"tail" * 29  # 5,492 bytes: 5.5 chunks
    ref = await store.put(namespace, bytearray(data))
    assert (ref.size, ref.chunks, ref.digest) == (len(data), 6, hashlib.sha256(data).hexdigest())
    assert await store.ref(namespace, ref.digest) == ref
    assert await store.get(namespace, ref.digest) == data
    assert [len(c) async for c in store.iter_chunks(namespace, ref.digest)] == [1000] * 5 + [492]
    meta_ttl = await raw_redis.pttl(f"{namespace}:blob:{ref.digest}")
    assert 0 < meta_ttl <= 60_000
    for index in range(6):  # chunks outlive the meta, so a reader that saw the meta finds them all
        assert await raw_redis.pttl(f"{namespace}:blob:{ref.digest}:{index}") > meta_ttl


async def test_empty_blob(raw_redis, namespace):
    store = BlobStore(raw_redis)
    ref = await store.put(namespace, memoryview(b""))
    assert ref.size == 0 and await store.get(namespace, ref.digest) == b""


async def test_same_content_is_stored_once_and_refreshed(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=100, ttl_s=60)
    data = b"x" * 350
    first = await store.put(namespace, data)
    keys = await _keys(raw_redis, namespace)
    assert len(keys) == 5  # 4 chunks + meta
    await raw_redis.pexpire(f"{namespace}:blob:{first.digest}", 1000)
    second = await store.put(namespace, bytes(data))
    assert first == second and await _keys(raw_redis, namespace) == keys
    assert await raw_redis.pttl(f"{namespace}:blob:{first.digest}") > 50_000


async def test_missing_lost_and_repaired(raw_redis, namespace):
    store = BlobStore(raw_redis, chunk_bytes=10)
    assert await store.ref(namespace, "0" * 64) is None
    with pytest.raises(KeyError):
        await store.get(namespace, "0" * 64)
    with pytest.raises(KeyError):
        [chunk async for chunk in store.iter_chunks(namespace, "0" * 64)]
    data = b"y" * 35
    ref = await store.put(namespace, data)
    await raw_redis.delete(f"{namespace}:blob:{ref.digest}:2")
    with pytest.raises(KeyError, match="lost chunk"):
        await store.get(namespace, ref.digest)
    assert await store.put(namespace, data) == ref  # a lost chunk is written again, not just refreshed
    assert await store.get(namespace, ref.digest) == data
    await store.delete(namespace, ref.digest)
    assert await _keys(raw_redis, namespace) == set()
    await store.delete(namespace, ref.digest)  # deleting twice is fine
