"""Predictions about a job's current round that several plug-ins share."""

from __future__ import annotations

from policies.base import JobView, SchedulingContext

__all__ = ["client_task_s", "expected_close"]


def expected_close(job: JobView, response_factor: float = 1.0) -> float | None:
    """Open time + recent scheduling delay + ``response_factor`` x recent response time; None until timed."""
    if job.opened_at is None or job.recent_schedule_s is None or job.recent_response_s is None:
        return None
    return job.opened_at + job.recent_schedule_s + response_factor * job.recent_response_s


def client_task_s(job: JobView, ctx: SchedulingContext) -> float | None:
    """The checking-in client's predicted seconds for one task of ``job``; None when not known."""
    return ctx.client.task_s(job) if ctx.client is not None else None
