"""ClientService.Multiplex: many devices' calls on one stream answer exactly as the unary RPCs do."""

from __future__ import annotations

import asyncio
import math

import grpc
import pytest

from clients.transport_mux import MultiplexedClients
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def profile(client_id: str, **numeric: float) -> pb.ClientProfile:
    return pb.ClientProfile(client_id=client_id, device_class="edge", numeric=numeric)


async def rejected(call, code: grpc.StatusCode, field: str = "") -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    assert field in (caught.value.details() or "")


@pytest.fixture
async def mux(stubs):
    clients = MultiplexedClients(stubs.channel)
    yield clients
    await clients.close()


@pytest.fixture
async def race_mux(race_plane):
    """A multiplexed stream to the accept race's plane (``race_plane``)."""
    clients = MultiplexedClients(race_plane[1].channel)
    yield clients
    await clients.close()


async def test_multiplexed_accepts_never_overfill_a_round(race_plane, race_mux):
    """200 devices of one daemon race for 50 slots over one stream: exactly 50 bind."""
    (plane, stubs), mux = race_plane, race_mux
    job_id, token = await stubs.register(name="crowded-mux", demand=50, over_selection=1.0)
    await stubs.start_round(job_id, token)
    assert (await mux.CheckIn(pb.CheckInRequest(profile=profile("probe"), wait_s=2.0))).offers

    client_ids = [f"m{i:03d}" for i in range(200)]
    checkins = await asyncio.gather(*(
        mux.CheckIn(pb.CheckInRequest(profile=profile(client_id), max_offers=4)) for client_id in client_ids))
    assert all([offer.job_id for offer in checkin.offers] == [job_id] for checkin in checkins)
    assert len({checkin.session_token for checkin in checkins}) == 200  # a session per device
    replies = await asyncio.gather(*(
        mux.Accept(pb.AcceptRequest(client_id=client_id, session_token=checkin.session_token,
                                    offer_id=checkin.offers[0].offer_id))
        for client_id, checkin in zip(client_ids, checkins, strict=True)))

    winners = {client_id for client_id, reply in zip(client_ids, replies, strict=True) if reply.bound}
    assert len(winners) == 50
    assert {reply.reason for reply in replies if not reply.bound} == {"round_full"}
    assert all(reply.job_id == job_id and reply.lease_s == plane.settings.lease_s for reply in replies if reply.bound)
    assert (await plane.hot.round(job_id)).bound == 50
    assert await plane.hot.members(job_id, 0, 0) == winners

    # An offer binds once: accepting it again (same device) is refused, so is another device's offer.
    first = client_ids.index(sorted(winners)[0])
    again = await mux.Accept(pb.AcceptRequest(client_id=client_ids[first], session_token=checkins[first].session_token,
                                              offer_id=checkins[first].offers[0].offer_id))
    assert not again.bound
    other = checkins[(first + 1) % 200]
    stolen = await mux.Accept(pb.AcceptRequest(client_id=client_ids[first], session_token=checkins[first].session_token,
                                               offer_id=other.offers[0].offer_id))
    assert not stolen.bound and stolen.reason in ("offer_not_yours", "offer_expired")


