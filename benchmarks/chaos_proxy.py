"""A loopback TCP proxy that a chaos run cuts or stalls: a database outage without stopping a shared server.

``cut`` resets every open connection and answers new ones by closing them at once (what a client sees
of a server that went away); ``stall`` holds every byte in both directions (a network stall);
``restore`` ends either. It runs its own event loop in a thread, so a caller that blocks its loop (a
synchronous database driver) cannot stall the proxy too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._thread.start()
        self.port = self._call(self._listen())
        return self.port

    async def _listen(self) -> int:
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        self._call(self._set(cut=True, flowing=True))

    def stall(self) -> None:
        self._call(self._set(cut=False, flowing=False))

    def restore(self) -> None:
        self._call(self._set(cut=False, flowing=True))

    def stop(self) -> None:
        self.cut()
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _call(self, coroutine):  # noqa: ANN001, ANN202 - a coroutine of this loop, and its result
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _set(self, *, cut: bool, flowing: bool) -> None:
        self._cut = cut
        if cut:
            for writer in list(self._writers):
                writer.transport.abort()
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, upstream_writer}
        try:
            await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))
        finally:
            self._writers -= {writer, upstream_writer}
            for end in (writer, upstream_writer):
                end.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                if self._cut:
                    return
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
