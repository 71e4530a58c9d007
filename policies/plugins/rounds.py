"""Predictions about a job's current round that several plug-ins share."""

from __future__ import annotations

import math

from policies.base import JobView, SchedulingContext

__all__ = ["client_task_s", "expected_close", "has_spare_supply", "round_limit_s"]


def round_limit_s(job: JobView) -> float | None:
    """The current round attempt's time limit (schedule + execution timeout, ``deadline_at - opened_at``), a
    constant of the job's spec; None while no round is open or it has no deadline."""
    if job.opened_at is None or math.isinf(job.deadline_at):
        return None
    return job.deadline_at - job.opened_at


def expected_close(job: JobView, response_factor: float = 1.0) -> float | None:
    """Open time + recent scheduling delay + ``response_factor`` x recent response time; None until timed."""
    if job.opened_at is None or job.recent_schedule_s is None or job.recent_response_s is None:
        return None
    return job.opened_at + job.recent_schedule_s + response_factor * job.recent_response_s


def client_task_s(job: JobView, ctx: SchedulingContext) -> float | None:
    """The checking-in client's predicted seconds for one task of ``job``; None when not known."""
    return ctx.client.task_s(job) if ctx.client is not None else None


def has_spare_supply(job: JobView, ctx: SchedulingContext, factor: float | None) -> bool:
    """Whether ``job``'s class has at least ``factor`` x its round's slots of recent clients, so the round can do
    without any one of them; False when ``factor`` is None (the test off)."""
    return factor is not None and ctx.class_supply(job) >= factor * job.target
