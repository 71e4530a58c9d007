"""``wait_for_faster`` (offer): the head job refuses a client that would deliver after its fastest possible fill.

``JobView.fastest_fill_at`` (estimated for the head of the order only, because this plug-in asks) is
when the round could have all its results from the fastest eligible clients, those busy elsewhere
counted from when they free up. A slower idle client serves another job; the round waits seconds for a
fast one. Part of the makespan objective (the ``makespan`` profile).
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s

__all__ = ["WaitForFaster"]


class WaitForFaster(OfferFilter):
    name: ClassVar[str] = "wait_for_faster"
    wants_fastest_fill: ClassVar[bool] = True

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        task_s = client_task_s(job, ctx)
        return task_s is None or job.fastest_fill_at is None or ctx.now + task_s <= job.fastest_fill_at
