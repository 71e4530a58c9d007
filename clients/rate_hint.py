"""Waiting out a control plane's rate limit: RESOURCE_EXHAUSTED with a retry hint, retried within a budget.

A refused call changed nothing on the server (its limits are checked before any state), so trying it
again is safe for every call, RegisterJob and UploadUpdate included.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from propius.retry_after import RetryBudget, Throttle, retry_after_s

__all__ = ["RateLimited", "rate_hint", "throttled"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def rate_hint(error: grpc.RpcError) -> float | None:
    """The seconds a rate-limit refusal asks the caller to wait; None for any other error."""
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    return retry_after_s(error.details() or "")


class RateLimited(grpc.aio.AioRpcError):
    """A rate limit that outlasted the call's :class:`RetryBudget`: still RESOURCE_EXHAUSTED, so code that
    handles the server's status keeps working, with details that say what was waited."""

    def __init__(self, error: grpc.aio.AioRpcError, throttle: Throttle) -> None:
        super().__init__(error.code(), error.initial_metadata(), error.trailing_metadata(),
                         details=throttle.gave_up(error.details() or ""),
                         debug_error_string=error.debug_error_string())


async def throttled(call: Callable[[], Awaitable[T]], budget: RetryBudget, rng: random.Random | None = None) -> T:
    """``call()``, tried again after each rate-limit refusal's hint until ``budget`` is spent, then
    :class:`RateLimited`. Other errors are raised as they come."""
    throttle = budget.start(rng)
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            hint_s = rate_hint(error)
            if hint_s is None:
                raise
            wait_s = throttle.next_wait(hint_s)
            if wait_s is None:
                raise RateLimited(error, throttle) from error
            log.info("rate limited (%s); retrying in %.2f s", error.details(), wait_s)
            await asyncio.sleep(wait_s)
