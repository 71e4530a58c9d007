"""``starvation_bound`` (promote): no job is passed over forever; a job far behind its own pace goes first.

The sort order (smallest remaining service first) favours small jobs, so under a steady stream of them a
large job could wait for ever. As with the YARN fair scheduler's fair-share preemption timeout, a job
that has fallen too far behind is served first, whatever the sort says.

A job's pace is the time one of its rounds takes once it holds its clients: its recent response-collection
time, or, before any round of it was timed, its round's time limit (schedule + execution timeout). Its
``k``-th round (``k = rounds_done + 1``) is *due* at ``registered_at + slowdown x k x pace``. A job past its
due time is promoted: ranked ahead of every job that is not, among promoted jobs oldest registration
first (FIFO), and offered to every client (no speed-tier pin).

Why this bounds every job, by construction: a round's response time never exceeds its time limit, so a
job's ``k``-th round is due no later than ``registered_at + slowdown x k x limit``, a fixed time. From then
on the job is promoted until it completes a round, and a promoted job is passed over only by promoted
jobs registered before it, as under FIFO: a stream of newer jobs cannot overtake it. Rounds that fail
while it starves are timed as all scheduling and no response, so its pace only shrinks and it is promoted
sooner. ``slowdown`` is the bound (default 8, at least 1): the larger, the longer the sort order is
followed before a job is promoted.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import JobView, SchedulingContext
from policies.plugins.base import PromotePlugin

__all__ = ["StarvationBound"]


class StarvationBound(PromotePlugin):
    name: ClassVar[str] = "starvation_bound"
    slowdown: Annotated[float, Field(ge=1.0)] = 8.0

    def due_at(self, job: JobView) -> float | None:
        """When the job's current round is due; None when its round's time limit is not known."""
        if job.opened_at is None or math.isinf(job.deadline_at):
            return None
        limit = job.deadline_at - job.opened_at
        pace = limit if job.recent_response_s is None else min(job.recent_response_s, limit)
        return job.registered_at + self.slowdown * (job.rounds_done + 1) * pace

    def promote(self, job: JobView, ctx: SchedulingContext) -> float | None:
        due = self.due_at(job)
        return job.registered_at if due is not None and ctx.now > due else None
