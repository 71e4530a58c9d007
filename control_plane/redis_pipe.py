"""A lean Redis connection for the binding hot path (check-in writes, the atomic bind script).

redis-py spends more CPU per command than Redis does: a pool checkout, a timeout context and Python
packing for every call. Here the commands of all concurrent callers share one connection: they are
packed by hiredis (in C), those issued in one event-loop turn leave in one write, and the replies, which
Redis sends in request order, are parsed by hiredis and handed back in that order. Nothing about the
commands changes: a Lua script is still one atomic EVALSHA, so binding stays atomic.

A lost connection fails the commands in flight with ``ConnectionError`` (callers see an error, as with
redis-py) and the next command reconnects; a reply that takes longer than ``timeout_s`` aborts the
connection the same way.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from abc import ABC, abstractmethod
from typing import Any

import hiredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

__all__ = ["RedisPipe", "ScriptedPipe", "pipe_supported"]


class _Pending:
    __slots__ = ("future", "replies", "remaining", "sent_at")

    def __init__(self, future: asyncio.Future[list[Any]], count: int, sent_at: float) -> None:
        self.future = future
        self.remaining = count
        self.replies: list[Any] = []
        self.sent_at = sent_at


class _Protocol(asyncio.Protocol):
    def __init__(self, pipe: RedisPipe) -> None:
        self._pipe = pipe
        self._reader = hiredis.Reader(encoding="utf-8")
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        pending = self._pipe._pending
        try:
            while (reply := self._reader.gets()) is not False:
                entry = pending[0]
                if isinstance(reply, hiredis.ReplyError):
                    text = str(reply)
                    reply = NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)
                entry.replies.append(reply)
                entry.remaining -= 1
                if entry.remaining == 0:
                    pending.popleft()
                    if not entry.future.done():
                        entry.future.set_result(entry.replies)
        except (hiredis.ProtocolError, IndexError) as error:
            self._pipe._abort(RedisConnectionError(f"redis protocol error: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._pipe._lost(self, RedisConnectionError(f"connection to redis lost: {exc or 'closed'}"))


def pipe_supported(url: str) -> bool:
    """Plain TCP and unix sockets to one server; TLS URLs (with their certificate options) stay on redis-py,
    and Redis Cluster URLs get one pipe per node (:mod:`control_plane.cluster_pipe`)."""
    return url.startswith(("redis://", "unix://"))


class ScriptedPipe(ABC):
    """What a pipe offers besides :meth:`execute_many`: one command, and Lua scripts run by SHA-1 and loaded
    again where Redis no longer knows them (a restarted or flushed server, a replica promoted since)."""

    def __init__(self) -> None:
        self._scripts: dict[str, str] = {}  # sha -> source

    @abstractmethod
    async def execute_many(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Replies in command order; an error reply is a ``ResponseError`` instance, not raised."""

    async def execute(self, *command: Any) -> Any:
        reply = (await self.execute_many([command]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def script(self, source: str) -> str:
        """Register a Lua script; returns the sha to pass to :meth:`evalsha`."""
        sha = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1
        self._scripts[sha] = source
        return sha

    async def evalsha(self, sha: str, keys: list[str], args: list[Any]) -> Any:
        command = ("EVALSHA", sha, len(keys), *keys, *args)
        reply = (await self.execute_many([command]))[0]
        if isinstance(reply, NoScriptError):  # Redis does not know it (any more): load it once, run again
            await self._load_script(keys, self._scripts[sha])
            reply = (await self.execute_many([command]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def _load_script(self, keys: list[str], source: str) -> None:
        """Load ``source`` where a script on ``keys`` runs."""
        await self.execute("SCRIPT", "LOAD", source)


class RedisPipe(ScriptedPipe):
    """``await pipe.execute_many([(cmd, *args), ...])`` -> replies (``ResponseError`` instances for errors)."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        super().__init__()
        kwargs = parse_url(url)
        self._host = kwargs.get("host", "127.0.0.1")
        self._port = kwargs.get("port", 6379)
        self._path = kwargs.get("path")
        if kwargs.get("connection_class") is SSLConnection:
            raise ValueError("RedisPipe speaks plain TCP or unix sockets; use redis-py for rediss:// URLs")
        self._auth = [a for a in (kwargs.get("username"), kwargs.get("password")) if a]
        self._db = int(kwargs.get("db", 0) or 0)
        self._timeout_s = timeout_s
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._pending: collections.deque[_Pending] = collections.deque()
        self._outbox: list[bytes] = []
        self._flush_scheduled = False
        self._watchdog: asyncio.TimerHandle | None = None

    # ---------------------------------------------------------------- commands

    async def execute_many(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        if self._protocol is None:
            await self._connect()
            if self._protocol is None:  # lost again before this caller ran: its reply slot would never fill
                raise RedisConnectionError("connection to redis lost while connecting")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._pending.append(_Pending(future, len(commands), loop.time()))
        self._outbox.extend(hiredis.pack_command(command) for command in commands)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._timeout_s, self._check_timeout)
        return await future

    # ---------------------------------------------------------------- connection

    def _flush(self) -> None:
        self._flush_scheduled = False
        data, self._outbox = b"".join(self._outbox), []
        protocol = self._protocol
        if data and protocol is not None and protocol.transport is not None:
            protocol.transport.write(data)
        # else: the connection was lost after these were queued, and _lost failed their futures

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            if self._path:
                _, protocol = await loop.create_unix_connection(lambda: _Protocol(self), self._path)
            else:
                _, protocol = await loop.create_connection(lambda: _Protocol(self), self._host, self._port)
        except OSError as error:
            raise RedisConnectionError(f"cannot connect to redis: {error}") from error
        self._protocol = protocol
        setup = ([("AUTH", *self._auth)] if self._auth else []) + ([("SELECT", self._db)] if self._db else [])
        if setup:
            for reply in await self.execute_many(setup):
                if isinstance(reply, Exception):
                    self.close()
                    raise reply
        return protocol

    def _check_timeout(self) -> None:
        self._watchdog = None
        if not self._pending:
            return
        loop = asyncio.get_running_loop()
        waited = loop.time() - self._pending[0].sent_at
        if waited > self._timeout_s:
            self._abort(RedisConnectionError(f"no reply from redis in {waited:.1f} s"))
        else:
            self._watchdog = loop.call_later(self._timeout_s - waited, self._check_timeout)

    def _abort(self, error: Exception) -> None:
        protocol = self._protocol
        if protocol is not None:
            self._lost(protocol, error)
            if protocol.transport is not None:
                protocol.transport.abort()

    def _lost(self, protocol: _Protocol, error: Exception) -> None:
        if protocol is not self._protocol:
            return
        self._protocol = None
        self._outbox = []  # unsent commands of the lost connection: their futures fail below
        pending, self._pending = self._pending, collections.deque()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(error)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        protocol = self._protocol
        if protocol is not None:
            self._lost(protocol, RedisConnectionError("redis pipe closed"))
            if protocol.transport is not None:
                protocol.transport.close()
