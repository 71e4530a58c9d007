"""``longest_first`` (sort): a makespan objective, the longest predicted remaining time first.

Longest-processing-time-first list scheduling, for a batch of jobs that must all finish: remaining
rounds x (recent scheduling delay + response time). A job whose rounds have not been timed goes first,
so it is measured. Small jobs wait, so it is not for a JCT objective (the ``makespan`` profile).
"""

from __future__ import annotations

import math
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import SortPlugin

__all__ = ["LongestFirst"]


class LongestFirst(SortPlugin):
    name: ClassVar[str] = "longest_first"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        if job.recent_schedule_s is None or job.recent_response_s is None or job.remaining_rounds is None:
            return -math.inf
        return -job.remaining_rounds * (job.recent_schedule_s + job.recent_response_s)
