"""The SDK, the CLI and the client daemon wait out a rate limit (RESOURCE_EXHAUSTED, "retry after N s") as
its hint asks, and give up with a clear error once their budget of refusals or seconds is spent."""

from __future__ import annotations

import asyncio
import logging
import random
import time

import grpc
import pytest
from typer.testing import CliRunner

from clients.daemon import run_devices
from clients.device import AgentConfig
from clients.enrolment import Credentials
from clients.executors.models import initial_weights
from clients.identity import simulated_devices
from propius.cli import CliError, app
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2 as pb
from propius.retry_after import RetryBudget, retry_after_s, retry_after_text
from propius.sdk import AsyncJob, RateLimited
from propius.specs import JobSpec
from tests.security.auth_setup import Stubs, api_key, enrolled, keyed_plane

SPEC = JobSpec.parse({"name": "throttled", "rounds": 1, "demand": 1, "over_selection": 1.0,
                      "schedule_timeout_s": 30, "execution_timeout_s": 30, "task": {"local_steps": 1}})


def _key(plane) -> str:
    return dict(api_key(plane, "alice", "submit", "read"))["authorization"].removeprefix("Bearer ")


def _rate_limited(caplog: pytest.LogCaptureFixture, *loggers: str) -> int:
    """Refusals the clients logged as waited out ("rate limited", or a retried RESOURCE_EXHAUSTED)."""
    return sum(1 for record in caplog.records if record.name in loggers
               and any(word in record.getMessage() for word in ("rate limited", "RESOURCE_EXHAUSTED")))


def test_the_hint_round_trips_and_the_budget_bounds_refusals_and_seconds() -> None:
    assert retry_after_s(f"rate limit of API key k (5 calls/s) reached; {retry_after_text(0.25)}") == 0.25
    assert retry_after_s(retry_after_text(0.001)) == 0.01  # "0.00 s" still means "not yet"
    assert retry_after_s("model of 70 MiB over the limit of 64 MiB") is None
    by_count = RetryBudget(attempts=3, total_s=100.0).start(random.Random(0))
    waits = [by_count.next_wait(1.0) for _ in range(4)]
    assert all(1.0 <= wait <= 1.5 for wait in waits[:3]) and waits[3] is None
    by_time = RetryBudget(attempts=100, total_s=2.0).start(random.Random(0))
    assert by_time.next_wait(1.0) is not None and by_time.next_wait(1.0) is None  # 1.0-1.5 s each: two exceed 2 s
    assert "rate limited 2 time(s)" in by_time.gave_up("rate limit reached")


async def test_the_sdk_waits_out_its_keys_rate(settings, caplog) -> None:
    caplog.set_level(logging.INFO, logger="clients.rate_hint")
    async with keyed_plane(settings, key_rate_per_s=4.0, key_burst=1) as plane:
        job = AsyncJob(SPEC, plane.address, api_key=_key(plane))
        started = time.monotonic()
        await job.register()
        try:
            infos = [await job.info() for _ in range(3)]  # a token each, 0.25 s apart
        finally:
            await job.cancel()
            await job.close()
        elapsed = time.monotonic() - started
    assert [info.job_id for info in infos] == [job.job_id] * 3
    assert _rate_limited(caplog, "clients.rate_hint") >= 3
    assert elapsed >= 3 * 0.25 * 0.9  # never earlier than the hints asked


async def test_watch_waits_out_a_refused_opening(settings, caplog) -> None:
    async with keyed_plane(settings, key_rate_per_s=4.0, key_burst=1) as plane:
        job = AsyncJob(SPEC, plane.address, api_key=_key(plane))
        await job.register()  # spends the token: the stream's opening is refused, then waited out
        try:
            events = job.watch()
            snapshot = await asyncio.wait_for(anext(events), 10)
            await events.aclose()
        finally:
            await job.cancel()
            await job.close()
    assert snapshot.kind == "snapshot" and snapshot.job.job_id == job.job_id


async def test_the_sdk_gives_up_with_a_clear_error(settings) -> None:
    async with keyed_plane(settings, key_rate_per_s=0.01, key_burst=1) as plane:  # a token per 100 s
        job = AsyncJob(SPEC, plane.address, api_key=_key(plane), rate_limit=RetryBudget(attempts=5, total_s=2.0))
        await job.register()
        started = time.monotonic()
        with pytest.raises(RateLimited) as refused:
            await job.info()
        await job.close()
    assert time.monotonic() - started < 2.0  # a hint beyond the budget is not waited for
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "rate limit of API key" in refused.value.details() and "gave up" in refused.value.details()


async def test_the_cli_waits_out_the_rate_then_says_so(settings, monkeypatch) -> None:
    runner = CliRunner()
    async with keyed_plane(settings, key_rate_per_s=2.0, key_burst=1) as plane:
        key = _key(plane)
        monkeypatch.setenv("PROPIUS_API_KEY", key)
        stubs = Stubs(plane.address)
        started = time.monotonic()
        await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=(("authorization", f"Bearer {key}"),))  # the token
        result = await asyncio.to_thread(runner.invoke, app, ["jobs", "--server", plane.address])  # refused, waits
        elapsed = time.monotonic() - started
        await stubs.close()
    assert result.exit_code == 0, result.output
    assert elapsed >= 0.5 * 0.9
    async with keyed_plane(settings, key_rate_per_s=0.01, key_burst=1) as plane:
        monkeypatch.setenv("PROPIUS_API_KEY", _key(plane))
        jobs = ["jobs", "--server", plane.address]
        assert (await asyncio.to_thread(runner.invoke, app, jobs)).exit_code == 0
        started = time.monotonic()
        result = await asyncio.to_thread(runner.invoke, app, jobs)
    assert result.exit_code == 1 and time.monotonic() - started < 5.0  # a hint beyond the budget: not waited
    failure = result.exception  # the CliError the CLI prints as "error: ..." and its fix
    assert isinstance(failure, CliError) and "kept refusing: rate limit of API key" in failure.cause
    assert "waited out the rate limit" in failure.fix


async def test_a_daemon_finishes_its_task_under_a_tight_device_rate(settings, caplog) -> None:
    """Every device call (check-in, accept, fetch, heartbeat, upload, on the Multiplex stream and unary)
    spends a token: at one token per 0.5 s, back-to-back calls are refused and waited out, and the
    update still counts."""
    caplog.set_level(logging.INFO, logger="clients.device")
    caplog.set_level(logging.INFO, logger="clients.rate_hint")
    async with keyed_plane(settings, device_rate_per_s=2.0, device_burst=1, lease_s=6.0) as plane:
        devices = simulated_devices(1, 0, seed=3)
        credentials = Credentials()
        credentials.save(devices[0].client_id,
                         dict(enrolled(plane, devices[0].client_id)[devices[0].client_id])[DEVICE_TOKEN_HEADER])
        stop = asyncio.Event()
        config = AgentConfig(wait_s=2.0, idle_retry_s=0.1, backoff_initial_s=0.05)
        serving = asyncio.create_task(run_devices(plane.address, devices, stop=stop, max_tasks=1, config=config,
                                                  credentials=credentials))
        try:
            async with AsyncJob(SPEC, plane.address, api_key=_key(plane)) as job:
                result = await job.run_round(initial_weights(SPEC.task, seed=0), timeout_s=30, max_attempts=1)
            done = await asyncio.wait_for(serving, 30)
        finally:
            stop.set()
    assert result.info.results == 1 and done == {devices[0].client_id: 1}
    assert _rate_limited(caplog, "clients.device", "clients.rate_hint") >= 2
