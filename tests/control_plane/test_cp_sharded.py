"""A job with ``cloud: {shards: 2}`` aggregates on live shard processes through the real control plane (gRPC,
Redis, SQL): the same aggregate and metrics as an unsharded job fed the same updates, round after round, on
the same two processes, which are gone once the job completes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from data_plane.collectives.cost import LinkCost
from data_plane.sharded import ShardedAggregator
from data_plane.tensors import decode
from propius.fabric.model import Link
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.trace.card import read_card
from propius.trace.export import data_point_exporter
from propius.trace.format import card_file

CLIENTS = 4
NVLINK = {"kind": "scale-up", "a": "h0-g0", "b": "h0-g1", "bandwidth_gbps": 900.0, "latency_us": 2.0}


def small_fabric(gpus: int = 2) -> dict:
    """One host of ``gpus`` GPUs, the first two joined by NVLink, an EPS rail per GPU."""
    return {
        "sites": [{"id": "dc"}],
        "racks": [{"id": "r0", "site": "dc"}],
        "hosts": [{"id": "h0", "rack": "r0", "srg": {"power": "p", "board": "b", "tor": "t"}}],
        "accelerators": [{"id": f"h0-g{i}", "host": "h0", "index": i, "domain": "h0"} for i in range(gpus)],
        "links": [NVLINK],
        "rails": [{"id": f"rail{i}", "index": i, "kind": "eps"} for i in range(gpus)],
    }


def client_update(round_: int, client: int) -> tuple[dict[str, np.ndarray], float, dict[str, float]]:
    """Integer-valued float64 (every fold exact), Gaussian float32, a power-of-two weight, a metric."""
    rng = np.random.default_rng(100 * round_ + client)
    tensors = {"w": np.rint(rng.normal(size=(6, 5)) * 1000), "f": rng.normal(size=7).astype(np.float32)}
    return tensors, float(2 ** (client % 3)), {"loss": float(rng.uniform())}


async def bind_to(stubs, client_id: str, job_id: str) -> tuple[str, pb.AcceptResponse]:
    """Check in until offered ``job_id`` (both jobs' rounds are open), then accept that offer."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        checkin = await stubs.check_in(client_id, wait_s=1.0)
        for offer in checkin.offers:
            if offer.job_id == job_id:
                accept = await stubs.accept(client_id, checkin.session_token, offer.offer_id)
                assert accept.bound
                return checkin.session_token, accept
    raise AssertionError(f"{client_id} was never offered job {job_id}")


async def aggregate(stubs, job_id: str, token: str, round_: int) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    info, metrics, buffer = None, {}, bytearray()
    request = pb.AwaitAggregateRequest(job_id=job_id, job_token=token, round=round_, timeout_s=60.0)
    async for chunk in stubs.data.AwaitAggregate(request):
        if info is None:
            info, metrics = chunk.round, json.loads(chunk.metrics_json)
        buffer += chunk.data
    assert info is not None and info.state == pb.ROUND_STATE_CLOSED and info.results == CLIENTS
    return decode(bytes(buffer)), metrics


def within_one_float32_ulp(a: np.ndarray, b: np.ndarray) -> bool:
    return bool((np.abs(a.astype(np.float64) - b) <= np.spacing(np.maximum(np.abs(a), np.abs(b)))).all())


async def upload(stubs, round_: int, clients: range, jobs: tuple[tuple[str, str], ...]) -> None:
    """The same update from client ``i`` of each job (``s<i>`` binds to the sharded job, ``p<i>`` to the plain)."""
    for client in clients:
        tensors, weight, metrics = client_update(round_, client)
        for job_id, prefix in jobs:
            session, accept = await bind_to(stubs, f"{prefix}{client}", job_id)
            reply = await stubs.upload(f"{prefix}{client}", session, accept, tensors, weight, json.dumps(metrics))
            assert reply.accepted


def gone(pids: list[int]) -> bool:
    return not any(os.path.exists(f"/proc/{pid}") for pid in pids)


async def test_sharded_job_aggregates_like_an_unsharded_one_across_a_restart(planes, stub_factory):
    """Round 0 on one plane; round 1 half before a restart and half after, the kept updates folded again on
    the new plane's shards (``durable_updates``); both rounds equal the unsharded job's."""
    plane = await planes.start(durable_updates=True)
    stubs = await stub_factory(plane.address)
    await pb_grpc.FabricServiceStub(stubs.channel).LoadFabric(
        pb.LoadFabricRequest(fabric_json=json.dumps(small_fabric())))
    spec = {"demand": CLIENTS, "over_selection": 1.0, "rounds": 2}
    sharded, sharded_token = await stubs.register(name="sharded", cloud={"shards": 2}, **spec)
    plain, plain_token = await stubs.register(name="plain", **spec)
    jobs = ((sharded, "s"), (plain, "p"))
    model = {"w": np.zeros((6, 5)), "f": np.zeros(7, np.float32)}
    first_pids: list[int] = []
    for round_ in range(2):
        # The first StartRound waits for the two shard processes to import torch and join their group.
        for job_id, token in ((sharded, sharded_token), (plain, plain_token)):
            await stubs.start_round(job_id, token)
            await stubs.publish(job_id, token, round_, model)
        pool = plane.rounds.pools.get(sharded)
        assert pool is not None and not pool.broken
        assert isinstance(plane.rounds._aggregators[sharded], ShardedAggregator)
        assert pool.link == LinkCost.from_link(Link(**NVLINK))  # the selector's α-β: the placement's NVLink
        assert {pool.shard_of(f"s{client}") for client in range(CLIENTS)} == {0, 1}  # both cohorts hold updates
        first_pids = first_pids or list(pool.pids)
        assert pool.pids == first_pids and len(first_pids) == 2  # the same processes every round
        if round_ == 0:
            await upload(stubs, round_, range(CLIENTS), jobs)
        else:
            await upload(stubs, round_, range(CLIENTS // 2), jobs)
            assert [(step.round, step.algorithm) for step in pool.steps] == [(0, "allreduce")]  # n=2: no StragglAR
            await planes.stop(plane)
            assert gone(first_pids)  # the plane's shutdown stopped its shards
            plane = await planes.start(durable_updates=True,  # takes the open rounds over, folds the kept updates
                                       trace_exporter=data_point_exporter(planes.settings))
            stubs = await stub_factory(plane.address)
            pool = plane.rounds.pools.get(sharded)
            assert pool is not None and pool.pids != first_pids and plane.rounds._aggregators[sharded].results == 2
            await upload(stubs, round_, range(CLIENTS // 2, CLIENTS), jobs)
        got, got_metrics = await aggregate(stubs, sharded, sharded_token, round_)
        want, want_metrics = await aggregate(stubs, plain, plain_token, round_)
        assert got["w"].dtype == np.float64 and np.array_equal(got["w"], want["w"])  # bit-identical
        assert got["f"].dtype == np.float32 and within_one_float32_ulp(got["f"], want["f"])
        assert got_metrics == want_metrics and set(got_metrics) == {"loss"}
        model = got

    assert [step.round for step in pool.steps] == [1] and set(pool.tracker.ewma) == {0, 1}
    pids = list(pool.pids)
    assert not gone(pids)
    done = await stubs.jobs.CompleteJob(pb.JobRef(job_id=sharded, job_token=sharded_token, export_trace=True))
    folder = Path(done.trace_dir)
    card = read_card(folder / card_file(folder.name))  # the hardware section read from the job's placement
    assert card.workload.hardware.network_topo.bandwidth_gbps[1] == NVLINK["bandwidth_gbps"]
    assert card.workload.hardware.xpu_spec.total_count == 2
    assert plane.rounds.pools.get(sharded) is None and plane.rounds.pools.processes == 0
    assert gone(pids) and not pool.workdir.exists()


async def test_over_the_bound_or_with_a_dead_shard_a_job_runs_unsharded(planes, stub_factory):
    """A second job that would exceed the plane's bound is aggregated in one process; a shard that dies fails
    its attempt with UNAVAILABLE and the job's next attempt runs unsharded."""
    plane = await planes.start(max_shard_processes=2)
    stubs = await stub_factory(plane.address)
    await pb_grpc.FabricServiceStub(stubs.channel).LoadFabric(
        pb.LoadFabricRequest(fabric_json=json.dumps(small_fabric(4))))
    first, first_token = await stubs.register(name="first", demand=1, cloud={"shards": 2})
    await stubs.start_round(first, first_token)
    pool = plane.rounds.pools.get(first)
    assert pool is not None and plane.rounds.pools.processes == 2
    second, second_token = await stubs.register(name="second", demand=1, cloud={"shards": 2})
    await stubs.start_round(second, second_token)
    assert plane.rounds.pools.get(second) is None and plane.rounds.pools.processes == 2
    assert "exceed this plane's bound of 2" in plane.rounds.pools.refused(second)
    assert not isinstance(plane.rounds._aggregators[second], ShardedAggregator)

    model = {"w": np.zeros(3)}
    await stubs.publish(first, first_token, 0, model)
    os.kill(pool.pids[pool.shard_of("c0")], signal.SIGKILL)
    session, accept = await bind_to(stubs, "c0", first)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.upload("c0", session, accept, {"w": np.ones(3)}, 1.0)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and "aggregator shards" in refused.value.details()
    assert gone(pool.pids) and plane.rounds.pools.processes == 0
    info = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=first))
    assert info.current_round.state == pb.ROUND_STATE_FAILED

    retry = await stubs.start_round(first, first_token)  # the next attempt runs in the control plane
    assert retry.attempt == 1 and not isinstance(plane.rounds._aggregators[first], ShardedAggregator)
    assert "broke" in plane.rounds.pools.refused(first)
    session, accept = await bind_to(stubs, "c1", first)
    assert (await stubs.upload("c1", session, accept, {"w": np.full(3, 2.0)}, 1.0)).accepted
