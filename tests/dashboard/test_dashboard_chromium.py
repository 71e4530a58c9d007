"""The dashboard page in a real headless Chromium: the jobs and a "why waiting" line are rendered.

Skipped where Debian's ``chromium`` is not installed (``.ci/run`` installs it). The screenshot goes to the
test's tmp dir; ``PROPIUS_DASHBOARD_SCREENSHOT=docs/img/dashboard.png python -m pytest
tests/dashboard/test_dashboard_chromium.py`` also writes it there (the one docs/operations.md shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import grpc
import pytest

from control_plane.app import ControlPlane
from propius.proto import propius_pb2 as pb
from tests.conftest import eventually
from tests.control_plane.conftest import Stubs
from tests.dashboard.conftest import fetch

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
ROOT = Path(__file__).resolve().parents[2]


def _chromium(profile: Path, *args: str) -> str:
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses to run its sandbox as root
    command = [CHROMIUM, "--headless=new", *sandbox, "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--window-size=1280,900", "--virtual-time-budget=4000", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


async def _heartbeat(stubs: Stubs, request: pb.HeartbeatRequest) -> None:
    while True:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stubs.clients.Heartbeat(request)
        await asyncio.sleep(0.3)


async def test_the_page_shows_jobs_and_why_they_wait(dashboard_plane: ControlPlane, tmp_path: Path) -> None:
    plane = dashboard_plane
    stubs = Stubs(plane.address)
    holding = None
    try:
        # "keyboard" holds small-0; "everyday" wants 5 clients with ram <= 8 and only 2 such exist
        keyboard, keyboard_token = await stubs.register(name="keyboard", demand=1, over_selection=1.0)
        await stubs.start_round(keyboard, keyboard_token)
        checkin, accept = await stubs.bind("small-0", ram=4)
        holding = asyncio.create_task(_heartbeat(stubs, pb.HeartbeatRequest(
            client_id="small-0", session_token=checkin.session_token, job_id=keyboard, round=accept.round)))
        everyday, everyday_token = await stubs.register(
            name="everyday", demand=5, rounds=3, requirements={"public": {"ram": {"max": 8}}})
        await stubs.start_round(everyday, everyday_token)
        for client_id, ram in (("small-1", 4), ("large-0", 16)):
            await stubs.check_in(client_id, ram=ram)

        async def ready() -> bool:
            state = json.loads((await fetch(plane, "/api/state")).body)
            jobs = {job["name"]: job for job in state["jobs"]}
            return "everyday" in jobs and jobs["everyday"]["eligible"] == 2 and state["clients_recent"] == 3
        await eventually(ready, timeout_s=10, what="the jobs and the clients in the dashboard's state")

        url = f"http://{plane.settings.host}:{plane.dashboard_port}/"
        dom = await asyncio.to_thread(_chromium, tmp_path / "profile", "--dump-dom", url)
        assert "everyday" in dom and "keyboard" in dom
        assert f"2 eligible clients checked in within 120 s (demand 5); busy: 1 by keyboard ({keyboard})" in dom
        assert "cannot fill a round: 3 more eligible clients needed" in dom
        screenshot = tmp_path / "dashboard.png"
        await asyncio.to_thread(_chromium, tmp_path / "profile", f"--screenshot={screenshot}", url)
        assert screenshot.read_bytes().startswith(b"\x89PNG")
        if target := os.environ.get("PROPIUS_DASHBOARD_SCREENSHOT"):
            (ROOT / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(screenshot, ROOT / target)
    finally:
        if holding is not None:
            holding.cancel()
        await stubs.close()
