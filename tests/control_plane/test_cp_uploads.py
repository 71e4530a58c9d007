"""Idempotent uploads: a retried (or doubled) update counts once and enters the aggregate once."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from propius.proto import propius_pb2 as pb


async def open_round(stubs) -> tuple[str, str]:
    """A round of demand 2, so that one client's result does not close it."""
    job_id, token = await stubs.register(name="dedupe", demand=2, over_selection=1.0)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros((2, 3), np.float32)})
    return job_id, token


async def close_and_read(stubs, job_id: str, token: str) -> tuple[pb.RoundInfo, dict[str, np.ndarray]]:
    closed = await stubs.jobs.EndRound(pb.EndRoundRequest(job_id=job_id, job_token=token, round=0))
    assert closed.state == pb.ROUND_STATE_CLOSED
    return await stubs.aggregate(job_id, token, 0)


UPDATE = {"w": np.arange(6, dtype=np.float32).reshape(2, 3) / 7}


async def test_retried_upload_is_counted_once(stubs):
    job_id, token = await open_round(stubs)
    checkin, accept = await stubs.bind("retrier")
    first = await stubs.upload("retrier", checkin.session_token, accept, UPDATE, 3.0)
    second = await stubs.upload("retrier", checkin.session_token, accept, UPDATE, 3.0)
    assert (first.accepted, first.duplicate, first.results) == (True, False, 1)
    assert (second.accepted, second.duplicate, second.results) == (False, True, 1)

    info, aggregate = await close_and_read(stubs, job_id, token)
    assert info.results == 1
    np.testing.assert_array_equal(aggregate["w"], UPDATE["w"])


async def test_concurrent_identical_uploads_are_counted_once(plane, stubs):
    job_id, token = await open_round(stubs)
    checkin, accept = await stubs.bind("twin")
    replies = await asyncio.gather(*(
        stubs.upload("twin", checkin.session_token, accept, UPDATE, 3.0) for _ in range(2)
    ))
    assert sorted((r.accepted, r.duplicate) for r in replies) == [(False, True), (True, False)]
    assert all(r.results == 1 for r in replies)
    assert (await plane.hot.round(job_id)).results == 1

    info, aggregate = await close_and_read(stubs, job_id, token)
    assert info.results == 1
    np.testing.assert_array_equal(aggregate["w"], UPDATE["w"])


async def test_upload_before_the_model_is_published_is_refused(plane, stubs):
    job_id, token = await stubs.register(name="early", demand=1)
    await stubs.start_round(job_id, token)  # no PublishModel yet
    checkin, accept = await stubs.bind("eager")
    with pytest.raises(grpc.aio.AioRpcError) as early:
        await stubs.upload("eager", checkin.session_token, accept, {"junk": np.ones(7, np.float32)}, 1.0)
    assert early.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    state = await plane.hot.round(job_id)
    assert (state.state, state.results) == ("open", 0)


async def test_retry_of_the_closing_upload_is_a_duplicate(stubs):
    job_id, token = await stubs.register(name="closer", demand=1)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros((2, 3), np.float32)})
    checkin, accept = await stubs.bind("closer")
    first = await stubs.upload("closer", checkin.session_token, accept, UPDATE, 1.0)
    assert first.accepted  # this one closed the round; suppose its reply was lost and the device retries
    retry = await stubs.upload("closer", checkin.session_token, accept, UPDATE, 1.0)
    assert (retry.accepted, retry.duplicate) == (False, True)
