"""The whole system: a control plane, client-daemon processes hosting simulated phones, two SDK jobs."""

from __future__ import annotations

import asyncio
import signal

from propius.devices import load_devices
from propius.runner import run_training_job
from propius.specs import Constraints, JobSpec

DEVICES_PER_DAEMON = 2
FAST = {"cpu_f": {"min": 7}}  # devices rows 0, 1, 2, 3, 6 of propius/data/devices.csv
SMALL = {"ram": {"max": 6}}  # rows 3, 4, 5, 7, 8, 9: row 3 may serve either job


def spec(name: str, public: dict, *, seed: int = 1, local_steps: int = 10, **overrides) -> JobSpec:
    fields = {
        "name": name, "rounds": 3, "demand": 3, "schedule_timeout_s": 120, "execution_timeout_s": 120,
        "requirements": {"public": public},
        "task": {"local_steps": local_steps, "options": {"data_seed": seed, "init_seed": seed}},
    }
    return JobSpec.parse({**fields, **overrides})


def eligible_rows(public: dict, rows: range) -> list[int]:
    devices = load_devices()
    constraints = Constraints.model_validate(public)
    return [i for i in rows if constraints.admits(devices[i].profile(f"d{i}").attributes())]


async def test_two_jobs_train_to_completion_over_daemons(plane, daemons, wait_for):
    hosted = range(5 * DEVICES_PER_DAEMON)
    assert eligible_rows(FAST, hosted) == [0, 1, 2, 3, 6]
    assert eligible_rows(SMALL, hosted) == [3, 4, 5, 7, 8, 9]
    pool = daemons.spawn(plane.address, 5, DEVICES_PER_DAEMON)
    specs = [spec("fast-phones", FAST, seed=1), spec("small-phones", SMALL, seed=2)]

    async def all_checked_in() -> bool:  # daemon start-up (imports) is what a loaded machine slows most
        return len(await plane.hot.recent_clients(0)) == 10

    try:
        await wait_for(all_checked_in, timeout_s=120, what="the 10 devices to check in")
        reports = await asyncio.wait_for(
            asyncio.gather(*(run_training_job(s, plane.address, round_timeout_s=120) for s in specs)), 300)
    except BaseException:
        print(daemons.logs())
        raise
    codes = await daemons.terminate(pool)
    assert codes == [0] * 5, daemons.logs()

    for report in reports:
        assert [r.round for r in report.rounds] == [0, 1, 2]
        assert all(r.results >= 3 for r in report.rounds)
        assert report.final_accuracy > 0.5, report  # 4 classes: chance is 0.25
    await plane.journal.flush()
    profiles = {p.client_id: p for p, _ in await plane.hot.recent_clients(0)}
    assert len(profiles) == 10
    for report, job_spec in zip(reports, specs, strict=True):
        job = plane.store.get_job(report.job_id)
        assert (job.state, job.rounds_done) == ("completed", 3)
        served = {b.client_id for b in plane.store.bindings(report.job_id) if b.outcome == "completed"}
        assert len(served) >= 3
        assert all(job_spec.requirements.public.admits(profiles[c].attributes()) for c in served)


async def test_round_completes_when_a_bound_daemon_is_killed(plane, daemons):
    pool = daemons.spawn(plane.address, 3, DEVICES_PER_DAEMON)
    owner = {client: daemon for daemon in pool for client in await asyncio.to_thread(daemon.client_ids)}
    # Slow local training (4000 steps, over half a second) keeps a bound device busy, holding its lease.
    job_spec = spec("survivor", {}, rounds=1, over_selection=1.0, local_steps=4000)
    started = asyncio.Event()
    job_ids: list[str] = []

    def on_start(report) -> None:
        job_ids.append(report.job_id)
        started.set()

    job = asyncio.create_task(run_training_job(job_spec, plane.address, round_timeout_s=120, on_start=on_start))
    await asyncio.wait_for(started.wait(), 60)
    job_id = job_ids[0]

    # The victim is a device seen bound within the last poll: most of its training is still ahead of it.
    victim, seen = "", set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while not victim:
        assert loop.time() < deadline, "no device was ever bound"
        assert not job.done(), "the round finished before a device could be killed"
        members = await plane.hot.members(job_id, 0, 0)
        fresh, seen = members - seen, seen | members
        for client in fresh:
            if await plane.hot.has_lease(job_id, 0, 0, client):  # bound and still working: not delivered
                victim = client
                break
        else:
            await asyncio.sleep(0.02)
    killed = owner[victim]
    killed.process.send_signal(signal.SIGKILL)
    assert await asyncio.to_thread(killed.process.wait, 10) == -signal.SIGKILL

    try:
        report = await asyncio.wait_for(job, 120)
    except BaseException:
        print(daemons.logs())
        raise
    survivors = [d for d in pool if d is not killed]
    assert await daemons.terminate(survivors) == [0, 0]

    assert [(r.round, r.attempt, r.results) for r in report.rounds] == [(0, 0, 3)]
    await plane.journal.flush()
    outcomes = {b.client_id: b.outcome for b in plane.store.bindings(job_id, round=0)}
    assert outcomes[victim] == "dropped"  # its slot was freed by lease expiry ...
    completed = {c for c, outcome in outcomes.items() if outcome == "completed"}
    assert len(completed) == 3 and victim not in completed  # ... and the round was refilled by others
