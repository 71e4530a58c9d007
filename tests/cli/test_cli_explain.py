"""Feasibility at submit, ``propius jobs explain`` and ``propius cancel`` against a live control plane."""

from __future__ import annotations

import asyncio
import stat

import grpc
import yaml

from propius.explain import Eligibility, explain, round_failure
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec
from tests.cli.conftest import cli_env, propius

EVERYDAY = {"name": "everyday", "demand": 5, "rounds": 3, "requirements": {"public": {"ram": {"max": 8}}}}


def test_a_failed_round_names_too_few_eligible_clients() -> None:
    spec = JobSpec.parse(EVERYDAY)
    info = pb.RoundInfo(job_id="j", round=0, attempt=2, state=pb.ROUND_STATE_FAILED, demand=5, results=4)
    assert round_failure(info, spec, Eligibility(4, {})) == (
        "round 0 attempt 2 failed with 4 of 5 results: only 4 eligible clients known")
    job = pb.JobInfo(job_id="j", name="everyday", state=pb.JOB_STATE_RUNNING, rounds_total=3, current_round=info,
                     spec_json=spec.to_json())
    assert explain(job, Eligibility(4, {"k": 1}), [pb.JobInfo(job_id="k", name="keyboard")], 120) == [
        "job everyday (j): running, 0/3 rounds done",
        "4 eligible clients checked in within 120 s (demand 5); busy: 1 by keyboard (k)",
        "round 0 failed 2 time(s) before attempt 2",
        "round 0 attempt 2 failed with 4 of 5 results: only 4 eligible clients known",
        "cannot fill a round: 1 more eligible clients needed; start clients whose attributes meet "
        "requirements.public, or lower demand",
    ]


async def _check_in(clients: pb_grpc.ClientServiceStub, client_id: str, ram: float,
                    wait_s: float = 0.0) -> pb.CheckInResponse:
    profile = pb.ClientProfile(client_id=client_id, device_class="edge", numeric={"ram": ram})
    return await clients.CheckIn(pb.CheckInRequest(profile=profile, wait_s=wait_s, max_offers=4))


async def test_submit_explain_and_cancel(tmp_path, plane) -> None:
    spec_file = tmp_path / "everyday.yaml"
    spec_file.write_text(yaml.safe_dump(EVERYDAY))
    async with grpc.aio.insecure_channel(plane.address) as channel:
        jobs, clients = pb_grpc.JobServiceStub(channel), pb_grpc.ClientServiceStub(channel)
        for client_id, ram in (("small-0", 4), ("small-1", 4), ("large-0", 16)):
            await _check_in(clients, client_id, ram)
        # another job holds small-0
        other = await jobs.RegisterJob(pb.RegisterJobRequest(
            spec_json=JobSpec.parse({"name": "keyboard", "demand": 1, "over_selection": 1.0}).to_json()))
        await jobs.StartRound(pb.StartRoundRequest(job_id=other.job_id, job_token=other.job_token))
        offer = await _check_in(clients, "small-0", 4, wait_s=2.0)
        accept = await clients.Accept(pb.AcceptRequest(client_id="small-0", session_token=offer.session_token,
                                                       offer_id=offer.offers[0].offer_id))
        assert accept.bound
        heartbeat = pb.HeartbeatRequest(client_id="small-0", session_token=offer.session_token,
                                        job_id=other.job_id, round=accept.round)
        holding = asyncio.create_task(_keep_alive(clients, heartbeat))
        try:
            await _cli_session(tmp_path, plane.address, spec_file, jobs, other.job_id)
        finally:
            holding.cancel()


async def _keep_alive(clients: pb_grpc.ClientServiceStub, request: pb.HeartbeatRequest) -> None:
    """Heartbeat the binding well within its lease for as long as the test runs."""
    while True:
        assert (await clients.Heartbeat(request)).valid
        await asyncio.sleep(0.3)


async def _cli_session(tmp_path, address: str, spec_file, jobs: pb_grpc.JobServiceStub, other_id: str) -> None:
    env = cli_env(tmp_path)
    strict = await asyncio.to_thread(propius, "submit", str(spec_file), "--strict", "--server", address,
                                     env=env)
    assert strict.returncode == 1
    assert strict.stderr.splitlines() == [
        "error: only 2 eligible clients checked in within 120 s, fewer than the job's demand of 5: its rounds "
        "wait or fail until more come",
        "start clients whose attributes meet requirements.public (`propius clients` lists them), or lower "
        "demand; nothing was registered"]
    assert [job.name for job in (await jobs.ListJobs(pb.ListJobsRequest(include_finished=True))).jobs] == [
        "keyboard"]

    submitted = await asyncio.to_thread(propius, "submit", str(spec_file), "--server", address, env=env)
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stderr.startswith("warning: only 2 eligible clients checked in within 120 s")
    (token_file,) = (tmp_path / "tokens").glob("*.token")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    job_id = token_file.name.removesuffix(".token")

    explained = await asyncio.to_thread(propius, "jobs", "explain", job_id, "--server", address, env=env)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines() == [
        f"job everyday ({job_id}): registered, 0/3 rounds done",
        f"2 eligible clients checked in within 120 s (demand 5); busy: 1 by keyboard ({other_id})",
        "no round started yet: the job's driver (SDK, `propius submit --wait`) starts them",
        "cannot fill a round: 3 more eligible clients needed; start clients whose attributes meet "
        "requirements.public, or lower demand",
    ]

    cancelled = await asyncio.to_thread(propius, "cancel", job_id, "--server", address, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"job everyday ({job_id}) cancelled"
    info = await jobs.GetJob(pb.GetJobRequest(job_id=job_id))
    assert info.state == pb.JOB_STATE_CANCELLED

    unknown = await asyncio.to_thread(propius, "cancel", "no-such-job", "--server", address, env=env)
    assert unknown.returncode == 1
    assert len(unknown.stderr.splitlines()) == 2
