"""The lean Redis pipe of the binding hot path: ordered replies, errors in place, script loading, reconnects."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from control_plane.redis_pipe import RedisPipe


@pytest.fixture
async def pipe(redis_url):
    made = RedisPipe(redis_url, timeout_s=5.0)
    yield made
    made.close()


async def test_concurrent_callers_get_their_own_replies_in_order(pipe, key_prefix):
    counter = f"{key_prefix}:counter"

    async def caller(i: int) -> tuple[int, list]:
        key = f"{key_prefix}:k{i}"
        return i, await pipe.execute_many([("INCR", counter), ("SET", key, i), ("GET", key)])

    results = await asyncio.gather(*(caller(i) for i in range(300)))
    assert sorted(replies[0] for _, replies in results) == list(range(1, 301))  # every INCR once, none lost
    assert all(replies[1:] == ["OK", str(i)] for i, replies in results)


async def test_an_error_reply_stays_in_its_slot_and_the_connection_keeps_serving(pipe, key_prefix):
    key = f"{key_prefix}:hash"
    replies = await pipe.execute_many([("HSET", key, "f", "v"), ("INCR", key), ("HGET", key, "f")])
    assert replies[0] == 1 and isinstance(replies[1], ResponseError) and replies[2] == "v"
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await pipe.execute("INCR", key)
    assert await pipe.execute("HGET", key, "f") == "v"


async def test_scripts_are_loaded_on_first_use(pipe, key_prefix):
    # A script Redis has never seen (unique source): EVALSHA answers NOSCRIPT, the pipe loads and reruns it.
    sha = pipe.script(f"-- {uuid.uuid4().hex}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert await pipe.evalsha(sha, [f"{key_prefix}:n"], [5]) == 5
    assert await pipe.evalsha(sha, [f"{key_prefix}:n"], [2]) == 7


async def test_a_lost_connection_fails_its_calls_and_the_next_call_reconnects(pipe, redis_url, key_prefix):
    first_id = await pipe.execute("CLIENT", "ID")
    admin = aioredis.Redis.from_url(redis_url)
    try:
        blocked = asyncio.ensure_future(pipe.execute("BLPOP", f"{key_prefix}:never", 5))
        await asyncio.sleep(0.1)
        await admin.client_kill_filter(_id=first_id)
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(blocked, 3.0)
    finally:
        await admin.aclose()
    assert await pipe.execute("SET", f"{key_prefix}:after", "1") == "OK"
    assert await pipe.execute("CLIENT", "ID") != first_id


async def test_a_reply_that_never_comes_times_out(redis_url, key_prefix):
    slow = RedisPipe(redis_url, timeout_s=0.3)
    try:
        with pytest.raises(RedisConnectionError, match="no reply"):
            await asyncio.wait_for(slow.execute("BLPOP", f"{key_prefix}:never", 5), 3.0)
        assert await slow.execute("PING") == "PONG"
    finally:
        slow.close()
