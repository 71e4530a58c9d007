"""WatchJob streams a snapshot, then the job's live events in order, and ends when the job does."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np

from propius.proto import propius_pb2 as pb
from tests.conftest import REDIS_MODE


async def read_until(watch, kind: str, timeout_s: float = 5.0) -> list[pb.JobEvent]:
    """Events up to and including the first of ``kind``."""
    async def collect() -> list[pb.JobEvent]:
        events = []
        while True:
            event = await watch.read()
            assert event is not grpc.aio.EOF, f"watch ended before {kind}: {[e.kind for e in events]}"
            events.append(event)
            if event.kind == kind:
                return events

    return await asyncio.wait_for(collect(), timeout_s)


async def test_watch_job_streams_round_events(stubs):
    job_id, token = await stubs.register(name="watched", demand=1, over_selection=1.0)
    watch = stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job_id))
    snapshot = await asyncio.wait_for(watch.read(), 5.0)
    assert snapshot.kind == "snapshot"
    assert (snapshot.job.job_id, snapshot.job.state) == (job_id, pb.JOB_STATE_REGISTERED)

    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(2, np.float32)})
    checkin, accept = await stubs.bind("watched-client")
    await stubs.upload("watched-client", checkin.session_token, accept, {"w": np.ones(2, np.float32)}, 1.0)

    events = await read_until(watch, "round_closed")
    kinds = [event.kind for event in events]
    assert [k for k in kinds if k in {"round_started", "client_bound", "round_closed"}] == [
        "round_started", "client_bound", "round_closed"]
    by_kind = {event.kind: event for event in events}
    assert by_kind["client_bound"].client_id == "watched-client"
    assert by_kind["round_started"].round.job_id == job_id
    assert by_kind["round_closed"].round.state == pb.ROUND_STATE_CLOSED
    assert by_kind["round_closed"].round.results == 1
    assert by_kind["round_closed"].job.rounds_done == 1
    assert all(event.at_unix > 0 for event in events)

    await stubs.jobs.CompleteJob(pb.JobRef(job_id=job_id, job_token=token))
    final = await read_until(watch, "job_completed")
    assert final[-1].job.state == pb.JOB_STATE_COMPLETED
    assert await asyncio.wait_for(watch.read(), 5.0) is grpc.aio.EOF  # the stream ends with the job


async def test_watch_job_delivers_every_event_of_a_burst(stubs):
    """Binds that land together reach the watcher one event each, in order, with the round as it stands."""
    clients = [f"burst-{i}" for i in range(8)]
    job_id, token = await stubs.register(name="burst", demand=len(clients), over_selection=1.0)
    watch = stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job_id))
    assert (await asyncio.wait_for(watch.read(), 5.0)).kind == "snapshot"
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(2, np.float32)})
    await asyncio.gather(*(stubs.bind(client) for client in clients))

    events = []
    while len([e for e in events if e.kind == "client_bound"]) < len(clients):
        events += await read_until(watch, "client_bound")
    bound = [event for event in events if event.kind == "client_bound"]
    assert sorted(event.client_id for event in bound) == clients
    if REDIS_MODE != "cluster":  # one server's lean pipe sends the binds in the order they were made; on a
        # cluster they travel on separate connections and reach Redis in any order (each event still once)
        assert [event.at_unix for event in bound] == sorted(event.at_unix for event in bound)
    assert bound[-1].round.bound == len(clients)