async def test_multiplexed_calls_are_validated_like_unary_ones(stubs, mux):
    job_id, token = await stubs.register(name="mux-bad", demand=2)
    await stubs.start_round(job_id, token)

    for bad in (math.nan, math.inf):
        await rejected(mux.CheckIn(pb.CheckInRequest(profile=profile("c", cpu_f=bad))), INVALID,
                       "profile.numeric.cpu_f")
    await rejected(mux.CheckIn(pb.CheckInRequest(profile=profile("c"), wait_s=-1)), INVALID, "wait_s")
    await rejected(mux.CheckIn(pb.CheckInRequest(profile=pb.ClientProfile(device_class="phone"))), INVALID,
                   "profile.device_class")
    checkin = await mux.CheckIn(pb.CheckInRequest(profile=profile("c", cpu_f=8), wait_s=2.0))
    assert [offer.job_id for offer in checkin.offers] == [job_id]
    offer_id = checkin.offers[0].offer_id

    for bad_offer in ("", "garbage", f"{job_id}.x.0.abc"):
        await rejected(mux.Accept(pb.AcceptRequest(client_id="c", session_token=checkin.session_token,
                                                   offer_id=bad_offer)), INVALID, "offer_id")
    await rejected(mux.Accept(pb.AcceptRequest(client_id="c", session_token="wrong-session", offer_id=offer_id)),
                   grpc.StatusCode.PERMISSION_DENIED)
    beat = pb.HeartbeatRequest(client_id="c", session_token=checkin.session_token, job_id="", round=0)
    await rejected(mux.Heartbeat(beat), INVALID, "job_id")
    # The stream keeps serving after every refusal.
    accept = await mux.Accept(pb.AcceptRequest(client_id="c", session_token=checkin.session_token, offer_id=offer_id))
    assert accept.bound
    beat.job_id, beat.session_token = job_id, "wrong-session"
    await rejected(mux.Heartbeat(beat), grpc.StatusCode.PERMISSION_DENIED)
    beat.session_token = checkin.session_token
    assert (await mux.Heartbeat(beat)).valid
    release = pb.ReleaseRequest(client_id="c", session_token="wrong-session", job_id=job_id, round=0)
    await rejected(mux.Release(release), grpc.StatusCode.PERMISSION_DENIED)
    release.session_token = checkin.session_token
    assert (await mux.Release(release)).released


async def test_raw_stream_matches_replies_by_call_id_and_refuses_malformed_calls(stubs):
    """Several calls in one message; an empty call or a reused call_id gets INVALID_ARGUMENT, not a dead stream."""
    job_id, token = await stubs.register(name="mux-raw", demand=5, requirements={"public": {"cpu_f": {"min": 7}}})
    await stubs.start_round(job_id, token)
    assert (await stubs.check_in("warm", wait_s=2.0, cpu_f=8)).offers
    call = pb_grpc.ClientServiceStub(stubs.channel).Multiplex()
    await call.write(pb.ClientCalls(calls=[
        pb.ClientCall(call_id=7, check_in=pb.CheckInRequest(profile=profile("r1", cpu_f=8))),
        pb.ClientCall(call_id=8),
        pb.ClientCall(call_id=9, check_in=pb.CheckInRequest(profile=profile("r2", cpu_f=8))),
    ]))
    replies: dict[int, pb.ClientReply] = {}
    while len(replies) < 3:
        for reply in (await call.read()).replies:
            replies[reply.call_id] = reply
    assert replies[7].status_code == 0 and replies[7].check_in.client_id == "r1" and replies[7].check_in.offers
    assert replies[9].status_code == 0 and replies[9].check_in.client_id == "r2"
    assert replies[8].status_code == INVALID.value[0] and "request" in replies[8].status_details
    assert replies[7].check_in.session_token != replies[9].check_in.session_token

    # A long poll (call 10: not eligible, so it waits) is in flight; reusing its call_id is refused,
    # cancelling it ends it without a reply.
    await call.write(pb.ClientCalls(calls=[
        pb.ClientCall(call_id=10, check_in=pb.CheckInRequest(profile=profile("slow", cpu_f=0), wait_s=5.0)),
        pb.ClientCall(call_id=10, check_in=pb.CheckInRequest(profile=profile("slow", cpu_f=0))),
    ]))
    duplicate = (await call.read()).replies[0]
    assert duplicate.call_id == 10 and duplicate.status_code == INVALID.value[0]
    assert "call_id" in duplicate.status_details
    await call.write(pb.ClientCalls(calls=[pb.ClientCall(call_id=10, cancel=True)]))
    await call.done_writing()
    assert await asyncio.wait_for(call.read(), 3.0) is grpc.aio.EOF  # cancelled: no reply, and the stream ends
    assert await call.code() == grpc.StatusCode.OK


