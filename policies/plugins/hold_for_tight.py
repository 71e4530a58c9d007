"""``hold_for_tight`` (offer): keep a client for a tight job ranked before the one it would be given.

A job is tight when its round needs at least ``tight_fraction`` (default 0.75) of its class's clients.
A client is not offered a job ranked after a tight one if its task there would outlast the tight job's
expected next opening (open time + recent scheduling delay + recent response time, or now if overdue)
by more than ``hold_slack`` (default 0.5) x its response time; it waits for the tight job instead. Part
of the makespan objective (the ``makespan`` profile); list it before the other ``offer`` plug-ins, so a
tight job holds even when this client is not offered it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.options import Fraction, NonNegative
from policies.plugins.base import OfferPlugin
from policies.plugins.rounds import client_task_s, expected_close

__all__ = ["HoldForTight"]


class HoldForTight(OfferPlugin):
    name: ClassVar[str] = "hold_for_tight"
    tight_fraction: Fraction = 0.75
    hold_slack: NonNegative = 0.5

    def offers(self, ranked: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        if ctx.client is None:
            return list(ranked)
        kept: list[JobView] = []
        hold_until = math.inf
        for job in ranked:
            task_s = client_task_s(job, ctx)
            if task_s is None or ctx.now + task_s <= hold_until:
                kept.append(job)
            hold_until = min(hold_until, self._hold_until(job, ctx))
        return kept

    def _hold_until(self, job: JobView, ctx: SchedulingContext) -> float:
        """For a tight, timed job: its expected next opening + ``hold_slack`` x its response time; else inf."""
        supply = ctx.class_supply(job)
        if supply <= 0 or job.demand < self.tight_fraction * supply:
            return math.inf
        closes_at = expected_close(job)
        if closes_at is None or job.recent_response_s is None:
            return math.inf
        return max(closes_at, ctx.now) + self.hold_slack * job.recent_response_s
