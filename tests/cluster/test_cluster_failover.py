"""The control plane on a Redis Cluster that loses the primary holding a job's keys.

While the replica takes over, calls answer OK or UNAVAILABLE (which clients retry), never INTERNAL; the
update accepted before the crash still counts, and a client that binds after it (the bind script runs
on the promoted replica, which has never loaded it) completes the round.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import numpy as np
import pytest
import redis

from control_plane.app import ControlPlane
from propius.local_cluster import LocalCluster, cluster_available, local_cluster
from propius.proto import propius_pb2 as pb
from tests.control_plane.conftest import Stubs, make_settings

pytestmark = pytest.mark.skipif(not cluster_available(), reason="needs redis-server and redis-cli")

OK_OR_RETRY = {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}


@pytest.fixture
def own_cluster():
    """A cluster of this test's own: it kills one of its primaries."""
    with local_cluster() as cluster:
        yield cluster


def _primary_of(cluster: LocalCluster, key: str) -> int:
    client = cluster.client()
    try:
        return client.nodes_manager.get_node_from_slot(client.keyslot(key)).port
    finally:
        client.close()


def _replica_caught_up(port: int) -> bool:
    """Redis replicates asynchronously: what a primary acknowledged just before a crash can be lost. The
    test kills the primary once its replica holds everything it acknowledged."""
    info = redis.Redis(port=port, decode_responses=True).info("replication")
    replicas = [value for key, value in info.items() if key.startswith("slave") and isinstance(value, dict)]
    return bool(replicas) and all(int(r["offset"]) >= int(info["master_repl_offset"]) for r in replicas)


async def _retrying(call, seen: set[grpc.StatusCode], timeout_s: float = 30.0):  # noqa: ANN001, ANN202
    """Run ``call()`` until it answers, recording each status; only UNAVAILABLE is retried."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            reply = await call()
            seen.add(grpc.StatusCode.OK)
            return reply
        except grpc.aio.AioRpcError as error:
            seen.add(error.code())
            if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_primary_killed_mid_round_loses_no_accepted_update(own_cluster, tmp_path, wait_for):
    settings = make_settings(own_cluster.url, f"t{uuid.uuid4().hex[:12]}", f"sqlite:///{tmp_path / 'p.db'}",
                             tmp_path, lease_s=60.0)
    async with ControlPlane(settings) as plane:
        stubs = Stubs(plane.address)
        try:
            job_id, token = await stubs.register(name="failover", demand=2, over_selection=1.0)
            await stubs.start_round(job_id, token)
            await stubs.publish(job_id, token, 0, {"w": np.zeros(4, np.float32)})
            checkin, accept = await stubs.bind("before")
            reply = await stubs.upload("before", checkin.session_token, accept, {"w": np.full(4, 2, np.float32)}, 1.0)
            assert reply.accepted

            primary = _primary_of(own_cluster, plane.hot.namespace(job_id))
            await wait_for(lambda: asyncio.to_thread(_replica_caught_up, primary), what="the replica to catch up")
            own_cluster.kill(primary)

            seen: set[grpc.StatusCode] = set()
            await _retrying(lambda: stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id)), seen)
            checkin, accept = await _retrying(lambda: stubs.bind("after"), seen)
            assert accept.bound and accept.round == 0
            reply = await _retrying(lambda: stubs.upload("after", checkin.session_token, accept,
                                                         {"w": np.full(4, 4, np.float32)}, 1.0), seen)
            assert reply.accepted
            info, aggregate = await stubs.aggregate(job_id, token, 0, timeout_s=20.0)
            assert info.results == 2
            np.testing.assert_allclose(aggregate["w"], np.full(4, 3, np.float32))  # both updates, once each
            assert seen <= OK_OR_RETRY, seen
            assert primary not in own_cluster.primaries()  # a replica serves the slot now
        finally:
            await stubs.close()


async def test_events_reach_a_shard_again_after_the_node_it_listens_on_dies(own_cluster, tmp_path, wait_for):
    """A shard's event subscription rides on one node's connection: when that node dies, the shard
    subscribes on another node (PUBLISH reaches every node) and events from other shards reach it again."""
    from control_plane.events import Event

    settings = make_settings(own_cluster.url, f"t{uuid.uuid4().hex[:12]}", f"sqlite:///{tmp_path / 'p.db'}",
                             tmp_path)
    async with ControlPlane(settings) as first, ControlPlane(settings.model_copy(update={"port": 0})) as second:
        own_cluster.kill(int(second.bus.node.rsplit(":", 1)[1]))
        await asyncio.to_thread(own_cluster.wait_healthy)
        with second.bus.subscribe("probe-job") as received:
            async def delivered() -> bool:
                try:
                    await first.bus.publish(Event("probe", "probe-job"))
                except redis.RedisError:
                    return False  # the publishing connection meets the failover: publish again
                try:
                    await asyncio.wait_for(received.get(), 0.5)
                except TimeoutError:
                    return False
                return True

            await wait_for(delivered, timeout_s=30.0, what="an event from shard A to reach shard B")
