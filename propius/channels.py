"""Channels of the user-facing tools (SDK, CLI, Flower bridge) to the control plane, TLS unless told otherwise.

The credentials are the client daemon's (:func:`clients.transport.channel_credentials`), so every client of
the control plane reads the same settings: ``ChannelSecurity`` from arguments or from ``PROPIUS_TLS_CA``,
``PROPIUS_TLS_CERT``, ``PROPIUS_TLS_KEY`` and ``PROPIUS_INSECURE``. The CLI's blocking channel waits out
a rate limit's RESOURCE_EXHAUSTED as its hint asks, within a ``RetryBudget``, as the SDK does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import grpc

from clients.rate_hint import rate_hint
from clients.transport import channel_credentials, open_channel
from propius.config import ChannelSecurity
from propius.retry_after import RetryBudget

__all__ = ["ChannelSecurity", "async_channel", "sync_channel"]

Options = Sequence[tuple[str, Any]]


def async_channel(server: str, security: ChannelSecurity | None = None, options: Options = ()) -> grpc.aio.Channel:
    """An asyncio channel (the SDK's, the Flower bridge's); ``security`` None: from the environment."""
    return open_channel(server, security, list(options))


class _WaitOutRateLimits(grpc.UnaryUnaryClientInterceptor):
    """Tries a unary call again after each rate-limit refusal's hint until the budget is spent; the last
    refusal is then the call's outcome."""

    def __init__(self, budget: RetryBudget) -> None:
        self._budget = budget

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        throttle = self._budget.start()
        while True:
            outcome = continuation(client_call_details, request)
            error = outcome.exception()
            hint_s = None if error is None else rate_hint(error)
            wait_s = None if hint_s is None else throttle.next_wait(hint_s)
            if wait_s is None:
                return outcome
            time.sleep(wait_s)


def sync_channel(server: str, security: ChannelSecurity | None = None, options: Options = (),
                 rate_limit: RetryBudget = RetryBudget()) -> grpc.Channel:  # noqa: B008 - frozen
    """A blocking channel (the CLI's); ``security`` None: from the environment. Unary calls wait out rate
    limits within ``rate_limit``."""
    credentials = channel_credentials(security if security is not None else ChannelSecurity())
    if credentials is None:
        channel = grpc.insecure_channel(server, options=list(options))
    else:
        channel = grpc.secure_channel(server, credentials, options=list(options))
    return grpc.intercept_channel(channel, _WaitOutRateLimits(rate_limit))
