"""The SDK asks the control plane for a job's data point on completion (where it does not export every job)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clients.daemon import run_devices
from clients.device import AgentConfig
from clients.executors.models import initial_weights
from clients.identity import simulated_devices
from control_plane.app import ControlPlane
from propius.config import Settings
from propius.sdk import AsyncJob
from propius.specs import JobSpec
from propius.trace.export import data_point_exporter

SPEC = JobSpec.parse({"name": "asked-for", "rounds": 2, "demand": 2, "over_selection": 1.0,
                      "schedule_timeout_s": 20, "execution_timeout_s": 20, "task": {"local_steps": 2}})


async def test_complete_with_export_trace_writes_a_data_point(redis_url, key_prefix, tmp_path):
    settings = Settings(redis_url=redis_url, key_prefix=key_prefix, database_url=f"sqlite:///{tmp_path / 'p.db'}",
                        data_dir=tmp_path, port=0, lease_s=2.0, scheduler_period_s=0.1, max_wait_s=2.0,
                        auth="open")
    assert settings.trace_export_dir is None  # no automatic export: only on request
    async with ControlPlane(settings, trace_exporter=data_point_exporter(settings)) as plane:
        stop = asyncio.Event()
        devices = simulated_devices(3, 0, seed=1, state_dir=tmp_path / "devices")
        config = AgentConfig(wait_s=2.0, idle_retry_s=0.1, backoff_initial_s=0.05)
        serving = asyncio.create_task(run_devices(plane.address, devices, stop=stop, max_tasks=None, config=config))
        try:
            weights = initial_weights(SPEC.task, seed=0)
            async with AsyncJob(SPEC, plane.address, export_trace=True) as job:
                for _ in range(SPEC.rounds):
                    weights = (await job.run_round(weights, timeout_s=30)).tensors
            plain = AsyncJob(SPEC, plane.address)
            await plain.register()
            info_plain = await plain.complete()
            await plain.close()
        finally:
            stop.set()
            await asyncio.wait_for(serving, 30)
    folder = Path(job.completed.trace_dir)
    assert folder == tmp_path / "traces" / "mlp-propius-dp2-asked-for-cpu-propius"
    assert (folder / f"{folder.name}.yaml").is_file() and (folder / "rank0_trace.json").is_file()
    assert (folder / "run.sh").is_file()
    assert info_plain.trace_dir == ""  # not asked for, not exported
