"""Fixtures of the auth tests: a control plane in ``keys`` mode (tests/security/auth_setup.py) and stubs for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from control_plane.app import ControlPlane
from tests.security.auth_setup import Stubs, keyed_plane


@pytest.fixture
async def plane(settings) -> AsyncIterator[ControlPlane]:
    async with keyed_plane(settings) as cp:
        yield cp


@pytest.fixture
async def stubs(plane: ControlPlane) -> AsyncIterator[Stubs]:
    made = Stubs(plane.address)
    yield made
    await made.close()
