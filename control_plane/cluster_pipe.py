"""The lean Redis pipe of the binding hot path (:mod:`control_plane.redis_pipe`) on a Redis Cluster.

One :class:`RedisPipe` per node; each command goes to the node serving its key's slot, as redis-py's
cluster client (whose slot map this reuses, kept current across failovers) would send it, and the
commands of one call that share a node leave in one write. A command a node answers ``MOVED`` or ``ASK``
(it never ran: its slot moved) is sent again through redis-py, which follows the redirection and
refreshes the map. A lost connection fails the call in flight with ``ConnectionError``, as on one server
(the command may have run, so it is not sent again); the caller retries.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from control_plane.redis_pipe import RedisPipe, ScriptedPipe

__all__ = ["ClusterPipe", "cluster_pipe_supported"]


def cluster_pipe_supported(url: str) -> bool:
    """Plain TCP clusters; TLS ones (``rediss+cluster://``) stay on redis-py."""
    return url.startswith("redis+cluster://")


def _key(command: tuple[Any, ...]) -> str:
    """The key that routes a command (the first key of a script)."""
    return str(command[3] if command[0] == "EVALSHA" else command[1])


class ClusterPipe(ScriptedPipe):
    """``await pipe.execute_many([(cmd, key, *args), ...])`` -> replies, with the interface of RedisPipe."""

    def __init__(self, cluster: aioredis.RedisCluster, *, timeout_s: float = 30.0) -> None:
        super().__init__()
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._pipes: dict[str, RedisPipe] = {}

    def _pipe_for(self, key: str) -> RedisPipe:
        node = self._cluster.get_node_from_key(key)
        if node is None:
            raise RedisConnectionError(f"no node serves the slot of {key!r}")
        pipe = self._pipes.get(node.name)
        if pipe is None:
            options = self._cluster.get_connection_kwargs()
            user, password = options.get("username") or "", options.get("password") or ""
            auth = f"{quote(user)}:{quote(password)}@" if password else ""
            pipe = self._pipes[node.name] = RedisPipe(f"redis://{auth}{node.host}:{node.port}",
                                                      timeout_s=self._timeout_s)
        return pipe

    async def execute_many(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        groups: dict[int, tuple[RedisPipe, list[int]]] = {}
        for index, command in enumerate(commands):
            pipe = self._pipe_for(_key(command))
            groups.setdefault(id(pipe), (pipe, []))[1].append(index)
        parts = await asyncio.gather(*(pipe.execute_many([commands[i] for i in indices])
                                       for pipe, indices in groups.values()), return_exceptions=True)
        replies: list[Any] = [None] * len(commands)
        for (pipe, indices), part in zip(groups.values(), parts, strict=True):
            if isinstance(part, BaseException):
                self._forget(pipe)
                raise part
            for index, reply in zip(indices, part, strict=True):
                replies[index] = reply
        for index, reply in enumerate(replies):
            if isinstance(reply, ResponseError) and str(reply).startswith(("MOVED", "ASK")):
                try:
                    replies[index] = await self._cluster.execute_command(*commands[index])
                except RedisError as error:
                    replies[index] = error
        return replies

    async def _load_script(self, keys: list[str], source: str) -> None:
        """On the node serving the script's first key (one that never ran it: a replica promoted since)."""
        await self._pipe_for(keys[0]).execute("SCRIPT", "LOAD", source)

    def _forget(self, pipe: RedisPipe) -> None:
        """Drop a node's pipe whose connection failed: the next command finds the slot's node anew."""
        for name, known in list(self._pipes.items()):
            if known is pipe:
                del self._pipes[name]
        pipe.close()

    def close(self) -> None:
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()
