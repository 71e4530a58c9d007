"""A real Redis connection (bytes) and a unique namespace per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis


@pytest.fixture
async def raw_redis(redis_url) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def namespace(key_prefix) -> str:
    return key_prefix + ":{job:test}"
