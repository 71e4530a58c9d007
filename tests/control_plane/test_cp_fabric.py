"""The cloud fabric in the real control plane (gRPC, Redis, SQLite or PostgreSQL): jobs' cloud requests
placed at registration or queued with a reason, released on completion and cancel, an accelerator failure
recovered onto a spare with the job told, all of it surviving a control-plane restart."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from control_plane.fabric_store import FabricRecord, FabricStore, StaleFabric
from propius.fabric import AcceleratorState
from propius.fabric.snapshot import snapshot
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec


def rack_fabric() -> dict:
    """One programmable rack of two hosts with four GPUs each (one NVLink domain per host) on four EPS rails;
    h1-g3 is a spare; four fibres join the two hosts' interposers."""
    hosts = ["h0", "h1"]
    return {
        "sites": [{"id": "dc"}],
        "racks": [{"id": "r0", "site": "dc", "programmable": True}],
        "hosts": [{"id": h, "rack": "r0", "srg": {"power": f"p-{h}", "board": h, "tor": "tor0"},
                   "interposer": {"fibres": {other: 4 for other in hosts if other != h}}} for h in hosts],
        "accelerators": [{"id": f"{h}-g{i}", "host": h, "index": i, "domain": h,
                          **({"state": "spare"} if (h, i) == ("h1", 3) else {})} for h in hosts for i in range(4)],
        "rails": [{"id": f"rail{i}", "index": i, "kind": "eps"} for i in range(4)],
    }


class FabricStubs:
    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.jobs = pb_grpc.JobServiceStub(self.channel)
        self.fabric = pb_grpc.FabricServiceStub(self.channel)

    async def load(self, document: dict) -> pb.FabricChange:
        return await self.fabric.LoadFabric(pb.LoadFabricRequest(fabric_json=json.dumps(document)))

    async def register(self, name: str, **cloud) -> tuple[str, str]:
        spec = JobSpec.parse({"name": name, "demand": 1, "cloud": cloud})
        reply = await self.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()))
        return reply.job_id, reply.job_token

    async def placement(self, job_id: str) -> pb.JobPlacement:
        return (await self.jobs.GetJob(pb.GetJobRequest(job_id=job_id))).placement

    async def close(self) -> None:
        await self.channel.close()


@pytest.fixture
async def connect():
    made: list[FabricStubs] = []

    async def make(address: str) -> FabricStubs:
        made.append(FabricStubs(address))
        return made[-1]

    yield make
    for stubs in made:
        await stubs.close()


async def _recovery_event(stubs: FabricStubs, job_id: str, started: asyncio.Event) -> pb.JobEvent:
    async for event in stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job_id)):
        started.set()
        if event.kind == "fabric_recovery":
            return event
    raise AssertionError("the watch ended without a fabric_recovery event")


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, sqlite_url) -> str:
    return request.getfixturevalue("pg_database_url") if request.param == "postgres" else sqlite_url


