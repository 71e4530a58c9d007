"""The job registry's cache must never move backwards when a periodic refresh races a local update."""

from __future__ import annotations

import asyncio
import threading

from control_plane.jobs import JobRegistry
from control_plane.store import JobRecord, Store
from propius.specs import JobSpec


class PausingStore(Store):
    """A real SQLite store whose ``list_jobs`` pauses after reading, to pin down one interleaving."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.read_done = threading.Event()
        self.resume = threading.Event()
        self.pause = False

    def list_jobs(self, include_finished: bool = True) -> list[JobRecord]:
        records = super().list_jobs(include_finished)
        if self.pause:
            self.read_done.set()
            assert self.resume.wait(10)
        return records


async def test_refresh_racing_an_update_keeps_the_newer_state(sqlite_url):
    store = PausingStore(sqlite_url)
    try:
        registry = JobRegistry(store)
        job, _ = await registry.register(JobSpec.parse({"name": "racy", "demand": 1, "rounds": 3}))
        await registry.update(job.job_id, state="running")
        store.pause = True
        refresh = asyncio.create_task(registry.refresh())  # reads "running, 0 rounds done" ...
        assert await asyncio.to_thread(store.read_done.wait, 10)
        store.pause = False
        await registry.update(job.job_id, rounds_done=1)  # ... while a round closes here
        await registry.update(job.job_id, state="completed")  # ... and the job completes
        store.resume.set()
        await refresh

        cached = await registry.get(job.job_id)
        assert (cached.state, cached.rounds_done) == ("completed", 1)
        assert registry.active() == []
        await registry.refresh()  # a later refresh no longer lists the finished job; the cache must agree
        assert (await registry.get(job.job_id)).state == "completed"
    finally:
        store.close()
