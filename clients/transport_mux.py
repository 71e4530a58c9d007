"""Many devices' client calls multiplexed onto one ``ClientService.Multiplex`` stream.

A client daemon hosts many devices; rather than one unary RPC per check-in or accept, it sends its
devices' calls on one bidirectional stream, several per message (every call that is ready when the
previous message has gone), and the control plane answers them the same way. Each call keeps its
unary semantics: the server runs the same handler, a failed call raises the same
:class:`grpc.aio.AioRpcError` (code and details) the unary RPC would, and a call that times out raises
DEADLINE_EXCEEDED and is cancelled on the server. If the stream breaks (a restarting control plane),
the calls in flight fail with its status (UNAVAILABLE) and the next call opens a new stream.

:class:`MultiplexedClients` has the unary stub's call signature (``await mux.CheckIn(request,
timeout=..., metadata=...)``), so a device does not know which one it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

import grpc

from propius.multiplex import take_batch
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["MultiplexedClients"]

log = logging.getLogger(__name__)

_CODES = {code.value[0]: code for code in grpc.StatusCode}
Metadata = tuple[tuple[str, str], ...]


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


MAX_BATCH_BYTES = 1 << 20  # well under the server's receive limit


class _Stream:
    """One open Multiplex call: a sender of call batches and a receiver that resolves the callers' futures."""

    def __init__(self, stub: pb_grpc.ClientServiceStub) -> None:
        self.call = stub.Multiplex()
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.outbox: list[pb.ClientCall] = []
        self.closed: grpc.aio.AioRpcError | None = None
        self._wake = asyncio.Event()
        self._tasks = [asyncio.create_task(self._send()), asyncio.create_task(self._receive())]

    def submit(self, call: pb.ClientCall, future: asyncio.Future[Any] | None) -> None:
        if future is not None:
            self.pending[call.call_id] = future
        self.outbox.append(call)
        self._wake.set()

    async def _send(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self.outbox:
                    await self.call.write(pb.ClientCalls(calls=take_batch(self.outbox, MAX_BATCH_BYTES)))
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as error:
            self._fail(error)
        except Exception as error:  # noqa: BLE001 - e.g. writing after the call ended
            self._fail(_error(grpc.StatusCode.UNAVAILABLE, f"multiplex stream: {error!r}"))

    async def _receive(self) -> None:
        try:
            while True:
                message = await self.call.read()
                if message is grpc.aio.EOF:
                    self._fail(_error(grpc.StatusCode.UNAVAILABLE, "multiplex stream ended"))
                    return
                for reply in message.replies:
                    future = self.pending.pop(reply.call_id, None)
                    if future is None or future.done():
                        continue
                    if reply.status_code:
                        code = _CODES.get(reply.status_code, grpc.StatusCode.UNKNOWN)
                        future.set_exception(_error(code, reply.status_details))
                    else:
                        future.set_result(getattr(reply, reply.WhichOneof("response")))
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as error:
            self._fail(error)
        except Exception as error:  # noqa: BLE001
            self._fail(_error(grpc.StatusCode.UNAVAILABLE, f"multiplex stream: {error!r}"))

    def _fail(self, error: grpc.aio.AioRpcError) -> None:
        """The stream is gone: every call in flight fails with its status; the next call opens a new one."""
        if self.closed is None:
            self.closed = error
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self.closed)
        self.call.cancel()
        current = asyncio.current_task()
        for task in self._tasks:  # the other half of a dead stream must not wait forever
            if task is not current:
                task.cancel()

    async def close(self) -> None:
        if self.closed is None:
            self.closed = _error(grpc.StatusCode.CANCELLED, "multiplexer closed")
        with contextlib.suppress(Exception):
            await self.call.done_writing()
        for task in self._tasks:
            task.cancel()
        self.call.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._fail(self.closed)


class MultiplexedClients:
    """Drop-in for ``ClientServiceStub``'s per-device calls, over one Multiplex stream per channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.ClientServiceStub(channel)
        self._ids = itertools.count(1)
        self._stream: _Stream | None = None
        self.ListClients = self._stub.ListClients  # not per device: stays unary

    async def CheckIn(self, request: pb.CheckInRequest, timeout: float | None = None,  # noqa: N802
                      metadata: Metadata = ()) -> pb.CheckInResponse:
        return await self._call("check_in", request, timeout, metadata)

    async def Accept(self, request: pb.AcceptRequest, timeout: float | None = None,  # noqa: N802
                     metadata: Metadata = ()) -> pb.AcceptResponse:
        return await self._call("accept", request, timeout, metadata)

    async def Heartbeat(self, request: pb.HeartbeatRequest, timeout: float | None = None,  # noqa: N802
                        metadata: Metadata = ()) -> pb.HeartbeatResponse:
        return await self._call("heartbeat", request, timeout, metadata)

    async def Release(self, request: pb.ReleaseRequest, timeout: float | None = None,  # noqa: N802
                      metadata: Metadata = ()) -> pb.ReleaseResponse:
        return await self._call("release", request, timeout, metadata)

    def _open(self) -> _Stream:
        if self._stream is None or self._stream.closed is not None:
            self._stream = _Stream(self._stub)
        return self._stream

    async def _call(self, kind: str, request: Any, timeout: float | None, metadata: Metadata) -> Any:
        """``metadata``: the unary call's; the device credential in it travels in the call itself."""
        stream = self._open()
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        token = dict(metadata).get(DEVICE_TOKEN_HEADER, "")
        stream.submit(pb.ClientCall(call_id=call_id, device_token=token, **{kind: request}), future)
        try:
            if timeout is None:
                return await future
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._cancel(stream, call_id)
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        except asyncio.CancelledError:
            self._cancel(stream, call_id)
            raise

    @staticmethod
    def _cancel(stream: _Stream, call_id: int) -> None:
        """Tell the server to stop a call nobody waits for (a long-polling check-in holds a waiter slot)."""
        if stream.pending.pop(call_id, None) is not None and stream.closed is None:
            stream.submit(pb.ClientCall(call_id=call_id, cancel=True), None)

    async def close(self) -> None:
        if self._stream is not None:
            await self._stream.close()
            self._stream = None