async def test_place_queue_fail_and_restart(planes, connect, database_url):
    plane = await planes.start(database_url=database_url)
    stubs = await connect(plane.address)
    assert (await stubs.load(rack_fabric())).version == 1

    first, first_token = await stubs.register("first", count=4)
    held = await stubs.placement(first)
    assert list(held.accelerators) == ["h0-g0", "h0-g1", "h0-g2", "h0-g3"]  # one host: no rail carries its traffic
    assert list(held.racks) == ["r0"] and held.requested == 4 and not held.waiting_reason
    second, _ = await stubs.register("second", count=4)
    waiting = await stubs.placement(second)
    assert not waiting.accelerators and "no set of hosts" in waiting.waiting_reason  # 3 free, 1 spare on h1

    # Restart: a new control plane on the same SQL rebuilds the very same state.
    before = plane.fabric.view
    await planes.stop(plane)
    plane = await planes.start(database_url=database_url)
    after = plane.fabric.view
    after.state.check_invariants()
    assert after.state.allocations == before.state.allocations and snapshot(after.state) == snapshot(before.state)
    stubs = await connect(plane.address)
    assert list((await stubs.placement(first)).accelerators) == list(held.accelerators)
    assert (await stubs.placement(second)).waiting_reason == waiting.waiting_reason

    # A failure: the spare on the other host takes h0-g1's rank over a light path, and the job is told.
    started = asyncio.Event()
    watch = asyncio.create_task(_recovery_event(stubs, first, started))
    await asyncio.wait_for(started.wait(), 5)
    change = await stubs.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="h0-g1"))
    recovery = change.recovery
    assert (recovery.kind, recovery.job_id, recovery.failed, recovery.spare) == (
        "in-rack swap", first, "h0-g1", "h1-g3")
    assert recovery.throughput == 1.0
    assert recovery.time_s == pytest.approx(sum(recovery.components.values()))
    assert {"detect", "program", "restart", "comm_init", "first_step", "lost_work"} == set(recovery.components)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="h0-g1"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "already failed" in refused.value.details()
    event = await asyncio.wait_for(watch, 5)
    assert event.recovery == recovery and list(event.job.placement.accelerators) == [
        "h0-g0", "h1-g3", "h0-g2", "h0-g3"]

    # Restart again: the failure and the swap are durable.
    await planes.stop(plane)
    plane = await planes.start(database_url=database_url)
    state = plane.fabric.view.state
    state.check_invariants()
    assert state.state("h0-g1") == AcceleratorState.FAILED
    assert state.allocations[first].accelerators == ("h0-g0", "h1-g3", "h0-g2", "h0-g3")
    assert [c.path for c in state.allocations[first].fibre] == [("h1", "h0")]
    stubs = await connect(plane.address)

    # The first job completes: its accelerators come back and the waiting job is placed on them.
    await stubs.jobs.CompleteJob(pb.JobRef(job_id=first, job_token=first_token))
    placed = await stubs.placement(second)
    assert list(placed.accelerators) == ["h1-g0", "h1-g1", "h1-g2", "h1-g3"] and not placed.waiting_reason
    assert first not in plane.fabric.view.state.allocations
    info = await stubs.fabric.GetFabric(pb.GetFabricRequest())
    assert info.version == plane.fabric.view.record.version and not info.waiting
    assert json.loads(info.state_json)["states"] == {"h0-g1": "failed"}


async def test_bad_fabric_impossible_request_and_cancel(planes, connect):
    plane = await planes.start()
    stubs = await connect(plane.address)
    footprint = (await stubs.jobs.ListJobs(pb.ListJobsRequest(include_finished=True))).jobs

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.register("early", count=1)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("cloud: ") and "no fabric" in refused.value.details()

    bad = rack_fabric()
    bad["accelerators"][2]["host"] = "h9"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.load(bad)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "accelerator 'h0-g2'" in refused.value.details() and "'h9' is not defined" in refused.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.fabric.LoadFabric(pb.LoadFabricRequest(fabric_json="[" * 50_000))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await stubs.fabric.GetFabric(pb.GetFabricRequest())).version == 0  # nothing half-loaded

    await stubs.load(rack_fabric())
    for cloud, field in (({"count": 100}, "cloud.count: 100 accelerators requested, the fabric has 8"),
                         ({"count": 8, "parallel": {"tp": 8}}, "cloud.count: can never be placed")):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stubs.register("impossible", **cloud)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details().startswith(field)
    assert (await stubs.jobs.ListJobs(pb.ListJobsRequest(include_finished=True))).jobs == footprint  # no trace

    job, token = await stubs.register("cancelled", count=2, parallel={"tp": 2})
    assert len((await stubs.placement(job)).accelerators) == 2
    with pytest.raises(grpc.aio.AioRpcError) as refused:  # the new fabric lacks the job's host h0
        smaller = rack_fabric()
        smaller["hosts"] = smaller["hosts"][1:]
        smaller["hosts"][0].pop("interposer")
        smaller["accelerators"] = smaller["accelerators"][4:]
        await stubs.load(smaller)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"would orphan job {job!r}" in refused.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="nope"))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND

    cancelled = await stubs.jobs.CancelJob(pb.JobRef(job_id=job, job_token=token))
    assert cancelled.placement.requested == 2 and not cancelled.placement.accelerators
    assert plane.fabric.view.state.allocations == {}
    assert (await stubs.load(smaller)).version == plane.fabric.view.record.version  # nothing held now


