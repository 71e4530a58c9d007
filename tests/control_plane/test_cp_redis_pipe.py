"""The lean Redis pipe of the binding hot path: ordered replies, errors in place, script loading, reconnects."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from control_plane.redis_client import connect
from control_plane.redis_pipe import RedisPipe
from tests.conftest import REDIS_MODE

# The pipe serves one server; on a Redis Cluster the control plane uses redis-py (pipe_supported is False).
single_server = pytest.mark.skipif(REDIS_MODE == "cluster", reason="the lean pipe speaks to one Redis server")


@pytest.fixture
async def pipe(redis_url):
    if REDIS_MODE == "cluster":
        pytest.skip("the lean pipe speaks to one Redis server")
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


async def test_a_lost_connection_fails_its_calls_and_the_next_call_reconnects(pipe, redis_url, key_prefix, wait_for):
    first_id = await pipe.execute("CLIENT", "ID")
    admin = connect(redis_url, decode_responses=True, max_connections=4)

    async def blocking() -> bool:
        return any("b" in client["flags"] for client in await admin.client_list(client_id=[first_id]))

    try:
        blocked = asyncio.ensure_future(pipe.execute("BLPOP", f"{key_prefix}:never", 5))
        await wait_for(blocking, what="the pipe's connection to block in BLPOP")
        await admin.client_kill_filter(_id=first_id)
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(blocked, 3.0)
    finally:
        await admin.aclose()
    assert await pipe.execute("SET", f"{key_prefix}:after", "1") == "OK"
    assert await pipe.execute("CLIENT", "ID") != first_id


@single_server
async def test_a_reply_that_never_comes_times_out(redis_url, key_prefix):
    slow = RedisPipe(redis_url, timeout_s=0.3)
    try:
        with pytest.raises(RedisConnectionError, match="no reply"):
            await asyncio.wait_for(slow.execute("BLPOP", f"{key_prefix}:never", 5), 3.0)
        assert await slow.execute("PING") == "PONG"
    finally:
        slow.close()


@pytest.mark.parametrize("lean", [pytest.param(True, marks=single_server), False], ids=["pipe", "redis-py"])
async def test_hot_state_offers_and_bind_on_either_path(redis_url, key_prefix, lean):
    """The check-in writes and the bind script behave the same through the pipe and through redis-py
    (which serves rediss:// URLs): an offer binds once, only for its client and session, never past the target."""
    from control_plane.binding import make_offer_id
    from control_plane.hot_state import HotState
    from control_plane.scheduling.state import RoundState
    from propius.specs import ClientProfile

    client = connect(redis_url, decode_responses=True, max_connections=4)
    pipe = RedisPipe(redis_url) if lean else None
    hot = HotState(client, key_prefix, pipe=pipe)
    try:
        now = time.time()
        state = RoundState(job_id="job1", round=0, attempt=0, state="open", demand=1, target=1, min_results=1,
                           bound=0, results=0, started_at=now, deadline_at=now + 60, closed_at=0.0, model_digest="",
                           aggregate_digest="")
        await hot.open_round(state)
        tokens, offers = {}, {}
        for name in ("a", "b", "ü-c"):
            offers[name] = make_offer_id("job1", 0, 0)
            tokens[name] = await hot.check_in(ClientProfile(client_id=name), now, 60, [(offers[name], state)], 30)
        assert await hot.session_valid("a", tokens["a"]) and not await hot.session_valid("a", tokens["b"])

        with pytest.raises(PermissionError):
            await hot.bind("job1", offers["a"], "a", 0, 0, 10, tokens["b"])  # another session's token
        assert (await hot.bind("job1", offers["a"], "b", 0, 0, 10, tokens["b"])).reason == "offer_not_yours"
        assert (await hot.bind("job1", "job1.0.0.nope", "a", 0, 0, 10, tokens["a"])).reason == "offer_expired"
        first = await hot.bind("job1", offers["ü-c"], "ü-c", 0, 0, 10, tokens["ü-c"])
        assert first.bound and first.deadline_at == pytest.approx(now + 60)
        assert (await hot.bind("job1", offers["a"], "a", 0, 0, 10, tokens["a"])).reason == "round_full"
        assert (await hot.round("job1")).bound == 1
        assert await hot.members("job1", 0, 0) == {"ü-c"}
    finally:
        if pipe is not None:
            pipe.close()
        await client.aclose()


@single_server
async def test_a_connection_lost_while_connecting_fails_its_callers_and_leaves_no_stale_reply_slot(redis_url):
    """Redis restarting behind a proxy: the TCP connect succeeds and the connection drops at once. Every
    caller gets a connection error (none waits for a reply that can never come), and once Redis is back
    each caller gets its own reply."""
    from benchmarks.chaos_proxy import TcpProxy

    host, port = redis_url.removeprefix("redis://").split("/")[0].split(":")
    proxy = TcpProxy(host, int(port))
    proxy_port = proxy.start()
    proxy.cut()
    pipe = RedisPipe(f"redis://127.0.0.1:{proxy_port}/0", timeout_s=2.0)
    try:
        for _ in range(20):
            results = await asyncio.wait_for(
                asyncio.gather(*(pipe.execute("PING") for _ in range(5)), return_exceptions=True), 5)
            assert all(isinstance(result, RedisConnectionError) for result in results), results
        proxy.restore()
        replies = await asyncio.wait_for(asyncio.gather(*(pipe.execute("ECHO", str(i)) for i in range(50))), 5)
        assert replies == [str(i) for i in range(50)]
    finally:
        pipe.close()
        proxy.stop()
