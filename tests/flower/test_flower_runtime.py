"""Unmodified Flower apps on Propius: ServerApp processes, client daemons, several runs at once."""

from __future__ import annotations

import asyncio
import re
import time
from functools import partial

from propius.flower.launch import FlowerRun
from propius.flower.project import RunOptions
from propius.sdk import AsyncJob
from propius.specs import JobSpec

from .conftest import APPS, TINYFED

# Flower's own simulation of tinyfed (run_sim_api.py: 10 nodes, Ray), rounded as in Flower's summary.
FLOWER_TRAIN_LOSS = [0.6728, 0.6203, 0.5709]
FLOWER_EVAL_ACC = [0.679, 0.749, 0.796]
FAST = {"public": {"cpu_f": {"min": 7}}}  # 12 of the first 20 simulated phones


def metrics(output: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf"Aggregated MetricRecord: \{{[^}}]*'{name}': ([0-9.e-]+)", output)]


async def finish(run: FlowerRun, daemons, timeout_s: float = 90) -> str:
    try:
        code = await asyncio.to_thread(run.wait, timeout_s)
        output = run.output()
        assert code == 0, output[-4000:] + daemons.logs()
        return output
    finally:
        run.stop()


async def test_two_tinyfed_runs_share_twenty_clients_and_match_flower(plane, daemons):
    daemons.spawn(plane.address, 10, offset=0)
    daemons.spawn(plane.address, 10, offset=10)
    runs = [FlowerRun.start(TINYFED, plane.address, options=RunOptions(name="tinyfed-fast", requirements=FAST)),
            FlowerRun.start(TINYFED, plane.address, options=RunOptions(name="tinyfed-any"))]
    outputs = await asyncio.gather(*(finish(run, daemons) for run in runs))
    for output in outputs:
        assert [round(v, 4) for v in metrics(output, "train_loss")] == FLOWER_TRAIN_LOSS
        assert [round(v, 3) for v in metrics(output, "eval_acc")] == FLOWER_EVAL_ACC
    jobs = {job.name: job for job in plane.store.list_jobs()}
    assert {jobs["tinyfed-fast"].state, jobs["tinyfed-any"].state} == {"completed"}
    profiles = {p.client_id: p for p, _ in await plane.hot.recent_clients(0)}
    fast = JobSpec.parse(jobs["tinyfed-fast"].spec_json).requirements.public
    await plane.journal.flush()
    served = {b.client_id for b in plane.store.bindings(jobs["tinyfed-fast"].job_id) if b.outcome == "completed"}
    assert len(served) >= 10 and all(fast.admits(profiles[c].attributes()) for c in served)


async def test_contexts_and_legacy_numpyclient_apps_through_daemons(plane, daemons):
    daemons.spawn(plane.address, 8)
    counter = await finish(FlowerRun.start(APPS / "counter", plane.address, ["step=2"],
                                           RunOptions(demand=8)), daemons)
    assert re.findall(r"COUNTS (\[.*\])", counter) == [str([2] * 8), str([4] * 8)]  # state kept across rounds
    # Legacy server (8 nodes, a 6-thread pool on 2 cores: each Flower round spans two Propius rounds).
    legacy = await finish(FlowerRun.start(APPS / "legacyapp", plane.address), daemons)
    losses = [float(v) for v in re.findall(r"round \d: ([0-9.]+)", legacy)]
    assert [round(v, 6) for v in losses] == [1.0, 2.0]
    assert "received 8 results and 0 failures" in legacy


async def test_daemons_decline_flower_apps_their_owner_did_not_list(plane, daemons, wait_for):
    daemons.spawn(plane.address, 4, flower_apps=APPS / "twin-a")
    options = {"app": str(APPS / "counter"), "clientapp": "counterapp.client:app", "run-id": "1"}
    spec = JobSpec.parse({"name": "unlisted-app", "demand": 2, "aggregation": "collect",
                          "task": {"executor": "flower-clientapp", "options": options}})
    async with AsyncJob(spec, plane.address) as job:
        await job.start_round()
        # Each device checks in, answers its offers (accepting or declining), and only then checks in again:
        # two check-ins of every device since the round opened prove each one has seen and declined it.
        for _ in range(2):
            since = time.time()
            await wait_for(partial(all_checked_in, plane, since), timeout_s=120, what="every device to check in")
        state = await plane.hot.round(job.job_id)
        assert (state.state, state.bound) == ("open", 0)
        await job.cancel()


async def all_checked_in(plane, since: float, devices: int = 4) -> bool:
    return len(await plane.hot.recent_clients(since)) == devices
