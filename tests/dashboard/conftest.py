"""A control plane with its dashboard port on, and an HTTP reader for it."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from control_plane.app import ControlPlane
from propius.config import Settings


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


def get(url: str, token: str = "") -> Reply:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return Reply(reply.status, reply.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.read())


@pytest.fixture
async def dashboard_plane(settings: Settings) -> AsyncIterator[ControlPlane]:
    """A plane whose supply estimate follows check-ins within a tick, with the dashboard on a free port
    (picked here and bound at once by the plane; a port taken in between fails the start, and is retried)."""
    for attempt in range(3):
        overrides = {"dashboard_port": free_port(), "supply_period_s": 0.2, "fill_period_s": 0.2}
        plane = ControlPlane(settings.model_copy(update=overrides))
        try:
            await plane.start()
        except OSError:
            if attempt == 2:
                raise
            continue
        try:
            yield plane
        finally:
            await plane.stop(grace_s=0.1)
        return


async def fetch(plane: ControlPlane, path: str, token: str = "") -> Reply:
    return await asyncio.to_thread(get, f"http://{plane.settings.host}:{plane.dashboard_port}{path}", token)
