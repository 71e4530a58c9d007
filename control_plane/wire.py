"""Requests that are not valid protobuf are answered INVALID_ARGUMENT, never UNKNOWN.

gRPC decodes a request before any handler runs, and a decoding error becomes UNKNOWN. Every method's
decoder is wrapped so that a message that does not decode becomes a marker, and the method's behaviour
so that the marker is answered INVALID_ARGUMENT naming the message type; a streamed request is checked
message by message as the handler reads it. The wrapping happens once, when a service is registered
(:class:`DecodeGuard`), not per call as a server interceptor would: a bind costs nothing more.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = ["DecodeGuard", "guarded"]

Deserializer = Callable[[bytes], Any]


@dataclass(frozen=True)
class _Undecodable:
    """What a request that did not decode becomes; the handler's wrapper answers it."""

    details: str


def _tolerant(deserialize: Deserializer | None) -> Deserializer | None:
    if deserialize is None:
        return None
    name = getattr(getattr(deserialize, "__self__", None), "__name__", "message")

    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception:  # noqa: BLE001 - any decoding failure is the client's malformed message
            return _Undecodable(f"request: not a valid {name} message")

    return decode


async def _refuse(context: grpc.aio.ServicerContext, request: _Undecodable) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.details)


def _checked_stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    async def checked() -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Undecodable):
                await _refuse(context, request)
            yield request

    return checked()


def _guard(behaviour: Callable[..., Any], streamed_request: bool) -> Callable[..., Any]:
    """``behaviour`` refusing an undecodable request (a streamed request: each message as it is read).

    The wrapper is of the same kind as ``behaviour`` (coroutine or async generator function): gRPC runs
    anything else in a thread pool.
    """
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if streamed_request:
            return _checked_stream(request, context)
        if isinstance(request, _Undecodable):
            await _refuse(context, request)
        return request

    if inspect.isasyncgenfunction(behaviour):
        async def replies(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for reply in behaviour(await checked(request, context), context):
                yield reply

        return replies

    async def reply(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await behaviour(await checked(request, context), context)

    return reply


def guarded(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` answering undecodable requests INVALID_ARGUMENT (see the module docstring)."""
    if handler.request_deserializer is None:
        return handler
    changes: dict[str, Any] = {"request_deserializer": _tolerant(handler.request_deserializer)}
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        behaviour = getattr(handler, kind)
        if behaviour is not None:
            changes[kind] = _guard(behaviour, streamed_request=kind.startswith("stream"))
    return handler._replace(**changes)


class _GuardedGeneric(grpc.GenericRpcHandler):
    """A generic handler whose method handlers are guarded, each once."""

    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self._inner = inner
        self._done: dict[str, grpc.RpcMethodHandler | None] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method not in self._done:
            handler = self._inner.service(handler_call_details)
            self._done[method] = None if handler is None else guarded(handler)
        return self._done[method]


class DecodeGuard:
    """The server as the generated ``add_*Servicer_to_server`` functions see it: what they register is
    guarded on the way in. ``add_JobServiceServicer_to_server(servicer, DecodeGuard(server))``."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: tuple[grpc.GenericRpcHandler, ...]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_GuardedGeneric(handler) for handler in handlers))

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self._server.add_registered_method_handlers(service, {name: guarded(h) for name, h in handlers.items()})
