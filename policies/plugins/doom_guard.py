"""``doom_guard`` (offer): stop feeding a round that, at its bind rate so far, cannot reach ``demand`` in time.

Once a round has been open ``min_s`` seconds (default 60), it is not offered to a client when its
expected results plus what its bind rate so far would add before the deadline (less this client's task
time) stay short of ``demand``: the client stays free for a round that will complete, and the doomed round
fails without holding anyone and is re-run.
"""

from __future__ import annotations

import math
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.options import NonNegative
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s

__all__ = ["DoomGuard"]


class DoomGuard(OfferFilter):
    name: ClassVar[str] = "doom_guard"
    min_s: NonNegative = 60.0

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        if job.opened_at is None or math.isinf(job.deadline_at):
            return True
        elapsed = ctx.now - job.opened_at
        if elapsed < self.min_s:
            return True
        have = job.expected_results if job.expected_results is not None else float(job.bound)
        if have >= job.demand:
            return True
        left = max(0.0, job.deadline_at - ctx.now - (client_task_s(job, ctx) or 0.0))
        per_bind = have / job.bound if job.bound > 0 else 1.0
        return have + job.bound / elapsed * left * per_bind >= job.demand
