"""``straggler_guard`` (offer): no over-selected bind predicted to deliver after the round's expected close.

Once a round holds ``demand`` clients, a further client is bound only if it is predicted to deliver
before the round's expected close: open time + recent scheduling delay + (1 + ``slack``) x recent
response time (``slack`` default 0.2, > -1). A later result would be thrown away.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import JobView, SchedulingContext
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s, expected_close

__all__ = ["StragglerGuard"]


class StragglerGuard(OfferFilter):
    name: ClassVar[str] = "straggler_guard"
    slack: Annotated[float, Field(gt=-1.0)] = 0.2

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        task_s = client_task_s(job, ctx)
        if task_s is None or job.bound < job.demand:
            return True
        closes_at = expected_close(job, response_factor=1.0 + self.slack)
        return closes_at is None or ctx.now + task_s <= closes_at
