"""Device identities: a device acts only under the client id its credential is bound to, so the session
takeover of issue 24 (check in under a bound client's id, read from ListClients) is refused; enrolment
binds an id once; a daemon enrols its devices, keeps the credentials (0600) and reuses them on restart."""

from __future__ import annotations

import asyncio
import stat
import time

import grpc
import numpy as np

from clients.daemon import run_devices
from clients.device import AgentConfig
from clients.enrolment import Credentials
from clients.executors.models import initial_weights
from clients.identity import simulated_devices
from data_plane.tensors import encode
from propius.certs import init_certs
from propius.channels import async_channel
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import AsyncJob
from propius.specs import JobSpec
from tests.security.auth_setup import api_key, enrolled, footprint, keyed_plane, refused
from tests.security.tls_setup import Pki

UNAUTHENTICATED, DENIED = grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED


def _check_in(client_id: str) -> pb.CheckInRequest:
    return pb.CheckInRequest(profile=pb.ClientProfile(client_id=client_id, numeric={"ram": 4}), wait_s=3.0)


async def test_a_device_without_a_valid_credential_is_refused(plane, stubs):
    before = await footprint(plane)
    assert await refused(stubs.clients.CheckIn(_check_in("phone-1"))) == UNAUTHENTICATED
    forged = (("x-propius-device-token", "pd_000000000000_" + "y" * 43),)
    assert await refused(stubs.clients.CheckIn(_check_in("phone-1"), metadata=forged)) == UNAUTHENTICATED
    fetch = pb.FetchModelRequest(client_id="phone-1", session_token="s", job_id="j", round=0)
    assert await refused(anext(aiter(stubs.data.FetchModel(fetch)))) == UNAUTHENTICATED
    assert await footprint(plane) == before


async def test_enrolment_binds_a_client_id_once(plane, stubs):
    _, token = plane.identities.create_enrolment(2, 60.0, time.time())
    first = await stubs.clients.Enroll(pb.EnrollRequest(enrolment_token=str(token), client_id="phone-1"))
    assert first.client_id == "phone-1" and first.device_token.startswith("pd_")
    again = pb.EnrollRequest(enrolment_token=str(token), client_id="phone-1")
    assert await refused(stubs.clients.Enroll(again)) == DENIED  # the id is taken; the token's use is not spent
    await stubs.clients.Enroll(pb.EnrollRequest(enrolment_token=str(token), client_id="phone-2"))
    used_up = pb.EnrollRequest(enrolment_token=str(token), client_id="phone-3")
    assert await refused(stubs.clients.Enroll(used_up)) == UNAUTHENTICATED
    _, expired = plane.identities.create_enrolment(5, 1.0, time.time() - 10)
    late = pb.EnrollRequest(enrolment_token=str(expired), client_id="phone-4")
    assert await refused(stubs.clients.Enroll(late)) == UNAUTHENTICATED
    device = (("x-propius-device-token", first.device_token),)
    assert (await stubs.clients.CheckIn(_check_in("phone-1"), metadata=device)).client_id == "phone-1"
    assert plane.identities.revoke_device("phone-1", time.time())
    assert await refused(stubs.clients.CheckIn(_check_in("phone-1"), metadata=device)) == UNAUTHENTICATED


