"""A control plane that stops mid-round and comes back on the same state: the SDK job just continues."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np

from propius.proto import propius_pb2 as pb
from propius.sdk import AsyncJob
from propius.specs import JobSpec


async def test_job_continues_after_restart_mid_round(planes, client_pool, stub_factory, wait_for):
    plane_a = await planes.start()
    port = plane_a.port  # settings say port 0; plane B must take A's port so that everyone reconnects
    spec = JobSpec.parse({"name": "phoenix", "demand": 2, "over_selection": 1.0, "rounds": 2})
    job = AsyncJob(spec, plane_a.address)
    uploads_allowed = asyncio.Event()

    async def drive() -> dict[str, np.ndarray]:
        weights = {"w": np.zeros(3, np.float32)}
        async with job:
            for _ in range(spec.rounds):
                weights = (await job.run_round(weights, timeout_s=120)).tensors
        return weights

    async with client_pool(plane_a.address, 3, hold=uploads_allowed) as pool:
        driver = asyncio.create_task(drive())

        def first_binds() -> set[str]:
            return {client for client, _, round_, attempt in pool.binds if (round_, attempt) == (0, 0)}

        async def round_zero_full() -> bool:
            state = await plane_a.hot.round(job.job_id) if job.job_id else None
            return state is not None and state.bound == 2 and bool(state.model_digest) and len(first_binds()) == 2

        await wait_for(round_zero_full, timeout_s=60.0, what="two clients bound to round 0 on plane A")
        assert (await plane_a.hot.round(job.job_id)).results == 0
        held = first_binds()

        await planes.stop(plane_a)
        plane_b = await planes.start(port=port)
        reopened = await plane_b.hot.round(job.job_id)
        assert (reopened.round, reopened.attempt, reopened.state) == (0, 1, "open")
        assert reopened.model_digest  # the retry serves the same model without the job publishing again

        uploads_allowed.set()  # the attempt-0 uploads now reach plane B, which must refuse them
        weights = await asyncio.wait_for(driver, 120)

    np.testing.assert_array_equal(weights["w"], np.full(3, 2.0, np.float32))  # each round folded exactly once
    assert (0, 0, True) not in {(r, a, ok) for _, r, a, ok in pool.uploads}
    assert {client for client, code in pool.errors if code == grpc.StatusCode.FAILED_PRECONDITION} >= held
    assert {(round_, attempt) for _, _, round_, attempt in pool.binds} == {(0, 0), (0, 1), (1, 0)}

    stubs = await stub_factory(plane_b.address)
    info = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id))
    assert info.state == pb.JOB_STATE_COMPLETED
    assert info.rounds_done == info.rounds_total == 2
    rounds = [(r.round, r.attempt, r.state) for r in plane_b.store.rounds(job.job_id)]
    assert rounds == [(0, 0, "failed"), (0, 1, "closed"), (1, 0, "closed")]
    await plane_b.journal.flush()
    attempt_zero = {b.client_id for b in plane_b.store.bindings(job.job_id, round=0) if b.attempt == 0}
    assert attempt_zero == held
