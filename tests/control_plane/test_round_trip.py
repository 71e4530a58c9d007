"""One round over gRPC: register, start, bind, fetch, upload, aggregate — exact FedAvg."""

from __future__ import annotations

import numpy as np

from propius.proto import propius_pb2 as pb


async def test_one_round_aggregates_weighted_mean(stubs):
    job_id, token = await stubs.register(name="exact", demand=3, over_selection=1.0)
    info = await stubs.jobs.StartRound(pb.StartRoundRequest(job_id=job_id, job_token=token))
    assert (info.round, info.target, info.state) == (0, 3, pb.ROUND_STATE_OPEN)
    model = {"w": np.zeros((4, 3), np.float32), "b": np.zeros(3, np.float32)}
    await stubs.publish(job_id, token, 0, model)

    rng = np.random.default_rng(0)
    updates, weights = [], [10.0, 30.0, 60.0]
    for i, weight in enumerate(weights):
        checkin, accept = await stubs.bind(f"c{i}", cpu_f=8)
        assert accept.bound and accept.job_id == job_id
        fetched = await stubs.fetch(f"c{i}", checkin.session_token, job_id, 0)
        assert set(fetched) == {"w", "b"}
        update = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in model.items()}
        updates.append(update)
        reply = await stubs.upload(f"c{i}", checkin.session_token, accept, update, weight, f'{{"loss": {i}}}')
        assert reply.accepted

    round_info, aggregate = await stubs.aggregate(job_id, token, 0)
    assert round_info.state == pb.ROUND_STATE_CLOSED and round_info.results == 3
    for name in model:
        expected = np.average(np.stack([u[name] for u in updates]), axis=0, weights=weights)
        np.testing.assert_allclose(aggregate[name], expected, rtol=1e-6, atol=1e-6)
    job = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id))
    assert job.rounds_done == 1
