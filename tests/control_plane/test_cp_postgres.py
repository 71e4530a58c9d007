"""The durable store on PostgreSQL, end to end through the control plane, across a restart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from propius.proto import propius_pb2 as pb


async def test_round_trip_and_restart_on_postgres(planes, stub_factory, pg_database_url):
    plane = await planes.start(database_url=pg_database_url)
    assert plane.store._engine.dialect.name == "postgresql"
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="on-postgres", demand=3, over_selection=1.0, rounds=2)
    await stubs.start_round(job_id, token)
    model = {"w": np.zeros((4, 3), np.float32)}
    await stubs.publish(job_id, token, 0, model)
    weights, updates = [1.0, 2.0, 5.0], []
    for i, weight in enumerate(weights):
        checkin, accept = await stubs.bind(f"pg{i}")
        assert set(await stubs.fetch(f"pg{i}", checkin.session_token, job_id, 0)) == {"w"}
        updates.append({"w": np.full((4, 3), float(i), np.float32)})
        reply = await stubs.upload(f"pg{i}", checkin.session_token, accept, updates[-1], weight, f'{{"loss": {i}}}')
        assert reply.accepted
    info, aggregate = await stubs.aggregate(job_id, token, 0)
    assert info.state == pb.ROUND_STATE_CLOSED and info.results == 3
    np.testing.assert_allclose(aggregate["w"], np.full((4, 3), (0 + 2 + 10) / 8), rtol=1e-6)
    await plane.journal.flush()
    assert sorted((b.client_id, b.outcome, b.num_samples) for b in plane.store.bindings(job_id)) == [
        ("pg0", "completed", 1.0), ("pg1", "completed", 2.0), ("pg2", "completed", 5.0)]

    await planes.stop(plane)
    restarted = await planes.start(database_url=pg_database_url)
    stubs = await stub_factory(restarted.address)
    job = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id))
    assert (job.name, job.state, job.rounds_done, job.rounds_total) == ("on-postgres", pb.JOB_STATE_RUNNING, 1, 2)
    listed = await stubs.jobs.ListJobs(pb.ListJobsRequest())
    assert [j.job_id for j in listed.jobs] == [job_id]
    (record,) = restarted.store.rounds(job_id)
    assert (record.state, record.results) == ("closed", 3)
    assert json.loads(record.metrics_json)["loss"] == pytest.approx((0 * 1 + 1 * 2 + 2 * 5) / 8)
    following = await stubs.start_round(job_id, token)  # the job token still works: it lives in the store
    assert (following.round, following.attempt) == (1, 0)