async def test_a_failure_without_spares_waits_for_the_repair(planes, connect):
    plane = await planes.start()
    stubs = await connect(plane.address)
    no_spare = rack_fabric()
    no_spare["accelerators"][-1].pop("state")
    await stubs.load(no_spare)
    job, _ = await stubs.register("whole", count=8, parallel={"tp": 4, "dp": 2})
    assert len((await stubs.placement(job)).accelerators) == 8
    change = await stubs.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="h1-g2"))
    assert (change.recovery.kind, change.recovery.job_id, change.recovery.spare) == ("queue", job, "")
    waiting = await stubs.placement(job)
    assert not waiting.accelerators and waiting.waiting_reason.startswith("accelerator h1-g2 failed")
    repaired = await stubs.fabric.RepairAccelerator(pb.AcceleratorRequest(accelerator="h1-g2"))
    assert list(repaired.placed_jobs) == [job]
    assert len((await stubs.placement(job)).accelerators) == 8
    plane.fabric.view.state.check_invariants()


async def test_shards_serialise_fabric_changes_through_sql(planes, connect, pg_database_url):
    """Two control planes on one PostgreSQL: a change on one is seen by the other before it changes the
    fabric, and a commit from a stale read is refused by the version's compare-and-set."""
    one = await planes.start(database_url=pg_database_url)
    two = await planes.start(database_url=pg_database_url)
    a, b = await connect(one.address), await connect(two.address)
    await a.load(rack_fabric())
    job, _ = await a.register("sharded", count=4)
    change = await b.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="h0-g2"))  # shard two re-reads first
    assert (change.recovery.kind, change.recovery.job_id, change.recovery.spare) == ("in-rack swap", job, "h1-g3")
    assert (await one.fabric.current()).state.allocations == two.fabric.view.state.allocations

    store = FabricStore(one.store.engine)
    read = store.read()
    newer = FabricRecord(read.version + 1, read.document, read.snapshot, {})
    store.commit(read, newer, 0.0)
    with pytest.raises(StaleFabric):
        store.commit(read, newer, 0.0)  # a second writer from the same read loses
    assert store.read() == newer


async def test_fabric_changes_need_admin_with_keys(planes, connect):
    plane = await planes.start(auth="keys")
    _, submit_key = plane.identities.create_key("alice", ("submit", "read"), 0.0)
    _, admin_key = plane.identities.create_key("ops", ("admin",), 0.0)
    stubs = await connect(plane.address)
    document = pb.LoadFabricRequest(fabric_json=json.dumps(rack_fabric()))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.fabric.LoadFabric(document, metadata=(("authorization", f"Bearer {submit_key}"),))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "'admin'" in refused.value.details()
    assert (await stubs.fabric.GetFabric(pb.GetFabricRequest(),
                                         metadata=(("authorization", f"Bearer {submit_key}"),))).version == 0
    reply = await stubs.fabric.LoadFabric(document, metadata=(("authorization", f"Bearer {admin_key}"),))
    assert reply.version == 1


async def _event(stubs: FabricStubs, job_id: str, kind: str, started: asyncio.Event) -> pb.JobEvent:
    async for event in stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job_id)):
        started.set()
        if event.kind == kind:
            return event
    raise AssertionError(f"the watch ended without a {kind} event")


