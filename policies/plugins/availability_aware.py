"""``availability_aware`` (offer): no bind of a client predicted to go offline before the task would finish.

The prediction is the end of the client's current online period, from its learned typical session
length; once that moment has passed (the prediction failed), the client is offered again.
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s

__all__ = ["AvailabilityAware"]


class AvailabilityAware(OfferFilter):
    name: ClassVar[str] = "availability_aware"

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        task_s = client_task_s(job, ctx)
        if task_s is None or ctx.client is None:
            return True
        available_s = ctx.client.available_for_s(ctx.now)
        return available_s is None or not 0 < available_s < task_s  # <= 0: the prediction already failed