async def test_the_session_takeover_sequence_is_refused(plane, stubs):
    owner, reader = api_key(plane, "alice", "submit"), api_key(plane, "ops", "read")
    devices = enrolled(plane, "victim", "attacker")
    spec = JobSpec.parse({"name": "t", "demand": 1, "over_selection": 1.0, "schedule_timeout_s": 60})
    job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()), metadata=owner)
    await stubs.jobs.StartRound(pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token), metadata=owner)
    model = encode({"w": np.zeros(2, np.float32)})
    publish = pb.PublishModelRequest(job_id=job.job_id, job_token=job.job_token, round=0, data=model)
    await stubs.data.PublishModel(iter([publish]), metadata=owner)
    victim = await stubs.clients.CheckIn(_check_in("victim"), metadata=devices["victim"])
    bound = await stubs.clients.Accept(pb.AcceptRequest(client_id="victim", session_token=victim.session_token,
                                                        offer_id=victim.offers[0].offer_id), metadata=devices["victim"])
    assert bound.bound

    # The attacker learns the bound id (ListClients needs the read role; assume it leaked) ...
    listed = await stubs.clients.ListClients(pb.ListClientsRequest(), metadata=reader)
    assert "victim" in {info.profile.client_id for info in listed.clients}
    # ... and checks in under it: with no credential, with its own, over a Multiplex stream.
    assert await refused(stubs.clients.CheckIn(_check_in("victim"))) == UNAUTHENTICATED
    assert await refused(stubs.clients.CheckIn(_check_in("victim"), metadata=devices["attacker"])) == DENIED
    own_token = dict(devices["attacker"])["x-propius-device-token"]
    stream = stubs.clients.Multiplex(iter([pb.ClientCalls(calls=[
        pb.ClientCall(call_id=1, check_in=_check_in("victim"), device_token=own_token)])]))
    replies = [reply async for message in stream for reply in message.replies]
    assert [(r.call_id, r.status_code) for r in replies] == [(1, DENIED.value[0])]
    # Nor can it upload, heartbeat or release as the victim, even holding the victim's session token.
    upload = pb.UploadUpdateRequest(client_id="victim", session_token=victim.session_token, job_id=job.job_id,
                                    round=0, attempt=bound.attempt, num_samples=1e6, data=encode(
                                        {"w": np.full(2, 1e30, np.float32)}))
    assert await refused(stubs.data.UploadUpdate(iter([upload]), metadata=devices["attacker"])) == DENIED
    heartbeat = pb.HeartbeatRequest(client_id="victim", session_token=victim.session_token, job_id=job.job_id)
    assert await refused(stubs.clients.Heartbeat(heartbeat, metadata=devices["attacker"])) == DENIED
    release = pb.ReleaseRequest(client_id="victim", session_token=victim.session_token, job_id=job.job_id)
    assert await refused(stubs.clients.Release(release, metadata=devices["attacker"])) == DENIED

    # The victim's session and binding are intact, and its own update is the one that counts.
    assert (await stubs.clients.Heartbeat(heartbeat, metadata=devices["victim"])).valid
    upload.num_samples, upload.data = 10, encode({"w": np.ones(2, np.float32)})
    assert (await stubs.data.UploadUpdate(iter([upload]), metadata=devices["victim"])).accepted


async def test_a_daemon_enrols_once_and_reuses_its_credentials(plane, tmp_path):
    spec = JobSpec.parse({"name": "enrolled", "rounds": 1, "demand": 2, "over_selection": 1.0,
                          "schedule_timeout_s": 20, "execution_timeout_s": 20, "task": {"local_steps": 2}})
    devices = simulated_devices(2, 0, seed=1, state_dir=tmp_path / "devices")
    _, token = plane.identities.create_enrolment(2, 60.0, time.time())  # one use per device: no re-enrolment
    path = tmp_path / "devices" / "credentials.json"
    config = AgentConfig(wait_s=2.0, idle_retry_s=0.1, backoff_initial_s=0.05)
    key = dict(api_key(plane, "alice", "submit"))["authorization"].removeprefix("Bearer ")

    async def one_round() -> None:
        stop = asyncio.Event()
        serving = asyncio.create_task(run_devices(plane.address, devices, stop=stop, max_tasks=None, config=config,
                                                  credentials=Credentials(path), enroll_token=str(token)))
        try:
            async with AsyncJob(spec, plane.address, api_key=key) as job:
                await job.run_round(initial_weights(spec.task, seed=0), timeout_s=30)
        finally:
            stop.set()
            await asyncio.wait_for(serving, 30)

    await one_round()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert all(Credentials(path).get(device.client_id).startswith("pd_") for device in devices)
    await one_round()  # the token is used up: the restart works only by reusing the stored credentials
    assert {record.client_id for record in plane.identities.devices()} == {device.client_id for device in devices}


async def test_under_mutual_tls_a_certificate_names_its_device(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("PROPIUS_INSECURE", raising=False)  # the suite's plaintext default (tests/conftest.py)
    init_certs(tmp_path / "pki", clients=["phone-cn"])
    pki = Pki(tmp_path / "pki")
    async with (keyed_plane(pki.server(settings)) as plane,
                async_channel(plane.address, pki.client("phone-cn")) as channel):
        clients = pb_grpc.ClientServiceStub(channel)
        reply = await clients.CheckIn(_check_in("phone-cn"))  # no credential: the certificate's CN is the id
        assert reply.client_id == "phone-cn"
        assert await refused(clients.CheckIn(_check_in("phone-other"))) == DENIED
        stranger = enrolled(plane, "phone-other")["phone-other"]  # a credential still names its own device
        assert (await clients.CheckIn(_check_in("phone-other"), metadata=stranger)).client_id == "phone-other"
        # Revoking the id cuts the certificate off (no CRL needed: the CN is the identity), binds the id for
        # good (no one can enrol under it), and a second revocation says it was revoked already.
        assert plane.identities.revoke_device("phone-cn", time.time())
        assert await refused(clients.CheckIn(_check_in("phone-cn"))) == UNAUTHENTICATED
        assert not plane.identities.revoke_device("phone-cn", time.time())
        _, token = plane.identities.create_enrolment(1, 60.0, time.time())
        taken = pb.EnrollRequest(enrolment_token=str(token), client_id="phone-cn")
        assert await refused(clients.Enroll(taken)) == DENIED
