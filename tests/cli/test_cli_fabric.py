"""``propius fabric load/show/fail/repair`` and the cloud column of ``propius jobs``, against a live control plane."""

from __future__ import annotations

import asyncio

import grpc
import yaml

from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec
from tests.cli.conftest import cli_env, propius
from tests.control_plane.test_cp_fabric import rack_fabric


async def test_fabric_commands(tmp_path, plane) -> None:
    env = cli_env(tmp_path)
    server = ("--server", plane.address)
    bad = rack_fabric()
    bad["accelerators"][2]["host"] = "h9"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    (tmp_path / "rack.yaml").write_text(yaml.safe_dump(rack_fabric()))

    refused = await asyncio.to_thread(propius, "fabric", "load", str(tmp_path / "bad.yaml"), *server, env=env)
    assert refused.returncode == 2 and "accelerator 'h0-g2': host 'h9' is not defined" in refused.stderr
    loaded = await asyncio.to_thread(propius, "fabric", "load", str(tmp_path / "rack.yaml"), *server, env=env)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == [f"loaded {tmp_path / 'rack.yaml'}: 1 racks, 2 hosts, 8 accelerators, "
                                          "4 rails", "fabric version 1"]

    async with grpc.aio.insecure_channel(plane.address) as channel:
        spec = JobSpec.parse({"name": "tuned", "demand": 1, "cloud": {"count": 4}}).to_json()
        job = await pb_grpc.JobServiceStub(channel).RegisterJob(pb.RegisterJobRequest(spec_json=spec))

    shown = await asyncio.to_thread(propius, "fabric", "show", "--png", str(tmp_path / "fabric.png"), *server, env=env)
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "fabric.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "fabric version 2, placement rail-aligned" in shown.stdout
    host_h0 = next(line for line in shown.stdout.splitlines() if "0: h0-g0 allocated" in line)
    assert job.job_id in host_h0 and "r0 (programmable)" in host_h0
    assert "3: h1-g3 spare" in shown.stdout
    listed = await asyncio.to_thread(propius, "jobs", *server, env=env)
    assert "4 on r0: h0-g0 h0-g1 h0-g2 h0-g3" in listed.stdout

    failed = await asyncio.to_thread(propius, "fabric", "fail", "h0-g1", *server, env=env)
    assert failed.returncode == 0, failed.stderr
    lines = failed.stdout.splitlines()
    assert lines[0] == f"h0-g1 failed (job {job.job_id}): in-rack swap onto h1-g3"
    assert lines[1].startswith("recovery 930.7 s = detect 5 s, program 0.1 s, restart 1.1 s, comm_init 4.5 s, "
                               "first_step 20 s, lost_work 900 s; throughput after: 100%")
    repaired = await asyncio.to_thread(propius, "fabric", "repair", "h0-g1", "--spare", *server, env=env)
    assert repaired.returncode == 0 and repaired.stdout.splitlines() == ["h0-g1 repaired (spare)", "fabric version 4"]
