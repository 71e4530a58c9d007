"""Channels of the user-facing tools (SDK, CLI, Flower bridge) to the control plane, TLS unless told otherwise.

The credentials are the client daemon's (:func:`clients.transport.channel_credentials`), so every client of
the control plane reads the same settings: ``ChannelSecurity`` from arguments or from ``PROPIUS_TLS_CA``,
``PROPIUS_TLS_CERT``, ``PROPIUS_TLS_KEY`` and ``PROPIUS_INSECURE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from clients.transport import channel_credentials, open_channel
from propius.config import ChannelSecurity

__all__ = ["ChannelSecurity", "async_channel", "sync_channel"]

Options = Sequence[tuple[str, Any]]


def async_channel(server: str, security: ChannelSecurity | None = None, options: Options = ()) -> grpc.aio.Channel:
    """An asyncio channel (the SDK's, the Flower bridge's); ``security`` None: from the environment."""
    return open_channel(server, security, list(options))


def sync_channel(server: str, security: ChannelSecurity | None = None, options: Options = ()) -> grpc.Channel:
    """A blocking channel (the CLI's); ``security`` None: from the environment."""
    credentials = channel_credentials(security if security is not None else ChannelSecurity())
    if credentials is None:
        return grpc.insecure_channel(server, options=list(options))
    return grpc.secure_channel(server, credentials, options=list(options))
