"""``fifo_lag`` (promote): a job that the order has put more than ``slowdown`` times behind its FIFO pace goes first.

SRSF's gains come from letting newer, smaller jobs take clients that FIFO would have given an older job,
and so does its worst case against FIFO: an older job that the newer ones keep passing (a large job in a
burst of small ones; a job whose failed rounds let others overtake it in remaining service, so it fails
again). The scheduling core measures what each job lost that way (``JobView.lost_to_newer_s``,
:mod:`control_plane.scheduling.fifo_lag`): the part of its rounds' scheduling delay that the binds taken
by jobs registered after it would have saved, and, for an attempt that never filled, the time from when
they would have filled it to its close.

Without those losses the job would have got this far in ``elapsed - lost`` seconds, so it is running at
``elapsed / (elapsed - lost)`` times its FIFO pace. Once that exceeds ``slowdown``, and the loss exceeds
one round limit of the job or, where they are shorter, ``floor_rounds`` of its recent rounds (a young job's
ratio moves by seconds: in a batch of jobs registered together, the first binds made every job that lost a
few seconds to a newer one due at once; but a job whose rounds take a minute against a round limit of ten
lost ten of its rounds before the limit alone let it be promoted), it is promoted: ranked
ahead of every job that is not, among promoted jobs oldest registration first (FIFO), and offered to every
client, so no newer job passes it until it has caught up; then it is ranked by the sort again. Unlike a
rule over the order alone (``fifo_floor``), it acts only on what passing a job actually cost it: on a pool
with room for every round, being passed over costs seconds and nothing is promoted. It bounds the order's
share of a job's delay, not its JCT (a round filled late may also wait for a straggler, or meet the evening
drop in its class). The default profile has it at ``slowdown`` 1.35: at 1.25 it promoted so often on an
overloaded pool that the default lost its margin over IRS (docs/policies.md, "FIFO lag", has the measurements).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import JobView, SchedulingContext
from policies.plugins.base import PromotePlugin
from policies.plugins.rounds import round_limit_s

__all__ = ["FifoLag"]


class FifoLag(PromotePlugin):
    name: ClassVar[str] = "fifo_lag"
    slowdown: Annotated[float, Field(gt=1.0)] = 1.35
    floor_rounds: Annotated[float, Field(gt=0.0)] | None = 2.0

    def noise_floor_s(self, job: JobView, limit: float) -> float:
        """The loss below which the job is not promoted: one round limit, or ``floor_rounds`` of its recent rounds
        (scheduling delay + response time) where those are shorter; the round limit alone until it has timed a
        round, or with ``floor_rounds`` None."""
        if self.floor_rounds is None or job.recent_schedule_s is None or job.recent_response_s is None:
            return limit
        return min(limit, self.floor_rounds * (job.recent_schedule_s + job.recent_response_s))

    def promote(self, job: JobView, ctx: SchedulingContext) -> float | None:
        limit = round_limit_s(job)
        if limit is None:
            return None
        lost = job.lost_to_newer_s + (max(0.0, ctx.now - job.fifo_filled_at) if job.fifo_filled_at is not None else 0.0)
        elapsed = ctx.now - job.registered_at
        if lost <= self.noise_floor_s(job, limit):  # a young job's ratio moves by seconds
            return None
        if elapsed <= self.slowdown * (elapsed - lost):  # within slowdown x its FIFO pace
            return None
        return job.registered_at
