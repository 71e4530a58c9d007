"""A real Redis connection (bytes, as the data plane needs) and a fresh job namespace per test.

``redis_url`` comes from the root conftest: ``PROPIUS_TEST_REDIS_URL``, default the machine's Redis.
Each test's keys are deleted afterwards by SCAN, never by FLUSHALL.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from propius.keys import job_key


@pytest.fixture
async def raw_redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def namespace(raw_redis: aioredis.Redis) -> AsyncIterator[str]:
    namespace = job_key(f"test-{uuid.uuid4().hex}", "dp")
    yield namespace
    keys = [key async for key in raw_redis.scan_iter(match=namespace + "*", count=1000)]
    for start in range(0, len(keys), 500):
        await raw_redis.delete(*keys[start: start + 500])
