"""The registry of live jobs: their specs and token hashes, cached from the durable store."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from dataclasses import replace

from control_plane.errors import Conflict, NotFound, PermissionDenied
from control_plane.hot_state import token_hash
from control_plane.scheduling.state import FINISHED, ActiveJob
from control_plane.store import JobRecord, Store
from propius.specs import JobSpec

__all__ = ["JobRegistry", "active_job"]

def active_job(record: JobRecord) -> ActiveJob:
    return ActiveJob(
        job_id=record.job_id,
        spec=JobSpec.parse(record.spec_json),
        token_hash=record.token_hash,
        registered_at=record.created_at,
        state=record.state,
        rounds_done=record.rounds_done,
        finished_at=record.finished_at,
    )


_PROGRESS = {"registered": 0, "running": 1, "completed": 2, "cancelled": 2}


def _later(cached: ActiveJob, fresh: ActiveJob) -> ActiveJob:
    """Merge a store read into the cache without going backwards.

    A refresh reads the store in a thread; an update that lands meanwhile (a round closing, the job
    completing) is newer than what the read returns, so job state and rounds_done only move forward.
    """
    if _PROGRESS[cached.state] > _PROGRESS[fresh.state]:
        fresh = replace(fresh, state=cached.state, finished_at=cached.finished_at)
    if cached.rounds_done > fresh.rounds_done:
        fresh = replace(fresh, rounds_done=cached.rounds_done)
    return fresh


class JobRegistry:
    """In-memory view of jobs backed by :class:`Store`; other shards' jobs are picked up by ``refresh``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._jobs: dict[str, ActiveJob] = {}

    def active(self) -> list[ActiveJob]:
        return [job for job in self._jobs.values() if not job.finished]

    async def refresh(self) -> None:
        records = await asyncio.to_thread(self._store.list_jobs, False)
        for record in records:
            fresh = active_job(record)
            cached = self._jobs.get(record.job_id)
            self._jobs[record.job_id] = fresh if cached is None else _later(cached, fresh)

    async def register(self, spec: JobSpec) -> tuple[ActiveJob, str]:
        job_id = uuid.uuid4().hex
        token = secrets.token_urlsafe(32)
        record = await asyncio.to_thread(
            self._store.create_job, job_id, spec.name, spec.owner, spec.to_json(), token_hash(token), time.time()
        )
        job = active_job(record)
        self._jobs[job_id] = job
        return job, token

    async def get(self, job_id: str) -> ActiveJob:
        job = self._jobs.get(job_id)
        if job is None:
            record = await asyncio.to_thread(self._store.get_job, job_id)
            if record is None:
                raise NotFound(f"job {job_id!r} not found")
            job = active_job(record)
            self._jobs[job_id] = job
        return job

    def cached(self, job_id: str) -> ActiveJob | None:
        return self._jobs.get(job_id)

    async def authorize(self, job_id: str, token: str) -> ActiveJob:
        """The job, if ``token`` is its job token; PERMISSION_DENIED otherwise."""
        job = await self.get(job_id)
        if not secrets.compare_digest(job.token_hash, token_hash(token)):
            raise PermissionDenied(f"wrong job token for job {job_id!r}")
        return job

    async def require_live(self, job_id: str, token: str) -> ActiveJob:
        job = await self.authorize(job_id, token)
        if job.finished:
            raise Conflict(f"job {job_id!r} is {job.state}")
        return job

    async def update(self, job_id: str, *, state: str | None = None, rounds_done: int | None = None) -> ActiveJob:
        job = await self.get(job_id)
        changes: dict[str, object] = {}
        if state is not None and state != job.state:
            changes["state"] = state
            finished_at = time.time() if state in FINISHED else None
            changes["finished_at"] = finished_at
            await asyncio.to_thread(self._store.set_job_state, job_id, state, finished_at)
        if rounds_done is not None and rounds_done != job.rounds_done:
            changes["rounds_done"] = rounds_done
            await asyncio.to_thread(self._store.set_rounds_done, job_id, rounds_done)
        job = replace(job, **changes)
        self._jobs[job_id] = job
        return job

    def advanced(self, job_id: str, rounds_done: int) -> None:
        """Note in the cache a ``rounds_done`` the store already committed (with the round that ended)."""
        job = self._jobs.get(job_id)
        if job is not None and rounds_done > job.rounds_done:
            self._jobs[job_id] = replace(job, rounds_done=rounds_done)

    async def list(self, include_finished: bool) -> list[ActiveJob]:
        records = await asyncio.to_thread(self._store.list_jobs, include_finished)
        return [self._jobs.get(r.job_id) or active_job(r) for r in records]
