"""Bad input gets the right gRPC status naming the field, and the service keeps serving afterwards.

Every rejection is followed by a valid call on the same channel that must succeed, and rejected
uploads must never cost a round the updates it already accepted.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable

import grpc
import numpy as np
import pytest

from data_plane.tensors import encode
from propius.proto import propius_pb2 as pb

INVALID = grpc.StatusCode.INVALID_ARGUMENT


async def rejected(call: Awaitable[object], code: grpc.StatusCode, field: str = "") -> str:
    """Await ``call``, expect status ``code`` whose details start with ``field``; return the details."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    details = info.value.details() or ""
    assert info.value.code() == code, f"{info.value.code()}: {details}"
    assert details.startswith(field), details
    return details


async def test_job_service_rejects_bad_specs_ids_and_tokens(stubs):
    register = stubs.jobs.RegisterJob
    details = await rejected(register(pb.RegisterJobRequest(spec_json='{"name": "x", "demand": ')), INVALID)
    assert "json" in details.lower()
    await rejected(register(pb.RegisterJobRequest(spec_json='{"name": "x", "demand": 0}')), INVALID, "demand")
    await rejected(register(pb.RegisterJobRequest(spec_json='{"name": "x", "demand": 2, "colour": 1}')), INVALID,
                   "colour")
    await rejected(register(pb.RegisterJobRequest(spec_json="")), INVALID, "spec_json")
    job_id, token = await stubs.register(name="valid", demand=1)  # still serving

    await rejected(stubs.jobs.GetJob(pb.GetJobRequest(job_id="f" * 32)), grpc.StatusCode.NOT_FOUND)
    await rejected(stubs.start_round("f" * 32, token), grpc.StatusCode.NOT_FOUND)
    await rejected(stubs.jobs.GetJob(pb.GetJobRequest(job_id="")), INVALID, "job_id")
    await rejected(stubs.start_round(job_id, "wrong-token"), grpc.StatusCode.PERMISSION_DENIED)
    await rejected(stubs.jobs.CompleteJob(pb.JobRef(job_id=job_id, job_token="wrong-token")),
                   grpc.StatusCode.PERMISSION_DENIED)
    info = await stubs.start_round(job_id, token)
    assert info.state == pb.ROUND_STATE_OPEN
    await rejected(stubs.start_round(job_id, token), grpc.StatusCode.FAILED_PRECONDITION)  # still open
    job = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id))
    assert job.state == pb.JOB_STATE_RUNNING


async def test_client_service_rejects_bad_profiles_offers_and_sessions(stubs):
    job_id, token = await stubs.register(name="clients", demand=2)
    await stubs.start_round(job_id, token)

    for bad in (math.nan, math.inf, -math.inf):
        profile = pb.ClientProfile(client_id="c", numeric={"cpu_f": bad})
        await rejected(stubs.clients.CheckIn(pb.CheckInRequest(profile=profile)), INVALID, "profile.numeric.cpu_f")
    await rejected(stubs.clients.CheckIn(pb.CheckInRequest(profile=pb.ClientProfile(client_id="c"), wait_s=-1)),
                   INVALID, "wait_s")
    await rejected(stubs.clients.CheckIn(pb.CheckInRequest(profile=pb.ClientProfile(device_class="phone"))),
                   INVALID, "profile.device_class")
    checkin = await stubs.check_in("c", wait_s=2.0, cpu_f=8)
    assert [offer.job_id for offer in checkin.offers] == [job_id]

    for offer_id in ("garbage", f"{job_id}.0.0", f"{job_id}.x.0.abc", f"{job_id}.0.0.a.b"):
        await rejected(stubs.accept("c", checkin.session_token, offer_id), INVALID, "offer_id")
    await rejected(stubs.accept("c", checkin.session_token, ""), INVALID, "offer_id")
    await rejected(stubs.accept("c", "wrong-session", checkin.offers[0].offer_id), grpc.StatusCode.PERMISSION_DENIED)
    accept = await stubs.accept("c", checkin.session_token, checkin.offers[0].offer_id)
    assert accept.bound

    beat = pb.HeartbeatRequest(client_id="c", session_token="wrong-session", job_id=job_id, round=0)
    await rejected(stubs.clients.Heartbeat(beat), grpc.StatusCode.PERMISSION_DENIED)
    beat.session_token = checkin.session_token
    assert (await stubs.clients.Heartbeat(beat)).valid


