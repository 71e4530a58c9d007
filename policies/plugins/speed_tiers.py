"""``speed_tiers`` (pin): pin a group's head job to the fastest speed tier when its response collection dominates.

From IRS (:mod:`policies.irs`, step 4): when the head job's recent response collection is longer than
``k x`` its scheduling delay (``k`` tiers: pinning to one of ``k`` tiers stretches scheduling about ``k``
times), only clients of the fastest tier are offered it; the others go on to the next job. Two
refinements, each an option:

- ``task_tiers`` (default true): the fastest tier is the fastest third of clients by predicted task time
  for this job (training, download and upload: ``JobView.fast_task_s``), not by training speed alone: a
  fast phone on a slow link would be the round's straggler.
- ``tier_fit`` (default true): pin only a job whose class supply is at least ``tiers x`` its bind target,
  i.e. whose round the fastest tier can fill; pinning a job that needs most of its class to one tier of it
  only stretches its scheduling delay.

Without tier bounds, round timings or the client's estimates (not yet observed), nothing is pinned; a
client of unknown speed counts as fastest, so it is tried and measured.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import PinPlugin
from policies.plugins.rounds import client_task_s

__all__ = ["SpeedTiers"]


class SpeedTiers(PinPlugin):
    name: ClassVar[str] = "speed_tiers"
    task_tiers: bool = True
    tier_fit: bool = True

    def pinned_elsewhere(self, head: JobView, ctx: SchedulingContext) -> bool:
        tiers = len(ctx.speed_tiers) + 1
        if not ctx.speed_tiers or head.recent_response_s is None or head.recent_schedule_s is None:
            return False
        if self.tier_fit and ctx.class_supply(head) < tiers * head.target:  # the fastest tier cannot fill it
            return False
        if head.recent_response_s <= tiers * head.recent_schedule_s:
            return False
        return not self._in_fastest_tier(head, ctx)

    def _in_fastest_tier(self, head: JobView, ctx: SchedulingContext) -> bool:
        if self.task_tiers and head.fast_task_s is not None:
            task_s = client_task_s(head, ctx)
            return task_s is None or task_s <= head.fast_task_s
        speed = ctx.client.s_per_sample if ctx.client is not None else None
        return speed is None or bisect.bisect_left(ctx.speed_tiers, speed) == 0
