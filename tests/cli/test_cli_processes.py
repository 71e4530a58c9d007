"""Processes ``propius`` starts end with it: the embedded Redis on every exit path; a taken port is refused;
``propius up`` logs state changes, not scheduler ticks."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from propius.embedded import embedded_redis
from propius.proto import propius_pb2 as pb
from propius.sdk import AsyncJob
from propius.specs import JobSpec
from tests.cli.conftest import address_of, cli_env, embedded_server, processes_mentioning, propius, server_alive


def test_embedded_redis_stops_when_the_block_ends_or_raises(tmp_path) -> None:
    with embedded_redis(tmp_path / "normal"):
        pid, socket = embedded_server(tmp_path / "normal")
        assert server_alive(pid, socket)
    assert not server_alive(pid, socket)
    assert (tmp_path / "normal" / "redis.rdb").is_file()  # saved on the way out

    with pytest.raises(KeyError), embedded_redis(tmp_path / "error"):
        pid, socket = embedded_server(tmp_path / "error")
        raise KeyError("boom")
    assert not server_alive(pid, socket)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_up_stopped_by_a_signal_leaves_no_redis_server(tmp_path, background, sig) -> None:
    up = background("up", "--port", "0", "--data-dir", str(tmp_path / "data"), env=cli_env(tmp_path))
    up.wait_for_line("Propius control plane on")
    pid, socket = embedded_server(tmp_path / "data")
    up.process.send_signal(sig)
    assert up.wait(30) == 0, "\n".join(up.lines)
    assert not server_alive(pid, socket)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_stopped_by_a_signal_leaves_no_redis_server(tmp_path, background, sig) -> None:
    demo = background("demo", "--devices", "2", "--daemons", "1", "--data-dir", str(tmp_path / "data"),
                      env=cli_env(tmp_path))
    demo.wait_for_line("control plane on")
    pid, socket = embedded_server(tmp_path / "data")
    demo.process.send_signal(sig)
    assert demo.wait(60) != 0
    assert not server_alive(pid, socket)
    assert processes_mentioning(str(tmp_path / "data")) == []  # nor a client daemon


def test_a_second_control_plane_on_a_taken_port_fails_at_once(tmp_path, background, redis_url, key_prefix) -> None:
    env = cli_env(tmp_path, PROPIUS_KEY_PREFIX=key_prefix)
    first = background("up", "--port", "0", "--redis-url", redis_url, "--data-dir", str(tmp_path / "a"), env=env)
    port = address_of(first.wait_for_line("Propius control plane on")).rsplit(":", 1)[1]
    began = time.monotonic()
    second = propius("up", "--port", port, "--redis-url", redis_url, "--data-dir", str(tmp_path / "b"), env=env)
    assert time.monotonic() - began < 5
    assert second.returncode == 1
    output = (second.stdout + second.stderr).strip().splitlines()
    assert output == [f"error: cannot listen on 127.0.0.1:{port}: the address is in use or not local",
                      "stop the control plane already there, or pass another --port"]
    assert first.process.poll() is None  # the first one serves on


async def test_up_logs_no_scheduler_ticks_at_info(tmp_path, background, redis_url, key_prefix) -> None:
    env = cli_env(tmp_path, PROPIUS_KEY_PREFIX=key_prefix, PROPIUS_SCHEDULER_PERIOD_S="0.05")
    up = background("up", "--port", "0", "--redis-url", redis_url, "--data-dir", str(tmp_path / "data"), env=env)
    address = address_of(await asyncio.to_thread(up.wait_for_line, "Propius control plane on"))
    spec = JobSpec.parse({"name": "ticks", "demand": 1, "rounds": 1, "schedule_timeout_s": 0.2,
                          "execution_timeout_s": 0.2})
    async with AsyncJob(spec, address) as job:
        await job.start_round()
        deadline = time.monotonic() + 20
        while (await job.info()).current_round.state != pb.ROUND_STATE_FAILED:  # failed by a tick's sweep
            assert time.monotonic() < deadline, "the round did not fail by its deadline"
            await asyncio.sleep(0.05)
        await job.cancel()
    up.process.send_signal(signal.SIGINT)
    assert await asyncio.to_thread(up.wait, 30) == 0
    info = [line for line in up.lines if " INFO " in line]
    assert info, "expected the control plane's state changes at INFO"
    assert not [line for line in info if "apscheduler" in line or "Running job" in line], "\n".join(info)
