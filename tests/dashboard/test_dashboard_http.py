"""The dashboard port: /metrics scraped over HTTP from a running plane, /api/state, the bearer token."""

from __future__ import annotations

import asyncio
import json

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from control_plane.app import ControlPlane
from propius.proto import propius_pb2 as pb
from tests.conftest import eventually
from tests.control_plane.conftest import Stubs
from tests.dashboard.conftest import fetch


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text.decode()) for sample in family.samples}


async def test_metrics_after_a_bind_and_a_round(dashboard_plane: ControlPlane) -> None:
    plane = dashboard_plane
    stubs = Stubs(plane.address)
    try:
        job_id, token = await stubs.register(name="metered", demand=1, over_selection=1.0)
        await stubs.start_round(job_id, token)
        await stubs.publish(job_id, token, 0, {"w": np.zeros(3, np.float32)})
        checkin, accept = await stubs.bind("m1")
        assert accept.bound
        await stubs.check_in("m2")  # idle: supply 2, no free slot

        async def wait_for_a_slot() -> None:  # long-polls again whenever max_wait_s ends a wait
            while True:
                await stubs.check_in("m2", wait_s=30.0)

        polling = asyncio.create_task(wait_for_a_slot())

        async def scraped() -> bool:
            samples = _samples((await fetch(plane, "/metrics")).body)
            return (samples.get(("propius_schedule_seconds_count", ())) == 1
                    and samples.get(("propius_class_supply", (("class", "{}"),))) == 2
                    and samples.get(("propius_class_waiting_clients", (("class", "{}"),))) == 1)

        try:
            await eventually(scraped, timeout_s=10, what="the bind, the supply and the waiting client in /metrics")
        finally:
            polling.cancel()
        await stubs.upload("m1", checkin.session_token, accept, {"w": np.ones(3, np.float32)}, 1.0)
        info, _ = await stubs.aggregate(job_id, token, 0)
        assert info.state == pb.ROUND_STATE_CLOSED

        async def closed() -> bool:
            samples = _samples((await fetch(plane, "/metrics")).body)
            return samples.get(("propius_round_seconds_count", (("state", "closed"),))) == 1
        await eventually(closed, timeout_s=10, what="the closed round's duration in /metrics")
        samples = _samples((await fetch(plane, "/metrics")).body)
        assert samples[("propius_accepts_total", (("outcome", "bound"),))] == 1
        for field in ("open_rounds", "waiting_jobs", "open_slots", "waiting_clients"):
            assert ("propius_class_" + field, (("class", "{}"),)) in samples
        assert samples[("propius_schedule_seconds_bucket", (("le", "+Inf"),))] == 1
    finally:
        await stubs.close()


async def test_state_names_the_waiting_job_and_why(dashboard_plane: ControlPlane) -> None:
    plane = dashboard_plane
    stubs = Stubs(plane.address)
    try:
        job_id, token = await stubs.register(name="starved", demand=3, over_selection=1.0)
        await stubs.start_round(job_id, token)
        await stubs.check_in("c1")

        async def explained() -> bool:
            state = json.loads((await fetch(plane, "/api/state")).body)
            return bool(state["jobs"]) and state["jobs"][0]["eligible"] == 1 and state["classes"][0]["supply"] == 1
        await eventually(explained, timeout_s=10, what="the job and its eligible client in /api/state")
        state = json.loads((await fetch(plane, "/api/state")).body)
        (job,) = state["jobs"]
        assert (job["job_id"], job["name"], job["round"]["bound"], job["round"]["target"]) == (job_id, "starved", 0, 3)
        assert job["why_waiting"] == [
            "1 eligible clients checked in within 120 s (demand 3)",
            "position 1 of 1 in the propius policy's order",
            "cannot fill a round: 2 more eligible clients needed; start clients whose attributes meet "
            "requirements.public, or lower demand",
        ]
        assert state["device_classes"] == [{"device_class": "edge", "recent": 1, "bound": 0}]
        page = await fetch(plane, "/")
        assert page.status == 200 and b"api/state" in page.body
        assert (await fetch(plane, "/nowhere")).status == 404
    finally:
        await stubs.close()


async def test_a_token_guards_the_data(settings) -> None:
    from tests.dashboard.conftest import free_port

    plane = ControlPlane(settings.model_copy(update={"dashboard_port": free_port(), "dashboard_token": "s3cret"}))
    async with plane:
        for path in ("/api/state", "/metrics"):
            assert (await fetch(plane, path)).status == 401
            assert (await fetch(plane, path, token="wrong")).status == 401
            assert (await fetch(plane, path, token="s3cret")).status == 200
        assert (await fetch(plane, "/")).status == 200  # the page holds no data
