"""``speed_tiers`` (pin): pin a group's head job to the fastest speed tier of its class when its response
collection dominates.

IRS's rule (:mod:`policies.irs`, step 4; :func:`~policies.irs.pinned`): when the head job's recent
response collection is longer than ``k x`` its scheduling delay (``k`` tiers: pinning to one of ``k``
tiers stretches scheduling about ``k`` times), only clients of the fastest tier of its eligibility class
(``ctx.tiers_for``) are offered it; the others go on to the next job. Options:

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
- ``pin_share`` (default 1): the pin holds for the first ``pin_share`` of a round attempt's scheduling
  window (round limit less the execution timeout), then the round is offered to every eligible client. The
  fastest tier may be busy elsewhere when the round opens; a pinned round kept short of ``demand`` binds
  until its deadline fails and is re-run, a round that takes slower clients late only collects more slowly.
- ``trial_reliability`` (default 0): a client of unknown speed counts as fastest, so it is tried and
  measured, only while its reliability is at least this. A client that never delivers (too slow for the
  execution timeout, or offline before the end) stays unknown; counted fastest, it is offered every attempt
  of a pinned round while the known, slower clients that would deliver are refused.

Without tier bounds, round timings or the client's estimates (not yet observed), nothing is pinned.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import JobView, SchedulingContext
from policies.irs import in_fastest_tier, pinned
from policies.options import Fraction
from policies.plugins.base import PinPlugin
from policies.plugins.rounds import client_task_s

__all__ = ["SpeedTiers"]


class SpeedTiers(PinPlugin):
    name: ClassVar[str] = "speed_tiers"
    task_tiers: bool = True
    tier_fit: bool = True
    pin_share: Fraction = 1.0
    trial_reliability: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0

    def pinned_elsewhere(self, head: JobView, ctx: SchedulingContext) -> bool:
        return (pinned(head, ctx, tier_fit=self.tier_fit) and self._within_pin(head, ctx)
                and not self._in_fastest_tier(head, ctx))

    def _within_pin(self, head: JobView, ctx: SchedulingContext) -> bool:
        """Whether the round attempt is still in the first ``pin_share`` of its scheduling window."""
        if self.pin_share >= 1.0 or head.opened_at is None or math.isinf(head.deadline_at):
            return True
        window = head.deadline_at - head.opened_at - head.execution_timeout_s
        return ctx.now - head.opened_at < self.pin_share * window

    def _in_fastest_tier(self, head: JobView, ctx: SchedulingContext) -> bool:
        client = ctx.client
        if self.task_tiers and head.fast_task_s is not None:
            task_s = client_task_s(head, ctx)
            if task_s is not None:
                return task_s <= head.fast_task_s
        elif client is not None and client.s_per_sample is not None:
            return in_fastest_tier(head, ctx)
        # Unknown: tried, as in IRS, so it is measured; but not once it has missed too often without delivering.
        return client is None or client.reliability >= self.trial_reliability