async def test_bad_uploads_are_rejected_without_losing_accepted_data(planes, stub_factory):
    plane = await planes.start(max_update_bytes=4096)
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="uploads", demand=3, over_selection=1.0)
    await stubs.start_round(job_id, token)
    model = {"w": np.zeros((2, 3), np.float32)}
    await stubs.publish(job_id, token, 0, model)
    good_update = {"w": np.ones((2, 3), np.float32)}

    first, first_accept = await stubs.bind("first")
    assert (await stubs.upload("first", first.session_token, first_accept, good_update, 2.0)).results == 1
    checkin, accept = await stubs.bind("c")
    session = checkin.session_token

    def upload(update=good_update, num_samples=1.0, metrics="{}", payload=None, target=accept, token=session):
        return stubs.upload("c", token, target, update, num_samples, metrics, payload)

    rng = np.random.default_rng(7)
    valid = encode(good_update)
    nan_update = {"w": np.array([[1, 2, np.nan], [0, 0, 0]], np.float32)}
    await rejected(upload(token="wrong-session"), grpc.StatusCode.PERMISSION_DENIED)
    await rejected(upload(update={"w": np.zeros(2000, np.float32)}), grpc.StatusCode.RESOURCE_EXHAUSTED)
    await rejected(upload(payload=rng.bytes(512)), INVALID, "data")
    await rejected(upload(payload=valid[:-5]), INVALID, "data")  # truncated safetensors
    await rejected(upload(payload=valid[:6]), INVALID, "data")
    await rejected(upload(payload=b""), INVALID, "data")
    await rejected(upload(update=nan_update), INVALID, "data")
    await rejected(upload(update={"w": np.ones((3, 2), np.float32)}), INVALID, "data")  # shape differs
    await rejected(upload(update={"w": np.ones((2, 3), np.float64)}), INVALID, "data")  # dtype differs
    await rejected(upload(update={"v": np.ones((2, 3), np.float32)}), INVALID, "data")  # name differs
    for samples in (-1.0, 0.0, math.nan, math.inf, 1.5e308, 1e12 * 1.01):
        await rejected(upload(num_samples=samples), INVALID, "num_samples")
    for metrics in ("not json", "[1, 2]", '{"loss": "low"}', '{"loss": NaN}', '{"ok": true}', '{"a": Infinity}',
                    "[" * 100_000 + "]" * 100_000, '{"a": ' + "[" * 5000 + "]" * 5000 + "}"):
        await rejected(upload(metrics=metrics), INVALID, "metrics_json")
    # An upload to a round or attempt the client is not bound to is refused before its body is read.
    stale_round = pb.AcceptResponse(job_id=job_id, round=5, attempt=0)
    await rejected(upload(target=stale_round), grpc.StatusCode.PERMISSION_DENIED)
    stale_attempt = pb.AcceptResponse(job_id=job_id, round=0, attempt=1)
    await rejected(upload(target=stale_attempt), grpc.StatusCode.PERMISSION_DENIED)
    await rejected(stubs.upload("stranger", session, accept, good_update, 1.0), grpc.StatusCode.PERMISSION_DENIED)

    state = await plane.hot.round(job_id)
    assert (state.state, state.results) == ("open", 1)  # the rejects neither counted nor lost anything
    reply = await upload(update={"w": np.full((2, 3), 4.0, np.float32)}, num_samples=2.0, metrics='{"loss": 0.5}')
    assert reply.accepted and reply.results == 2

    last, last_accept = await stubs.bind("last")
    assert (await stubs.upload("last", last.session_token, last_accept, good_update, 4.0)).results == 3
    info, aggregate = await stubs.aggregate(job_id, token, 0)
    assert info.state == pb.ROUND_STATE_CLOSED and info.results == 3
    np.testing.assert_allclose(aggregate["w"], np.full((2, 3), (2 + 8 + 4) / 8, np.float32))
    retry = await upload()  # "c" was counted: after the round closed, its retry is a duplicate, not an error
    assert (retry.accepted, retry.duplicate) == (False, True)
    late, late_accept = checkin, pb.AcceptResponse(job_id=job_id, round=0, attempt=0)
    await rejected(stubs.upload("late", late.session_token, late_accept, good_update, 1.0),
                   grpc.StatusCode.PERMISSION_DENIED)  # another client's session


async def test_bad_models_are_rejected(stubs):
    job_id, token = await stubs.register(name="models", demand=1)
    await stubs.start_round(job_id, token)
    request = pb.PublishModelRequest(job_id=job_id, job_token=token, round=0, data=b"\x00" * 64)
    await rejected(stubs.data.PublishModel(iter([request])), INVALID, "data")
    nan = pb.PublishModelRequest(job_id=job_id, job_token=token, round=0,
                                 data=encode({"w": np.array([np.inf], np.float32)}))
    await rejected(stubs.data.PublishModel(iter([nan])), INVALID, "data")
    wrong = pb.PublishModelRequest(job_id=job_id, job_token="wrong", round=0, data=encode({"w": np.ones(1)}))
    await rejected(stubs.data.PublishModel(iter([wrong])), grpc.StatusCode.PERMISSION_DENIED)
    stale = pb.PublishModelRequest(job_id=job_id, job_token=token, round=3, data=encode({"w": np.ones(1)}))
    await rejected(stubs.data.PublishModel(iter([stale])), grpc.StatusCode.FAILED_PRECONDITION)
    assert await stubs.publish(job_id, token, 0, {"w": np.ones(1, np.float32)})
