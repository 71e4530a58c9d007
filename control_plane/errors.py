"""Service errors and their gRPC status codes.

Handlers raise these; :func:`rpc_errors` turns them into a clear status so bad input never crashes a
service, and an unexpected exception becomes INTERNAL without taking the server down.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any

import grpc
import redis.exceptions
import sqlalchemy.exc

from control_plane.redis_client import CLUSTER_OUTAGE
from propius.specs import SpecError

__all__ = [
    "Conflict",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "ServiceError",
    "Unauthenticated",
    "Unavailable",
    "error_status",
    "is_outage",
    "require_id",
    "rpc_errors",
]

log = logging.getLogger(__name__)


class ServiceError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(ServiceError):
    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotFound(ServiceError):
    code = grpc.StatusCode.NOT_FOUND


class PermissionDenied(ServiceError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(ServiceError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Conflict(ServiceError):
    """The request is valid but the job or round is not in a state that allows it (e.g. a stale round)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


_ID = re.compile(r"[\x21-\x7e]{1,128}")


def require_id(value: str, field: str = "job_id") -> str:
    """An identifier from a request: 1 to 128 printable ASCII characters, no space, so it is safe as a key
    and in SQL (PostgreSQL text cannot hold NUL)."""
    if not _ID.fullmatch(value):
        raise InvalidArgument(field, "required: 1 to 128 printable ASCII characters, no space or control character")
    return value


# A backend that cannot be reached (or lost the connection mid-call) is an outage the caller retries.
_REDIS_OUTAGE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError,
                 *CLUSTER_OUTAGE)
_SQL_OUTAGE = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, sqlalchemy.exc.TimeoutError)


class Unavailable(ServiceError):
    """A backend is down or being rebuilt; the caller retries with backoff."""

    code = grpc.StatusCode.UNAVAILABLE


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` is Redis or the database being unreachable (worth retrying), not a bug."""
    if isinstance(error, _REDIS_OUTAGE + _SQL_OUTAGE):
        return True
    return isinstance(error, sqlalchemy.exc.DBAPIError) and bool(error.connection_invalidated)


def error_status(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The status a handler's exception becomes (INTERNAL, logged, for anything unexpected).

    A Redis or database outage is UNAVAILABLE, which the SDK and the client daemon retry with backoff.
    """
    if isinstance(error, ServiceError):
        return error.code, error.message
    if isinstance(error, SpecError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(error)
    if is_outage(error):
        log.warning("backend unavailable: %s", error)
        return grpc.StatusCode.UNAVAILABLE, f"backend unavailable ({type(error).__name__}); retry"
    log.exception("internal error", exc_info=error)
    return grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}"


def rpc_errors(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a grpc.aio servicer method (unary or server-streaming) so errors become statuses."""
    if inspect.isasyncgenfunction(handler):

        @functools.wraps(handler)
        async def stream(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for item in handler(self, request, context):
                    yield item
            except grpc.aio.AbortError:  # the call already has its status (control_plane.wire)
                raise
            except Exception as error:  # noqa: BLE001 - every failure must become a status
                code, message = error_status(error)
                await context.abort(code, message)

        return stream

    @functools.wraps(handler)
    async def unary(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as error:  # noqa: BLE001
            code, message = error_status(error)
            await context.abort(code, message)

    return unary


class Unauthenticated(ServiceError):
    """No credential, or one the server does not know (unknown, revoked, malformed)."""

    code = grpc.StatusCode.UNAUTHENTICATED
