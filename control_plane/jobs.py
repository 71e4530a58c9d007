"""The registry of live jobs: their specs and token hashes, cached from the durable store.

A row whose spec no longer validates (written by an older version, or by hand) is logged and skipped:
one bad row never stops a restart nor a listing. A job registered but never started expires after an
idle time, and an owner may hold a bounded number of live jobs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from dataclasses import replace

from control_plane.errors import Conflict, NotFound, PermissionDenied, ResourceExhausted, require_id
from control_plane.hot_state import token_hash
from control_plane.scheduling.state import FINISHED, ActiveJob
from control_plane.store import JobRecord, Store
from propius.specs import JobSpec, SpecError

__all__ = ["JobRegistry", "active_job"]

log = logging.getLogger(__name__)


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


def _loaded(record: JobRecord) -> ActiveJob | None:
    """The job of a stored row, or None (logged) when its spec does not validate."""
    try:
        return active_job(record)
    except SpecError as error:
        log.error("job %s (%r) skipped: its stored spec is invalid (%s)", record.job_id, record.name, error,
                  extra={"job_id": record.job_id})
        return None


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

    def __init__(self, store: Store, *, max_live_per_owner: int | None = None,
                 idle_ttl_s: float | None = None) -> None:
        """``max_live_per_owner``: live jobs (registered or running) one owner may hold, None: no cap;
        ``idle_ttl_s``: a job registered but never started is cancelled after this long, None: never."""
        self._store = store
        self._jobs: dict[str, ActiveJob] = {}
        self._max_live_per_owner = max_live_per_owner
        self._idle_ttl_s = idle_ttl_s

    def active(self) -> list[ActiveJob]:
        return [job for job in self._jobs.values() if not job.finished]

    async def refresh(self) -> None:
        """Reload the live jobs of every shard (rows that do not validate are logged and skipped), then
        cancel those registered but never started for longer than the idle time."""
        records = await asyncio.to_thread(self._store.list_jobs, False)
        for record in records:
            fresh = _loaded(record)
            if fresh is None:
                continue
            cached = self._jobs.get(record.job_id)
            self._jobs[record.job_id] = fresh if cached is None else _later(cached, fresh)
        await self.expire_idle(time.time())

    async def expire_idle(self, now: float) -> list[str]:
        """Cancel the jobs registered before ``now - idle_ttl_s`` that never started a round."""
        if self._idle_ttl_s is None:
            return []
        expired = await asyncio.to_thread(self._store.expire_registered, now - self._idle_ttl_s, now)
        for job_id in expired:
            log.info("job %s cancelled: registered %.0f s ago and never started", job_id, self._idle_ttl_s,
                     extra={"job_id": job_id})
            cached = self._jobs.get(job_id)
            if cached is not None:
                self._jobs[job_id] = replace(cached, state="cancelled", finished_at=now)
        return expired

    async def register(self, spec: JobSpec) -> tuple[ActiveJob, str]:
        """Store a new job. Checked before anything is written: its spec reads back as itself (what a
        restart will load) and its owner is under the cap of live jobs."""
        spec_json = spec.to_json()
        JobSpec.parse(spec_json)  # SpecError (INVALID_ARGUMENT) rather than a row a restart cannot load
        if self._max_live_per_owner is not None:
            live = await asyncio.to_thread(self._store.list_jobs, False)
            if sum(record.owner == spec.owner for record in live) >= self._max_live_per_owner:
                raise ResourceExhausted(
                    f"owner: {spec.owner!r} already has {self._max_live_per_owner} live jobs; complete or cancel one")
        job_id = uuid.uuid4().hex
        token = secrets.token_urlsafe(32)
        record = await asyncio.to_thread(
            self._store.create_job, job_id, spec.name, spec.owner, spec_json, token_hash(token), time.time()
        )
        job = active_job(record)
        self._jobs[job_id] = job
        return job, token

    async def get(self, job_id: str) -> ActiveJob:
        """The job; INVALID_ARGUMENT for a malformed id (checked before the store is asked), else NOT_FOUND."""
        job = self._jobs.get(require_id(job_id))
        if job is None:
            record = await asyncio.to_thread(self._store.get_job, job_id)
            loaded = None if record is None else _loaded(record)
            if loaded is None:
                raise NotFound(f"job {job_id!r} not found")
            job = self._jobs[job_id] = loaded
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
        jobs = (self._jobs.get(record.job_id) or _loaded(record) for record in records)
        return [job for job in jobs if job is not None]