async def test_a_preemptible_job_borrows_the_spare_until_a_failure_reclaims_it(planes, connect, database_url):
    plane = await planes.start(database_url=database_url)
    stubs = await connect(plane.address)
    await stubs.load(rack_fabric())
    big, _ = await stubs.register("big", count=4)
    other, _ = await stubs.register("other", count=3)
    assert list((await stubs.placement(big)).accelerators) == ["h0-g0", "h0-g1", "h0-g2", "h0-g3"]
    assert list((await stubs.placement(other)).accelerators) == ["h1-g0", "h1-g1", "h1-g2"]
    plain, plain_token = await stubs.register("plain", count=1)  # only the spare h1-g3 is left
    waiting = await stubs.placement(plain)
    assert not waiting.accelerators and waiting.waiting_reason  # a non-preemptible job never gets a spare
    borrower, _ = await stubs.register("borrower", count=1, preemptible=True)
    assert list((await stubs.placement(borrower)).accelerators) == ["h1-g3"]
    await stubs.jobs.CancelJob(pb.JobRef(job_id=plain, job_token=plain_token))
    assert plane.fabric.view.state.lent() == {"h1-g3": borrower}
    assert plane.fabric.view.state.reserve("r0") == 1

    # Restart: the lent spare is still lent (SQL keeps the mark).
    await planes.stop(plane)
    plane = await planes.start(database_url=database_url)
    assert plane.fabric.view.state.lent() == {"h1-g3": borrower}
    stubs = await connect(plane.address)

    # big's chip fails: no free spare, so the lent one is reclaimed; the borrower is preempted and told.
    started = asyncio.Event()
    watch = asyncio.create_task(_event(stubs, borrower, "fabric_preempted", started))
    await asyncio.wait_for(started.wait(), 5)
    change = await stubs.fabric.FailAccelerator(pb.AcceleratorRequest(accelerator="h0-g1"))
    assert (change.recovery.kind, change.recovery.job_id, change.recovery.spare) == ("in-rack swap", big, "h1-g3")
    event = await asyncio.wait_for(watch, 5)
    assert (event.recovery.kind, event.recovery.job_id, event.recovery.failed, event.recovery.spare) == (
        "preempted", borrower, "h0-g1", "h1-g3")
    waiting = await stubs.placement(borrower)
    assert not waiting.accelerators and waiting.waiting_reason == "preempted: spare reclaimed for h0-g1"
    assert event.job.placement.waiting_reason == waiting.waiting_reason
    assert list((await stubs.placement(big)).accelerators) == ["h0-g0", "h1-g3", "h0-g2", "h0-g3"]

    # Restart: the same state and the same waiting reason.
    before = plane.fabric.view
    await planes.stop(plane)
    plane = await planes.start(database_url=database_url)
    after = plane.fabric.view
    after.state.check_invariants()
    assert snapshot(after.state) == snapshot(before.state) and after.record.pending == before.record.pending
    assert after.state.lent() == {} and after.state.reserve("r0") == 0
    stubs = await connect(plane.address)
    assert (await stubs.placement(borrower)).waiting_reason == "preempted: spare reclaimed for h0-g1"

    # The repair frees h0-g1: the queue retry places the preempted job again.
    started = asyncio.Event()
    watch = asyncio.create_task(_event(stubs, borrower, "fabric_placed", started))
    await asyncio.wait_for(started.wait(), 5)
    repaired = await stubs.fabric.RepairAccelerator(pb.AcceleratorRequest(accelerator="h0-g1"))
    assert list(repaired.placed_jobs) == [borrower]
    await asyncio.wait_for(watch, 5)
    placed = await stubs.placement(borrower)
    assert list(placed.accelerators) == ["h0-g1"] and not placed.waiting_reason
    plane.fabric.view.state.check_invariants()

    # Reloading the same file keeps both: the spare the file declares is big's now, not a lent one.
    version = plane.fabric.view.record.version
    assert (await stubs.load(rack_fabric())).version == version + 1
    state = plane.fabric.view.state
    assert state.allocations[big].accelerators == ("h0-g0", "h1-g3", "h0-g2", "h0-g3")
    assert state.allocations[borrower].accelerators == ("h0-g1",) and state.lent() == {}
