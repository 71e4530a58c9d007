"""``deadline_aware`` (offer): no bind predicted to finish after the round's deadline or the task's timeout.

The prediction comes from the client's learned speed and bandwidth (:class:`~policies.base.ClientEstimate`);
such a bind could only ever be a straggler. A client or job without estimates is always offered.
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s

__all__ = ["DeadlineAware"]


class DeadlineAware(OfferFilter):
    name: ClassVar[str] = "deadline_aware"

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        task_s = client_task_s(job, ctx)
        return task_s is None or ctx.now + task_s <= min(job.deadline_at, ctx.now + job.execution_timeout_s)
