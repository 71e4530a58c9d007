"""Redis clients for a ``redis_url``: one server, or a Redis Cluster.

A URL whose scheme ends in ``+cluster`` (``redis+cluster://host:port``, ``rediss+cluster://...``) names a
Redis Cluster by any one of its nodes; the client learns the others from it and follows failovers. The
control plane runs unchanged on either: every key carries a hash tag (:mod:`propius.keys`), and every Lua
script and transaction touches the keys of one job (or one key), so each runs within one slot. Pub/sub
(:mod:`control_plane.events`) uses plain PUBLISH, which a cluster delivers to subscribers on every node.
Check-ins and binds go through the lean pipe, one per node (:mod:`control_plane.cluster_pipe`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeAlias

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterPipeline
from redis.exceptions import ClusterDownError, RedisClusterUnreachableError, TryAgainError

__all__ = ["CLUSTER_OUTAGE", "AnyRedis", "connect", "is_cluster_url", "node_url"]

AnyRedis: TypeAlias = aioredis.Redis | aioredis.RedisCluster

# What a cluster answers while a failover is under way or no node can be reached: an outage to retry.
CLUSTER_OUTAGE = (ClusterDownError, TryAgainError, RedisClusterUnreachableError)


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].endswith("+cluster")


def node_url(url: str) -> str:
    """The URL of the one node a cluster URL names (a plain URL is returned as is)."""
    scheme, sep, rest = url.partition("://")
    return scheme.removesuffix("+cluster") + sep + rest


_holding: ContextVar[bool] = ContextVar("propius_redis_holding", default=False)


class _QueuedCluster(aioredis.RedisCluster):
    """A RedisCluster whose callers wait for a connection, as with one server's blocking pool, instead of
    failing with ``MaxConnectionsError`` under a burst: at most ``limit`` commands and pipelines run at
    once, and each holds at most one connection per node. A command that a pipeline re-sends (after a
    MOVED or TRYAGAIN) runs under the pipeline's turn, so the limit cannot deadlock."""

    def __init__(self, *args: Any, limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turns = asyncio.Semaphore(limit)

    async def _in_turn(self, call: Callable[[], Awaitable[Any]]) -> Any:
        if _holding.get():
            return await call()
        async with self._turns:
            token = _holding.set(True)
            try:
                return await call()
            finally:
                _holding.reset(token)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        return await self._in_turn(lambda: super(_QueuedCluster, self).execute_command(*args, **kwargs))

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        if shard_hint:
            raise ValueError("shard_hint is not supported on a cluster")
        return _QueuedPipeline(self, transaction)


class _QueuedPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        client = self.cluster_client
        assert isinstance(client, _QueuedCluster)
        return await client._in_turn(lambda: super(_QueuedPipeline, self).execute(raise_on_error, allow_redirections))


def connect(url: str, *, decode_responses: bool, max_connections: int) -> AnyRedis:
    """A client for ``url``; requests beyond ``max_connections`` (per node, on a cluster) wait for one."""
    if is_cluster_url(url):
        # headroom over the limit for the connections that pub/sub holds outside it
        return _QueuedCluster.from_url(node_url(url), decode_responses=decode_responses, limit=max_connections,
                                       max_connections=max_connections + 4)
    return aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
        url, decode_responses=decode_responses, max_connections=max_connections, timeout=30))
