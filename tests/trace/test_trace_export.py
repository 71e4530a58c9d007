"""End to end: a real multi-round job on a real control plane and client devices, exported and checked.

The export runs after the control plane has stopped, on the store opened read-only, as an operator would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from clients.daemon import run_devices
from clients.device import AgentConfig
from clients.identity import simulated_devices
from control_plane.app import ControlPlane
from control_plane.store import Store
from propius.config import Settings
from propius.runner import run_training_job
from propius.specs import JobSpec
from propius.trace.check import check_data_point
from propius.trace.cli import app
from propius.trace.datapoint import load_data_point
from propius.trace.export import (
    NoTraceError,
    data_point_exporter,
    export_job,
    read_only_sqlite_url,
    recorded_policy,
    try_export_job,
)
from propius.trace.metrics import compute_metrics

ROUNDS = 6
NAME = "mlp-propius-dp3-trace_e2e-out-put-cpu-propius"
AUTO_EXPORT = "trace_export_dir" in Settings.model_fields
"""Whether the control plane exports on CompleteJob (Settings.trace_export_dir wired)."""
SPEC = JobSpec.parse({
    "name": "Trace_E2E.output", "owner": "tests", "rounds": ROUNDS, "demand": 3, "over_selection": 1.34,
    "schedule_timeout_s": 20, "execution_timeout_s": 20,
    "task": {"local_steps": 5, "batch_size": 16, "options": {"data_seed": 3}},
})


async def _run_job(settings: Settings) -> str:
    async with ControlPlane(settings, trace_exporter=data_point_exporter(settings)) as plane:
        stop = asyncio.Event()
        devices = simulated_devices(4, 0, seed=7, state_dir=settings.data_dir / "devices")
        config = AgentConfig(wait_s=2.0, idle_retry_s=0.1, backoff_initial_s=0.05)
        serving = asyncio.create_task(run_devices(plane.address, devices, stop=stop, max_tasks=None, config=config))
        try:
            report = await run_training_job(SPEC, plane.address, round_timeout_s=30)
        finally:
            stop.set()
            await asyncio.wait_for(serving, 30)
        await plane.journal.flush()
    assert len(report.rounds) == ROUNDS
    return report.job_id


@pytest.fixture(scope="module")
def exported(tmp_path_factory, redis_url) -> tuple[Path, str, Path]:
    """One job run for every test of the module: (data point, job id, database file)."""
    import uuid

    import redis

    root = tmp_path_factory.mktemp("trace-e2e")
    prefix = f"t{uuid.uuid4().hex[:12]}"
    database = root / "propius.db"
    auto = {"trace_export_dir": root / "auto"} if AUTO_EXPORT else {}
    settings = Settings(redis_url=redis_url, key_prefix=prefix, database_url=f"sqlite:///{database}",
                        data_dir=root, port=0, lease_s=2.0, scheduler_period_s=0.1, max_wait_s=2.0, auth="open",
                        **auto)
    try:
        job_id = asyncio.run(_run_job(settings))
    finally:
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    store = Store(read_only_sqlite_url(database))
    try:
        folder = export_job(store, job_id, root / "points", contact="tests@example.org")
    finally:
        store.close()
    return folder, job_id, database


def test_export_of_a_real_job_passes_the_check(exported) -> None:
    folder, job_id, _ = exported
    # <model>-<framework+parallelism>-<job>-<platform>-<group>; the job's name sanitized, "tpu" in "output" split
    assert folder.name == NAME
    assert [str(problem) for problem in check_data_point(folder)] == []
    names = sorted(p.name for p in folder.iterdir())
    ranks = [n for n in names if n.startswith("rank")]
    assert set(names) - set(ranks) == {"run.sh", f"{NAME}.yaml"}
    assert 4 <= len(ranks) <= 5 and os.access(folder / "run.sh", os.X_OK)  # aggregator + 3..4 slots


def test_card_describes_the_job(exported) -> None:
    folder, job_id, _ = exported
    card = yaml.safe_load((folder / f"{folder.name}.yaml").read_text())
    assert card["workload"]["model"]["iteration"] == ROUNDS
    assert card["workload"]["model"]["model_arch"]["num_params"] == 16 * 32 + 32 + 32 * 4 + 4
    assert card["Model-executor"]["model_plan_parallelization"]["dp_replicate"] == 3
    notes = card["collection_notes"]
    assert notes["job_id"] == job_id and notes["server_rank"] == 0 and notes["local_steps"] == 5
    assert notes["clients_per_round"]["demand"] == 3 and notes["clients_per_round"]["accepted_min"] >= 3
    accepted = notes["clients_per_round"]["accepted_mean"]
    assert 3 * 5 * 16 * 0.9 <= card["workload"]["data"]["batch_size"] <= accepted * 5 * 16 + 1
    assert 1 <= card["workload"]["hardware"]["xpu_spec"]["total_count"] <= 4
    assert card["contact"] == "tests@example.org"
    assert notes["policy"] == "propius"  # the plane's (default) policy, recorded when the job registered
    assert (card["hf_url"], card["trace_url"], card["workload"]["data"]["seq_len"]) == (None, None, None)
    assert card["workload"]["model"]["moe"] is False and card["workload"]["model"]["granularity"] == "fl_round"
    assert card["workload"]["hardware"]["driver_version"] is None
    executor = card["Model-executor"]
    assert executor["framework"]["compiler_tool_selection"] == "plain_pytorch"
    assert executor["model_plan_parallelization"]["pp_mb"] == 1 and executor["communication_library"]["env"] is None
    assert card["metric_source"] == {"traces": ["json"], "metrics_specific_trace": []}


def test_cli_export_writes_the_recorded_policy_unless_told_another(exported, tmp_path) -> None:
    folder, job_id, database = exported
    runner = CliRunner()
    for extra, policy in (([], "propius"), (["--policy", "fifo"], "fifo")):
        out = tmp_path / policy
        result = runner.invoke(app, ["export", job_id, str(out), "--data-dir", str(database.parent), *extra])
        assert result.exit_code == 0, result.output
        card = yaml.safe_load((out / NAME / f"{NAME}.yaml").read_text())
        assert card["collection_notes"]["policy"] == policy


def test_traces_hold_measured_phases_on_one_clock(exported) -> None:
    folder, _, _ = exported
    rank1 = json.loads((folder / "rank1_trace.json").read_text())
    events = [e for e in rank1["traceEvents"] if e["ph"] == "X"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{r}" for r in range(ROUNDS)]
    work = {e["name"] for e in events if e["cat"] == "kernel"}
    assert work == {"broadcast_model_fetch", "local_training", "sendrecv_update_upload"}
    assert all(e["args"]["synthetic_kernel"] is True and e["args"]["client_id"] for e in events if e["cat"] == "kernel")
    rank0 = json.loads((folder / "rank0_trace.json").read_text())
    assert {e["name"] for e in rank0["traceEvents"] if e.get("cat") == "kernel"} == {
        "broadcast_model_publish", "fedavg_fold_update", "fedavg_finalize"}
    for step in steps:  # every slot's work lies within its round, up to the device clock's uncertainty
        inside = [e for e in events if e["cat"] == "kernel" and e["args"]["round"] == step["args"]["round"]]
        # The device's phases come onto the server clock by an offset measured over one Accept: within half
        # its round trip (recorded on the upload span), which a loaded machine stretches.
        rtt_us = max((1e6 * e["args"]["rtt_s"] for e in inside if "rtt_s" in e["args"]), default=0.0)
        slack = 50_000 + rtt_us / 2
        assert all(step["ts"] - slack <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + slack
                   for e in inside)


def test_metrics_are_sane(exported) -> None:
    folder, _, _ = exported
    result = compute_metrics(load_data_point(folder))
    assert result.steps == ROUNDS and result.steps_measured == ROUNDS - 2
    assert 0 < result.communication_fraction < 1
    assert result.avg_step_time_s is not None and 0 < result.avg_step_time_s < 30
    assert result.worker_finish_lag_s is not None and result.worker_finish_lag_s >= 0
    assert result.worker_compute_imbalance is not None and result.worker_compute_imbalance >= 0
    assert result.compute_comm_overlap is not None and 0 <= result.compute_comm_overlap <= 1


def test_re_export_replaces_the_folder_and_honours_a_launch_command(exported, tmp_path) -> None:
    folder, job_id, database = exported
    earlier = shutil.copytree(folder, tmp_path / folder.name)
    (earlier / "rank99_trace.json").write_text("{}")  # left over from a wider export: must go
    store = Store(read_only_sqlite_url(database))
    try:
        again = export_job(store, job_id, tmp_path, launch_command="propius demo --data-dir /tmp/x")
        assert again == earlier and check_data_point(again) == []
        assert (again / "run.sh").read_text() == "#!/usr/bin/env bash\npropius demo --data-dir /tmp/x\n"
        foreign = tmp_path / "foreign" / folder.name  # a folder of that name that is not a data point
        foreign.mkdir(parents=True)
        (foreign / "notes.txt").write_text("keep me")
        with pytest.raises(FileExistsError):
            export_job(store, job_id, foreign.parent)
        assert (foreign / "notes.txt").read_text() == "keep me" and not list(foreign.parent.glob(".*"))
        with pytest.raises(KeyError):
            export_job(store, "no-such-job", tmp_path)
        assert try_export_job(store, "no-such-job", tmp_path) is None
    finally:
        store.close()


def test_a_job_without_rounds_cannot_be_exported(tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path}/x.db")
    store.create_job("j1", "empty", "tests", SPEC.to_json(), "0" * 64, 0.0)
    assert recorded_policy(store, "j1") is None  # registered outside a control plane: no policy recorded
    with pytest.raises(NoTraceError):
        export_job(store, "j1", tmp_path / "out")
    assert try_export_job(store, "j1", tmp_path / "out") is None
    store.close()


@pytest.mark.skipif(not AUTO_EXPORT, reason="Settings.trace_export_dir (auto-export on CompleteJob) is not wired")
def test_the_control_plane_exports_a_completed_job(exported) -> None:
    folder, _, _ = exported
    auto = folder.parent.parent / "auto" / folder.name
    assert check_data_point(auto) == []
    assert sorted(p.name for p in auto.iterdir()) == sorted(p.name for p in folder.iterdir())
    for name in ("rank0_trace.json", "rank1_trace.json", "run.sh"):  # the card differs only in its contact
        assert (auto / name).read_text() == (folder / name).read_text()
