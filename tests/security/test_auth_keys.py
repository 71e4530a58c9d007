"""API keys: no or a bad key is refused and leaves no trace; a job key reads and drives only its owner's jobs;
private requirements and the task config reach no one but the owner."""

from __future__ import annotations

import asyncio
import json

import grpc

from propius.proto import propius_pb2 as pb
from propius.specs import JobSpec
from tests.security.auth_setup import SECRET_SPEC, api_key, footprint, refused

UNAUTHENTICATED, DENIED = grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED


async def test_no_bad_or_revoked_key_is_refused_and_writes_nothing(plane, stubs):
    register = pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json())
    before = await footprint(plane)
    assert await refused(stubs.jobs.RegisterJob(register)) == UNAUTHENTICATED
    assert await refused(stubs.jobs.ListJobs(pb.ListJobsRequest())) == UNAUTHENTICATED
    assert await refused(stubs.clients.ListClients(pb.ListClientsRequest())) == UNAUTHENTICATED
    for header in ("Bearer pk_000000000000_" + "x" * 43, "Bearer nonsense", "Basic dXNlcjpwYXNz"):
        assert await refused(stubs.jobs.RegisterJob(register, metadata=(("authorization", header),))) == UNAUTHENTICATED
    alice = api_key(plane, "alice", "submit")
    key_id = dict(alice)["authorization"].split("_")[1]
    wrong_secret = (("authorization", dict(alice)["authorization"][:-4] + "AAAA"),)
    assert await refused(stubs.jobs.RegisterJob(register, metadata=wrong_secret)) == UNAUTHENTICATED
    assert plane.identities.revoke_key(key_id, 0.0)
    assert await refused(stubs.jobs.RegisterJob(register, metadata=alice)) == UNAUTHENTICATED
    assert await footprint(plane) == before


async def test_roles(plane, stubs):
    reader, submitter = api_key(plane, "carol", "read"), api_key(plane, "dave", "submit")
    spec = JobSpec.parse({"name": "j", "demand": 1}).to_json()
    assert await refused(stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec), metadata=reader)) == DENIED
    assert await refused(stubs.clients.ListClients(pb.ListClientsRequest(), metadata=submitter)) == DENIED
    await stubs.clients.ListClients(pb.ListClientsRequest(), metadata=reader)  # client ids: read or admin
    await stubs.clients.ListClients(pb.ListClientsRequest(), metadata=api_key(plane, "erin", "admin"))


async def test_the_owner_comes_from_the_key(plane, stubs):
    alice, bob = api_key(plane, "alice", "submit"), api_key(plane, "bob", "submit")
    unnamed = JobSpec.parse({"name": "unnamed", "demand": 1}).to_json()  # owner: the default
    job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=unnamed), metadata=bob)
    assert (await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=bob)).owner == "bob"
    claims_alice = pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json())
    assert await refused(stubs.jobs.RegisterJob(claims_alice, metadata=bob)) == DENIED
    await stubs.jobs.RegisterJob(claims_alice, metadata=alice)


async def test_a_job_key_cannot_read_or_drive_another_owners_job(plane, stubs):
    alice, bob = api_key(plane, "alice", "submit"), api_key(plane, "bob", "submit")
    job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json()), metadata=alice)
    ref = pb.JobRef(job_id=job.job_id, job_token=job.job_token)  # even with the job token in hand
    get = pb.GetJobRequest(job_id=job.job_id)
    assert await refused(stubs.jobs.GetJob(get, metadata=bob)) == DENIED
    assert await refused(anext(aiter(stubs.jobs.WatchJob(get, metadata=bob)))) == DENIED
    start = pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token)
    assert await refused(stubs.jobs.StartRound(start, metadata=bob)) == DENIED
    assert await refused(stubs.jobs.CancelJob(ref, metadata=bob)) == DENIED
    assert await refused(stubs.jobs.CompleteJob(ref, metadata=bob)) == DENIED
    publish = pb.PublishModelRequest(job_id=job.job_id, job_token=job.job_token, round=0, data=b"x")
    assert await refused(stubs.data.PublishModel(iter([publish]), metadata=bob)) == DENIED
    wait = pb.AwaitAggregateRequest(job_id=job.job_id, job_token=job.job_token, round=0, timeout_s=1)
    assert await refused(anext(aiter(stubs.data.AwaitAggregate(wait, metadata=bob)))) == DENIED
    assert job.job_id not in {j.job_id for j in (await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=bob)).jobs}
    info = await stubs.jobs.GetJob(get, metadata=alice)
    assert info.state == pb.JOB_STATE_REGISTERED  # nothing bob tried took effect
    assert (await stubs.jobs.StartRound(start, metadata=alice)).round == 0
    assert (await stubs.jobs.CancelJob(ref, metadata=alice)).state == pb.JOB_STATE_CANCELLED


def _private_parts(spec_json: str) -> tuple[object, object]:
    spec = json.loads(spec_json)
    return spec.get("requirements", {}).get("private"), spec.get("task")


async def test_private_requirements_reach_only_the_owner(plane, stubs):
    alice = api_key(plane, "alice", "submit")
    others = {"reader": api_key(plane, "carol", "read"), "admin": api_key(plane, "erin", "admin")}
    job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json()), metadata=alice)
    get = pb.GetJobRequest(job_id=job.job_id)
    owned = await stubs.jobs.GetJob(get, metadata=alice)
    assert "oncology" in owned.spec_json and "alice-private" in owned.spec_json
    for name, key in others.items():
        seen = [(await stubs.jobs.GetJob(get, metadata=key)).spec_json]
        seen += [info.spec_json for info in (await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=key)).jobs]
        watch = stubs.jobs.WatchJob(get, metadata=key)
        seen.append((await anext(aiter(watch))).job.spec_json)
        watch.cancel()
        assert len(seen) == 3, name
        for text in seen:
            assert "oncology" not in text and "alice-private" not in text, name
            assert _private_parts(text) == (None, None), name
            public = JobSpec.parse(text)  # still a spec: `propius jobs explain` reads the public requirements
            assert public.requirements.public == SECRET_SPEC.requirements.public


async def test_watch_events_stay_redacted(plane, stubs):
    alice, reader = api_key(plane, "alice", "submit"), api_key(plane, "carol", "read")
    job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json()), metadata=alice)
    watch = stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job.job_id), metadata=reader)
    events = aiter(watch)
    assert (await anext(events)).kind == "snapshot"
    await stubs.jobs.StartRound(pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token), metadata=alice)
    event = await asyncio.wait_for(anext(events), 10)
    assert event.kind == "round_started" and "oncology" not in event.job.spec_json
    watch.cancel()
