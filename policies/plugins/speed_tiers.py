"""``speed_tiers`` (pin): pin a group's head job to the fastest speed tier of its class when its response
collection dominates.

IRS's rule (:mod:`policies.irs`, step 4; :func:`~policies.irs.pinned`): when the head job's recent
response collection is longer than ``k x`` its scheduling delay (``k`` tiers: pinning to one of ``k``
tiers stretches scheduling about ``k`` times), only clients of the fastest tier of its eligibility class
(``ctx.tiers_for``) are offered it; the others go on to the next job. Two options:

- ``task_tiers`` (default true): the fastest tier is the fastest third of the class's clients by predicted
  task time for this job (training, download and upload: ``JobView.fast_task_s``), not by training speed
  alone: a fast phone on a slow link would be the round's straggler.
- ``tier_fit`` (default true): pin only a job whose class supply is at least ``tiers x`` its bind target,
  i.e. whose round the fastest tier can fill, as IRS does; pinning a job that needs most of its class to
  one tier of it only stretches its scheduling delay. False pins without that check. In a profile the
  supply a pin plug-in sees is the class's less the bind targets of its other open rounds
  (:class:`~policies.profile_policy.ProfilePolicy`): in a batch of jobs on one class, the fastest tier is
  mostly bound elsewhere, and a pinned round timed out (robustness benchmark, tuning seeds: the worst
  workload went from 0.98x to 0.96x FIFO; one held-out workload from 1.16x to 1.01x).

Without tier bounds, round timings or the client's estimates (not yet observed), nothing is pinned; a
client of unknown speed counts as fastest, so it is tried and measured.
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.irs import in_fastest_tier, pinned
from policies.plugins.base import PinPlugin
from policies.plugins.rounds import client_task_s

__all__ = ["SpeedTiers"]


class SpeedTiers(PinPlugin):
    name: ClassVar[str] = "speed_tiers"
    task_tiers: bool = True
    tier_fit: bool = True

    def pinned_elsewhere(self, head: JobView, ctx: SchedulingContext) -> bool:
        return pinned(head, ctx, tier_fit=self.tier_fit) and not self._in_fastest_tier(head, ctx)

    def _in_fastest_tier(self, head: JobView, ctx: SchedulingContext) -> bool:
        if not self.task_tiers or head.fast_task_s is None:
            return in_fastest_tier(head, ctx)
        task_s = client_task_s(head, ctx)
        return task_s is None or task_s <= head.fast_task_s  # unknown: tried, as in IRS
