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
from propius.trace.check import check_data_point
from propius.trace.datapoint import load_data_point
from propius.trace.export import data_point_exporter
from propius.trace.format import card_file
from propius.trace.metrics import compute_metrics
from tests.trace.ccl_bench_tools import ccl_bench_communication_fraction

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
    # Beside it, the shards' own data point: the new plane's pool recorded one reduce (round 1).
    (tier,) = [p for p in folder.parent.iterdir() if p.name != folder.name and "sharded-tier2" in p.name]
    tier_card = read_card(tier / card_file(tier.name))
    assert tier_card.workload.model.iteration == 1 and tier_card.collection_notes["steps"][0]["round"] == 1


async def test_a_sharded_job_exports_its_shards_collectives_as_a_ccl_bench_data_point(planes, stub_factory):
    """Five rounds on two shards: CompleteJob writes, beside the job's data point, one of the shards' recorded
    reduces (the pack and gloo's all_reduce, as torch.profiler saw them) that passes the format check, and whose
    communication fraction by our metrics is CCL-Bench's."""
    rounds = 5
    plane = await planes.start(trace_exporter=data_point_exporter(planes.settings))
    stubs = await stub_factory(plane.address)
    await pb_grpc.FabricServiceStub(stubs.channel).LoadFabric(
        pb.LoadFabricRequest(fabric_json=json.dumps(small_fabric())))
    job, token = await stubs.register(name="traced", cloud={"shards": 2}, demand=CLIENTS, over_selection=1.0,
                                      rounds=rounds)
    model = {"w": np.zeros((6, 5)), "f": np.zeros(7, np.float32)}
    for round_ in range(rounds):
        await stubs.start_round(job, token)
        await stubs.publish(job, token, round_, model)
        await upload(stubs, round_, range(CLIENTS), ((job, "s"),))
        model, _ = await aggregate(stubs, job, token, round_)
    done = await stubs.jobs.CompleteJob(pb.JobRef(job_id=job, job_token=token, export_trace=True))
    folder = Path(done.trace_dir)
    (tier,) = [p for p in folder.parent.iterdir() if p.name != folder.name and "traced-tier2" in p.name]
    assert check_data_point(tier) == []
    assert sorted(p.name for p in tier.iterdir()) == sorted(["rank0_trace.json", "rank1_trace.json", "run.sh",
                                                             card_file(tier.name)])
    card = read_card(tier / card_file(tier.name))
    assert card.workload.model.iteration == rounds and card.workload.data.batch_size == 8  # weights 1, 2, 4, 1
    assert [step["round"] for step in card.collection_notes["steps"]] == list(range(rounds))
    assert card.workload.hardware.network_topo.bandwidth_gbps[1] == NVLINK["bandwidth_gbps"]
    for rank in (0, 1):
        events = json.loads((tier / f"rank{rank}_trace.json").read_text())["traceEvents"]
        kernels = {e["name"] for e in events if e.get("cat") == "kernel"}
        assert {"gloo:all_reduce", "tier_pack_partial"} <= kernels  # the collective and the pack, as recorded
    ours = compute_metrics(load_data_point(tier)).communication_fraction
    assert ours is not None and 0 < ours < 1 and ours == pytest.approx(ccl_bench_communication_fraction(tier))


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