async def test_a_timed_out_long_poll_is_cancelled_on_the_server(plane, mux, wait_for):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await mux.CheckIn(pb.CheckInRequest(profile=profile("idle", cpu_f=1), wait_s=5.0), timeout=0.3)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    async def no_waiter() -> bool:
        return len(plane.binder.waiting) == 0

    await wait_for(no_waiter, timeout_s=2.0, what="the cancelled check-in to stop waiting")


async def test_calls_in_flight_fail_unavailable_when_the_server_goes_and_work_again_after(planes, wait_for):
    first = await planes.start()
    channel = grpc.aio.insecure_channel(first.address)
    mux = MultiplexedClients(channel)
    try:
        poll = asyncio.create_task(mux.CheckIn(pb.CheckInRequest(profile=profile("p", cpu_f=1), wait_s=5.0)))

        async def waiting() -> bool:
            return len(first.binder.waiting) == 1

        await wait_for(waiting, what="the long poll to arrive")
        port = first.port
        await planes.stop(first, grace_s=0.1)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(poll, 5.0)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # as a unary call would: devices back off

        await planes.start(port=port)

        async def served() -> bool:
            try:
                reply = await mux.CheckIn(pb.CheckInRequest(profile=profile("p", cpu_f=1)), timeout=1.0)
            except grpc.aio.AioRpcError:
                return False
            return bool(reply.session_token)

        await wait_for(served, timeout_s=10.0, what="a new stream to the restarted control plane")
    finally:
        await mux.close()
        await channel.close()


async def test_large_batches_are_split_into_messages_of_bounded_size(stubs, mux, monkeypatch):
    import clients.transport_mux
    import control_plane.client_service

    monkeypatch.setattr(control_plane.client_service, "MAX_BATCH_BYTES", 600)
    monkeypatch.setattr(clients.transport_mux, "MAX_BATCH_BYTES", 200)
    job_id, token = await stubs.register(name="mux-split", demand=100)
    await stubs.start_round(job_id, token)
    assert (await stubs.check_in("warm", wait_s=2.0)).offers
    checkins = await asyncio.gather(*(mux.CheckIn(pb.CheckInRequest(profile=profile(f"s{i}"))) for i in range(60)))
    assert [checkin.client_id for checkin in checkins] == [f"s{i}" for i in range(60)]
    assert all(checkin.offers[0].job_id == job_id for checkin in checkins)


async def test_daemon_devices_bind_again_after_a_control_plane_restart(planes, stub_factory, wait_for, tmp_path):
    """propius-client's devices share one Multiplex stream; a restarted control plane gets a new one."""
    from clients.daemon import run_devices
    from clients.device import AgentConfig
    from clients.identity import simulated_devices

    first = await planes.start()
    port = first.port
    stubs = await stub_factory(first.address)
    job_id, token = await stubs.register(name="mux-restart", demand=2, over_selection=1.0)
    stop = asyncio.Event()
    devices = simulated_devices(3, 0, seed=3, state_dir=tmp_path / "devices")
    config = AgentConfig(wait_s=1.0, idle_retry_s=0.05, backoff_initial_s=0.05, backoff_cap_s=0.3)
    serving = asyncio.create_task(run_devices(first.address, devices, stop=stop, max_tasks=None, config=config))
    try:
        async def polling(plane) -> bool:
            return len(plane.binder.waiting) >= 1

        await wait_for(lambda: polling(first), what="devices long-polling the first plane")
        await planes.stop(first)
        second = await planes.start(port=port)
        stubs = await stub_factory(second.address)
        await stubs.start_round(job_id, token)

        async def bound() -> bool:
            state = await second.hot.round(job_id)
            return state is not None and state.bound >= 2

        await wait_for(bound, timeout_s=30.0, what="the daemon's devices to bind on the restarted plane")
        assert not serving.done()
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)
